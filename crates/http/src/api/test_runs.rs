//! The `/api/v1/previews/{name}/tests/{test}` handler: run one of the Blueprint's tests in a
//! preview now. HTTP in, the `agent` operation, JSON out.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::allowed::{Allowed, op};
use super::extract::{Body, ErrorBody, Failed, NoFields};
use crate::AppState;
use sandcastle_agent::PreviewView;

#[utoipa::path(post, path = "/api/v1/previews/{name}/tests/{test}", tag = "previews",
    params(("name" = String, Path, description = "the preview's name"),
        ("test" = String, Path, description = "one of the Blueprint's tests")),
    request_body = Option<NoFields>, security(("bearer" = [])),
    responses((status = 202, body = PreviewView, description = "Asked: the run starts once the preview is Ready (at once when it is); wait for it with `wait?for=test&test=NAME`"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The preview is torn down"),
        (status = 422, body = ErrorBody, description = "The preview's Blueprint has no such test (`unknown_test`)"),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer"),
        (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)")))]
/// Run one of the Blueprint's tests in the preview now (cancelling a run of it still going);
/// its result is the commit's check run `Sandcastle / <test>`.
pub(super) async fn run_test(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::RunTest>,
    Path((name, test)): Path<(String, String)>,
    _: Option<Body<NoFields>>,
) -> Result<(StatusCode, Json<PreviewView>), Failed> {
    let view = state.agent.run_test(&caller, &name, &test).await?;
    Ok((StatusCode::ACCEPTED, Json(view)))
}
