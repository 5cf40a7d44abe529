//! A commit's content as GitHub serves it for rendering a Blueprint's chart or overlay: the
//! tarball (`GET /repos/{owner}/{repo}/tarball/{sha}`, one request however many files), which
//! GitHub answers with a redirect to `codeload.github.com` whose URL carries its own short-lived
//! token. The redirect is followed by a client of its own, so the installation token never
//! travels to another host, and the archive is read up to a bound.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};

use super::{GitHubError, Installation};
use sandcastle_domain::{RepoName, Sha};

/// How long the archive's download may take, all of it.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);

impl Installation {
    /// The gzip-compressed tarball of `repo` at `sha`, at most `max_bytes` long.
    pub async fn tarball(
        &self,
        repo: &RepoName,
        sha: &Sha,
        max_bytes: u64,
    ) -> Result<Arc<[u8]>, GitHubError> {
        let path = format!("/repos/{}/{}/tarball/{}", repo.owner(), repo.name(), sha);
        let resp = self.transport.send(Method::GET, &path, None).await?;
        let location = match resp.status {
            s if s.is_redirection() => resp
                .headers
                .get(http::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| GitHubError::decode("archive redirect", "no Location header"))?,
            StatusCode::OK => return bounded(resp.body.to_vec(), max_bytes),
            other => {
                return Err(GitHubError::decode(
                    "archive answer",
                    format!("status {other}"),
                ));
            }
        };
        download(&location, max_bytes).await
    }
}

fn too_large(max_bytes: u64) -> GitHubError {
    GitHubError::TooLarge {
        what: "the repository's archive",
        limit_mib: max_bytes.div_ceil(1 << 20),
    }
}

fn bounded(body: Vec<u8>, max_bytes: u64) -> Result<Arc<[u8]>, GitHubError> {
    if body.len() as u64 > max_bytes {
        return Err(too_large(max_bytes));
    }
    Ok(body.into())
}

/// GET `url` with no credentials of Sandcastle's, reading at most `max_bytes`.
async fn download(url: &str, max_bytes: u64) -> Result<Arc<[u8]>, GitHubError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(DOWNLOAD_TIMEOUT)
        .user_agent(concat!("sandcastle/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| GitHubError::Transport(e.to_string()))?;
    let transport = |e: reqwest::Error| GitHubError::Transport(e.without_url().to_string());
    let mut resp = client.get(url).send().await.map_err(transport)?;
    if !resp.status().is_success() {
        return Err(GitHubError::Status {
            status: resp.status(),
            message: "the repository's archive could not be downloaded".to_owned(),
        });
    }
    if resp.content_length().is_some_and(|n| n > max_bytes) {
        return Err(too_large(max_bytes));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(transport)? {
        if (body.len() + chunk.len()) as u64 > max_bytes {
            return Err(too_large(max_bytes));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.into())
}
