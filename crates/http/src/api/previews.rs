//! The `/api/v1/previews` handlers, one per operation, each documented for the OpenAPI
//! document: HTTP in, an `agent` operation, JSON out.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};

use super::allowed::{Allowed, op};
use super::extract::{Body, ErrorBody, Failed, NoFields, Params};
use crate::AppState;
use sandcastle_agent::{
    CreatePreview, EventsView, ExtendBody, ExtendView, ListFilter, LogLines, LogQuery, PreviewList,
    PreviewView, RedeployBody, ResetBody, TokenRequestBody, TokenView, WaitQuery, WaitResult,
};

type Answer<T> = Result<T, Failed>;

const NAME: &str = "the preview's name";

#[utoipa::path(get, path = "/api/v1/previews", tag = "previews", params(ListFilter),
    security(("bearer" = [])),
    responses((status = 200, body = PreviewList), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer")))]
/// List previews (those a preview token belongs to, for such a token); Removed ones only when
/// asked (`removed=true`, or `phase=Removed`). Items carry no history: get one preview for it.
pub(super) async fn list(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::List>,
    Params(filter): Params<ListFilter>,
) -> Answer<Json<PreviewList>> {
    Ok(Json(state.agent.list(&caller, &filter).await?))
}

#[utoipa::path(post, path = "/api/v1/previews", tag = "previews", request_body = CreatePreview,
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes a retried create return the preview the first one made")),
    security(("bearer" = [])),
    responses((status = 201, body = PreviewView, description = "Created"),
        (status = 200, body = PreviewView, description = "Created before, with the same Idempotency-Key and body"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody), (status = 503, body = ErrorBody),
        (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)")))]
/// Create a sandbox: a preview without a pull request.
pub(super) async fn create(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Create>,
    headers: HeaderMap,
    Body(body): Body<CreatePreview>,
) -> Answer<(StatusCode, Json<PreviewView>)> {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .filter(|k| !k.is_empty());
    let (view, created) = state.agent.create(&caller, &body, key).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)))
}

