//! The REST API for agents and people, `/api/v1`: previews listed, read, created (sandboxes),
//! redeployed, stopped, woken, extended, reset and deleted; waited on; their logs, events and a
//! scoped token; share links minted and revoked, and the header secret; their tests run; a
//! Blueprint's data snapshot refreshed. Handlers only translate HTTP to the `agent` operations (which authenticate,
//! authorize and audit) and back; each takes first the caller allowed its operation
//! (`allowed`), so a query or body is read only for a caller who may, and a body only so far.
//! The OpenAPI document is generated from these handlers (utoipa), served at
//! `/api/v1/openapi.json`, and kept in `docs/openapi.json` (`sandcastle openapi`; CI fails when
//! it drifts). Every error is the one JSON shape with a stable code.

mod allowed;
mod blueprints;
mod extract;
mod previews;
mod shares;
mod test_runs;

use axum::Json;
use axum::extract::State;
use axum::routing::get;
use utoipa::openapi::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi as _};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use sandcastle_agent::Operation;

pub use extract::ErrorBody;

/// The document's frame: title, version, the bearer scheme every operation uses.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Sandcastle API",
        description = "Preview environments for pull requests and agents: create, watch, operate and delete them. Authenticate with a Kubernetes bearer token (`kubectl create token`); access follows Kubernetes RBAC on `previewenvironments` in Sandcastle's namespace.",
        license(name = "Apache-2.0")
    ),
    modifiers(&Bearer),
    tags((name = "previews", description = "Preview environments"),
        (name = "blueprints", description = "What previews are cloned from"))
)]
struct Frame;

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, doc: &mut OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The method and path each operation is offered at. Exhaustive: a new operation does not
/// compile until it has a route (the OpenAPI test checks the route exists).
pub fn route_of(op: Operation) -> (&'static str, &'static str) {
    match op {
        Operation::List => ("get", "/api/v1/previews"),
        Operation::Create => ("post", "/api/v1/previews"),
        Operation::Get => ("get", "/api/v1/previews/{name}"),
        Operation::Delete => ("delete", "/api/v1/previews/{name}"),
        Operation::Wait => ("get", "/api/v1/previews/{name}/wait"),
        Operation::Logs => ("get", "/api/v1/previews/{name}/logs"),
        Operation::Events => ("get", "/api/v1/previews/{name}/events"),
        Operation::Redeploy => ("post", "/api/v1/previews/{name}/redeploy"),
        Operation::Stop => ("post", "/api/v1/previews/{name}/stop"),
        Operation::Wake => ("post", "/api/v1/previews/{name}/wake"),
        Operation::Extend => ("post", "/api/v1/previews/{name}/extend"),
        Operation::Reset => ("post", "/api/v1/previews/{name}/reset"),
        Operation::Token => ("post", "/api/v1/previews/{name}/token"),
        Operation::Share => ("post", "/api/v1/previews/{name}/shares"),
        Operation::Unshare => ("delete", "/api/v1/previews/{name}/shares/{id}"),
        Operation::HeaderSecret => ("post", "/api/v1/previews/{name}/header-secret"),
        Operation::RunTest => ("post", "/api/v1/previews/{name}/tests/{test}"),
        Operation::RefreshData => ("post", "/api/v1/blueprints/{name}/data/refresh"),
    }
}

fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(Frame::openapi())
        .routes(routes!(previews::list, previews::create))
        .routes(routes!(previews::get, previews::delete))
        .routes(routes!(previews::wait))
        .routes(routes!(previews::logs))
        .routes(routes!(previews::events))
        .routes(routes!(previews::redeploy))
        .routes(routes!(previews::stop))
        .routes(routes!(previews::wake))
        .routes(routes!(previews::extend))
        .routes(routes!(previews::reset))
        .routes(routes!(previews::token))
        .routes(routes!(shares::share))
        .routes(routes!(shares::unshare))
        .routes(routes!(shares::header_secret))
        .routes(routes!(test_runs::run_test))
        .routes(routes!(blueprints::refresh_data))
}

/// The OpenAPI document, as served and as kept in `docs/openapi.json`.
pub fn openapi() -> OpenApi {
    let (_, doc) = routes().split_for_parts();
    doc
}

/// The document as pretty JSON with a final newline.
pub fn openapi_json() -> String {
    let mut text = openapi().to_pretty_json().unwrap_or_default();
    text.push('\n');
    text
}

async fn document(State(_): State<AppState>) -> Json<serde_json::Value> {
    Json(serde_json::to_value(openapi()).unwrap_or_default())
}

/// The API's routes, and its document at `/api/v1/openapi.json`.
pub(super) fn router() -> axum::Router<AppState> {
    let (router, _) = routes().split_for_parts();
    router
        .route("/api/v1/openapi.json", get(document))
        .route("/api/v1/{*rest}", axum::routing::any(extract::no_route))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_its_route_in_the_document() {
        let doc = serde_json::to_value(openapi()).unwrap();
        for op in Operation::ALL {
            let (method, path) = route_of(op);
            assert!(
                doc["paths"][path][method].is_object(),
                "{op}: {method} {path} is not in the document"
            );
            assert_eq!(
                doc["paths"][path][method]["security"][0]["bearer"],
                serde_json::json!([]),
                "{op} asks for the bearer token"
            );
        }
    }
}
