//! The `/api/v1/previews/{name}/shares` and `/header-secret` handlers: the ways into a
//! `signedIn` preview that need no GitHub account. HTTP in, an `agent` operation, JSON out.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::allowed::{Allowed, op};
use super::extract::{Body, ErrorBody, Failed, NoFields};
use crate::AppState;
use sandcastle_agent::{HeaderSecretView, PreviewView, ShareBody, ShareView};

type Answer<T> = Result<T, Failed>;

const NAME: &str = "the preview's name";

#[utoipa::path(post, path = "/api/v1/previews/{name}/shares", tag = "previews",
    params(("name" = String, Path, description = NAME)), request_body = Option<ShareBody>,
    security(("bearer" = [])),
    responses((status = 201, body = ShareView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "The preview is torn down, or has no URL yet"),
        (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer"), (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)")))]
/// Mint a share link: it opens the preview without signing in until it expires (default 24h)
/// or is revoked. The link is in this answer only.
pub(super) async fn share(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Share>,
    Path(name): Path<String>,
    body: Option<Body<ShareBody>>,
) -> Answer<(StatusCode, Json<ShareView>)> {
    let body = body.map(|Body(b)| b).unwrap_or_default();
    let view = state.agent.share(&caller, &name, &body).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

#[utoipa::path(delete, path = "/api/v1/previews/{name}/shares/{id}", tag = "previews",
    params(("name" = String, Path, description = NAME), ("id" = String, Path, description = "the share link's id")),
    request_body = Option<NoFields>, security(("bearer" = [])),
    responses((status = 200, body = PreviewView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody, description = "The preview has no such link"),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer"),
        (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)")))]
/// Revoke a share link: it opens nothing from now on, and whoever entered with it is let in
/// no more.
pub(super) async fn unshare(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::Unshare>,
    Path((name, id)): Path<(String, String)>,
    _: Option<Body<NoFields>>,
) -> Answer<Json<PreviewView>> {
    Ok(Json(state.agent.unshare(&caller, &name, &id).await?))
}

#[utoipa::path(post, path = "/api/v1/previews/{name}/header-secret", tag = "previews",
    params(("name" = String, Path, description = NAME)), request_body = Option<NoFields>, security(("bearer" = [])),
    responses((status = 200, body = HeaderSecretView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer"),
        (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)"), (status = 422, body = ErrorBody, description = "The body is not an empty object")))]
/// The preview's header secret, for tools that can send a fixed header but not a token
/// (uptime checks, webhooks into the preview): it opens this preview through the gate until
/// the preview is torn down. Needs the access tokens need.
pub(super) async fn header_secret(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::HeaderSecret>,
    Path(name): Path<String>,
    _: Option<Body<NoFields>>,
) -> Answer<Json<HeaderSecretView>> {
    Ok(Json(state.agent.header_secret(&caller, &name).await?))
}