#[utoipa::path(get, path = "/api/v1/previews/{name}", tag = "previews",
    params(("name" = String, Path, description = NAME)), security(("bearer" = [])),
    responses((status = 200, body = PreviewView), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer")))]
/// One preview.
pub(super) async fn get(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Get>,
    Path(name): Path<String>,
) -> Answer<Json<PreviewView>> {
    Ok(Json(state.agent.get(&caller, &name).await?))
}

#[utoipa::path(delete, path = "/api/v1/previews/{name}", tag = "previews",
    params(("name" = String, Path, description = NAME)), request_body = Option<NoFields>, security(("bearer" = [])),
    responses((status = 202, body = PreviewView, description = "Being torn down"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody),
        (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)"), (status = 422, body = ErrorBody, description = "The body is not an empty object")))]
/// Tear a preview down now (its record stays a while as a tombstone).
pub(super) async fn delete(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Delete>,
    Path(name): Path<String>,
    _: Option<Body<NoFields>>,
) -> Answer<(StatusCode, Json<PreviewView>)> {
    let view = state.agent.delete(&caller, &name).await?;
    Ok((StatusCode::ACCEPTED, Json(view)))
}

#[utoipa::path(get, path = "/api/v1/previews/{name}/wait", tag = "previews",
    params(("name" = String, Path, description = NAME), WaitQuery), security(("bearer" = [])),
    responses((status = 200, body = WaitResult), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer")))]
/// Wait until the preview is Ready (or Failed, or what `for` asks: with `for=test&test=NAME`,
/// until that test has a result), or the timeout passes.
pub(super) async fn wait(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Wait>,
    Path(name): Path<String>,
    Params(q): Params<WaitQuery>,
) -> Answer<Json<WaitResult>> {
    Ok(Json(state.agent.wait(&caller, &name, &q).await?))
}

#[utoipa::path(get, path = "/api/v1/previews/{name}/logs", tag = "previews",
    params(("name" = String, Path, description = NAME), LogQuery), security(("bearer" = [])),
    responses((status = 200, body = LogLines), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer")))]
/// The logs of the preview's workloads: bounded, with Secret values and tokens redacted.
pub(super) async fn logs(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Logs>,
    Path(name): Path<String>,
    Params(q): Params<LogQuery>,
) -> Answer<Json<LogLines>> {
    Ok(Json(state.agent.logs(&caller, &name, &q).await?))
}

#[utoipa::path(get, path = "/api/v1/previews/{name}/events", tag = "previews",
    params(("name" = String, Path, description = NAME)), security(("bearer" = [])),
    responses((status = 200, body = EventsView), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer")))]
/// Sandcastle's Events on the preview and the Events of its namespace.
pub(super) async fn events(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Events>,
    Path(name): Path<String>,
) -> Answer<Json<EventsView>> {
    Ok(Json(state.agent.events(&caller, &name).await?))
}

#[utoipa::path(post, path = "/api/v1/previews/{name}/redeploy", tag = "previews",
    params(("name" = String, Path, description = NAME)), request_body = Option<RedeployBody>,
    security(("bearer" = [])),
    responses((status = 202, body = PreviewView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer"), (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)")))]
/// Deploy again: another commit, or the same one as a new rollout.
pub(super) async fn redeploy(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Redeploy>,
    Path(name): Path<String>,
    body: Option<Body<RedeployBody>>,
) -> Answer<(StatusCode, Json<PreviewView>)> {
    let commit = body.and_then(|Body(b)| b.commit);
    let view = state
        .agent
        .redeploy(&caller, &name, commit.as_deref())
        .await?;
    Ok((StatusCode::ACCEPTED, Json(view)))
}

#[utoipa::path(post, path = "/api/v1/previews/{name}/stop", tag = "previews",
    params(("name" = String, Path, description = NAME)), request_body = Option<NoFields>, security(("bearer" = [])),
    responses((status = 202, body = PreviewView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer"),
        (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)"), (status = 422, body = ErrorBody, description = "The body is not an empty object")))]
/// Scale the preview to zero, keeping its data.
pub(super) async fn stop(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Stop>,
    Path(name): Path<String>,
    _: Option<Body<NoFields>>,
) -> Answer<(StatusCode, Json<PreviewView>)> {
    Ok((
        StatusCode::ACCEPTED,
        Json(state.agent.stop(&caller, &name).await?),
    ))
}

#[utoipa::path(post, path = "/api/v1/previews/{name}/wake", tag = "previews",
    params(("name" = String, Path, description = NAME)), request_body = Option<NoFields>, security(("bearer" = [])),
    responses((status = 202, body = PreviewView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer"),
        (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)"), (status = 422, body = ErrorBody, description = "The body is not an empty object")))]
/// Start a stopped preview again.
pub(super) async fn wake(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Wake>,
    Path(name): Path<String>,
    _: Option<Body<NoFields>>,
) -> Answer<(StatusCode, Json<PreviewView>)> {
    Ok((
        StatusCode::ACCEPTED,
        Json(state.agent.wake(&caller, &name).await?),
    ))
}

#[utoipa::path(post, path = "/api/v1/previews/{name}/extend", tag = "previews",
    params(("name" = String, Path, description = NAME)), request_body = ExtendBody,
    security(("bearer" = [])),
    responses((status = 200, body = ExtendView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer"), (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)")))]
/// Push the expiry back (never past the Blueprint's `maxTtl` from creation: `capped` says
/// when the extension was cut there).
pub(super) async fn extend(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Extend>,
    Path(name): Path<String>,
    Body(body): Body<ExtendBody>,
) -> Answer<Json<ExtendView>> {
    Ok(Json(
        state.agent.extend(&caller, &name, &body.duration).await?,
    ))
}

#[utoipa::path(post, path = "/api/v1/previews/{name}/reset", tag = "previews",
    params(("name" = String, Path, description = NAME)), request_body = Option<ResetBody>,
    security(("bearer" = [])),
    responses((status = 202, body = PreviewView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer"), (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)")))]
/// Throw the preview's data away and seed it again from the Blueprint — where the Blueprint
/// restores snapshots of its data, from the snapshot the preview started from (`latest`: the
/// newest).
pub(super) async fn reset(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Reset>,
    Path(name): Path<String>,
    body: Option<Body<ResetBody>>,
) -> Answer<(StatusCode, Json<PreviewView>)> {
    let body = body.map(|Body(b)| b).unwrap_or_default();
    Ok((
        StatusCode::ACCEPTED,
        Json(state.agent.reset(&caller, &name, &body).await?),
    ))
}

#[utoipa::path(post, path = "/api/v1/previews/{name}/token", tag = "previews",
    params(("name" = String, Path, description = NAME)), request_body = Option<TokenRequestBody>,
    security(("bearer" = [])),
    responses((status = 201, body = TokenView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer"), (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)")))]
/// A short-lived token for the preview's `preview-agent` account, voided with the preview.
pub(super) async fn token(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Token>,
    Path(name): Path<String>,
    body: Option<Body<TokenRequestBody>>,
) -> Answer<(StatusCode, Json<TokenView>)> {
    let body = body.map(|Body(b)| b).unwrap_or_default();
    let view = state.agent.token(&caller, &name, &body).await?;
    Ok((StatusCode::CREATED, Json(view)))
}
