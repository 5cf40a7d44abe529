//! Deployment environments as GitHub keeps them: made by the first deployment to a name, listed,
//! and deleted only by an App the installation granted `administration: write` (others get 403
//! "Resource not accessible by integration"); an unknown name is 404.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::{StatusCode, Uri};
use serde_json::{Value, json};

use super::{error, installation, not_found, paginate, with_repo};
use crate::auth::RequestAuth;
use crate::server::Shared;

const DELETE_DOC: &str =
    "https://docs.github.com/rest/deployments/environments#delete-an-environment";

fn environment(repo: &str, name: &str, id: u64) -> Value {
    json!({
        "id": id,
        "node_id": format!("EN_{id}"),
        "name": name,
        "url": format!("https://api.github.com/repos/{repo}/environments/{name}"),
        "html_url": format!("https://github.com/{repo}/deployments/activity_log?environments_filter={name}"),
        "created_at": "2025-10-01T00:00:00Z",
        "updated_at": "2025-10-01T00:00:00Z",
        "protection_rules": [],
        "deployment_branch_policy": null,
    })
}

pub(super) async fn list(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name)): Path<(String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    uri: Uri,
) -> Response {
    let mut items = Vec::new();
    let found = with_repo(&shared, &auth, &owner, &name, |st, repo| {
        items = st
            .repo(repo)
            .environments
            .iter()
            .map(|(n, id)| environment(repo.as_str(), n, *id))
            .collect();
        StatusCode::OK.into_response()
    });
    if found.status() != StatusCode::OK {
        return found;
    }
    paginate(
        &shared,
        uri.path(),
        &query,
        items,
        |page, total| json!({"total_count": total, "environments": page}),
    )
}

pub(super) async fn delete(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, env)): Path<(String, String, String)>,
) -> Response {
    let admin = match installation(&auth) {
        Ok(id) => shared
            .lock()
            .installations
            .get(&id)
            .is_some_and(|i| i.administration),
        Err(r) => return r,
    };
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        if !admin {
            return error(
                StatusCode::FORBIDDEN,
                "Resource not accessible by integration",
                DELETE_DOC,
            );
        }
        match st.repo_mut(repo).environments.remove(&env) {
            Some(_) => StatusCode::NO_CONTENT.into_response(),
            None => not_found(),
        }
    })
}
