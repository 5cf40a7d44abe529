//! Pull request events, as the webhook handles them: an event a Blueprint covers and that can
//! change a preview is recorded as a `PreviewEvent` and answered `202 Accepted` — one Kubernetes
//! write and no GitHub call, whatever GitHub's speed. The controller carries it out (the
//! repository's `.github/sandcastle.yml`, the triggers, the changed files, the desired-state
//! writes; `controller::events`). Events nothing can come of are answered `202 ignored` (from
//! the Blueprint cache alone), a redelivery `200 duplicate`; Kubernetes failing answers 503 with
//! nothing recorded, so GitHub can redeliver.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use futures::FutureExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::AppState;
use super::answer::{WRITE_TIMEOUT, reply};
use super::error::ApiError;
use sandcastle_crd::labels::{MANAGED_BY, MANAGER, PR, REPO};
use sandcastle_crd::{Blueprint, PreviewEvent, PreviewEventSpec};
use sandcastle_domain::naming::repo_label_value;
use sandcastle_domain::{RepoName, intent};
use sandcastle_github::event::{PullRequestEvent, to_record};
use sandcastle_github::triggers;

/// The record's name: the same for every redelivery of a delivery, valid whatever the id holds.
pub fn record_name(delivery: &str) -> String {
    let digest = Sha256::digest(delivery.as_bytes());
    format!("pr-{}", &hex::encode(digest)[..20])
}

/// Handle a `pull_request` delivery.
pub(super) async fn pull_request(
    state: &AppState,
    ev: &PullRequestEvent,
    delivery: &str,
) -> Result<Response, ApiError> {
    let ignored = |reason: String| {
        reply(
            StatusCode::ACCEPTED,
            json!({"status": "ignored", "reason": reason}),
        )
    };
    if !triggers::may_act(ev) {
        return Ok(ignored(format!(
            "a pull request {} changes no preview",
            ev.action.as_str()
        )));
    }
    let blueprints = blueprints_for(state, &ev.repo, &ev.base.ref_).await?;
    if !blueprints
        .iter()
        .any(|b| intent::admits(&b.spec, &ev.repo, &ev.base.ref_))
    {
        return Ok(ignored(format!(
            "no Blueprint covers {} (base {})",
            ev.repo, ev.base.ref_
        )));
    }
    let name = record_name(delivery);
    let record = record(state, ev, delivery, &name);
    let api: Api<PreviewEvent> = Api::namespaced(state.client.clone(), &state.home);
    let created = tokio::time::timeout(WRITE_TIMEOUT, api.create(&PostParams::default(), &record))
        .await
        .map_err(|_| {
            ApiError::unavailable("timed out recording the event in Kubernetes; redeliver later")
        })?;
    match created {
        Ok(_) => {
            tracing::info!(target: "audit", actor = %ev.sender, action = ev.action.as_str(), repo = %ev.repo, pr = %ev.number, sha = %ev.head.sha, record = %name, delivery, result = "recorded", "pull request event");
            Ok(reply(
                StatusCode::ACCEPTED,
                json!({"status": "recorded", "record": name}),
            ))
        }
        Err(kube::Error::Api(r)) if r.code == 409 => Ok(reply(
            StatusCode::OK,
            json!({"status": "duplicate", "record": name}),
        )),
        Err(e) => {
            tracing::warn!(error = %e, "recording a pull request event failed");
            Err(ApiError::unavailable(
                "could not record the event in Kubernetes; redeliver later",
            ))
        }
    }
}

fn record(state: &AppState, ev: &PullRequestEvent, delivery: &str, name: &str) -> PreviewEvent {
    let mut record = PreviewEvent::new(
        name,
        PreviewEventSpec {
            repository: ev.repo.to_string(),
            pull_request: ev.number.get(),
            action: ev.action.as_str().to_owned(),
            sha: ev.head.sha.to_string(),
            updated_at: Time(ev.updated_at),
            delivery: delivery.to_owned(),
            received_at: Time(state.clock.now()),
            received_ns: i64::try_from(state.clock.now().as_nanosecond()).unwrap_or(i64::MAX),
            event: to_record(ev),
        },
    );
    record.metadata.labels = Some(
        [
            (MANAGED_BY.to_owned(), MANAGER.to_owned()),
            (REPO.to_owned(), repo_label_value(&ev.repo)),
            (PR.to_owned(), ev.number.to_string()),
        ]
        .into(),
    );
    record
}

/// The Blueprints, from the watch cache; straight from the API when the cache knows none that
/// covers `repo` (it may not be filled yet, or a Blueprint was created a moment ago).
async fn blueprints_for(
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
