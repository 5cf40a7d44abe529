//! `POST /github/webhook`: read the body under GitHub's 25 MiB cap, verify the signature before
//! anything else, parse into Sandcastle's events, and record desired state: pull request events
//! (with the repository's `.github/sandcastle.yml` from the base branch), `/preview` commands
//! (`commands`), and completed check runs (a nudge to previews waiting for them). A 2xx is
//! returned only once that state is durably written; when Kubernetes cannot be reached (or GitHub
//! cannot tell something the desired state depends on) the answer is 503 so the delivery shows as
//! failed and can be redelivered. Every delivery is counted by its answer's JSON status or error
//! code, and timed.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::FutureExt as _;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::AppState;
use super::answer::{Answered, WRITE_TIMEOUT, reply};
use super::comments;
use super::error::ApiError;
use sandcastle_crd::labels::{CHECKS_CHANGED, REPO};
use sandcastle_crd::{Blueprint, BlueprintSpec, PreviewEnvironment};
use sandcastle_domain::RepoName;
use sandcastle_domain::intent;
use sandcastle_github::client::Installation;
use sandcastle_github::event::{
    self, CheckRunAction, CheckRunEvent, Event, PrAction, PullRequestEvent,
};
use sandcastle_github::verify::{SIGNATURE_HEADER, verify_signature};
use sandcastle_github::{changed_files, config_file};
use sandcastle_kube::events::Request;
use sandcastle_kube::previews::{self, Outcome};

/// GitHub caps payloads at 25 MB; Sandcastle accepts up to 25 MiB.
pub const BODY_LIMIT: usize = 25 * 1024 * 1024;
/// Limit on the one GitHub call a delivery may wait for (the configuration file of a pull
/// request event; GitHub gives up on a delivery after 10 s).
const GITHUB_TIMEOUT: Duration = Duration::from_secs(4);

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
    let body = axum::body::to_bytes(body, BODY_LIMIT).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "webhook bodies are limited to {} MiB",
                BODY_LIMIT / 1024 / 1024
            ),
        )
    })?;
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
        Event::PullRequest(ev) => pull_request(state, &ev, &delivery).await?,
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

/// The Blueprints, from the watch cache; straight from the API when the cache knows none that
/// covers `repo` (it may not be filled yet, or a Blueprint was created a moment ago).
pub(super) async fn blueprints_for(
    state: &AppState,
    repo: &RepoName,
    base: &str,
) -> Result<Vec<Arc<Blueprint>>, ApiError> {
    let cached = state.blueprints.state();
    // Once the watch has listed them, the cache is the truth: a Blueprint made a moment ago is
    // seen within the watch's latency. Asking the API server for every delivery no Blueprint
    // covers (most of what an App installed on a whole organization receives) cost a list per
    // delivery. Before the first list, the API server answers.
    let synced = state
        .blueprints
        .wait_until_ready()
        .now_or_never()
        .is_some_and(|r| r.is_ok());
    if synced || cached.iter().any(|b| intent::admits(&b.spec, repo, base)) {
        return Ok(cached);
    }
    let api: Api<Blueprint> = Api::namespaced(state.client.clone(), &state.home);
    let list = tokio::time::timeout(WRITE_TIMEOUT, api.list(&ListParams::default()))
        .await
        .map_err(|_| ApiError::unavailable("timed out listing Blueprints; redeliver later"))?
        .map_err(|e| {
            tracing::warn!(error = %e, "listing Blueprints failed");
            ApiError::unavailable("could not read Blueprints from Kubernetes; redeliver later")
        })?;
    Ok(list.items.into_iter().map(Arc::new).collect())
}

