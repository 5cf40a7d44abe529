//! Deployments and deployment statuses as GitHub handles them (GITHUB.md §4): ref resolution,
//! auto-merge's 202, commit-status checks' 409, the 140-character description limit and
//! `auto_inactive`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{StatusCode, Uri};
use serde_json::{Value, json};

use super::{error, field, invalid, not_found, object_body, paginate_array, reply, with_repo};
use crate::auth::RequestAuth;
use crate::json;
use crate::server::Shared;
use crate::state::{DeploymentRecord, StatusRecord, derived_sha};

const DEPLOY_DOC: &str = "https://docs.github.com/rest/deployments/deployments#create-a-deployment";
const STATUS_DOC: &str =
    "https://docs.github.com/rest/deployments/statuses#create-a-deployment-status";
const STATES: [&str; 7] = [
    "error",
    "failure",
    "inactive",
    "in_progress",
    "queued",
    "pending",
    "success",
];

type RepoPath = Path<(String, String)>;

pub(super) async fn create(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name)): RepoPath,
    body: Bytes,
) -> Response {
    let identity = shared.identity.clone();
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let body = match object_body(&body) {
            Ok(b) => b,
            Err(r) => return r,
        };
        let str_field = |n: &str| field(&body, n, "a string", Value::as_str, DEPLOY_DOC);
        let bool_field = |n: &str| field(&body, n, "a boolean", Value::as_bool, DEPLOY_DOC);
        let parsed = (|| {
            Ok::<_, Response>((
                str_field("ref")?,
                str_field("environment")?,
                str_field("description")?,
                str_field("task")?,
                bool_field("auto_merge")?,
                bool_field("transient_environment")?,
                bool_field("production_environment")?,
                field(
                    &body,
                    "required_contexts",
                    "an array",
                    Value::as_array,
                    DEPLOY_DOC,
                )?,
            ))
        })();
        let (ref_, environment, description, task, auto_merge, transient, production, contexts) =
            match parsed {
                Ok(p) => p,
                Err(r) => return r,
            };
        let Some(ref_) = ref_.filter(|r| !r.is_empty()) else {
            return invalid("\"ref\" wasn't supplied.", DEPLOY_DOC);
        };
        let rec = st.repo_mut(repo);
        let Some(sha) = rec.resolve(ref_) else {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("No ref found for: {ref_}"),
                DEPLOY_DOC,
            );
        };
        if auto_merge.unwrap_or(true) && rec.behind.remove(ref_) {
            // GitHub merges the default branch into the ref and creates no deployment.
            let merged = derived_sha(&format!("{sha}+{}", rec.default_branch));
            if rec.refs.contains_key(ref_) {
                rec.set_ref(ref_, &merged);
            }
            return reply(
                StatusCode::ACCEPTED,
                &json!({"message": format!("Auto-merged {} into {ref_} on deployment.", rec.default_branch)}),
            );
        }
        let required: Option<Vec<&str>> =
            contexts.map(|c| c.iter().filter_map(Value::as_str).collect());
        if !contexts_pass(&rec.check_runs, &sha, required.as_deref()) {
            return error(
                StatusCode::CONFLICT,
                &format!("Conflict: Commit status checks failed for {ref_}."),
                DEPLOY_DOC,
            );
        }
        let environment = environment.unwrap_or("production").to_owned();
        let record = DeploymentRecord {
            id: 0,
            sha,
            ref_: ref_.to_owned(),
            task: task.unwrap_or("deploy").to_owned(),
            production_environment: production.unwrap_or(environment == "production"),
            environment,
            description: Some(description.unwrap_or("").to_owned()),
            payload: body.get("payload").cloned().unwrap_or_else(|| json!({})),
            transient_environment: transient.unwrap_or(false),
            created_at: jiff::Timestamp::UNIX_EPOCH,
            updated_at: jiff::Timestamp::UNIX_EPOCH,
            statuses: Vec::new(),
        };
        let id = st.id();
        let now = st.tick();
        let record = DeploymentRecord {
            id,
            created_at: now,
            updated_at: now,
            ..record
        };
        let out = json::deployment(repo, &record, &identity);
        let env_id = st.id();
        let rec = st.repo_mut(repo);
        rec.environments
            .entry(record.environment.clone())
            .or_insert(env_id);
        rec.deployments.push(record);
        reply(StatusCode::CREATED, &out)
    })
}

/// Whether the check runs on `sha` allow a deployment: every run (or every required context)
/// completed with success, neutral or skipped. An empty list bypasses the check.
fn contexts_pass(
    runs: &[crate::state::CheckRunRecord],
    sha: &sandcastle_domain::Sha,
    required: Option<&[&str]>,
) -> bool {
    let on_sha: Vec<_> = runs.iter().filter(|r| &r.sha == sha).collect();
    let passed = |name: &str| {
        on_sha
            .iter()
            .rev()
            .find(|r| r.name == name)
            .is_some_and(|r| {
                r.status == "completed"
                    && matches!(
                        r.conclusion.as_deref(),
                        Some("success" | "neutral" | "skipped")
                    )
            })
    };
    match required {
        Some(names) => names.iter().all(|n| passed(n)),
        None => on_sha.iter().all(|r| passed(&r.name)),
    }
}

