//! `/mcp` on Sandcastle's HTTP server: rmcp's Streamable HTTP transport behind the REST API's
//! authentication. Every request carries a Kubernetes bearer token, checked by TokenReview (the
//! answer cached like the API's); the caller rides in the request's extensions, where each tool
//! call finds it, and each operation is authorized by SubjectAccessReview as over REST. A
//! request without a valid token is answered 401 before MCP sees it. The `Host` check rmcp
//! offers against DNS rebinding is off: a rebinding page cannot attach the caller's token.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use super::server::Mcp;
use crate::agent::auth::bearer;
use crate::agent::{AgentError, Authority, Via};

/// The `/mcp` routes: one [`Mcp`] per session, made by `make`.
pub fn router(make: impl Fn() -> Mcp + Send + Sync + 'static, authority: Authority) -> Router {
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(make()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(authority, authenticate))
}

async fn authenticate(
    State(authority): State<Authority>,
    mut req: Request,
    next: Next,
) -> Response {
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let caller = match bearer(header) {
        Ok(token) => authority.authenticate(token).await,
        Err(e) => Err(e),
    };
    match caller {
        Ok(mut caller) => {
            caller.via = Via::Mcp;
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(e) => refuse(&e),
    }
}

fn refuse(e: &AgentError) -> Response {
    let body = json!({"error": {"code": e.code(), "message": e.to_string()}});
    let mut response = (e.status(), axum::Json(body)).into_response();
    if e.status() == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}
