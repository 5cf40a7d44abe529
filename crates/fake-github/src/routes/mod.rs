//! The stand-in's REST routes and what they share: GitHub's error bodies, installation-token and
//! repository checks, JSON body parsing and `Link`-header pagination.

#![expect(
    clippy::result_large_err,
    reason = "handlers bail out early with a ready axum Response, built once per request"
)]

mod app;
mod archive;
mod checks;
mod deployments;
mod environments;
mod issues;
mod manifests;
mod oauth;
mod repos;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use axum::routing::{delete, get, patch, post};
use http::{HeaderValue, StatusCode};
use serde_json::{Map, Value, json};

use super::auth::RequestAuth;
use super::server::{Shared, json_response};
use super::state::State;
use sandcastle_domain::RepoName;

const REST_DOC: &str = "https://docs.github.com/rest";

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/app/installations", get(app::list_installations))
        .route(
            "/app/installations/{id}/access_tokens",
            post(app::create_access_token),
        )
        .route("/installation/repositories", get(app::installation_repos))
        .route("/login/oauth/authorize", get(oauth::authorize))
        .route("/settings/apps/new", post(manifests::new_for_user))
        .route(
            "/organizations/{org}/settings/apps/new",
            post(manifests::new_for_org),
        )
        .route(
            "/app-manifests/{code}/conversions",
            post(manifests::conversion),
        )
        .route("/login/oauth/access_token", post(oauth::access_token))
        .route("/user", get(oauth::user))
        .route("/user/installations", get(oauth::installations))
        .route(
            "/user/installations/{id}/repositories",
            get(oauth::installation_repositories),
        )
        .route(
            "/repos/{owner}/{repo}/deployments",
            get(deployments::list).post(deployments::create),
        )
        .route(
            "/repos/{owner}/{repo}/deployments/{id}/statuses",
            get(deployments::list_statuses).post(deployments::create_status),
        )
        .route(
            "/repos/{owner}/{repo}/environments",
            get(environments::list),
        )
        .route(
            "/repos/{owner}/{repo}/environments/{name}",
            delete(environments::delete),
        )
        .route(
            "/repos/{owner}/{repo}/issues/{number}/comments",
            get(issues::list_comments).post(issues::create_comment),
        )
        .route(
            "/repos/{owner}/{repo}/issues/comments/{id}",
            patch(issues::update_comment).delete(issues::delete_comment),
        )
        .route(
            "/repos/{owner}/{repo}/issues/comments/{id}/reactions",
            post(issues::create_reaction),
        )
        .route(
            "/repos/{owner}/{repo}/collaborators/{user}/permission",
            get(repos::permission),
        )
        .route(
            "/repos/{owner}/{repo}/installation",
            get(app::repo_installation),
        )
        .route(
            "/repos/{owner}/{repo}/commits/{ref}",
            get(repos::get_commit),
        )
        .route("/repos/{owner}/{repo}", get(repos::get_repo))
        .route("/repos/{owner}/{repo}/pulls", get(repos::list_pulls))
        .route("/repos/{owner}/{repo}/pulls/{number}", get(repos::get_pull))
        .route(
            "/repos/{owner}/{repo}/pulls/{number}/files",
            get(repos::pull_files),
        )
        .route(
            "/repos/{owner}/{repo}/compare/{basehead}",
            get(repos::compare),
        )
        .route(
            "/repos/{owner}/{repo}/contents/{*path}",
            get(repos::contents),
        )
        .route("/repos/{owner}/{repo}/tarball/{ref}", get(archive::tarball))
        .route(
            "/_codeload/{owner}/{repo}/legacy.tar.gz/{sha}",
            get(archive::download),
        )
        .route(
            "/repos/{owner}/{repo}/commits/{ref}/check-runs",
            get(repos::check_runs),
        )
        .route("/repos/{owner}/{repo}/check-runs", post(checks::create))
        .route(
            "/repos/{owner}/{repo}/check-runs/{id}",
            get(checks::get).patch(checks::update),
        )
        .fallback(|| async { not_found() })
        .method_not_allowed_fallback(|| async { not_found() })
        .with_state(shared)
}

/// `s` safe inside HTML text and attribute values (the stand-in's few pages).
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `n` random letters and digits (codes, tokens, secrets the stand-in hands out).
pub(crate) fn random(n: usize) -> String {
    use rand::Rng as _;
    rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(n)
        .map(char::from)
        .collect()
}

