//! `/mcp` on Sandcastle's HTTP server: rmcp's Streamable HTTP transport behind a guard that,
//! before MCP sees a request, checks the Kubernetes bearer token (TokenReview, the answer cached
//! like the API's), refuses a caller RBAC lets neither list nor get previews (403), bounds the
//! body (413 past [`BODY_LIMIT`]), and keeps each caller to its share of sessions (429, see
//! `sessions`); a session is its opener's (another caller is answered 404 for it), and its
//! `DELETE` answers 204. The caller rides in the request's extensions, where each tool call
//! finds it, and each operation is authorized by SubjectAccessReview as over REST. The `Host`
//! check rmcp offers against DNS rebinding is off: a rebinding page cannot attach the caller's
//! token.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use super::server::Mcp;
use super::sessions::{Ledger, SessionLimits, Sessions};
use sandcastle_agent::auth::bearer;
use sandcastle_agent::{Agent, AgentError, Caller, Operation, Via};

/// The most bytes one MCP message may hold (a tool call's arguments are well under 4 KiB).
pub const BODY_LIMIT: usize = 64 * 1024;

const SESSION_HEADER: &str = "mcp-session-id";

/// What the guard needs.
#[derive(Clone)]
struct Guard {
    agent: Agent,
    ledger: Arc<Ledger>,
}

/// The `/mcp` routes: one [`Mcp`] per session, made by `make`; callers checked by `agent`.
pub fn router(
    make: impl Fn() -> Mcp + Send + Sync + 'static,
    agent: Agent,
    limits: SessionLimits,
) -> Router {
    let ledger = Arc::new(Ledger::new(limits));
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(BODY_LIMIT);
    let service = StreamableHttpService::new(
        move || Ok(make()),
        Arc::new(Sessions::new(ledger.clone())),
        config,
    );
    Router::new()
        .nest_service("/mcp", service)
        .route_layer(middleware::from_fn_with_state(
            Guard { agent, ledger },
            guard,
        ))
}

async fn guard(State(g): State<Guard>, req: Request, next: Next) -> Response {
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let caller = match admit(&g.agent, authorization.as_deref()).await {
        Ok(caller) => caller,
        Err(e) => return refuse(&e),
    };
    let holder = format!("{}/{}", caller.cluster(), caller.user);
    let session = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (mut parts, body) = req.into_parts();
    let method = parts.method.clone();
    let who = caller.user.clone();
    parts.extensions.insert(caller);
    let bytes = if method == Method::POST {
        match read(&parts.headers, body).await {
            Ok(bytes) => bytes,
            Err(e) => return refuse(&e),
        }
    } else {
        Bytes::new()
    };
    let req = Request::from_parts(parts, Body::from(bytes.clone()));
    if let Some(id) = session {
        if g.ledger.holder(&id).flatten().is_some_and(|h| h != holder) {
            let message = "no such MCP session of yours; open one with an initialize request";
            let body = json!({"error": {"code": "session_not_found", "message": message}});
            return (StatusCode::NOT_FOUND, axum::Json(body)).into_response();
        }
        let mut response = next.run(req).await;
        if method == Method::DELETE && response.status() == StatusCode::ACCEPTED {
            // Ended: nothing to accept later (clients warn on 202).
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        return response;
    }
    if method != Method::POST || !opens_a_session(&bytes) {
        return next.run(req).await;
    }
    let reservation = match g.ledger.reserve(&holder, &who) {
        Ok(r) => r,
        Err(e) => return refuse(&e),
    };
    let response = next.run(req).await;
    if let Some(id) = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        reservation.bind(id);
    }
    response
}

/// The caller, authenticated (401 without a valid token) and allowed to read previews (403
/// when RBAC allows neither `list` nor `get`); marked as calling through MCP.
async fn admit(agent: &Agent, authorization: Option<&str>) -> Result<Caller, AgentError> {
    let mut caller = agent.authority.authenticate(bearer(authorization)?).await?;
    caller.via = Via::Mcp;
    if let Err(refused) = agent.permit(&caller, Operation::List, None).await {
        if !matches!(refused, AgentError::Forbidden(_)) {
            return Err(refused);
        }
        agent
            .permit(&caller, Operation::Get, None)
            .await
            .map_err(|_| refused)?;
    }
    Ok(caller)
}

/// The body, at most [`BODY_LIMIT`] bytes of it (a larger declared length refused unread).
async fn read(headers: &axum::http::HeaderMap, body: Body) -> Result<Bytes, AgentError> {
    let too_large = || {
        AgentError::invalid(
            "body_too_large",
            "body",
            format!("an MCP message may hold {} KiB at most", BODY_LIMIT / 1024),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT as u64) {
        return Err(too_large());
    }
    match Limited::new(body, BODY_LIMIT).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(_) => Err(AgentError::invalid(
            "invalid_body",
            "body",
            "the body could not be read",
        )),
    }
}

/// Whether a message is an `initialize` request (which opens a session).
fn opens_a_session(bytes: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        method: Option<String>,
    }
    serde_json::from_slice::<Probe>(bytes).is_ok_and(|p| p.method.as_deref() == Some("initialize"))
}

fn refuse(e: &AgentError) -> Response {
    let body = json!({"error": {"code": e.code(), "message": e.to_string()}});
    let mut response = (e.status(), axum::Json(body)).into_response();
    if e.status() == StatusCode::UNAUTHORIZED {
        // `http::discovery` adds where the resource's metadata is.
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_initialize_request_opens_a_session() {
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        assert!(opens_a_session(init));
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}"#;
        assert!(!opens_a_session(call));
        assert!(!opens_a_session(b"[1, 2]"));
        assert!(!opens_a_session(b"not json"));
    }
}
