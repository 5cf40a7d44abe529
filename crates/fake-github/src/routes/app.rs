//! App-level routes: installation access tokens and the installation list (JWT), and the
//! repositories an installation token can see.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{StatusCode, Uri};
use jiff::Timestamp;
use rand::Rng as _;
use serde_json::{Value, json};

use super::{error, installation, not_found, paginate, paginate_array, reply};
use crate::auth::RequestAuth;
use crate::json;
use crate::server::Shared;
use crate::state::{TokenRecord, ts};

const TOKEN_DOC: &str =
    "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app";

/// What the stand-in App may do (DESIGN.md §6), `administration: write` where the
/// installation granted it (deleting environments), and `checks: write` unless it has not
/// approved it (then `read`).
fn permissions(administration: bool, checks: bool) -> Value {
    let mut p = json!({
        "checks": if checks { "write" } else { "read" },
        "contents": "read",
        "deployments": "write",
        "issues": "write",
        "metadata": "read",
        "pull_requests": "read",
    });
    if administration {
        p["administration"] = json!("write");
    }
    p
}

/// 401 unless the request carries a JWT the App's key verifies.
fn require_jwt(auth: &RequestAuth, doc: &str) -> Result<(), Response> {
    match auth {
        RequestAuth::Jwt(Ok(())) => Ok(()),
        RequestAuth::Jwt(Err(message)) => Err(error(StatusCode::UNAUTHORIZED, message, doc)),
        _ => Err(error(
            StatusCode::UNAUTHORIZED,
            "A JSON web token could not be decoded",
            doc,
        )),
    }
}

pub(super) async fn create_access_token(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path(id): Path<u64>,
) -> Response {
    if let Err(r) = require_jwt(&auth, TOKEN_DOC) {
        return r;
    }
    let mut st = shared.lock();
    let Some((administration, checks)) = st
        .installations
        .get(&id)
        .map(|i| (i.administration, i.checks))
    else {
        return not_found();
    };
    st.tokens_issued += 1;
    let serial = st.tokens_issued;
    let secs = i64::try_from(st.token_lifetime.as_secs()).unwrap_or(3600);
    let expires_at =
        Timestamp::from_second(Timestamp::now().as_second() + secs).unwrap_or(Timestamp::MAX);
    let token: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(36)
        .map(char::from)
        .collect();
    let token = format!("ghs_{token}");
    st.tokens.insert(
        token.clone(),
        TokenRecord {
            installation: id,
            serial,
            expires_at,
        },
    );
    reply(
        StatusCode::CREATED,
        &json!({
            "token": token,
            "expires_at": ts(expires_at),
            "permissions": permissions(administration, checks),
            "repository_selection": "selected",
        }),
    )
}

pub(super) async fn list_installations(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Query(query): Query<BTreeMap<String, String>>,
    uri: Uri,
) -> Response {
    if let Err(r) = require_jwt(&auth, "https://docs.github.com/rest/apps/apps") {
        return r;
    }
    let identity = &shared.identity;
    let items: Vec<Value> = shared
        .lock()
        .installations
        .iter()
        .map(|(id, i)| {
            let account = json::user(&i.account, "Organization");
            json!({
                "id": id,
                "account": account,
                "repository_selection": "selected",
                "access_tokens_url": format!("https://api.github.com/app/installations/{id}/access_tokens"),
                "repositories_url": "https://api.github.com/installation/repositories",
                "html_url": format!("https://github.com/organizations/{}/settings/installations/{id}", i.account),
                "app_id": identity.id,
                "app_slug": identity.slug,
                "target_id": account["id"],
                "target_type": "Organization",
                "permissions": permissions(i.administration, i.checks),
                "events": ["check_run", "issue_comment", "pull_request"],
                "created_at": "2025-10-01T00:00:00Z",
                "updated_at": "2025-10-01T00:00:00Z",
                "single_file_name": null,
                "suspended_by": null,
                "suspended_at": null,
            })
        })
        .collect();
    paginate_array(&shared, uri.path(), &query, items)
}

/// `GET /repos/{owner}/{repo}/installation` (App JWT): the installation that sees the repository.
pub(super) async fn repo_installation(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name)): Path<(String, String)>,
) -> Response {
    let doc = "https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app";
    if let Err(r) = require_jwt(&auth, doc) {
        return r;
    }
    let Ok(repo) = sandcastle_domain::RepoName::new(&format!("{owner}/{name}")) else {
        return super::not_found();
    };
    let identity = &shared.identity;
    let st = shared.lock();
    let Some(id) = st.repos.get(&repo).map(|r| r.installation) else {
        return super::not_found();
    };
    let Some(i) = st.installations.get(&id) else {
        return super::not_found();
    };
    let account = json::user(&i.account, "Organization");
    reply(
        StatusCode::OK,
        &json!({
            "id": id,
            "account": account,
            "repository_selection": "selected",
            "access_tokens_url": format!("https://api.github.com/app/installations/{id}/access_tokens"),
            "repositories_url": "https://api.github.com/installation/repositories",
            "app_id": identity.id,
            "app_slug": identity.slug,
            "target_id": account["id"],
            "target_type": "Organization",
            "permissions": {},
            "events": [],
        }),
    )
}

pub(super) async fn installation_repos(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Query(query): Query<BTreeMap<String, String>>,
    uri: Uri,
) -> Response {
    let id = match installation(&auth) {
        Ok(id) => id,
        Err(r) => return r,
    };
    let items: Vec<Value> = shared
        .lock()
        .repos
        .iter()
        .filter(|(_, r)| r.installation == id)
        .map(|(name, r)| json::repo_of(name, r))
        .collect();
    paginate(&shared, uri.path(), &query, items, |page, total| {
        json!({
            "total_count": total,
            "repository_selection": "selected",
            "repositories": page,
        })
    })
}
