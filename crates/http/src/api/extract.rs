//! What every API handler takes and gives: the authenticated caller (from `Authorization:
//! Bearer`), JSON bodies (read only up to [`BODY_LIMIT`]) and query strings whose rejections
//! keep the one error shape, and the error itself — `{"error": {"code", "message", "field"}}`
//! with the status of `AgentError`. Values quoted back in messages are cut short.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, OptionalFromRequest, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use utoipa::ToSchema;

use crate::AppState;
use sandcastle_agent::auth::{VIA_HEADER, bearer};
use sandcastle_agent::{AgentError, Caller, Via};
use sandcastle_domain::quote::{clip, short};

/// The most bytes a request body to the API may hold: the largest request (a sandbox to
/// create) is well under 2 KiB.
pub const BODY_LIMIT: usize = 64 * 1024;

/// The one error shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `unauthenticated`, `forbidden`, `preview_not_found`,
    /// `invalid_duration`, `ttl_too_long`, `unknown_blueprint`, `idempotency_key_reused`,
    /// `body_too_large`, …
    pub code: String,
    /// For people; a value quoted in it is cut to a short prefix.
    pub message: String,
    /// The field at fault, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// An operation's failure, answered in the one shape.
#[derive(Debug)]
pub struct Failed(pub AgentError);

impl From<AgentError> for Failed {
    fn from(e: AgentError) -> Self {
        Self(e)
    }
}

impl IntoResponse for Failed {
    fn into_response(self) -> Response {
        let e = self.0;
        let body = ErrorBody {
            error: ErrorDetail {
                code: e.code().to_owned(),
                message: e.to_string(),
                field: e.field().map(|f| short(f).into_owned()),
            },
        };
        let mut response = (e.status(), Json(body)).into_response();
        if e.status() == StatusCode::UNAUTHORIZED {
            // `http::discovery` adds where the resource's metadata is.
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The caller, authenticated from `Authorization: Bearer <token>` (TokenReview). A client
/// relaying for another interface says which with `Sandcastle-Via` (the stdio MCP server:
/// `mcp`), and its writes are attributed to it; who the caller is comes from the token alone.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Caller);

impl FromRequestParts<AppState> for Authenticated {
    type Rejection = Failed;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Failed> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let token = bearer(header)?;
        let mut caller = state.agent.authority.authenticate(token).await?;
        if parts
            .headers
            .get(VIA_HEADER)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"mcp"))
        {
            caller.via = Via::Mcp;
        }
        Ok(Self(caller))
    }
}

/// A JSON body; one that is not `application/json` is answered 415, larger than
/// [`BODY_LIMIT`] 413, not JSON 400, not an object or with a field that cannot be used 422
/// naming the field, each in the one shape. Handlers take it after the caller was allowed the
/// route's operation (`Allowed`), so nothing of a body is read before.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Failed;

    async fn from_request(req: Request, _: &S) -> Result<Self, Failed> {
        json_media_type(req.headers()).map_err(Failed)?;
        let bytes = read(req).await.map_err(Failed)?;
        parse(&bytes).map(Self).map_err(Failed)
    }
}

/// An optional JSON body: none when the request has no body at all. One that is there is
/// checked as [`Body`] checks it: its media type, its size, JSON, its fields.
impl<T: DeserializeOwned, S: Send + Sync> OptionalFromRequest<S> for Body<T> {
    type Rejection = Failed;

    async fn from_request(req: Request, _: &S) -> Result<Option<Self>, Failed> {
        let declared_empty = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() == b"0");
        if !declared_empty && !http_body::Body::is_end_stream(req.body()) {
            json_media_type(req.headers()).map_err(Failed)?;
        }
        let bytes = read(req).await.map_err(Failed)?;
        // Only no body at all, or JSON's `null`, is no body: whitespace alone is not JSON, and
        // is refused like any other body that is not.
        if bytes.is_empty()
            || serde_json::from_slice::<serde_json::Value>(&bytes).is_ok_and(|v| v.is_null())
        {
            return Ok(None);
        }
        parse(&bytes).map(|v| Some(Self(v))).map_err(Failed)
    }
}

/// The body of a write that takes nothing: none, or an empty JSON object (`{}`); anything else
/// is refused as any body is (415, 413, 400, 422 naming the field).
#[derive(Debug, Clone, Copy, Default, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NoFields {}

/// A body's media type: JSON (`application/json`, or `…+json`), in UTF-8 (RFC 8259: the only
/// charset JSON has) — else 415.
fn json_media_type(headers: &axum::http::HeaderMap) -> Result<(), AgentError> {
    let value = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let json = essence == "application/json" || essence.ends_with("+json");
    let utf8 = parts.all(|p| {
        let (name, v) = p.split_once('=').unwrap_or((p, ""));
        !name.trim().eq_ignore_ascii_case("charset")
            || matches!(
                v.trim().trim_matches('"').to_ascii_lowercase().as_str(),
                "utf-8" | "utf8"
            )
    });
    if !json {
        return Err(AgentError::invalid(
            "unsupported_media_type",
            "body",
            "send the body as application/json",
        ));
    }
    if !utf8 {
        return Err(AgentError::invalid(
            "unsupported_media_type",
            "body",
            "send the body as application/json in UTF-8 (the only charset JSON has)",
        ));
    }
    Ok(())
}

