//! Check runs as an App writes them (GITHUB.md §9): create on a commit the repository has,
//! update by id, read by id. As strict as the deployments: `name` and `head_sha` required;
//! `status` one of `queued`, `in_progress`, `completed` (GitHub keeps `waiting`, `requested` and
//! `pending` for Actions); `conclusion` one of GitHub's, never `stale`, required with
//! `completed` or `completed_at`, refused beside another explicit status (GitHub would quietly
//! complete the run, which no caller means); times in ISO 8601; `details_url` an http(s) URL;
//! `output` with a `title` and a `summary`, `summary` and `text` at most 65,535 characters, at
//! most 50 annotations a request. An unknown run is 404; an installation that has not granted
//! the App `checks: write` gets 403 for every write.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use http::StatusCode;
use serde_json::{Map, Value, json};

use super::{error, field, installation, invalid, not_found, object_body, reply, with_repo};
use crate::auth::RequestAuth;
use crate::json;
use crate::server::Shared;
use crate::state::{CheckOutputRecord, CheckRunRecord};
use sandcastle_domain::Sha;

const CREATE_DOC: &str = "https://docs.github.com/rest/checks/runs#create-a-check-run";
const UPDATE_DOC: &str = "https://docs.github.com/rest/checks/runs#update-a-check-run";
const STATUSES: [&str; 3] = ["queued", "in_progress", "completed"];
const CONCLUSIONS: [&str; 7] = [
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "timed_out",
];
/// GitHub's limit on `output.summary` and `output.text`, in characters.
const OUTPUT_MAX: usize = 65_535;
const ANNOTATIONS_MAX: usize = 50;

/// What one write sets (every field optional; creation checks `name` and `head_sha`).
struct Write {
    name: Option<String>,
    head_sha: Option<String>,
    status: Option<String>,
    conclusion: Option<String>,
    started_at: Option<jiff::Timestamp>,
    completed_at: Option<jiff::Timestamp>,
    details_url: Option<String>,
    external_id: Option<String>,
    output: Option<CheckOutputRecord>,
}

fn validation_failed(field: &str, message: &str, doc: &str) -> Response {
    reply(
        StatusCode::UNPROCESSABLE_ENTITY,
        &json!({
            "message": "Validation Failed",
            "errors": [{"resource": "CheckRun", "code": "custom", "field": field, "message": message}],
            "documentation_url": doc,
            "status": "422",
        }),
    )
}

/// Read and check a write's body (see the module's doc).
fn read(body: &Map<String, Value>, doc: &str) -> Result<Write, Response> {
    let s = |n: &str| field(body, n, "a string", Value::as_str, doc).map(|v| v.map(str::to_owned));
    let time = |n: &str| -> Result<Option<jiff::Timestamp>, Response> {
        match s(n)? {
            None => Ok(None),
            Some(t) => t.parse().map(Some).map_err(|_| {
                invalid(
                    &format!("For 'properties/{n}', \"{t}\" is not a date-time."),
                    doc,
                )
            }),
        }
    };
    let status = s("status")?;
    if let Some(st) = status.as_deref().filter(|st| !STATUSES.contains(st)) {
        return Err(invalid(
            &format!(
                "For 'properties/status', \"{st}\" is not one of queued, in_progress, completed."
            ),
            doc,
        ));
    }
    let conclusion = s("conclusion")?;
    if let Some(c) = conclusion.as_deref().filter(|c| !CONCLUSIONS.contains(c)) {
        return Err(invalid(
            &format!(
                "For 'properties/conclusion', \"{c}\" is not one of {}.",
                CONCLUSIONS.join(", ")
            ),
            doc,
        ));
    }
    let completed_at = time("completed_at")?;
    let completed = status.as_deref() == Some("completed") || completed_at.is_some();
    if completed && conclusion.is_none() {
        return Err(validation_failed(
            "conclusion",
            "conclusion is required when status is completed or completed_at is given",
            doc,
        ));
    }
    if conclusion.is_some() && status.as_deref().is_some_and(|st| st != "completed") {
        return Err(validation_failed(
            "status",
            "a conclusion completes the run: status must be completed (or left out)",
            doc,
        ));
    }
    let details_url = s("details_url")?;
    if let Some(u) = details_url
        .as_deref()
        .filter(|u| !(u.starts_with("https://") || u.starts_with("http://")))
    {
        return Err(validation_failed(
            "details_url",
            &format!("details_url {u:?} is not a valid URL"),
            doc,
        ));
    }
    let output = match body.get("output") {
        None | Some(Value::Null) => None,
        Some(Value::Object(o)) => Some(read_output(o, doc)?),
        Some(other) => {
            return Err(invalid(
                &format!("For 'properties/output', {other} is not an object."),
                doc,
            ));
        }
    };
    Ok(Write {
        name: s("name")?,
        head_sha: s("head_sha")?,
        status,
        conclusion,
        started_at: time("started_at")?,
        completed_at,
        details_url,
        external_id: s("external_id")?,
        output,
    })
}

