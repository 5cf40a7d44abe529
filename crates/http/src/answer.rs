//! How the webhook answers a delivery: a JSON body whose `status` is one of Sandcastle's own
//! words (`accepted`, `duplicate`, `ignored`, ...), carried on the response for the metrics, and
//! how long a desired-state write may take before the answer is 503.

use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// How long one desired-state write may take before the delivery is answered 503.
pub(super) const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The `status` of a delivery's JSON answer, carried on the response to the metrics.
#[derive(Debug, Clone)]
pub(super) struct Answered(pub String);

pub(super) fn reply(status: StatusCode, body: serde_json::Value) -> Response {
    let answered = body["status"].as_str().map(|s| Answered(s.to_owned()));
    let mut response = (status, Json(body)).into_response();
    if let Some(a) = answered {
        response.extensions_mut().insert(a);
    }
    response
}
