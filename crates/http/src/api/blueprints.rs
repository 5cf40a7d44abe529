//! The `/api/v1/blueprints/{name}/data/refresh` handler: ask for a new snapshot of a
//! Blueprint's data, which previews made from then on start from. HTTP in, the `agent`
//! operation, JSON out.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::allowed::{Allowed, op};
use super::extract::{Body, ErrorBody, Failed, NoFields};
use crate::AppState;
use sandcastle_agent::DataRefreshView;

#[utoipa::path(post, path = "/api/v1/blueprints/{name}/data/refresh", tag = "blueprints",
    params(("name" = String, Path, description = "the Blueprint's name")),
    request_body = Option<NoFields>, security(("bearer" = [])),
    responses((status = 202, body = DataRefreshView, description = "Asked: the Blueprint's `status.data.refreshed` becomes `asked` once the new snapshot is taken"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody, description = "RBAC does not allow `update blueprints/data-refresh`; a preview's token never may"),
        (status = 404, body = ErrorBody, description = "No such Blueprint (`blueprint_not_found`)"),
        (status = 409, body = ErrorBody, description = "The Blueprint does not restore snapshots (`no_data_snapshots`)"),
        (status = 503, body = ErrorBody, description = "Kubernetes did not answer"),
        (status = 400, body = ErrorBody, description = "The body is not JSON"), (status = 415, body = ErrorBody, description = "The body is not `application/json`"),
        (status = 413, body = ErrorBody, description = "The body is larger than the API reads (64 KiB)"), (status = 422, body = ErrorBody, description = "The body is not an empty object")))]
/// Take a new snapshot of the Blueprint's data (`spec.data.from: snapshot`) for the previews made
/// from now on; those already running keep theirs.
pub(super) async fn refresh_data(
    State(state): State<AppState>,
    Allowed(caller, _): Allowed<op::RefreshData>,
    Path(name): Path<String>,
    _: Option<Body<NoFields>>,
) -> Result<(StatusCode, Json<DataRefreshView>), Failed> {
    let view = state.agent.refresh_data(&caller, &name).await?;
    Ok((StatusCode::ACCEPTED, Json(view)))
}
