//! Plain HTML pages for people: the list of previews and one page per preview (GitHub's
//! `log_url`), with phase, URL, commit, the diagnosis and log tail when it is not Ready,
//! services and history.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::AppState;
use crate::crd::PreviewEnvironment;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>body{{font-family:system-ui,sans-serif;margin:2rem;max-width:60rem}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}}</style>\
         </head><body><h1>{t}</h1>{body}</body></html>",
        t = esc(title)
    ))
}

fn link(url: Option<&str>) -> String {
    url.map_or_else(
        || "—".to_owned(),
        |u| format!("<a href=\"{0}\">{0}</a>", esc(u)),
    )
}

/// Why the preview is not Ready, and the failing container's last lines (already redacted).
fn diagnosis(d: &crate::crd::Diagnosis) -> String {
    let mut out = format!(
        "<h2>Diagnosis</h2><p><strong>{}</strong> ({})</p>",
        esc(&d.summary),
        esc(d.reason.as_str())
    );
    if !d.log_tail.is_empty() {
        let whose = match (&d.container, &d.pod) {
            (Some(c), Some(p)) => format!(" of {} in {}", esc(c), esc(p)),
            _ => String::new(),
        };
        let run = if d.previous { ", previous run" } else { "" };
        out.push_str(&format!(
            "<details open><summary>Last log lines{whose}{run}</summary><pre>{}</pre></details>",
            esc(&d.log_tail.join("\n"))
        ));
    }
    out
}

pub(super) async fn index(State(state): State<AppState>) -> Response {
    let api: Api<PreviewEnvironment> = Api::namespaced(state.client.clone(), &state.home);
    let list = match api.list(&ListParams::default()).await {
        Ok(l) => l,
        Err(e) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("Kubernetes API: {e}"),
            )
                .into_response();
        }
    };
    let mut rows = String::new();
    for pe in &list.items {
        let st = pe.status.clone().unwrap_or_default();
        let name = pe.name_any();
        rows.push_str(&format!(
            "<tr><td><a href=\"/previews/{n}\">{n}</a></td><td>{repo}</td><td>{pr}</td><td>{phase}</td><td>{url}</td><td>{exp}</td></tr>",
            n = esc(&name),
            repo = esc(&pe.spec.repository),
            pr = pe.spec.pull_request.map(|p| p.to_string()).unwrap_or_default(),
            phase = st.phase.map_or("", |p| p.as_str()),
            url = link(st.url.as_deref()),
            exp = pe.spec.expires_at.as_ref().map(|t| t.0.to_string()).unwrap_or_default(),
        ));
    }
    page(
        "Sandcastle previews",
        &format!("<table><tr><th>Preview</th><th>Repository</th><th>PR</th><th>Phase</th><th>URL</th><th>Expires</th></tr>{rows}</table>"),
    )
    .into_response()
}

pub(super) async fn preview(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    let api: Api<PreviewEnvironment> = Api::namespaced(state.client.clone(), &state.home);
    let pe = match api.get_opt(&name).await {
        Ok(Some(pe)) => pe,
        Ok(None) => {
            return (
                StatusCode::NOT_FOUND,
                page(
                    "Not found",
                    &format!("<p>No preview named {}.</p>", esc(&name)),
                ),
            )
                .into_response();
        }
        Err(e) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("Kubernetes API: {e}"),
            )
                .into_response();
        }
    };
    let st = pe.status.clone().unwrap_or_default();
    let services: String = st
        .services
        .iter()
        .map(|s| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}/{}</td></tr>",
                esc(&s.kind),
                esc(&s.name),
                s.ready,
                s.desired
            )
        })
        .collect();
    let history: String = st
        .history
        .iter()
        .rev()
        .map(|h| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                h.time.0,
                esc(&h.actor),
                esc(&h.action),
                esc(h.result.as_deref().unwrap_or(""))
            )
        })
        .collect();
    let body = format!(
        "<table>\
         <tr><th>Phase</th><td>{phase}</td></tr><tr><th>Message</th><td>{msg}</td></tr>\
         <tr><th>URL</th><td>{url}</td></tr><tr><th>Repository</th><td>{repo} #{pr}</td></tr>\
         <tr><th>Commit</th><td>{sha}</td></tr><tr><th>Namespace</th><td>{ns}</td></tr>\
         <tr><th>Expires</th><td>{exp}</td></tr></table>\
         {diagnosis}\
         <h2>Services</h2><table><tr><th>Kind</th><th>Name</th><th>Ready</th></tr>{services}</table>\
         <h2>History</h2><table><tr><th>Time</th><th>Actor</th><th>Action</th><th>Result</th></tr>{history}</table>",
        phase = st.phase.map_or("", |p| p.as_str()),
        diagnosis = st.diagnosis.as_ref().map(diagnosis).unwrap_or_default(),
        msg = esc(st.message.as_deref().unwrap_or("")),
        url = link(st.url.as_deref()),
        repo = esc(&pe.spec.repository),
        pr = pe
            .spec
            .pull_request
            .map(|p| p.to_string())
            .unwrap_or_default(),
        sha = esc(&pe.spec.sha),
        ns = esc(st.namespace.as_deref().unwrap_or("")),
        exp = pe
            .spec
            .expires_at
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
    );
    page(&format!("Preview {name}"), &body).into_response()
}