/// GitHub's error body.
pub(crate) fn error(status: StatusCode, message: &str, doc: &str) -> Response {
    json_response(
        status,
        &json!({
            "message": message,
            "documentation_url": doc,
            "status": status.as_u16().to_string(),
        }),
    )
}

pub(crate) fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "Not Found", REST_DOC)
}

pub(crate) fn bad_credentials() -> Response {
    error(StatusCode::UNAUTHORIZED, "Bad credentials", REST_DOC)
}

/// 422 for a request body that does not follow the schema.
pub(crate) fn invalid(detail: &str, doc: &str) -> Response {
    error(
        StatusCode::UNPROCESSABLE_ENTITY,
        &format!("Invalid request.\n\n{detail}"),
        doc,
    )
}

pub(crate) fn reply(status: StatusCode, body: &Value) -> Response {
    json_response(status, body)
}

pub(crate) fn no_content() -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::NO_CONTENT;
    r
}

/// The installation a request acts as, or GitHub's 401.
pub(crate) fn installation(auth: &RequestAuth) -> Result<u64, Response> {
    match auth {
        RequestAuth::Installation { installation, .. } => Ok(*installation),
        _ => Err(bad_credentials()),
    }
}

/// Runs `f` on the repository, after checking that the request's installation token covers it
/// (401 without a valid token, 404 for a repository outside the installation).
pub(crate) fn with_repo(
    shared: &Shared,
    auth: &RequestAuth,
    owner: &str,
    name: &str,
    f: impl FnOnce(&mut State, &RepoName) -> Response,
) -> Response {
    let installation = match installation(auth) {
        Ok(i) => i,
        Err(r) => return r,
    };
    let Ok(repo) = RepoName::new(&format!("{owner}/{name}")) else {
        return not_found();
    };
    let mut st = shared.lock();
    if st
        .repos
        .get(&repo)
        .is_none_or(|r| r.installation != installation)
    {
        return not_found();
    }
    f(&mut st, &repo)
}

/// The JSON object body, or GitHub's 400 "Problems parsing JSON".
pub(crate) fn object_body(bytes: &[u8]) -> Result<Map<String, Value>, Response> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(error(
            StatusCode::BAD_REQUEST,
            "Problems parsing JSON",
            REST_DOC,
        )),
    }
}

/// Optional field of a given JSON type; the error is a 422 naming the field.
pub(crate) fn field<'a, T>(
    body: &'a Map<String, Value>,
    name: &str,
    kind: &str,
    get: impl Fn(&'a Value) -> Option<T>,
    doc: &str,
) -> Result<Option<T>, Response> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => get(v)
            .map(Some)
            .ok_or_else(|| invalid(&format!("For 'properties/{name}', {v} is not {kind}."), doc)),
    }
}

/// One page of `items` (`per_page` default 30, at most 100) with GitHub's `Link` header. `wrap`
/// turns the page into the body (an array, or an object holding one).
pub(crate) fn paginate(
    shared: &Shared,
    path: &str,
    query: &BTreeMap<String, String>,
    items: Vec<Value>,
    wrap: impl FnOnce(Vec<Value>, usize) -> Value,
) -> Response {
    let per_page = query
        .get("per_page")
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page = query
        .get("page")
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let total = items.len();
    let last = total.div_ceil(per_page).max(1);
    let slice: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    let link_to = |n: usize| {
        let mut q = query.clone();
        q.insert("page".to_owned(), n.to_string());
        let qs = serde_urlencoded::to_string(&q).unwrap_or_default();
        format!("<{}{path}?{qs}>", shared.url)
    };
    let mut links = Vec::new();
    if page < last {
        links.push(format!("{}; rel=\"next\"", link_to(page + 1)));
        links.push(format!("{}; rel=\"last\"", link_to(last)));
    }
    if page > 1 {
        links.push(format!("{}; rel=\"prev\"", link_to(page - 1)));
        links.push(format!("{}; rel=\"first\"", link_to(1)));
    }
    let mut r = reply(StatusCode::OK, &wrap(slice, total));
    if !links.is_empty()
        && let Ok(v) = HeaderValue::from_str(&links.join(", "))
    {
        r.headers_mut().insert(http::header::LINK, v);
    }
    r
}

/// `paginate` for endpoints that answer a bare array.
pub(crate) fn paginate_array(
    shared: &Shared,
    path: &str,
    query: &BTreeMap<String, String>,
    items: Vec<Value>,
) -> Response {
    paginate(shared, path, query, items, |page, _| Value::Array(page))
}
