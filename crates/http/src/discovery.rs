//! How a client finds out what to send: OAuth 2.0 Protected Resource Metadata (RFC 9728, as the
//! MCP authorization specification asks) at `/.well-known/oauth-protected-resource` (Sandcastle
//! as a whole) and `/.well-known/oauth-protected-resource/mcp` (the MCP endpoint), served
//! without a token; every 401 naming it in `WWW-Authenticate: Bearer resource_metadata="…"`;
//! and the documents it links (`/docs/api.md`, `/docs/mcp.md`). The metadata names an
//! authorization server only when one is configured (`--authorization-server`): without one,
//! clients send a Kubernetes bearer token they already have, and the documentation says how to
//! get one.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::AppState;

/// Where the metadata of Sandcastle as a whole is.
pub const METADATA: &str = "/.well-known/oauth-protected-resource";
/// Where the metadata of the MCP endpoint is (RFC 9728's path-suffixed form for `/mcp`).
pub const MCP_METADATA: &str = "/.well-known/oauth-protected-resource/mcp";

const API_DOC: &str = include_str!("../../../docs/api.md");
const MCP_DOC: &str = include_str!("../../../docs/mcp.md");

/// An RFC 9728 protected resource metadata document (the members Sandcastle uses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Metadata {
    /// The resource's identifier: the URL a client uses for it.
    pub resource: String,
    pub resource_name: String,
    /// Where people read what to send (a Kubernetes bearer token) and how to get one.
    pub resource_documentation: String,
    /// Bearer tokens go in the `Authorization` header, nowhere else.
    pub bearer_methods_supported: Vec<String>,
    /// Issuers of tokens the cluster accepts, when one is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorization_servers: Option<Vec<String>>,
}

/// Which resource a metadata document (or a 401) is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// Sandcastle as a whole: the REST API, the dashboard's token sign-in.
    Whole,
    /// The MCP endpoint, `/mcp`.
    Mcp,
}

impl Resource {
    /// The resource a request path belongs to.
    pub fn of(path: &str) -> Self {
        if path == "/mcp" || path.starts_with("/mcp/") {
            Self::Mcp
        } else {
            Self::Whole
        }
    }

    fn metadata_path(self) -> &'static str {
        match self {
            Self::Whole => METADATA,
            Self::Mcp => MCP_METADATA,
        }
    }
}

/// The metadata of `resource` for a Sandcastle at `public_url`.
pub fn metadata(resource: Resource, public_url: &str, issuer: Option<&str>) -> Metadata {
    let public = public_url.trim_end_matches('/');
    let (path, name, doc) = match resource {
        Resource::Whole => ("", "Sandcastle", "/docs/api.md"),
        Resource::Mcp => ("/mcp", "Sandcastle MCP server", "/docs/mcp.md"),
    };
    Metadata {
        resource: format!("{public}{path}"),
        resource_name: format!("{name} (send a Kubernetes bearer token)"),
        resource_documentation: format!("{public}{doc}"),
        bearer_methods_supported: vec!["header".to_owned()],
        authorization_servers: issuer.map(|i| vec![i.to_owned()]),
    }
}

/// The `WWW-Authenticate` challenge of a 401 for `resource`.
pub fn challenge(resource: Resource, public_url: &str) -> String {
    let public = public_url.trim_end_matches('/');
    format!(
        "Bearer resource_metadata=\"{public}{}\"",
        resource.metadata_path()
    )
}

fn answer(state: &AppState, resource: Resource) -> Json<Metadata> {
    Json(metadata(
        resource,
        &state.public_url,
        state.authorization_server.as_deref(),
    ))
}

/// `GET /.well-known/oauth-protected-resource`.
pub(super) async fn whole(State(state): State<AppState>) -> Json<Metadata> {
    answer(&state, Resource::Whole)
}

/// `GET /.well-known/oauth-protected-resource/mcp`.
pub(super) async fn mcp(State(state): State<AppState>) -> Json<Metadata> {
    answer(&state, Resource::Mcp)
}

fn markdown(text: &'static str) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/markdown; charset=utf-8")],
        text,
    )
        .into_response()
}

/// `GET /docs/api.md`: the API's documentation, as the metadata links it.
pub(super) async fn api_doc() -> Response {
    markdown(API_DOC)
}

/// `GET /docs/mcp.md`: the MCP server's documentation.
pub(super) async fn mcp_doc() -> Response {
    markdown(MCP_DOC)
}

/// Every 401 that asks for a bearer token names where the metadata of what was asked is.
pub(super) async fn name_the_metadata(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let resource = Resource::of(req.uri().path());
    let mut response = next.run(req).await;
    let asks_bearer = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .is_some_and(|v| v.as_bytes().starts_with(b"Bearer"));
    if response.status() == StatusCode::UNAUTHORIZED && asks_bearer {
        let value = challenge(resource, &state.public_url);
        if let Ok(value) = HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_names_the_resource_its_documents_and_an_issuer_only_when_there_is_one() {
        let m = metadata(Resource::Mcp, "https://sc.example.com/", None);
        assert_eq!(m.resource, "https://sc.example.com/mcp");
        assert_eq!(
            m.resource_documentation,
            "https://sc.example.com/docs/mcp.md"
        );
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(
            json["bearer_methods_supported"],
            serde_json::json!(["header"])
        );
        assert!(json.get("authorization_servers").is_none(), "{json}");
        let m = metadata(
            Resource::Whole,
            "https://sc.example.com",
            Some("https://login.example.com"),
        );
        assert_eq!(m.resource, "https://sc.example.com");
        assert_eq!(
            m.authorization_servers.as_deref(),
            Some(&["https://login.example.com".to_owned()][..])
        );
        assert_eq!(
            challenge(Resource::of("/mcp"), "https://sc.example.com"),
            "Bearer resource_metadata=\"https://sc.example.com/.well-known/oauth-protected-resource/mcp\""
        );
        assert_eq!(Resource::of("/api/v1/previews"), Resource::Whole);
        assert_eq!(Resource::of("/mcpx"), Resource::Whole);
        assert!(API_DOC.contains("bearer token") && MCP_DOC.contains("bearer token"));
    }
}
