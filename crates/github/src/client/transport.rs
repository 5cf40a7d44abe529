//! One GitHub call, done properly: the installation token refreshed ahead of expiry, a timeout per
//! attempt, the retry loop driven by [`decide`](super::retry::decide), the rate-limit budget
//! observed, each attempt and rate-limit wait counted, GETs made conditional on the last `ETag`
//! ([`Etags`]), and `Link`-header pagination. Raw octocrab responses stop here.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;
use jiff::Timestamp;
use octocrab::Octocrab;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ClientSettings;
use super::credentials::Credentials;
use super::error::GitHubError;
use super::etags::Etags;
use super::retry::{Decision, Outcome, RetryReason, decide};
use sandcastle_metrics::{Answer, GitHubMetrics};

/// Stop following `next` links after this many pages (100 items each): a loop guard, not a limit
/// any real listing reaches.
const MAX_PAGES: usize = 200;

/// A complete answer from GitHub.
#[derive(Debug)]
pub(crate) struct RawResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl RawResponse {
    /// GitHub's JSON `message`, if the body has one.
    pub fn message(&self) -> Option<String> {
        serde_json::from_slice::<Value>(&self.body)
            .ok()?
            .get("message")?
            .as_str()
            .map(str::to_owned)
    }

    pub fn json<T: DeserializeOwned>(&self, what: &'static str) -> Result<T, GitHubError> {
        let de = &mut serde_json::Deserializer::from_slice(&self.body);
        serde_path_to_error::deserialize(de).map_err(|e| GitHubError::decode(what, e))
    }

    fn into_status_error(self) -> GitHubError {
        let message = self.message().unwrap_or_else(|| {
            self.status
                .canonical_reason()
                .unwrap_or("unknown status")
                .to_owned()
        });
        GitHubError::Status {
            status: self.status,
            message,
        }
    }
}

/// How a transport authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthMode {
    /// As the App itself (JWT minted by octocrab on each request).
    App,
    /// As an installation (token minted and cached by octocrab).
    Installation,
}

/// An authenticated octocrab client plus the retry rules around it. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Transport {
    /// Behind an `Arc` on purpose: cloning an `Octocrab` copies its token cache instead of
    /// sharing it, so clones of one installation client would each mint their own token.
    crab: Arc<Octocrab>,
    mode: AuthMode,
    settings: ClientSettings,
    /// Path of the base URL (`/api/v3` on GitHub Enterprise Server, empty on github.com), stripped
    /// from `Link` URLs so that they go through octocrab's base-URI layer like any other path.
    base_path: Arc<str>,
    /// Last `x-ratelimit-remaining` seen; negative while unknown.
    remaining: Arc<AtomicI64>,
    metrics: GitHubMetrics,
    etags: Arc<Etags>,
    /// Whether GitHub accepts the App's credentials (shared by the App and its installations).
    credentials: Credentials,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("mode", &self.mode)
            .field("base_path", &self.base_path)
            .finish_non_exhaustive()
    }
}

/// One attempt went wrong before GitHub gave a usable answer.
enum AttemptError {
    Transport(String),
    /// Not worth retrying (the App's own credentials are refused).
    Fatal(GitHubError),
}

impl Transport {
    pub fn new(
        crab: Octocrab,
        mode: AuthMode,
        settings: ClientSettings,
        base_path: &str,
        metrics: GitHubMetrics,
        credentials: Credentials,
    ) -> Self {
        Self {
            crab: Arc::new(crab),
            mode,
            settings,
            base_path: base_path.trim_end_matches('/').into(),
            remaining: Arc::new(AtomicI64::new(-1)),
            metrics,
            etags: Arc::default(),
            credentials,
        }
    }

