//! Signing people in with the App's own OAuth (user-to-server): the authorize URL, exchanging
//! the code for a user token, and what that person may see — the repositories of the App's
//! installations they can access, and those they may write to. Plain HTTP with reqwest: these
//! few calls are outside the installation client's token and retry machinery.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;

use sandcastle_domain::Secret;

/// Most pages of installations or repositories read for one person (100 per page).
const MAX_PAGES: u32 = 10;

/// Why signing in failed.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("GitHub refused the sign-in: {0}")]
    Refused(String),
    #[error("GitHub could not be reached: {0}")]
    Unavailable(String),
}

/// The App's OAuth client, and where GitHub is.
#[derive(Debug, Clone)]
pub struct OAuthApp {
    pub client_id: String,
    pub client_secret: Secret,
    /// `https://github.com` (GitHub Enterprise: `https://HOST`).
    pub web_url: String,
    /// `https://api.github.com`.
    pub api_url: String,
}

/// What one person may see and do, as GitHub says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserAccess {
    pub login: String,
    /// `owner/name`, lower case.
    pub read: BTreeSet<String>,
    pub write: BTreeSet<String>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

#[derive(Deserialize)]
struct User {
    login: String,
}

#[derive(Deserialize)]
struct Installations {
    installations: Vec<Id>,
}

#[derive(Deserialize)]
struct Id {
    id: u64,
}

#[derive(Deserialize)]
struct Repositories {
    total_count: usize,
    repositories: Vec<Repository>,
}

#[derive(Deserialize)]
struct Repository {
    full_name: String,
    #[serde(default)]
    permissions: Permissions,
}

#[derive(Deserialize, Default)]
struct Permissions {
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    maintain: bool,
    #[serde(default)]
    push: bool,
}

fn unavailable(e: reqwest::Error) -> SignInError {
    SignInError::Unavailable(e.to_string())
}

impl OAuthApp {
    fn http() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .timeout(Duration::from_secs(15))
            .user_agent(concat!("sandcastle/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default()
    }

    /// Where to send a person to sign in; GitHub sends them back to `redirect_uri` with a code
    /// and `state`.
    pub fn authorize_url(&self, redirect_uri: &str, state: &str) -> String {
        let query = serde_urlencoded::to_string([
            ("client_id", self.client_id.as_str()),
            ("redirect_uri", redirect_uri),
            ("state", state),
            ("allow_signup", "false"),
        ])
        .unwrap_or_default();
        format!(
            "{}/login/oauth/authorize?{query}",
            self.web_url.trim_end_matches('/')
        )
    }

    /// The user token for the code GitHub sent the person back with.
    pub async fn exchange(&self, code: &str, redirect_uri: &str) -> Result<Secret, SignInError> {
        let url = format!(
            "{}/login/oauth/access_token",
            self.web_url.trim_end_matches('/')
        );
        let answer: TokenAnswer = Self::http()
            .post(url)
            .header("accept", "application/json")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                serde_urlencoded::to_string([
                    ("client_id", self.client_id.as_str()),
                    ("client_secret", self.client_secret.expose()),
                    ("code", code),
                    ("redirect_uri", redirect_uri),
                ])
                .unwrap_or_default(),
            )
            .send()
            .await
            .map_err(unavailable)?
            .json()
            .await
            .map_err(unavailable)?;
        match answer.access_token {
            Some(token) if !token.is_empty() => Ok(Secret::new(token)),
            _ => Err(SignInError::Refused(
                answer
                    .error_description
                    .or(answer.error)
                    .unwrap_or_else(|| "no token".into()),
            )),
        }
    }

    async fn get<T: serde::de::DeserializeOwned>(
        &self,
        token: &Secret,
        path: &str,
    ) -> Result<T, SignInError> {
        let url = format!("{}{path}", self.api_url.trim_end_matches('/'));
        let resp = Self::http()
            .get(url)
            .bearer_auth(token.expose())
            .header("accept", "application/vnd.github+json")
            .send()
            .await
            .map_err(unavailable)?;
        let status = resp.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(SignInError::Refused("the sign-in has expired".into()));
        }
        if !status.is_success() {
            return Err(SignInError::Unavailable(format!("{path}: {status}")));
        }
        resp.json().await.map_err(unavailable)
    }

    /// Who holds `token`, and the repositories of the App's installations they can read and
    /// write.
    pub async fn access(&self, token: &Secret) -> Result<UserAccess, SignInError> {
        let user: User = self.get(token, "/user").await?;
        let mut access = UserAccess {
            login: user.login,
            ..UserAccess::default()
        };
        let installations: Installations =
            self.get(token, "/user/installations?per_page=100").await?;
        for installation in installations.installations {
            for page in 1..=MAX_PAGES {
                let path = format!(
                    "/user/installations/{}/repositories?per_page=100&page={page}",
                    installation.id
                );
                let repos: Repositories = self.get(token, &path).await?;
                let done =
                    repos.repositories.len() < 100 || (page as usize) * 100 >= repos.total_count;
                for r in repos.repositories {
                    let name = r.full_name.to_ascii_lowercase();
                    let p = r.permissions;
                    if p.admin || p.maintain || p.push {
                        access.write.insert(name.clone());
                    }
                    access.read.insert(name);
                }
                if done {
                    break;
                }
            }
        }
        Ok(access)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authorize_url_carries_the_client_and_state() {
        let app = OAuthApp {
            client_id: "Iv1.abc".into(),
            client_secret: Secret::new("s"),
            web_url: "https://github.com/".into(),
            api_url: "https://api.github.com".into(),
        };
        assert_eq!(
            app.authorize_url("https://sandcastle.example.com/oauth/callback", "xyz"),
            "https://github.com/login/oauth/authorize?client_id=Iv1.abc&redirect_uri=https%3A%2F%2Fsandcastle.example.com%2Foauth%2Fcallback&state=xyz&allow_signup=false"
        );
    }
}
