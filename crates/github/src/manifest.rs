//! Creating Sandcastle's GitHub App with GitHub's manifest flow: the manifest
//! (`app-manifest.yml`, compiled in) filled with this Sandcastle's public URL, where a browser
//! posts it (a personal account or an organization), and the conversion of the code GitHub
//! sends back into the App's id, private key, webhook secret and OAuth client.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use sandcastle_domain::Secret;

/// The manifest as shipped; its example host is replaced by the public URL.
const MANIFEST: &str = include_str!("../../../app-manifest.yml");
const EXAMPLE: &str = "https://sandcastle.example.com";

/// Why filling or converting failed.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("the public URL {0:?} must be an absolute http(s) URL")]
    BadUrl(String),
    #[error("GitHub refused the code: {0}")]
    Refused(String),
    #[error("GitHub could not be reached: {0}")]
    Unavailable(String),
}

/// The manifest as JSON, for `public_url` (no trailing slash needed).
pub fn manifest(public_url: &str, name: Option<&str>) -> Result<Value, ManifestError> {
    let base = public_url.trim_end_matches('/');
    let parsed = reqwest::Url::parse(base).map_err(|_| ManifestError::BadUrl(public_url.into()))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(ManifestError::BadUrl(public_url.into()));
    }
    let text = MANIFEST.replace(EXAMPLE, base);
    let mut value: Value =
        serde_saphyr::from_str(&text).expect("the shipped manifest is valid YAML");
    if let Some(n) = name {
        value["name"] = Value::from(n);
    }
    Ok(value)
}

/// Where the browser posts the manifest: the account's or the organization's new-App page.
pub fn new_app_url(web_url: &str, organization: Option<&str>, state: &str) -> String {
    let web = web_url.trim_end_matches('/');
    let state = serde_urlencoded::to_string([("state", state)]).unwrap_or_default();
    match organization.filter(|o| !o.is_empty()) {
        Some(org) => format!(
            "{web}/organizations/{}/settings/apps/new?{state}",
            percent_encoding::utf8_percent_encode(org, percent_encoding::NON_ALPHANUMERIC)
        ),
        None => format!("{web}/settings/apps/new?{state}"),
    }
}

/// The App GitHub made.
#[derive(Debug, Clone, Deserialize)]
pub struct NewApp {
    pub id: u64,
    pub slug: String,
    #[serde(default)]
    pub html_url: String,
    pub pem: Secret,
    pub webhook_secret: Secret,
    pub client_id: String,
    pub client_secret: Secret,
}

/// Turn the code GitHub sent back into the App's credentials (`POST
/// /app-manifests/{code}/conversions`, unauthenticated, within an hour of creation).
pub async fn convert(api_url: &str, code: &str) -> Result<NewApp, ManifestError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .user_agent(concat!("sandcastle/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ManifestError::Unavailable(e.to_string()))?;
    let code = percent_encoding::utf8_percent_encode(code, percent_encoding::NON_ALPHANUMERIC);
    let url = format!(
        "{}/app-manifests/{code}/conversions",
        api_url.trim_end_matches('/')
    );
    let resp = http
        .post(url)
        .header("accept", "application/vnd.github+json")
        .send()
        .await
        .map_err(|e| ManifestError::Unavailable(e.to_string()))?;
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| ManifestError::Unavailable(e.to_string()))?;
    if !status.is_success() {
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| status.to_string());
        return Err(ManifestError::Refused(message));
    }
    serde_json::from_str(&text)
        .map_err(|e| ManifestError::Refused(format!("unreadable answer: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_points_at_this_sandcastle() {
        let m = manifest("https://preview.acme.dev/", None).unwrap();
        assert_eq!(m["url"], "https://preview.acme.dev");
        assert_eq!(
            m["hook_attributes"]["url"],
            "https://preview.acme.dev/github/webhook"
        );
        assert_eq!(m["redirect_url"], "https://preview.acme.dev/setup/callback");
        assert_eq!(
            m["callback_urls"][0],
            "https://preview.acme.dev/oauth/callback"
        );
        assert!(!m.to_string().contains("example.com"));
        assert_eq!(
            manifest("https://x.dev", Some("Acme previews")).unwrap()["name"],
            "Acme previews"
        );
        assert!(manifest("not a url", None).is_err());
        assert!(manifest("ftp://x.dev", None).is_err());
    }

    #[test]
    fn the_manifest_goes_to_the_account_or_the_organization() {
        assert_eq!(
            new_app_url("https://github.com", None, "s1"),
            "https://github.com/settings/apps/new?state=s1"
        );
        assert_eq!(
            new_app_url("https://github.com/", Some("acme"), "s 2"),
            "https://github.com/organizations/acme/settings/apps/new?state=s+2"
        );
    }
}
