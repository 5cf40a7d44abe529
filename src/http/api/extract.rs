//! What every API handler takes and gives: the authenticated caller (from `Authorization:
//! Bearer`), JSON bodies and query strings whose rejections keep the one error shape, and the
//! error itself — `{"error": {"code", "message", "field"}}` with the status of `AgentError`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, OptionalFromRequest, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use utoipa::ToSchema;

use crate::agent::auth::bearer;
use crate::agent::{AgentError, Caller};
use crate::domain::quote::{clip, short};
use crate::http::AppState;

/// The one error shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `unauthenticated`, `forbidden`, `preview_not_found`,
    /// `invalid_duration`, `ttl_too_long`, `unknown_blueprint`, `idempotency_key_reused`, …
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
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The caller, authenticated from `Authorization: Bearer <token>` (TokenReview).
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
        let caller = state.agent.authority.authenticate(token).await?;
        Ok(Self(caller))
    }
}

/// A JSON body; one that is not `application/json` is answered 415, not JSON 400, not an object
/// or with a field that cannot be used 422 naming the field, each in the one shape.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Failed;

    async fn from_request(req: Request, state: &S) -> Result<Self, Failed> {
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                let essence = v.split(';').next().unwrap_or_default().trim();
                essence.eq_ignore_ascii_case("application/json")
                    || essence.to_ascii_lowercase().ends_with("+json")
            });
        if !json {
            return Err(Failed(AgentError::invalid(
                "unsupported_media_type",
                "body",
                "send the body as application/json",
            )));
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| Failed(AgentError::invalid("invalid_body", "body", e.body_text())))?;
        parse(&bytes).map(Self).map_err(Failed)
    }
}

/// An optional JSON body: none when the request has no body at all.
impl<T: DeserializeOwned, S: Send + Sync> OptionalFromRequest<S> for Body<T> {
    type Rejection = Failed;

    async fn from_request(req: Request, state: &S) -> Result<Option<Self>, Failed> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| Failed(AgentError::invalid("invalid_body", "body", e.body_text())))?;
        // Only no body at all is no body: whitespace alone is not JSON, and is refused like any
        // other body that is not.
        if bytes.is_empty() {
            return Ok(None);
        }
        parse(&bytes).map(|v| Some(Self(v))).map_err(Failed)
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

/// A query string; one that cannot be read is answered 422 in the one shape.
#[derive(Debug)]
pub struct Params<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = Failed;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Failed> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(v)) => Ok(Self(v)),
            Err(e) => Err(Failed(query_error(&e))),
        }
    }
}

fn query_error(e: &QueryRejection) -> AgentError {
    AgentError::invalid("invalid_query", "query", e.body_text())
}

/// Anything under `/api/v1` that is no route.
pub(super) async fn no_route() -> Response {
    let body = json!({"error": {"code": "no_such_route", "message": "no such API route; see /api/v1/openapi.json"}});
    (StatusCode::NOT_FOUND, Json(body)).into_response()
}
