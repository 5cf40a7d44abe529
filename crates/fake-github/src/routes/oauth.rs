//! Signing people in as GitHub does for an App's OAuth (user-to-server): the authorize page
//! (the browser's signed-in user approves, and is sent back to `redirect_uri` with a one-time
//! `code` and the `state`), the code exchange (`POST /login/oauth/access_token`, answering 200
//! with `error` for a bad code, as GitHub does), and what the user token can read: `/user`,
//! `/user/installations` and each installation's repositories with the user's permissions.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Response};
use http::{StatusCode, Uri};
use serde_json::{Value, json};

use super::{error, esc, not_found, paginate, random, reply};
use crate::auth::RequestAuth;
use crate::json;
use crate::server::Shared;
use crate::state::{OAuthCode, State as Model};

const USER_DOC: &str = "https://docs.github.com/rest/users/users#get-the-authenticated-user";

pub(super) async fn authorize(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let get = |k: &str| q.get(k).cloned().unwrap_or_default();
    let (client_id, redirect_uri, state) = (get("client_id"), get("redirect_uri"), get("state"));
    let mut st = shared.lock();
    if client_id != st.oauth_client.0 || redirect_uri.is_empty() {
        return (
            StatusCode::NOT_FOUND,
            Html("<h1>404</h1><p>Application not found</p>"),
        )
            .into_response();
    }
    let Some(login) = st.browser_user.clone() else {
        return Html("<h1>Sign in to GitHub</h1><p>Nobody is signed in.</p>").into_response();
    };
    let code = random(36);
    st.oauth_codes.insert(
        code.clone(),
        OAuthCode {
            login: login.clone(),
            redirect_uri: redirect_uri.clone(),
        },
    );
    let slug = shared.identity.slug.clone();
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Authorize {app}</title></head>\
         <body><h1>Authorize {app}</h1><p>Signed in as <strong>{login}</strong>.</p>\
         <form method=\"get\" action=\"{to}\"><input type=\"hidden\" name=\"code\" value=\"{code}\">\
         <input type=\"hidden\" name=\"state\" value=\"{state}\">\
         <button type=\"submit\" id=\"authorize\">Authorize {app}</button></form></body></html>",
        app = esc(&slug),
        login = esc(&login),
        to = esc(&redirect_uri),
        code = esc(&code),
        state = esc(&state),
    ))
    .into_response()
}

pub(super) async fn access_token(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let fields: BTreeMap<String, String> = serde_urlencoded::from_bytes(&body)
        .ok()
        .or_else(|| serde_json::from_slice(&body).ok())
        .unwrap_or_default();
    let get = |k: &str| fields.get(k).cloned().unwrap_or_default();
    let mut st = shared.lock();
    if (get("client_id"), get("client_secret")) != st.oauth_client {
        return reply(
            StatusCode::OK,
            &json!({"error": "incorrect_client_credentials",
                "error_description": "The client_id and/or client_secret passed are incorrect."}),
        );
    }
    let code = st.oauth_codes.remove(&get("code"));
    match code {
        Some(c) if c.redirect_uri == get("redirect_uri") || get("redirect_uri").is_empty() => {
            let token = format!("ghu_{}", random(36));
            st.user_tokens.insert(token.clone(), c.login);
            reply(
                StatusCode::OK,
                &json!({"access_token": token, "token_type": "bearer", "scope": "",
                    "expires_in": 28800, "refresh_token": format!("ghr_{}", random(36)),
                    "refresh_token_expires_in": 15_897_600}),
            )
        }
        Some(_) => reply(
            StatusCode::OK,
            &json!({"error": "redirect_uri_mismatch",
                "error_description": "The redirect_uri MUST match the registered callback URL for this application."}),
        ),
        None => reply(
            StatusCode::OK,
            &json!({"error": "bad_verification_code",
                "error_description": "The code passed is incorrect or expired."}),
        ),
    }
}

fn user_of(auth: &RequestAuth) -> Result<String, Response> {
    match auth {
        RequestAuth::User { login } => Ok(login.clone()),
        _ => Err(error(
            StatusCode::UNAUTHORIZED,
            "Requires authentication",
            USER_DOC,
        )),
    }
}

pub(super) async fn user(Extension(auth): Extension<RequestAuth>) -> Response {
    match user_of(&auth) {
        Ok(login) => reply(StatusCode::OK, &json::user(&login, "User")),
        Err(r) => r,
    }
}

/// The installations with a repository `login` collaborates on, and those repositories with
/// the user's permissions.
fn reachable(st: &Model, login: &str) -> BTreeMap<u64, Vec<Value>> {
    let mut out: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    let login = login.to_ascii_lowercase();
    for (name, repo) in &st.repos {
        let Some(role) = repo.collaborators.get(&login) else {
            continue;
        };
        let (permission, _) = role.api_fields();
        out.entry(repo.installation).or_default().push(json!({
            "id": repo.id,
            "name": name.name(),
            "full_name": name.as_str(),
            "private": true,
            "owner": json::user(name.owner(), "Organization"),
            "permissions": {
                "admin": permission == "admin",
                "maintain": role.api_fields().1 == "maintain",
                "push": role.pushes(),
                "triage": true,
                "pull": true,
            },
        }));
    }
    out
}

pub(super) async fn installations(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Query(query): Query<BTreeMap<String, String>>,
    uri: Uri,
) -> Response {
    let login = match user_of(&auth) {
        Ok(l) => l,
        Err(r) => return r,
    };
    let items: Vec<Value> = {
        let st = shared.lock();
        reachable(&st, &login)
            .keys()
            .filter_map(|id| {
                let i = st.installations.get(id)?;
                Some(
                    json!({"id": id, "account": json::user(&i.account, "Organization"),
                    "app_id": shared.identity.id, "app_slug": shared.identity.slug}),
                )
            })
            .collect()
    };
    paginate(
        &shared,
        uri.path(),
        &query,
        items,
        |page, total| json!({"total_count": total, "installations": page}),
    )
}

pub(super) async fn installation_repositories(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path(id): Path<u64>,
    Query(query): Query<BTreeMap<String, String>>,
    uri: Uri,
) -> Response {
    let login = match user_of(&auth) {
        Ok(l) => l,
        Err(r) => return r,
    };
    let items = {
        let st = shared.lock();
        match reachable(&st, &login).remove(&id) {
            Some(repos) => repos,
            None => return not_found(),
        }
    };
    paginate(
        &shared,
        uri.path(),
        &query,
        items,
        |page, total| json!({"total_count": total, "repositories": page}),
    )
}