async fn pull_request(
    state: &AppState,
    ev: &PullRequestEvent,
    delivery: &str,
) -> Result<Response, ApiError> {
    let blueprints = blueprints_for(state, &ev.repo, &ev.base.ref_).await?;
    let specs: Vec<(&str, &BlueprintSpec)> = blueprints
        .iter()
        .filter_map(|b| b.metadata.name.as_deref().map(|n| (n, &b.spec)))
        .collect();
    let reads_config = match ev.action {
        PrAction::Opened
        | PrAction::Reopened
        | PrAction::Synchronize
        | PrAction::ReadyForReview => true,
        PrAction::Unlabeled => ev.label.as_deref() == Some(intent::NO_PREVIEW_LABEL),
        PrAction::Labeled => ev.label.as_deref() == Some(intent::KEEP_LABEL),
        _ => false,
    };
    let config = if reads_config {
        let admitting: Vec<(&str, &BlueprintSpec)> = specs
            .iter()
            .copied()
            .filter(|(_, s)| intent::admits(s, &ev.repo, &ev.base.ref_))
            .collect();
        match ev.installation_id {
            None => Default::default(),
            Some(id) => {
                let gh = state.github.installation(id);
                config_file::load(reader(state, &gh, ev), &admitting)
                    .await
                    .map_err(|e| ApiError::github_unavailable(format!("{e}; redeliver later")))?
            }
        }
    } else {
        Default::default()
    };
    let (mut intents, mut skipped) =
        sandcastle_github::triggers::from_pull_request(ev, &specs, &config);
    if ev.action == PrAction::Opened {
        tell_classes_off(state, ev, &specs, &config).await;
    }
    if let Some(id) = ev.installation_id {
        let gh = state.github.installation(id);
        changed_files::filter(&gh, ev, &specs, &mut intents, &mut skipped, |_| true).await;
    }
    if intents.is_empty() {
        let reason = match skipped.first() {
            Some(s) => format!("{}: {}", s.blueprint, s.reason),
            None if specs
                .iter()
                .any(|(_, s)| intent::admits(s, &ev.repo, &ev.base.ref_)) =>
            {
                "nothing to do for this action".to_owned()
            }
            None => format!("no Blueprint covers {} (base {})", ev.repo, ev.base.ref_),
        };
        return Ok(reply(
            StatusCode::ACCEPTED,
            json!({"status": "ignored", "reason": reason}),
        ));
    }
    let api: Api<PreviewEnvironment> = Api::namespaced(state.client.clone(), &state.home);
    let now = state.clock.now();
    let mut results = Vec::new();
    for intent in &intents {
        let request = Request {
            sha: None,
            id: String::new(),
            at: now,
            actor: format!("@{}", ev.sender),
            action: format!("pull-request-{}", ev.action.as_str()),
            note: format!(
                "pull request #{} {} at commit {}",
                ev.number,
                ev.action.as_str(),
                intent.sha.short()
            ),
        };
        let outcome = tokio::time::timeout(
            WRITE_TIMEOUT,
            previews::apply(&api, intent, &request, delivery, now),
        )
        .await
        .map_err(|_| {
            ApiError::unavailable("timed out writing the preview to Kubernetes; redeliver later")
        })?
        .map_err(|e| {
            tracing::warn!(error = %e, preview = %intent.preview, "writing desired state failed");
            ApiError::unavailable(format!(
                "could not write preview {} to Kubernetes; redeliver later",
                intent.preview
            ))
        })?;
        if matches!(outcome, Outcome::Deleting | Outcome::Contended) {
            return Err(ApiError::unavailable(format!(
                "preview {} is {}; redeliver later",
                intent.preview,
                if outcome == Outcome::Deleting {
                    "being deleted"
                } else {
                    "being changed by another writer"
                }
            )));
        }
        tracing::info!(target: "audit", actor = %ev.sender, action = ?ev.action, preview = %intent.preview, sha = %intent.sha, result = outcome.as_str(), delivery, "pull request event");
        results.push(json!({"preview": intent.preview.as_str(), "result": outcome.as_str()}));
    }
    let duplicate = results.iter().all(|r| r["result"] == "duplicate");
    let status = if duplicate { "duplicate" } else { "accepted" };
    Ok(reply(
        StatusCode::OK,
        json!({"status": status, "previews": results}),
    ))
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

/// How the webhook reads and writes on `ev`'s pull request through `gh`.
fn reader<'a>(
    state: &AppState,
    gh: &'a Installation,
    ev: &'a PullRequestEvent,
) -> config_file::Reader<'a> {
    config_file::Reader {
        gh,
        app_id: state.github.app_id(),
        repo: &ev.repo,
        base: &ev.base.ref_,
        pr: ev.number,
        timeout: GITHUB_TIMEOUT,
    }
}

/// Say on a pull request just opened which Blueprints give its author's class no preview (a
/// rule `trigger: off`), once each. Failures are logged: the delivery is not refused for them.
async fn tell_classes_off(
    state: &AppState,
    ev: &PullRequestEvent,
    specs: &[(&str, &BlueprintSpec)],
    config: &sandcastle_github::repo_config::RepoConfig,
) {
    let Some(id) = ev.installation_id else {
        return;
    };
    let gh = state.github.installation(id);
    for (name, spec) in specs
        .iter()
        .filter(|(n, s)| intent::admits(s, &ev.repo, &ev.base.ref_) && config.selects(n))
    {
        let class = sandcastle_github::triggers::class_of(ev, spec);
        if sandcastle_github::triggers::off_reason(spec, Some(class)).is_none() {
            continue;
        }
        let text = sandcastle_github::text::replies::reply_text(
            &sandcastle_github::text::replies::Reply::AuthorClassOff {
                blueprint: (*name).to_owned(),
                class,
            },
            &sandcastle_github::command_parser::HelpLimits::of(Some(spec)),
        );
        let marker = format!("<!-- sandcastle-note class-off {name} -->");
        if let Err(e) = config_file::tell_once(reader(state, &gh, ev), &marker, &text).await {
            tracing::warn!(repo = %ev.repo, pr = %ev.number, blueprint = %name, error = %e, "could not say why the pull request gets no preview");
        }
    }
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