pub(super) async fn list(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name)): RepoPath,
    Query(query): Query<BTreeMap<String, String>>,
    uri: Uri,
) -> Response {
    let identity = shared.identity.clone();
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let wanted = |key: &str, value: &str| query.get(key).is_none_or(|q| q == value);
        let items: Vec<Value> = st
            .repo(repo)
            .deployments
            .iter()
            .rev()
            .filter(|d| {
                wanted("environment", &d.environment)
                    && wanted("sha", d.sha.as_str())
                    && wanted("ref", &d.ref_)
                    && wanted("task", &d.task)
            })
            .map(|d| json::deployment(repo, d, &identity))
            .collect();
        paginate_array(&shared, uri.path(), &query, items)
    })
}

pub(super) async fn create_status(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, id)): Path<(String, String, u64)>,
    body: Bytes,
) -> Response {
    let identity = shared.identity.clone();
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let body = match object_body(&body) {
            Ok(b) => b,
            Err(r) => return r,
        };
        let str_field = |n: &str| field(&body, n, "a string", Value::as_str, STATUS_DOC);
        let parsed = (|| {
            Ok::<_, Response>((
                str_field("state")?,
                str_field("description")?,
                str_field("environment_url")?,
                str_field("log_url")?,
                str_field("target_url")?,
                str_field("environment")?,
                field(
                    &body,
                    "auto_inactive",
                    "a boolean",
                    Value::as_bool,
                    STATUS_DOC,
                )?,
            ))
        })();
        let (state, description, environment_url, log_url, target_url, environment, auto_inactive) =
            match parsed {
                Ok(p) => p,
                Err(r) => return r,
            };
        let Some(state) = state.filter(|s| STATES.contains(s)) else {
            return invalid(
                "\"state\" wasn't supplied or is not one of error, failure, inactive, in_progress, queued, pending, success.",
                STATUS_DOC,
            );
        };
        let description = description.unwrap_or("");
        if description.chars().count() > 140 {
            return reply(
                StatusCode::UNPROCESSABLE_ENTITY,
                &json!({
                    "message": "Validation Failed",
                    "errors": [{
                        "resource": "DeploymentStatus",
                        "code": "custom",
                        "field": "description",
                        "message": "description is too long (maximum is 140 characters)",
                    }],
                    "documentation_url": STATUS_DOC,
                    "status": "422",
                }),
            );
        }
        let Some(index) = st.repo(repo).deployments.iter().position(|d| d.id == id) else {
            return not_found();
        };
        let status_id = st.id();
        let now = st.tick();
        let rec = st.repo_mut(repo);
        let deployment = &mut rec.deployments[index];
        if let Some(env) = environment {
            deployment.environment = env.to_owned();
        }
        let status = StatusRecord {
            id: status_id,
            state: state.to_owned(),
            description: description.to_owned(),
            environment: deployment.environment.clone(),
            environment_url: environment_url.unwrap_or("").to_owned(),
            log_url: log_url.or(target_url).unwrap_or("").to_owned(),
            created_at: now,
        };
        deployment.statuses.push(status.clone());
        deployment.updated_at = now;
        let env = deployment.environment.clone();
        if state == "success" && auto_inactive.unwrap_or(true) {
            // GITHUB.md §4.3: prior non-transient, non-production deployments of the same
            // environment whose state is success become inactive.
            let stale: Vec<usize> = rec
                .deployments
                .iter()
                .enumerate()
                .filter(|(_, d)| {
                    d.id < id
                        && d.environment == env
                        && !d.transient_environment
                        && !d.production_environment
                        && d.latest_state() == Some("success")
                })
                .map(|(i, _)| i)
                .collect();
            for i in stale {
                let inactive_id = st.id();
                let d = &mut st.repo_mut(repo).deployments[i];
                d.statuses.push(StatusRecord {
                    id: inactive_id,
                    state: "inactive".to_owned(),
                    description: String::new(),
                    environment: env.clone(),
                    environment_url: String::new(),
                    log_url: String::new(),
                    created_at: now,
                });
                d.updated_at = now;
            }
        }
        reply(
            StatusCode::CREATED,
            &json::deployment_status(repo, id, &status, &identity),
        )
    })
}

pub(super) async fn list_statuses(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, id)): Path<(String, String, u64)>,
    Query(query): Query<BTreeMap<String, String>>,
    uri: Uri,
) -> Response {
    let identity = shared.identity.clone();
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let Some(d) = st.repo(repo).deployments.iter().find(|d| d.id == id) else {
            return not_found();
        };
        let items: Vec<Value> = d
            .statuses
            .iter()
            .rev()
            .map(|s| json::deployment_status(repo, id, s, &identity))
            .collect();
        paginate_array(&shared, uri.path(), &query, items)
    })
}
