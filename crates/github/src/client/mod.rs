//! The GitHub App client: [`GitHubApp`] authenticates as the App (RS256 JWT, minted by octocrab)
//! and hands out one [`Installation`] client per installation, whose token octocrab caches and
//! refreshes five minutes before expiry. Every call goes through the retry loop in `transport`,
//! which counts requests and rate-limit waits into [`GitHubMetrics`]; the typed operations live
//! in `api`.

mod api;
mod archive;
mod checks;
mod credentials;
mod error;
mod etags;
pub mod retry;
mod transport;
mod types;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use octocrab::Octocrab;
use octocrab::models::{AppId, InstallationId};

use sandcastle_domain::{RepoName, Secret};
use sandcastle_metrics::GitHubMetrics;

pub use checks::{CheckOutput, CheckRunWrite, OUTPUT_MAX_CHARS};
pub use credentials::{Credentials, Rejected};
pub use error::GitHubError;
pub use types::{
    Actor, AppRef, CheckConclusion, CheckRun, CheckStatus, Comment, DESCRIPTION_MAX_CHARS,
    Deployment, DeploymentState, DeploymentStatus, FileContent, InstallationInfo, NewDeployment,
    NewStatus, Permission, PullBase, PullHead, PullRequest, PullState, Reaction,
    decode_base64_content, truncate_description,
};

use transport::{AuthMode, Transport};

/// Timeouts, retries and waits for GitHub calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSettings {
    /// Limit on one attempt (connect, send, read the whole answer).
    pub request_timeout: Duration,
    /// Retries after the first attempt, for 5xx, timeouts, transport errors and rate limits.
    pub max_retries: u32,
    /// First backoff ceiling; doubles per retry up to `backoff_cap` (full jitter below it).
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// Longest rate-limit wait the client sits through; beyond it the call fails with
    /// [`GitHubError::RateLimited`] so the caller can requeue.
    pub max_wait: Duration,
    /// A cached installation token is used until this long before it expires.
    pub token_refresh_buffer: Duration,
}

impl Default for ClientSettings {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(10),
            max_retries: 4,
            backoff_base: Duration::from_millis(250),
            backoff_cap: Duration::from_secs(8),
            max_wait: Duration::from_secs(60),
            token_refresh_buffer: Duration::from_secs(5 * 60),
        }
    }
}

/// The App itself. Cheap to clone; clones share the installation clients.
#[derive(Clone)]
pub struct GitHubApp {
    app_id: u64,
    crab: Octocrab,
    transport: Transport,
    settings: ClientSettings,
    base_path: Arc<str>,
    /// GitHub's API address, as configured.
    api_url: Arc<str>,
    installations: Arc<Mutex<HashMap<u64, Installation>>>,
    metrics: GitHubMetrics,
    credentials: Credentials,
}

impl std::fmt::Debug for GitHubApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubApp")
            .field("app_id", &self.app_id)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl GitHubApp {
    /// Builds the client for App `app_id` with its PEM private key (PKCS#1 or PKCS#8), talking to
    /// `base_url` (`https://api.github.com`, a GHES `https://host/api/v3`, or a stand-in). Must be
    /// called inside a Tokio runtime.
    pub fn new(
        app_id: u64,
        private_key_pem: &Secret,
        base_url: &str,
        settings: ClientSettings,
    ) -> Result<Self, GitHubError> {
        let key = octocrab::EncodingKey::from_rsa_pem(private_key_pem.expose().as_bytes())
            .map_err(|_| {
                GitHubError::Auth("the App private key is not an RSA PEM key".to_owned())
            })?;
        let base_uri: http::Uri = base_url
            .parse()
            .map_err(|_| GitHubError::Transport(format!("invalid GitHub URL {base_url:?}")))?;
        let base_path = base_uri.path().trim_end_matches('/').to_owned();
        let crab = Octocrab::builder()
            .base_uri(base_uri)
            .map_err(|_| GitHubError::Transport(format!("invalid GitHub URL {base_url:?}")))?
            .add_header(
                http::header::ACCEPT,
                "application/vnd.github+json".to_owned(),
            )
            .set_connect_timeout(Some(settings.request_timeout))
            .set_read_timeout(Some(settings.request_timeout))
            .set_write_timeout(Some(settings.request_timeout))
            .app(AppId(app_id), key)
            .build()
            .map_err(|e| GitHubError::Transport(format!("could not build the HTTP client: {e}")))?;
        let metrics = GitHubMetrics::default();
        let credentials = Credentials::default();
        let transport = Transport::new(
            crab.clone(),
            AuthMode::App,
            settings,
            &base_path,
            metrics.clone(),
            credentials.clone(),
        );
        Ok(Self {
            app_id,
            crab,
            transport,
            settings,
            base_path: base_path.into(),
            api_url: base_url.trim_end_matches('/').into(),
            installations: Arc::default(),
            metrics,
            credentials,
        })
    }

    /// Whether GitHub refused the App's credentials at its last App-authenticated answer.
    pub fn credentials_rejected(&self) -> Option<Rejected> {
        self.credentials.state()
    }

    /// GitHub's API address (`https://api.github.com`, or an Enterprise `…/api/v3`).
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// The same App counting its requests into `metrics` (a new client starts with families no
    /// registry shows). Installation clients handed out before keep counting where they did, so
    /// call this before handing out clones.
    pub fn with_metrics(mut self, metrics: GitHubMetrics) -> Self {
        self.transport = self.transport.with_metrics(metrics.clone());
        self.installations = Arc::default();
        self.metrics = metrics;
        self
    }

    pub fn app_id(&self) -> u64 {
        self.app_id
    }

    /// The client for one installation, created on first use and kept (with its token cache).
    pub fn installation(&self, id: u64) -> Installation {
        let mut cache = self
            .installations
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cache
            .entry(id)
            .or_insert_with(|| {
                let crab = self
                    .crab
                    .installation(InstallationId(id))
                    .expect("an App-authenticated client can always derive an installation client");
                Installation {
                    id,
                    transport: Transport::new(
                        crab,
                        AuthMode::Installation,
                        self.settings,
                        &self.base_path,
                        self.metrics.clone(),
                        self.credentials.clone(),
                    ),
                }
            })
            .clone()
    }

    /// The installation of the App that sees `repo` (`GET /repos/{owner}/{repo}/installation`,
    /// with the JWT), or `None` when the App is not installed there.
    pub async fn repo_installation(&self, repo: &RepoName) -> Result<Option<u64>, GitHubError> {
        #[derive(serde::Deserialize)]
        struct InstallationWire {
            id: u64,
        }
        let path = format!("/repos/{}/{}/installation", repo.owner(), repo.name());
        match self
            .transport
            .get_json::<InstallationWire>(&path, "installation")
            .await
        {
            Ok(i) => Ok(Some(i.id)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every installation of the App (`GET /app/installations`, authenticated with the JWT).
    pub async fn list_installations(&self) -> Result<Vec<InstallationInfo>, GitHubError> {
        self.transport
            .get_pages("/app/installations?per_page=100", "installation list", None)
            .await
    }
}

/// A client acting as one installation of the App. Cheap to clone; clones share the token cache.
#[derive(Clone, Debug)]
pub struct Installation {
    id: u64,
    transport: Transport,
}

impl Installation {
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The last `x-ratelimit-remaining` GitHub reported for this installation.
    pub fn rate_limit_remaining(&self) -> Option<u64> {
        self.transport.rate_limit_remaining()
    }
}
