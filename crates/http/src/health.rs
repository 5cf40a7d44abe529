//! `/healthz` (the process is up), `/readyz` (the Kubernetes API answers, Sandcastle's CRDs
//! are installed with the schema this build writes, the Blueprint cache is filled, and — checked
//! once — the webhook's records can be written; it also reports each registered cluster, down or
//! not, without failing for one) and `/metrics` (Prometheus).

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use sandcastle_crd::{PreviewCommand, PreviewCommandSpec, PreviewEvent, PreviewEventSpec};
use serde_json::json;

use super::AppState;
use super::error::ApiError;

pub(super) async fn healthz() -> Response {
    (StatusCode::OK, Json(json!({"status": "ok"}))).into_response()
}

const CRDS: [&str; 4] = [
    "blueprints.sandcastle.dev",
    "previewenvironments.sandcastle.dev",
    "previewcommands.sandcastle.dev",
    "previewevents.sandcastle.dev",
];

async fn problems(state: &AppState) -> Vec<String> {
    let mut out = Vec::new();
    let crds: Api<CustomResourceDefinition> = Api::all(state.client.clone());
    for name in CRDS {
        match tokio::time::timeout(Duration::from_secs(2), crds.get_opt(name)).await {
            Ok(Ok(Some(crd))) => {
                let installed = crd.annotations().get(sandcastle_crd::SCHEMA_ANNOTATION);
                out.extend(sandcastle_crd::schema_mismatch(
                    name,
                    installed.map(String::as_str),
                ));
            }
            Ok(Ok(None)) => out.push(format!("CustomResourceDefinition {name} is not installed")),
            Ok(Err(e)) => {
                out.push(format!("Kubernetes API: {e}"));
                return out;
            }
            Err(_) => {
                out.push("Kubernetes API did not answer within 2s".to_owned());
                return out;
            }
        }
    }
    if tokio::time::timeout(
        Duration::from_millis(100),
        state.blueprints.wait_until_ready(),
    )
    .await
    .is_err()
    {
        out.push("the Blueprint cache is not filled yet".to_owned());
    }
    if out.is_empty() && !state.records_checked.load(Ordering::Relaxed) {
        match records_writable(state).await {
            Ok(()) => state.records_checked.store(true, Ordering::Relaxed),
            Err(problem) => out.push(problem),
        }
    }
    out
}

/// Whether the webhook can record what it receives: a server-side dry run of each record it
/// writes (nothing is stored). Beyond the permission, it readies the API server for them: the
/// first write of a kind there pays a one-time cost (its quota admission learns the kind, about
/// 2 s), which would otherwise fall on the first delivery GitHub sends.
async fn records_writable(state: &AppState) -> Result<(), String> {
    let now = Time(state.clock.now());
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let event = PreviewEvent::new(
        "sandcastle-readyz",
        PreviewEventSpec {
            repository: "sandcastle/readyz".to_owned(),
            pull_request: 1,
            action: "opened".to_owned(),
            sha: "0".repeat(40),
            updated_at: now.clone(),
            delivery: "readyz".to_owned(),
            received_at: now.clone(),
            received_ns: 0,
            event: json!({}),
        },
    );
    let command = PreviewCommand::new(
        "sandcastle-readyz",
        PreviewCommandSpec {
            repository: "sandcastle/readyz".to_owned(),
            pull_request: 1,
            installation_id: 1,
            comment_id: 1,
            author: "sandcastle".to_owned(),
            command: "/preview".to_owned(),
            delivery: "readyz".to_owned(),
            received_at: now,
        },
    );
    let events: Api<PreviewEvent> = Api::namespaced(state.client.clone(), &state.home);
    let commands: Api<PreviewCommand> = Api::namespaced(state.client.clone(), &state.home);
    let within = Duration::from_secs(5);
    let said = |kind: &str, r: Result<Result<(), kube::Error>, _>| match r {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "cannot record {kind}s in namespace {}: {e}",
            state.home
        )),
        Err(_) => Err(format!(
            "recording a {kind} (a dry run) took over {within:?}"
        )),
    };
    said(
        "PreviewEvent",
        tokio::time::timeout(within, events.create(&dry, &event))
            .await
            .map(|r| r.map(drop)),
    )?;
    said(
        "PreviewCommand",
        tokio::time::timeout(within, commands.create(&dry, &command))
            .await
            .map(|r| r.map(drop)),
    )
}

pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    let problems = problems(&state).await;
    // Other clusters are reported, never a reason to be unready: webhooks, the API and the
    // previews elsewhere go on while one is away.
    let clusters = clusters(&state.agent.clusters);
    // Likewise GitHub: refused credentials are said here (and in every answer that needed
    // GitHub), but taking every replica out of its Service would also hide the dashboard and
    // `/setup` that can fix them, and refuse the webhooks GitHub would not redeliver.
    let github = github(&state);
    if problems.is_empty() {
        (
            StatusCode::OK,
            Json(json!({"status": "ready", "github": github, "clusters": clusters})),
        )
            .into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(
                json!({"status": "not ready", "problems": problems, "github": github, "clusters": clusters}),
            ),
        )
            .into_response()
    }
}

/// What GitHub last said of the App's credentials.
fn github(state: &AppState) -> serde_json::Value {
    match state.github.credentials_rejected() {
        None => json!({"credentialsRejected": false}),
        Some(r) => json!({
            "credentialsRejected": true,
            "since": r.since.to_string(),
            "error": format!("GitHub refused the App's credentials ({}): the App id or private key is wrong or was revoked; an administrator must fix them, retrying will not help", r.message),
        }),
    }
}

/// What each registered cluster looks like from here: reachable (since when, or the error),
/// whether its credentials hold what previews need, its cap; and the cluster Secrets that cannot
/// be used, with why.
fn clusters(clusters: &sandcastle_kube::clusters::Clusters) -> serde_json::Value {
    use sandcastle_kube::clusters::{Access, Reach};
    let mut out: Vec<serde_json::Value> = clusters
        .registered()
        .iter()
        .map(|c| {
            let h = c.health();
            let (reachable, error) = match &h.reach {
                Reach::Up => (json!(true), None),
                Reach::Down(e) => (json!(false), Some(e.clone())),
                Reach::Unknown => (json!(null), None),
            };
            let (access, lacks) = match &h.access {
                Access::Complete => ("complete", Vec::new()),
                Access::Lacks(l) => ("lacking", l.clone()),
                Access::Unknown => ("unknown", Vec::new()),
            };
            json!({
                "name": c.name.as_str(),
                "server": c.server,
                "reachable": reachable,
                "since": h.since.map(|t| t.to_string()),
                "error": error,
                "access": access,
                "lacks": lacks,
                "maxPreviews": c.max_previews,
            })
        })
        .collect();
    for (name, why) in clusters.invalid() {
        out.push(json!({"name": name, "reachable": null, "error": why, "access": "unknown"}));
    }
    serde_json::Value::Array(out)
}

/// The metrics in the text format the scraper asks for (see [`sandcastle_metrics::Metrics::encode`]).
pub(super) async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    match state.metrics.encode(accept) {
        Ok((content_type, body)) => {
            (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "encoding metrics failed");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "metrics_failed",
                "the metrics could not be encoded",
            )
            .into_response()
        }
    }
}
