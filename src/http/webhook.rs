//! `POST /github/webhook`: read the body under GitHub's 25 MiB cap, verify the signature before
//! anything else, parse into Sandcastle's events, and record desired state. A 2xx is returned
//! only once that state is durably written; when Kubernetes cannot be reached the answer is 503 so
//! the delivery shows as failed and can be redelivered.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use kube::api::{Api, ListParams};
use serde_json::json;

use super::AppState;
use super::error::ApiError;
use crate::domain::RepoName;
use crate::github::event::{self, Event, PullRequestEvent};
use crate::github::intent;
use crate::github::verify::verify_signature;
use crate::k8s::crd::{Blueprint, PreviewEnvironment};
use crate::k8s::previews::{self, Outcome};

/// GitHub caps payloads at 25 MB; Sandcastle accepts up to 25 MiB.
pub const BODY_LIMIT: usize = 25 * 1024 * 1024;
/// How long one desired-state write may take before the delivery is answered 503.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

pub(super) async fn receive(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match handle(&state, &headers, body).await {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(status = e.status.as_u16(), code = e.code, message = %e.message, "webhook refused");
            e.into_response()
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
    verify_signature(
        &state.webhook_secrets,
        header(headers, "x-hub-signature-256"),
        &body,
    )
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

fn reply(status: StatusCode, body: serde_json::Value) -> Response {
    (status, Json(body)).into_response()
}

/// The Blueprints, from the watch cache; straight from the API when the cache knows none that
/// covers `repo` (it may not be filled yet, or a Blueprint was created a moment ago).
async fn blueprints_for(
    state: &AppState,
    repo: &RepoName,
    base: &str,
) -> Result<Vec<Arc<Blueprint>>, ApiError> {
    let cached = state.blueprints.state();
    if cached.iter().any(|b| intent::admits(&b.spec, repo, base)) {
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
    let specs: Vec<(&str, &crate::k8s::crd::BlueprintSpec)> = blueprints
        .iter()
        .filter_map(|b| b.metadata.name.as_deref().map(|n| (n, &b.spec)))
        .collect();
    let (intents, skipped) = intent::from_pull_request(ev, &specs);
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
        let outcome = tokio::time::timeout(
            WRITE_TIMEOUT,
            previews::apply(&api, intent, delivery, now),
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
