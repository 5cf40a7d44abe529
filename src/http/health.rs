//! `/healthz` (the process is up), `/readyz` (the Kubernetes API answers, Sandcastle's CRDs
//! are installed with the schema this build writes, and the Blueprint cache is filled) and `/metrics` (Prometheus).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::json;

use super::AppState;
use super::error::ApiError;

pub(super) async fn healthz() -> Response {
    (StatusCode::OK, Json(json!({"status": "ok"}))).into_response()
}

const CRDS: [&str; 3] = [
    "blueprints.sandcastle.dev",
    "previewenvironments.sandcastle.dev",
    "previewcommands.sandcastle.dev",
];

async fn problems(state: &AppState) -> Vec<String> {
    let mut out = Vec::new();
    let crds: Api<CustomResourceDefinition> = Api::all(state.client.clone());
    for name in CRDS {
        match tokio::time::timeout(Duration::from_secs(2), crds.get_opt(name)).await {
            Ok(Ok(Some(crd))) => {
                let installed = crd.annotations().get(crate::crd::SCHEMA_ANNOTATION);
                out.extend(crate::crd::schema_mismatch(
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
    out
}

pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    let problems = problems(&state).await;
    if problems.is_empty() {
        (StatusCode::OK, Json(json!({"status": "ready"}))).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "not ready", "problems": problems})),
        )
            .into_response()
    }
}

/// The metrics in the text format the scraper asks for (see [`crate::metrics::Metrics::encode`]).
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
