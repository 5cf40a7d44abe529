//! `POST /github/webhook`: read the body under GitHub's 25 MiB cap (a larger declared length is
//! refused before it is read), verify the signature before
//! anything else, parse into Sandcastle's events, and record them: pull request events
//! (`pulls`) and `/preview` commands (`comments`) as records the controller carries out, and
//! completed check runs as a nudge to previews waiting for them. No delivery waits on GitHub: a
//! 2xx is returned once the one Kubernetes write is made; when Kubernetes cannot be reached the
//! answer is 503 so the delivery shows as failed and can be redelivered. Every delivery is
//! counted by its answer's JSON status or error code, and timed.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::AppState;
use super::answer::{Answered, WRITE_TIMEOUT, reply};
use super::comments;
use super::error::ApiError;
use sandcastle_crd::PreviewEnvironment;
use sandcastle_crd::labels::{CHECKS_CHANGED, REPO};
use sandcastle_github::event::{self, CheckRunAction, CheckRunEvent, Event};
use sandcastle_github::verify::{SIGNATURE_HEADER, verify_signature};

/// GitHub caps payloads at 25 MB; Sandcastle accepts up to 25 MiB.
pub const BODY_LIMIT: usize = 25 * 1024 * 1024;

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The `X-Hub-Signature-256` value. One that is there but not visible ASCII (which no
/// signature is) reads as empty: refused as malformed, not as missing.
fn signature(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(SIGNATURE_HEADER)
        .map(|v| v.to_str().unwrap_or_default())
}

pub(super) async fn receive(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let (response, result) = match handle(&state, &headers, body).await {
        Ok(mut r) => {
            let result = r
                .extensions_mut()
                .remove::<Answered>()
                .map_or(Cow::Borrowed("unknown"), |Answered(status)| {
                    Cow::Owned(status)
                });
            (r, result)
        }
        Err(e) => {
            if e.code == "payload_too_large" || e.status == StatusCode::UNAUTHORIZED {
                UNSIGNED_REFUSALS.refused(&e);
            } else {
                tracing::info!(status = e.status.as_u16(), code = e.code, message = %e.message, "webhook refused");
            }
            let code = Cow::Borrowed(e.code);
            (e.into_response(), code)
        }
    };
    state.metrics.webhook.delivered(
        header(&headers, "x-github-event"),
        result,
        started.elapsed(),
    );
    response
}

/// Refusals anyone can cause, before a signature is verified (a wrong or missing signature, an
/// oversized body): logged at most once a second per process, each line with how many more were
/// refused since the one before. A flood of them (10,000 a second) would otherwise write as many
/// log lines (formatting and writing one took 8 % of a refusal's time) and fill the log storage.
/// Every refusal is still counted in the metrics.
static UNSIGNED_REFUSALS: RefusalLog = RefusalLog {
    second: AtomicU64::new(0),
    held: AtomicU64::new(0),
};

struct RefusalLog {
    /// The second (Unix time) of the last line written.
    second: AtomicU64,
    /// Refusals not logged since that line.
    held: AtomicU64,
}

impl RefusalLog {
    fn refused(&self, e: &ApiError) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = self.second.load(Ordering::Relaxed);
        if last != now
            && self
                .second
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let held = self.held.swap(0, Ordering::Relaxed);
            tracing::info!(status = e.status.as_u16(), code = e.code, message = %e.message, refused_since_last_line = held, "webhook refused");
        } else {
            self.held.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn handle(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Response, ApiError> {
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "webhook bodies are limited to {} MiB",
                BODY_LIMIT / 1024 / 1024
            ),
        )
    };
    // A larger declared length is refused before a byte is read.
    let declared = header(headers, "content-length").and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT as u64) {
        return Err(too_large());
    }
    let body = axum::body::to_bytes(body, BODY_LIMIT)
        .await
        .map_err(|_| too_large())?;
    verify_signature(&state.webhook_secrets, signature(headers), &body)
        .map_err(|e| ApiError::new(StatusCode::UNAUTHORIZED, e.code(), e.reason()))?;
    let event_name = header(headers, "x-github-event").ok_or_else(|| {
        ApiError::bad_request("missing_event", "the X-GitHub-Event header is missing")
    })?;
    let delivery = header(headers, "x-github-delivery")
        .ok_or_else(|| {
            ApiError::bad_request(
                "missing_delivery",
                "the X-GitHub-Delivery header is missing",
            )
        })?
        .to_owned();
    if state.deliveries.contains(&delivery) {
        return Ok(reply(
            StatusCode::OK,
            json!({"status": "duplicate", "delivery": delivery}),
        ));
    }
    let event = event::parse(event_name, &body)
        .map_err(|e| ApiError::bad_request(e.code(), e.to_string()))?;
    let response = match event {
        Event::Ping { zen, .. } => reply(StatusCode::OK, json!({"status": "pong", "zen": zen})),
        Event::PullRequest(ev) => super::pulls::pull_request(state, &ev, &delivery).await?,
        Event::IssueComment(ev) => comments::issue_comment(state, &ev, &delivery).await?,
        Event::CheckRun(ev) => check_run(state, &ev, &delivery).await?,
        Event::Ignored { event, action } => {
            tracing::debug!(%event, ?action, "event not used");
            reply(
                StatusCode::ACCEPTED,
                json!({"status": "ignored", "reason": format!("Sandcastle does not act on {event} {}", action.unwrap_or_default()).trim_end().to_owned()}),
            )
        }
        other => {
            tracing::debug!(event = event_name, ?other, "event not acted on yet");
            reply(
                StatusCode::ACCEPTED,
                json!({"status": "ignored", "reason": format!("Sandcastle does not act on {event_name}")}),
            )
        }
    };
    state.deliveries.insert(delivery);
    Ok(response)
}