    /// The same transport counting into `metrics`.
    pub fn with_metrics(mut self, metrics: GitHubMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The last `x-ratelimit-remaining` GitHub reported to this client.
    pub fn rate_limit_remaining(&self) -> Option<u64> {
        u64::try_from(self.remaining.load(Ordering::Relaxed)).ok()
    }

    /// Sends one request with retries. 2xx and 3xx come back as `Ok`; any other final status
    /// becomes [`GitHubError::Status`].
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<RawResponse, GitHubError> {
        let mut attempt = 0;
        loop {
            let result = tokio::time::timeout(
                self.settings.request_timeout,
                self.attempt(&method, path, body),
            )
            .await;
            let now = Timestamp::now();
            let jitter: f64 = rand::random();
            let (decision, last) = match result {
                Err(_) => {
                    self.metrics.requested(&method, Answer::Timeout);
                    (
                        decide(&Outcome::Timeout, attempt, now, &self.settings, jitter),
                        Err(GitHubError::Timeout),
                    )
                }
                Ok(Err(AttemptError::Fatal(e))) => return Err(e),
                Ok(Err(AttemptError::Transport(msg))) => {
                    self.metrics.requested(&method, Answer::Error);
                    (
                        decide(&Outcome::Transport, attempt, now, &self.settings, jitter),
                        Err(GitHubError::Transport(msg)),
                    )
                }
                Ok(Ok((resp, from_token))) => {
                    // A refused token comes from minting it: a POST of its own.
                    let sent = if from_token { &Method::POST } else { &method };
                    self.metrics.requested(sent, Answer::Status(resp.status));
                    self.observe(&resp.headers);
                    let message = resp.message();
                    let outcome = Outcome::Response {
                        status: resp.status,
                        headers: &resp.headers,
                        message: message.as_deref(),
                    };
                    let decision = decide(&outcome, attempt, now, &self.settings, jitter);
                    self.judge_credentials(&resp, from_token, message.as_deref());
                    let last = if resp.status.is_success() || resp.status.is_redirection() {
                        Ok(resp)
                    } else if resp.status == StatusCode::UNAUTHORIZED
                        && (from_token || self.mode == AuthMode::App)
                    {
                        Err(GitHubError::CredentialsRejected(
                            message.as_deref().unwrap_or("401 Unauthorized").to_owned(),
                        ))
                    } else if from_token && resp.status.is_client_error() {
                        Err(GitHubError::Auth(format!(
                            "installation token refused ({}): {}",
                            resp.status,
                            message.as_deref().unwrap_or("no message")
                        )))
                    } else {
                        Err(resp.into_status_error())
                    };
                    (decision, last)
                }
            };
            match decision {
                Decision::Accept | Decision::GiveUp => {
                    return last.map(|r| self.conditional(&method, path, r));
                }
                Decision::RateLimited { retry_at } => {
                    tracing::warn!(%method, path, %retry_at, "GitHub rate limit outlasts the allowed wait");
                    return Err(GitHubError::RateLimited { retry_at });
                }
                Decision::Retry { after, reason } => {
                    if reason == RetryReason::RateLimited {
                        self.metrics.rate_limit_wait();
                    }
                    tracing::debug!(%method, path, attempt, ?reason, wait_ms = after.as_millis() as u64, "retrying GitHub call");
                    tokio::time::sleep(after).await;
                    attempt += 1;
                }
            }
        }
    }

    /// Record what an answer says of the App's credentials: a 401 to the App's JWT (its own
    /// calls, or minting an installation token) refuses them; any other answer to one accepts
    /// them (an installation call's answer means its token was minted with them).
    fn judge_credentials(&self, resp: &RawResponse, from_token: bool, message: Option<&str>) {
        let app_credentials = from_token || self.mode == AuthMode::App;
        if app_credentials && resp.status == StatusCode::UNAUTHORIZED {
            self.credentials
                .rejected(message.unwrap_or("401 Unauthorized"));
        } else if !from_token && resp.status != StatusCode::UNAUTHORIZED {
            self.credentials.accepted();
        }
    }

    /// One attempt: make sure a fresh token is cached, send, read the whole body. The flag tells
    /// whether the answer came from minting the token rather than from the call itself.
    async fn attempt(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(RawResponse, bool), AttemptError> {
        if self.mode == AuthMode::Installation {
            let buffer = chrono::Duration::from_std(self.settings.token_refresh_buffer)
                .unwrap_or(chrono::Duration::minutes(5));
            if let Err(e) = self.crab.installation_token_with_buffer(buffer).await {
                return match e {
                    octocrab::Error::GitHub { source, .. } => Ok((
                        RawResponse {
                            status: source.status_code,
                            headers: source.headers.clone().unwrap_or_default(),
                            body: serde_json::to_vec(
                                &serde_json::json!({"message": source.message}),
                            )
                            .unwrap_or_default()
                            .into(),
                        },
                        true,
                    )),
                    octocrab::Error::JWT { .. } => Err(AttemptError::Fatal(GitHubError::Auth(
                        "could not sign the App JWT".to_owned(),
                    ))),
                    other => Err(AttemptError::Transport(describe(&other))),
                };
            }
        }
        let uri = path.to_owned();
        let sent = match *method {
            Method::GET => {
                let conditional = self.etags.tag(path).map(|tag| {
                    let mut h = HeaderMap::new();
                    h.insert(http::header::IF_NONE_MATCH, tag);
                    h
                });
                self.crab._get_with_headers(uri, conditional).await
            }
            Method::POST => self.crab._post(uri, body).await,
            Method::PATCH => self.crab._patch(uri, body).await,
            Method::DELETE => self.crab._delete(uri, body).await,
            Method::PUT => self.crab._put(uri, body).await,
            _ => {
                return Err(AttemptError::Fatal(GitHubError::Transport(format!(
                    "unsupported method {method}"
                ))));
            }
        };
        let response = sent.map_err(|e| AttemptError::Transport(describe(&e)))?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| AttemptError::Transport(describe(&e)))?
            .to_bytes();
        Ok((
            RawResponse {
                status: parts.status,
                headers: parts.headers,
                body,
            },
            false,
        ))
    }

    /// A `304` answered from what was remembered; a `200` with an `ETag` remembered.
    fn conditional(&self, method: &Method, path: &str, mut resp: RawResponse) -> RawResponse {
        if *method != Method::GET {
            return resp;
        }
        if resp.status == StatusCode::NOT_MODIFIED
            && let Some(cached) = self.etags.recall(path)
        {
            resp.status = StatusCode::OK;
            resp.body = cached.body;
            if let Some(link) = cached.link {
                resp.headers.insert(http::header::LINK, link);
            }
        } else if resp.status == StatusCode::OK
            && let Some(etag) = resp.headers.get(http::header::ETAG)
        {
            let link = resp.headers.get(http::header::LINK).cloned();
            self.etags
                .remember(path, etag.clone(), resp.body.clone(), link);
        }
        resp
    }

    fn observe(&self, headers: &HeaderMap) {
        if let Some(remaining) = headers
            .get("x-ratelimit-remaining")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<i64>().ok())
        {
            self.remaining.store(remaining, Ordering::Relaxed);
        }
    }

