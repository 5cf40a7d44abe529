//! The stand-in's HTTP front: accepts connections (on loopback unless configured), records every request, applies
//! injected faults, checks credentials, charges the rate-limit budget and stamps GitHub's
//! `x-ratelimit-*` headers, then hands the request to the routes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use jiff::Timestamp;
use jsonwebtoken::DecodingKey;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::auth::RequestAuth;
use super::calls::Call;
use super::faults::{self, Fault};
use super::json::AppIdentity;
use super::state::{Budget, State};

/// GitHub's documentation link for rate limits.
const RATE_LIMIT_DOC: &str = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api";

/// Everything the server tasks and the handles share.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    pub key: DecodingKey,
    pub identity: AppIdentity,
    pub hook_id: u64,
    /// `http://<address>:<port>`.
    pub url: String,
}

impl Shared {
    pub fn new(
        state: State,
        key: DecodingKey,
        identity: AppIdentity,
        hook_id: u64,
        url: String,
    ) -> Self {
        Self {
            state: Mutex::new(state),
            key,
            identity,
            hook_id,
            url,
        }
    }

    /// The state; never held across an `.await`.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The connection is dropped on purpose ([`Fault::Down`]).
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by fault injection")
    }
}

impl std::error::Error for Dropped {}

/// Serves `router` on `listener` until `cancel` fires.
pub(crate) fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    router: Router,
    cancel: CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                () = cancel.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::debug!(error = %e, "GitHub stand-in accept failed");
                        continue;
                    }
                },
            };
            let shared = shared.clone();
            let router = router.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    front(shared.clone(), router.clone(), req)
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                tokio::select! {
                    () = cancel.cancelled() => {}
                    _ = conn => {}
                }
            });
        }
    });
}

async fn front(
    shared: Arc<Shared>,
    router: Router,
    req: Request<Incoming>,
) -> Result<Response<Body>, Dropped> {
    let at = Instant::now();
    let (parts, body) = req.into_parts();
    let bytes = body.collect().await.map_err(|_| Dropped)?.to_bytes();
    let method = parts.method.to_string();
    let path = parts.uri.path().to_owned();
    let query: BTreeMap<String, String> = parts
        .uri
        .query()
        .and_then(|q| serde_urlencoded::from_str(q).ok())
        .unwrap_or_default();
    let body_json = (!bytes.iter().all(u8::is_ascii_whitespace)).then(|| {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    });
    let if_none_match = parts
        .headers
        .get(http::header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let header = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());

    let now = Timestamp::now().as_second();
    let (auth, fault, seq, within_budget, budget) = {
        let mut st = shared.lock();
        let auth = RequestAuth::classify(header, &st, &shared.key, shared.identity.id);
        let fault = faults::take(&mut st.faults, &method, &path);
        let seq = st.log.record(Call {
            seq: 0,
            at,
            method: method.clone(),
            path: path.clone(),
            query,
            body: body_json,
            auth: auth.for_log(),
            status: 0,
        });
        let budget = match auth {
            RequestAuth::Installation { installation, .. } => st
                .installations
                .get_mut(&installation)
                .map(|i| &mut i.budget),
            _ => None,
        };
        let (ok, snapshot) = match budget {
            Some(b) => (b.charge(now), *b),
            None => (st.app_budget.charge(now), st.app_budget),
        };
        (auth, fault, seq, ok, snapshot)
    };

    let installation = match auth {
        RequestAuth::Installation { installation, .. } => Some(installation),
        _ => None,
    };
    let mut response = match fault {
        Some(Fault::Down) => return Err(Dropped),
        Some(Fault::ServerError(code)) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            json_response(status, &json!({"message": "Server Error"}))
        }
        Some(Fault::SecondaryRateLimit { retry_after_secs }) => {
            let mut r = json_response(
                StatusCode::FORBIDDEN,
                &json!({
                    "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.",
                    "documentation_url": format!("{RATE_LIMIT_DOC}#about-secondary-rate-limits"),
                }),
            );
            insert(&mut r, "retry-after", &retry_after_secs.to_string());
            r
        }
        Some(Fault::PrimaryRateLimit { reset_in_secs }) => {
            let exhausted = Budget {
                limit: budget.limit,
                used: budget.limit,
                reset: now + i64::try_from(reset_in_secs).unwrap_or(i64::MAX / 2),
            };
            primary_limit(installation, &exhausted)
        }
        Some(Fault::IgnoreFilters) => {
            let mut parts = parts;
            let paging: Vec<&str> = parts
                .uri
                .query()
                .unwrap_or_default()
                .split('&')
                .filter(|p| p.starts_with("per_page=") || p.starts_with("page="))
                .collect();
            let uri = format!("{}?{}", parts.uri.path(), paging.join("&"));
            parts.uri = http::Uri::try_from(uri).unwrap_or(parts.uri);
            route(
                &router,
                parts,
                bytes,
                auth,
                within_budget,
                installation,
                &budget,
            )
            .await
        }
        Some(Fault::Slow(delay)) => {
            tokio::time::sleep(delay).await;
            route(
                &router,
                parts,
                bytes,
                auth,
                within_budget,
                installation,
                &budget,
            )
            .await
        }
        None => {
            route(
                &router,
                parts,
                bytes,
                auth,
                within_budget,
                installation,
                &budget,
            )
            .await
        }
    };
    let mut budget = budget;
    if method == "GET" && response.status() == StatusCode::OK {
        let not_modified;
        (response, not_modified) = conditional(response, if_none_match.as_deref()).await;
        if not_modified {
            let mut st = shared.lock();
            let b = match installation {
                Some(i) => st.installations.get_mut(&i).map(|i| &mut i.budget),
                None => Some(&mut st.app_budget),
            };
            if let Some(b) = b {
                b.refund();
                budget = *b;
            }
        }
    }
    for (name, value) in rate_headers(&budget) {
        if !response.headers().contains_key(name) {
            insert(&mut response, name, &value);
        }
    }
    insert(
        &mut response,
        "x-github-request-id",
        &format!("{seq:08X}:STANDIN"),
    );
    shared
        .lock()
        .log
        .set_status(seq, response.status().as_u16());
    Ok(response)
}

