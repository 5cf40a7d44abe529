//! How a client finds out what to send. Where an OAuth authorization server whose tokens the
//! cluster accepts is configured (`--authorization-server`), OAuth 2.0 Protected Resource
//! Metadata (RFC 9728, as the MCP authorization specification asks) at
//! `/.well-known/oauth-protected-resource` (Sandcastle as a whole) and
//! `/.well-known/oauth-protected-resource/mcp` (the MCP endpoint), served without a token and
//! naming it in `authorization_servers`, and every 401 naming that document in
//! `WWW-Authenticate: Bearer resource_metadata="…"`. Without one there is no valid metadata to
//! give (the specification requires an authorization server): those paths answer 404 saying
//! that a Kubernetes bearer token is required and how to get one, and every 401 says so in its
//! challenge (`realm`) and body. Documents name the resource by the URL the client used (its
//! `Host`, and `X-Forwarded-Proto` behind a proxy), so the metadata matches whatever address
//! reached Sandcastle. The documents linked (`/docs/api.md`, `/docs/mcp.md`) are served too.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
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
    /// Where people read what to send and how to get it.
    pub resource_documentation: String,
    /// Bearer tokens go in the `Authorization` header, nowhere else.
    pub bearer_methods_supported: Vec<String>,
    /// Issuers of tokens the cluster accepts (the one configured).
    pub authorization_servers: Vec<String>,
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

/// The metadata of `resource` for a Sandcastle reached at `base` (scheme and authority), where
/// tokens come from `issuer`.
pub fn metadata(resource: Resource, base: &str, issuer: &str) -> Metadata {
    let base = base.trim_end_matches('/');
    let (path, name, doc) = match resource {
        Resource::Whole => ("", "Sandcastle", "/docs/api.md"),
        Resource::Mcp => ("/mcp", "Sandcastle MCP server", "/docs/mcp.md"),
    };
    Metadata {
        resource: format!("{base}{path}"),
        resource_name: name.to_owned(),
        resource_documentation: format!("{base}{doc}"),
        bearer_methods_supported: vec!["header".to_owned()],
        authorization_servers: vec![issuer.to_owned()],
    }
}

/// What a client without an authorization server to go to is told (a 401's `realm`, the
/// metadata paths' 404): a Kubernetes bearer token, and where to read how to get one.
pub fn bearer_statement(base: &str) -> String {
    format!(
        "Sandcastle takes a Kubernetes bearer token in the Authorization header (no OAuth \
         sign-in is configured): e.g. `kubectl create token NAME -n NAMESPACE`; see \
         {}/docs/mcp.md",
        base.trim_end_matches('/')
    )
}

/// The `WWW-Authenticate` challenge of a 401 for `resource`, reached at `base`.
pub fn challenge(resource: Resource, base: &str, issuer: Option<&str>) -> String {
    let base = base.trim_end_matches('/');
    match issuer {
        Some(_) => format!(
            "Bearer resource_metadata=\"{base}{}\"",
            resource.metadata_path()
        ),
        None => format!(
            "Bearer realm=\"{}\"",
            bearer_statement(base).replace('"', "'")
        ),
    }
}

/// The scheme and authority the client used: its `Host` (when it is a plain host and port),
/// with `X-Forwarded-Proto` (`http` or `https`, set by a proxy in front) or, for the public
/// URL's own host, that URL's scheme; `public_url` when the request names no usable host.
pub fn base_url(headers: &HeaderMap, public_url: &str) -> String {
    let public = public_url.trim_end_matches('/');
    let (public_scheme, public_host) = public.split_once("://").unwrap_or(("http", public));
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.len() <= 261
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        });
    let Some(host) = host else {
        return public.to_owned();
    };
    let forwarded = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(',')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|p| p == "http" || p == "https");
    let scheme = match forwarded {
        Some(p) => p,
        None if host.eq_ignore_ascii_case(public_host) => public_scheme.to_owned(),
        None => "http".to_owned(),
    };
    format!("{scheme}://{host}")
}

fn answer(state: &AppState, headers: &HeaderMap, resource: Resource) -> Response {
    let base = base_url(headers, &state.public_url);
    match state.authorization_server.as_deref() {
        Some(issuer) => Json(metadata(resource, &base, issuer)).into_response(),
        None => {
            let body = serde_json::json!({"error": {"code": "no_authorization_server",
                "message": bearer_statement(&base)}});
            (StatusCode::NOT_FOUND, Json(body)).into_response()
        }
    }
}

/// `GET /.well-known/oauth-protected-resource`.
pub(super) async fn whole(State(state): State<AppState>, headers: HeaderMap) -> Response {
    answer(&state, &headers, Resource::Whole)
}

/// `GET /.well-known/oauth-protected-resource/mcp`.
pub(super) async fn mcp(State(state): State<AppState>, headers: HeaderMap) -> Response {
    answer(&state, &headers, Resource::Mcp)
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
    let base = base_url(req.headers(), &state.public_url);
    let mut response = next.run(req).await;
    let asks_bearer = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .is_some_and(|v| v.as_bytes().starts_with(b"Bearer"));
    if response.status() == StatusCode::UNAUTHORIZED && asks_bearer {
        let value = challenge(resource, &base, state.authorization_server.as_deref());
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

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_metadata_names_the_resource_its_documents_and_the_issuer() {
        let m = metadata(
            Resource::Mcp,
            "https://sc.example.com/",
            "https://login.example.com",
        );
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
        assert_eq!(
            json["authorization_servers"],
            serde_json::json!(["https://login.example.com"])
        );
        assert_eq!(
            challenge(
                Resource::of("/mcp"),
                "https://sc.example.com",
                Some("https://login.example.com")
            ),
            "Bearer resource_metadata=\"https://sc.example.com/.well-known/oauth-protected-resource/mcp\""
        );
        let plain = challenge(Resource::Mcp, "https://sc.example.com", None);
        assert!(
            plain.starts_with("Bearer realm=\"Sandcastle takes a Kubernetes bearer token")
                && plain.ends_with("see https://sc.example.com/docs/mcp.md\"")
                && !plain.contains("resource_metadata"),
            "{plain}"
        );
        assert_eq!(Resource::of("/api/v1/previews"), Resource::Whole);
        assert_eq!(Resource::of("/mcpx"), Resource::Whole);
        assert!(API_DOC.contains("bearer token") && MCP_DOC.contains("bearer token"));
    }

    #[test]
    fn the_resource_is_the_url_the_client_used() {
        let public = "http://localhost:8080";
        assert_eq!(base_url(&headers(&[]), public), public);
        assert_eq!(
            base_url(&headers(&[("host", "10.0.0.7:8080")]), public),
            "http://10.0.0.7:8080"
        );
        assert_eq!(
            base_url(
                &headers(&[("host", "sc.example.com"), ("x-forwarded-proto", "https")]),
                public
            ),
            "https://sc.example.com"
        );
        assert_eq!(
            base_url(
                &headers(&[("host", "sc.example.com")]),
                "https://sc.example.com/"
            ),
            "https://sc.example.com"
        );
        // Not a host: the public URL.
        assert_eq!(base_url(&headers(&[("host", "a b\"c")]), public), public);
        assert_eq!(
            base_url(
                &headers(&[("host", "sc.example.com"), ("x-forwarded-proto", "gopher")]),
                public
            ),
            "http://sc.example.com"
        );
    }
}