fn too_large() -> AgentError {
    AgentError::invalid(
        "body_too_large",
        "body",
        format!(
            "the body is larger than the {} KiB the API reads",
            BODY_LIMIT / 1024
        ),
    )
}

/// The body, at most [`BODY_LIMIT`] bytes of it: a larger declared length is refused before a
/// byte is read, and an undeclared one as soon as it passes the limit.
pub(crate) async fn read(req: Request) -> Result<Bytes, AgentError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT as u64) {
        return Err(too_large());
    }
    match Limited::new(req.into_body(), BODY_LIMIT).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(e) => Err(AgentError::invalid(
            "invalid_body",
            "body",
            format!("the body could not be read: {}", clip(&e.to_string())),
        )),
    }
}

/// A JSON object read into `T`; what is wrong names the field (`ttl`, `body`).
fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, AgentError> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        AgentError::invalid(
            "invalid_body",
            "body",
            format!("not JSON: {}", clip(&e.to_string())),
        )
    })?;
    if !value.is_object() {
        return Err(AgentError::invalid(
            "invalid_field",
            "body",
            "the body must be a JSON object",
        ));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "body".to_owned() } else { path };
        AgentError::invalid("invalid_field", &field, clip(&e.into_inner().to_string()))
    })
}

/// A query string; one that cannot be read is answered 422 in the one shape, naming the
/// parameter at fault.
#[derive(Debug)]
pub struct Params<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = Failed;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Failed> {
        query(parts.uri.query().unwrap_or_default())
            .map(Self)
            .map_err(Failed)
    }
}

/// `text` (a query string) read into `T`.
fn query<T: DeserializeOwned>(text: &str) -> Result<T, AgentError> {
    let pairs = serde_urlencoded::Deserializer::new(form_urlencoded::parse(text.as_bytes()));
    serde_path_to_error::deserialize(pairs).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "query".to_owned()
        } else {
            path
        };
        AgentError::invalid("invalid_query", &field, clip(&e.into_inner().to_string()))
    })
}

/// Anything under `/api/v1` that is no route.
pub(super) async fn no_route() -> Response {
    let body = json!({"error": {"code": "no_such_route", "message": "no such API route; see /api/v1/openapi.json"}});
    (StatusCode::NOT_FOUND, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandcastle_agent::ListFilter;

    fn request(body: axum::body::Body, length: Option<usize>) -> Request {
        let mut req = Request::new(body);
        req.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(n) = length {
            req.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        req
    }

    async fn refused(req: Request) -> AgentError {
        match <Body<ListFilter> as FromRequest<()>>::from_request(req, &()).await {
            Ok(_) => panic!("the body was taken"),
            Err(Failed(e)) => e,
        }
    }

    #[tokio::test]
    async fn a_body_past_the_limit_is_refused_whether_its_length_is_declared_or_not() {
        // Declared: refused before reading (this body would never end).
        let endless = axum::body::Body::from_stream(futures::stream::pending::<
            Result<Bytes, std::io::Error>,
        >());
        let e = refused(request(endless, Some(100 * 1024 * 1024))).await;
        assert_eq!((e.code(), e.status().as_u16()), ("body_too_large", 413));
        // Undeclared: refused once it passes the limit.
        let chunks = futures::stream::iter(
            (0..100).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 4096]))),
        );
        let e = refused(request(axum::body::Body::from_stream(chunks), None)).await;
        assert_eq!((e.code(), e.status().as_u16()), ("body_too_large", 413));
        assert!(e.to_string().contains("64 KiB"), "{e}");
        // Within it: read.
        let small = request(axum::body::Body::from(r#"{"limit": 5}"#), None);
        let Ok(Body(filter)) =
            <Body<ListFilter> as FromRequest<()>>::from_request(small, &()).await
        else {
            panic!("a small body is read");
        };
        assert_eq!(filter.limit, Some(5));
    }

    #[test]
    fn a_query_that_cannot_be_read_names_the_parameter_and_quotes_it_short() {
        let e = query::<ListFilter>("limit=lots").unwrap_err();
        assert_eq!((e.code(), e.field()), ("invalid_query", Some("limit")));
        let long = "x".repeat(10_000);
        let e = query::<ListFilter>(&format!("phase={long}")).unwrap_err();
        assert_eq!(e.field(), Some("phase"));
        assert!(e.to_string().len() < 600, "{e}");
        let f: ListFilter = query("repo=acme%2Fshop&limit=3").unwrap();
        assert_eq!((f.repo.as_deref(), f.limit), (Some("acme/shop"), Some(3)));
    }
}