    /// GET and decode one JSON document.
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        path: &str,
        what: &'static str,
    ) -> Result<T, GitHubError> {
        self.send(Method::GET, path, None).await?.json(what)
    }

    /// GET every page of a listing, following `Link: rel="next"`. `items` extracts a page's
    /// elements from its JSON (an array, or an object wrapping one).
    pub async fn get_pages<T: DeserializeOwned>(
        &self,
        first: &str,
        what: &'static str,
        wrapper_key: Option<&'static str>,
    ) -> Result<Vec<T>, GitHubError> {
        let mut out = Vec::new();
        let mut next = Some(first.to_owned());
        let mut pages = 0;
        while let Some(path) = next.take() {
            let resp = self.send(Method::GET, &path, None).await?;
            let page: Vec<T> = match wrapper_key {
                None => resp.json(what)?,
                Some(key) => {
                    let mut doc: serde_json::Map<String, Value> = resp.json(what)?;
                    let items = doc.remove(key).unwrap_or(Value::Array(Vec::new()));
                    serde_path_to_error::deserialize(items)
                        .map_err(|e| GitHubError::decode(what, e))?
                }
            };
            out.extend(page);
            pages += 1;
            next = resp
                .headers
                .get(http::header::LINK)
                .and_then(|v| v.to_str().ok())
                .and_then(next_link)
                .and_then(|url| relative_path(url, &self.base_path));
            if pages >= MAX_PAGES && next.is_some() {
                tracing::warn!(first, pages, "stopped following GitHub pagination");
                break;
            }
        }
        Ok(out)
    }
}

/// A short description of an octocrab failure. Never includes request headers (so no token).
fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The URL of the `rel="next"` entry of a `Link` header.
pub(crate) fn next_link(header: &str) -> Option<&str> {
    header.split(',').find_map(|entry| {
        let (target, params) = entry.split_once(';')?;
        let url = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let is_next = params.split(';').any(|p| {
            p.trim()
                .strip_prefix("rel=")
                .map(|v| v.trim_matches('"').split_whitespace().any(|r| r == "next"))
                .unwrap_or(false)
        });
        is_next.then_some(url)
    })
}

/// The path and query of `url`, relative to the client's base path (so octocrab adds the base
/// URL, and with it the authorization header, itself).
pub(crate) fn relative_path(url: &str, base_path: &str) -> Option<String> {
    let uri: http::Uri = url.parse().ok()?;
    let pq = uri.path_and_query()?.as_str();
    let rel = if base_path.is_empty() {
        pq
    } else {
        pq.strip_prefix(base_path).filter(|r| r.starts_with('/'))?
    };
    Some(rel.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_header_next_is_found() {
        let h = r#"<https://api.github.com/repositories/1/issues/2/comments?page=2>; rel="next", <https://api.github.com/repositories/1/issues/2/comments?page=5>; rel="last""#;
        assert_eq!(
            next_link(h),
            Some("https://api.github.com/repositories/1/issues/2/comments?page=2")
        );
        let last_page = r#"<https://api.github.com/x?page=1>; rel="first", <https://api.github.com/x?page=4>; rel="prev""#;
        assert_eq!(next_link(last_page), None);
        assert_eq!(next_link(""), None);
        assert_eq!(next_link("garbage"), None);
        assert_eq!(
            next_link(r#"<http://h/a?page=3>;rel="next""#),
            Some("http://h/a?page=3")
        );
    }

    #[test]
    fn link_urls_become_paths_under_the_base() {
        assert_eq!(
            relative_path(
                "https://api.github.com/repos/a/b/pulls?page=2&per_page=100",
                ""
            ),
            Some("/repos/a/b/pulls?page=2&per_page=100".to_owned())
        );
        assert_eq!(
            relative_path(
                "https://ghe.example.com/api/v3/repos/a/b/pulls?page=2",
                "/api/v3"
            ),
            Some("/repos/a/b/pulls?page=2".to_owned())
        );
        assert_eq!(
            relative_path("https://ghe.example.com/elsewhere?page=2", "/api/v3"),
            None
        );
    }
}