fn read_output(o: &Map<String, Value>, doc: &str) -> Result<CheckOutputRecord, Response> {
    let text = |n: &str| field(o, n, "a string", Value::as_str, doc);
    let (Some(title), Some(summary)) = (text("title")?, text("summary")?) else {
        return Err(invalid(
            "\"title\" and \"summary\" are required in \"output\".",
            doc,
        ));
    };
    let body = text("text")?;
    for (name, value) in [("summary", Some(summary)), ("text", body)] {
        if value.is_some_and(|v| v.chars().count() > OUTPUT_MAX) {
            return Err(validation_failed(
                &format!("output.{name}"),
                &format!("output.{name} is too long (maximum is {OUTPUT_MAX} characters)"),
                doc,
            ));
        }
    }
    let annotations = o
        .get("annotations")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if annotations > ANNOTATIONS_MAX {
        return Err(validation_failed(
            "output.annotations",
            &format!("at most {ANNOTATIONS_MAX} annotations per request"),
            doc,
        ));
    }
    Ok(CheckOutputRecord {
        title: title.to_owned(),
        summary: summary.to_owned(),
        text: body.map(str::to_owned),
    })
}

/// 403 unless the request's installation granted the App `checks: write`.
fn may_write(shared: &Shared, auth: &RequestAuth, doc: &str) -> Result<(), Response> {
    let id = installation(auth)?;
    let granted = shared
        .lock()
        .installations
        .get(&id)
        .is_some_and(|i| i.checks);
    if granted {
        Ok(())
    } else {
        Err(error(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
            doc,
        ))
    }
}

/// Apply `w` to `run`.
fn apply(run: &mut CheckRunRecord, w: Write, now: jiff::Timestamp) {
    if let Some(name) = w.name {
        run.name = name;
    }
    let status = if w.conclusion.is_some() {
        "completed".to_owned()
    } else {
        w.status.unwrap_or_else(|| run.status.clone())
    };
    if let Some(at) = w.started_at {
        run.started_at = at;
    }
    if status == "completed" {
        run.completed_at = Some(w.completed_at.unwrap_or(now));
    }
    run.conclusion = w.conclusion.or(run.conclusion.take());
    run.status = status;
    if w.details_url.is_some() {
        run.details_url = w.details_url;
    }
    if w.external_id.is_some() {
        run.external_id = w.external_id;
    }
    if w.output.is_some() {
        run.output = w.output;
    }
    let step = match &run.conclusion {
        Some(c) if run.status == "completed" => format!("completed/{c}"),
        _ => run.status.clone(),
    };
    run.steps.push(step);
}

pub(super) async fn create(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let identity = shared.identity.clone();
    let allowed = may_write(&shared, &auth, CREATE_DOC);
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        if let Err(r) = allowed {
            return r;
        }
        let write = match object_body(&body).and_then(|b| read(&b, CREATE_DOC)) {
            Ok(w) => w,
            Err(r) => return r,
        };
        let Some(run_name) = write.name.clone().filter(|n| !n.trim().is_empty()) else {
            return invalid("\"name\" wasn't supplied.", CREATE_DOC);
        };
        let Some(head) = write.head_sha.clone() else {
            return invalid("\"head_sha\" wasn't supplied.", CREATE_DOC);
        };
        let known = Sha::new(&head)
            .ok()
            .filter(|s| st.repo(repo).shas.contains(s));
        let Some(sha) = known else {
            return validation_failed(
                "head_sha",
                &format!("No commit found for SHA: {head}"),
                CREATE_DOC,
            );
        };
        let id = st.id();
        let now = st.tick();
        let mut run = CheckRunRecord::seeded(id, &sha, &run_name, now);
        run.by_app = true;
        run.steps.clear();
        apply(&mut run, write, now);
        let rec = st.repo_mut(repo);
        rec.check_runs.push(run);
        let rec = st.repo(repo);
        let out = json::app_check_run(
            repo,
            rec,
            rec.check_runs.last().expect("just pushed"),
            &identity,
        );
        reply(StatusCode::CREATED, &out)
    })
}

pub(super) async fn update(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, id)): Path<(String, String, u64)>,
    body: Bytes,
) -> Response {
    let identity = shared.identity.clone();
    let allowed = may_write(&shared, &auth, UPDATE_DOC);
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        if let Err(r) = allowed {
            return r;
        }
        let Some(index) = st.repo(repo).check_runs.iter().position(|r| r.id == id) else {
            return not_found();
        };
        let write = match object_body(&body).and_then(|b| read(&b, UPDATE_DOC)) {
            Ok(w) => w,
            Err(r) => return r,
        };
        if write.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
            return invalid("\"name\" is empty.", UPDATE_DOC);
        }
        let now = st.tick();
        let rec = st.repo_mut(repo);
        apply(&mut rec.check_runs[index], write, now);
        let rec = st.repo(repo);
        reply(
            StatusCode::OK,
            &json::app_check_run(repo, rec, &rec.check_runs[index], &identity),
        )
    })
}

pub(super) async fn get(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, id)): Path<(String, String, u64)>,
) -> Response {
    let identity = shared.identity.clone();
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let rec = st.repo(repo);
        match rec.check_runs.iter().find(|r| r.id == id) {
            Some(run) if run.by_app => reply(
                StatusCode::OK,
                &json::app_check_run(repo, rec, run, &identity),
            ),
            Some(run) => reply(StatusCode::OK, &json::check_run(repo, rec, run)),
            None => not_found(),
        }
    })
}