/// A check run completed on some commit: nudge the previews of that repository that wait for
/// checks on it, so the controller looks again now rather than at its next poll. Check runs on
/// forks carry no pull request, so previews are matched by commit.
async fn check_run(
    state: &AppState,
    ev: &CheckRunEvent,
    delivery: &str,
) -> Result<Response, ApiError> {
    if ev.action != CheckRunAction::Completed {
        return Ok(reply(
            StatusCode::ACCEPTED,
            json!({"status": "ignored", "reason": "only completed check runs matter"}),
        ));
    }
    let api: Api<PreviewEnvironment> = Api::namespaced(state.client.clone(), &state.home);
    let selector = format!(
        "{REPO}={}",
        sandcastle_domain::naming::repo_label_value(&ev.repo)
    );
    let list = tokio::time::timeout(
        WRITE_TIMEOUT,
        api.list(&ListParams::default().labels(&selector)),
    )
    .await
    .map_err(|_| ApiError::unavailable("timed out listing previews; redeliver later"))?
    .map_err(|e| {
        tracing::warn!(error = %e, "listing previews failed");
        ApiError::unavailable("could not read previews from Kubernetes; redeliver later")
    })?;
    // Previews of Blueprints that wait for this check, on this commit, not yet past their checks.
    let blueprints = state.blueprints.state();
    let waits_for = |bp: &str| {
        blueprints.iter().any(|b| {
            b.metadata.name.as_deref() == Some(bp) && b.spec.wait_for_checks.contains(&ev.name)
        })
    };
    let waiting: Vec<PreviewEnvironment> = list
        .items
        .into_iter()
        .filter(|p| {
            p.spec.sha == ev.head_sha.as_str()
                && p.spec.teardown.is_none()
                && p.status
                    .as_ref()
                    .and_then(|s| s.checks_passed_sha.as_deref())
                    != Some(p.spec.sha.as_str())
                && waits_for(&p.spec.blueprint)
        })
        .collect();
    if waiting.is_empty() {
        return Ok(reply(
            StatusCode::ACCEPTED,
            json!({"status": "ignored", "reason": "no preview waits for checks on that commit"}),
        ));
    }
    let mut nudged = Vec::new();
    for pe in waiting {
        let name = pe.name_any();
        let patch = json!({"metadata": {"annotations": {CHECKS_CHANGED: format!("{}={}", ev.name, delivery)}}});
        tokio::time::timeout(
            WRITE_TIMEOUT,
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        .map_err(|_| ApiError::unavailable("timed out writing a preview; redeliver later"))?
        .map_err(|e| {
            tracing::warn!(error = %e, preview = %name, "nudging a preview failed");
            ApiError::unavailable(format!("could not write preview {name}; redeliver later"))
        })?;
        nudged.push(name);
    }
    Ok(reply(
        StatusCode::OK,
        json!({"status": "accepted", "previews": nudged}),
    ))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;
    use sandcastle_domain::Secret;
    use sandcastle_github::verify::SignatureError;

    #[test]
    fn a_signature_header_that_is_not_text_is_malformed_not_missing() {
        let secrets = [Secret::new("s")];
        let mut headers = HeaderMap::new();
        assert_eq!(
            verify_signature(&secrets, signature(&headers), b"{}"),
            Err(SignatureError::Missing)
        );
        let mut value = b"sha256=".to_vec();
        value.extend([0xe9; 64]);
        headers.insert(SIGNATURE_HEADER, HeaderValue::from_bytes(&value).unwrap());
        assert_eq!(signature(&headers), Some(""));
        assert_eq!(
            verify_signature(&secrets, signature(&headers), b"{}"),
            Err(SignatureError::Malformed)
        );
    }
}