async fn route(
    router: &Router,
    parts: http::request::Parts,
    bytes: bytes::Bytes,
    auth: RequestAuth,
    within_budget: bool,
    installation: Option<u64>,
    budget: &Budget,
) -> Response<Body> {
    if !within_budget {
        return primary_limit(installation, budget);
    }
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(auth);
    match router.clone().oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// GitHub's conditional requests: every `200` to a GET carries a (weak) `ETag` of its body; a
/// request whose `If-None-Match` names it gets `304 Not Modified` with no body instead, which
/// does not count against the rate limit. The flag tells whether it was not modified.
async fn conditional(
    response: Response<Body>,
    if_none_match: Option<&str>,
) -> (Response<Body>, bool) {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = body.collect().await.map(|b| b.to_bytes()) else {
        return (
            json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                &json!({"message": "stand-in body"}),
            ),
            false,
        );
    };
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    let etag = format!("W/\"{}\"", hex::encode(&digest.as_ref()[..16]));
    if let Ok(v) = http::HeaderValue::from_str(&etag) {
        parts.headers.insert(http::header::ETAG, v);
    }
    let matches = if_none_match.is_some_and(|tags| {
        tags.split(',')
            .map(str::trim)
            .any(|t| t == etag || t == "*")
    });
    if matches {
        parts.status = StatusCode::NOT_MODIFIED;
        parts.headers.remove(http::header::CONTENT_LENGTH);
        parts.headers.remove(http::header::CONTENT_TYPE);
        return (Response::from_parts(parts, Body::empty()), true);
    }
    (Response::from_parts(parts, Body::from(bytes)), false)
}

fn primary_limit(installation: Option<u64>, budget: &Budget) -> Response<Body> {
    let who =
        installation.map_or_else(|| "this App".to_owned(), |i| format!("installation ID {i}"));
    let mut r = json_response(
        StatusCode::FORBIDDEN,
        &json!({
            "message": format!("API rate limit exceeded for {who}. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000."),
            "documentation_url": RATE_LIMIT_DOC,
        }),
    );
    for (name, value) in rate_headers(budget) {
        insert(&mut r, name, &value);
    }
    r
}

fn rate_headers(b: &Budget) -> [(&'static str, String); 5] {
    [
        ("x-ratelimit-limit", b.limit.to_string()),
        ("x-ratelimit-remaining", b.remaining().to_string()),
        ("x-ratelimit-used", b.used.to_string()),
        ("x-ratelimit-reset", b.reset.to_string()),
        ("x-ratelimit-resource", "core".to_owned()),
    ]
}

fn insert(r: &mut Response<Body>, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        r.headers_mut().insert(name, v);
    }
}

pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    r
}
