//! Creating an App from a manifest as GitHub does: the browser posts the manifest (form field
//! `manifest`) to the account's or an organization's new-App page, which shows a button that
//! sends it back to the manifest's `redirect_url` with a one-time `code` and the `state`; then
//! `POST /app-manifests/{code}/conversions` (no authentication) answers 201 with the App's id,
//! slug, private key, webhook secret and OAuth client. The App made is the stand-in's own (its
//! id, slug and test key), so what Sandcastle then does with it works against the stand-in.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Response};
use http::StatusCode;
use serde_json::{Value, json};

use super::{error, esc, random, reply};
use crate::TEST_APP_PRIVATE_KEY_PEM;
use crate::json;
use crate::server::Shared;

const DOC: &str = "https://docs.github.com/rest/apps/apps#create-a-github-app-from-a-manifest";

fn page(shared: &Shared, owner: &str, state: &str, body: &Bytes) -> Response {
    let form: BTreeMap<String, String> = serde_urlencoded::from_bytes(body).unwrap_or_default();
    let Some(manifest) = form
        .get("manifest")
        .and_then(|m| serde_json::from_str::<Value>(m).ok())
    else {
        return (StatusCode::UNPROCESSABLE_ENTITY, Html("<h1>Invalid GitHub App configuration</h1><p>The manifest is missing or is not JSON.</p>")).into_response();
    };
    let Some(redirect) = manifest["redirect_url"].as_str().map(str::to_owned) else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Html("<h1>Invalid GitHub App configuration</h1><p>redirect_url is required.</p>"),
        )
            .into_response();
    };
    let code = random(20);
    let name = manifest["name"].as_str().unwrap_or("App").to_owned();
    let mut st = shared.lock();
    let mut record = manifest;
    record["owner"] = Value::from(owner);
    st.manifest_codes.insert(code.clone(), record);
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Create GitHub App</title></head>\
         <body><h1>Create GitHub App {name} for {owner}</h1>\
         <form method=\"get\" action=\"{to}\"><input type=\"hidden\" name=\"code\" value=\"{code}\">\
         <input type=\"hidden\" name=\"state\" value=\"{state}\">\
         <button type=\"submit\" id=\"create-app\">Create GitHub App for {owner}</button></form></body></html>",
        name = esc(&name),
        owner = esc(owner),
        to = esc(&redirect),
        code = esc(&code),
        state = esc(state),
    ))
    .into_response()
}

pub(super) async fn new_for_user(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<BTreeMap<String, String>>,
    body: Bytes,
) -> Response {
    let user = shared
        .lock()
        .browser_user
        .clone()
        .unwrap_or_else(|| "octocat".into());
    page(
        &shared,
        &user,
        q.get("state").map_or("", String::as_str),
        &body,
    )
}

pub(super) async fn new_for_org(
    State(shared): State<Arc<Shared>>,
    Path(org): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
    body: Bytes,
) -> Response {
    page(
        &shared,
        &org,
        q.get("state").map_or("", String::as_str),
        &body,
    )
}

pub(super) async fn conversion(
    State(shared): State<Arc<Shared>>,
    Path(code): Path<String>,
) -> Response {
    let mut st = shared.lock();
    let Some(manifest) = st.manifest_codes.remove(&code) else {
        return error(StatusCode::NOT_FOUND, "Not Found", DOC);
    };
    let webhook_secret = random(40);
    st.created_webhook_secret = Some(webhook_secret.clone());
    let (client_id, client_secret) = st.oauth_client.clone();
    let identity = &shared.identity;
    let owner = manifest["owner"].as_str().unwrap_or("octocat");
    reply(
        StatusCode::CREATED,
        &json!({
            "id": identity.id,
            "slug": identity.slug,
            "node_id": format!("A_{}", identity.id),
            "owner": json::user(owner, "Organization"),
            "name": manifest["name"],
            "description": manifest["description"],
            "external_url": manifest["url"],
            "html_url": format!("https://github.com/apps/{}", identity.slug),
            "created_at": "2026-12-01T00:00:00Z",
            "updated_at": "2026-12-01T00:00:00Z",
            "permissions": manifest["default_permissions"],
            "events": manifest["default_events"],
            "client_id": client_id,
            "client_secret": client_secret,
            "webhook_secret": webhook_secret,
            "pem": TEST_APP_PRIVATE_KEY_PEM,
        }),
    )
}
