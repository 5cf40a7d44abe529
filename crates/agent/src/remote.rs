//! A Sandcastle server's `/api/v1` seen from outside: one call with the caller's bearer token,
//! answering the JSON, or the API's error with its stable code (`sandcastle previews` and
//! `sandcastle mcp` use it).

use std::time::Duration;

use reqwest::Method;
use serde::Serialize;
use serde_json::{Value, json};

use super::auth::VIA_HEADER;
use super::{
    CreatePreview, ExtendBody, ListFilter, LogQuery, RedeployBody, ResetBody, ShareBody,
    TokenRequestBody, Via, WaitQuery,
};

use sandcastle_domain::Secret;
use sandcastle_domain::quote::clip;

/// How long a call may take beyond what it asks the server to wait.
const SLACK: Duration = Duration::from_secs(30);

/// Why a call gave no answer to use.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The API said no, in its one error shape.
    #[error("{code}: {message}")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    #[error("could not reach Sandcastle at {server}: {reason}")]
    Unreachable { server: String, reason: String },
    /// An answer that is not the API's (a proxy's error page, another service on the port).
    #[error("{server} answered {status} with no Sandcastle API answer; is --server right?")]
    Foreign { server: String, status: u16 },
    #[error(
        "no token: pass --token or set SANDCASTLE_TOKEN (e.g. `kubectl create token NAME -n NAMESPACE`)"
    )]
    NoToken,
}

/// A Sandcastle server and the token to call it with.
#[derive(Debug)]
pub struct Server {
    base: String,
    token: Option<Secret>,
    http: reqwest::Client,
    /// The interface calls are made for, when it is not the API itself (the stdio MCP server).
    via: Option<Via>,
}

/// One request: method, path under `/api/v1`, query pairs, JSON body, extra headers.
#[derive(Debug, Default)]
pub struct Call<'a> {
    pub method: Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub body: Option<Value>,
    pub headers: Vec<(&'a str, String)>,
    /// How long the server is asked to wait (a `wait`), added to the call's own bound.
    pub waits: Duration,
}

impl Call<'_> {
    pub fn get(path: String) -> Self {
        Self {
            path,
            ..Self::default()
        }
    }

    pub fn post(path: String, body: Option<Value>) -> Self {
        Self {
            method: Method::POST,
            path,
            body,
            ..Self::default()
        }
    }
}

/// What a path segment keeps as it is (RFC 3986 unreserved characters).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `/previews/{name}` with the name escaped as a path segment.
pub fn preview_path(name: &str, rest: &str) -> String {
    let name = percent_encoding::utf8_percent_encode(name, SEGMENT);
    format!("/previews/{name}{rest}")
}

/// One operation on previews with its arguments, as the REST API takes them.
#[derive(Debug)]
pub enum Request {
    List(ListFilter),
    Get(String),
    Wait(String, WaitQuery),
    Logs(String, LogQuery),
    Events(String),
    Create(Box<CreatePreview>, Option<String>),
    Redeploy(String, RedeployBody),
    Extend(String, ExtendBody),
    Stop(String),
    Wake(String),
    Reset(String, ResetBody),
    /// A Blueprint, by name.
    RefreshData(String),
    Delete(String),
    Token(String, TokenRequestBody),
    Share(String, ShareBody),
    /// A preview and the id of its share link to revoke.
    Unshare(String, String),
    HeaderSecret(String),
    /// A preview and the test to run in it.
    RunTest(String, String),
}

fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A query pair for each field of `v` that is set (the REST API's query parameters).
fn query_of<T: Serialize>(v: &T) -> Vec<(String, String)> {
    let Value::Object(map) = to_json(v) else {
        return Vec::new();
    };
    map.into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            (k, text)
        })
        .collect()
}

impl Request {
    /// The REST call this is.
    pub fn call(&self) -> Call<'static> {
        rest_call(self)
    }
}

fn rest_call(request: &Request) -> Call<'static> {
    let post =
        |name: &str, rest: &str, body: Value| Call::post(preview_path(name, rest), Some(body));
    match request {
        Request::List(filter) => Call {
            query: query_of(filter),
            ..Call::get("/previews".to_owned())
        },
        Request::Get(name) => Call::get(preview_path(name, "")),
        Request::Wait(name, q) => Call {
            query: query_of(q),
            // The server bounds the wait; the call allows the longest it may ask for.
            waits: Duration::from_secs(3600),
            ..Call::get(preview_path(name, "/wait"))
        },
        Request::Logs(name, q) => Call {
            query: query_of(q),
            ..Call::get(preview_path(name, "/logs"))
        },
        Request::Events(name) => Call::get(preview_path(name, "/events")),
        Request::Create(body, key) => Call {
            headers: key.iter().map(|k| ("idempotency-key", k.clone())).collect(),
            ..Call::post("/previews".to_owned(), Some(to_json(body)))
        },
        Request::Redeploy(name, body) => post(name, "/redeploy", to_json(body)),
        Request::Extend(name, body) => post(name, "/extend", to_json(body)),
        Request::Stop(name) => post(name, "/stop", json!({})),
        Request::Wake(name) => post(name, "/wake", json!({})),
        Request::Reset(name, body) => post(name, "/reset", to_json(body)),
        Request::RefreshData(blueprint) => Call::post(
            format!(
                "/blueprints/{}/data/refresh",
                percent_encoding::utf8_percent_encode(blueprint, SEGMENT)
            ),
            Some(json!({})),
        ),
        Request::Delete(name) => Call {
            method: Method::DELETE,
            ..Call::get(preview_path(name, ""))
        },
        Request::Token(name, body) => post(name, "/token", to_json(body)),
        Request::Share(name, body) => post(name, "/shares", to_json(body)),
        Request::Unshare(name, id) => Call {
            method: Method::DELETE,
            ..Call::get(preview_path(
                name,
                &format!(
                    "/shares/{}",
                    percent_encoding::utf8_percent_encode(id, SEGMENT)
                ),
            ))
        },
        Request::HeaderSecret(name) => post(name, "/header-secret", json!({})),
        Request::RunTest(name, test) => post(
            name,
            &format!(
                "/tests/{}",
                percent_encoding::utf8_percent_encode(test, SEGMENT)
            ),
            json!({}),
        ),
    }
}

impl Server {
    pub fn new(base: &str, token: Option<Secret>) -> Result<Self, reqwest::Error> {
        // rustls is built with ring only; make it the process's provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("sandcastle-cli/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            token,
            http,
            via: None,
        })
    }

    /// Calls made for interface `via` (the stdio MCP server: `Via::Mcp`) say so, and the server
    /// attributes their writes to it.
    #[must_use]
    pub fn relaying(mut self, via: Via) -> Self {
        self.via = Some(via);
        self
    }

    /// Make `call`; the JSON answer of a 2xx, or why there is none.
    pub async fn call(&self, call: Call<'_>) -> Result<Value, CallError> {
        let token = self.token.as_ref().ok_or(CallError::NoToken)?;
        let url = format!("{}/api/v1{}", self.base, call.path);
        let mut req = self
            .http
            .request(call.method, url)
            .bearer_auth(token.expose())
            .timeout(call.waits + SLACK)
            .query(&call.query);
        for (k, v) in &call.headers {
            req = req.header(*k, v);
        }
        if let Some(via) = self.via {
            req = req.header(VIA_HEADER, via.name());
        }
        if let Some(body) = &call.body {
            req = req.json(body);
        }
        let unreachable = |e: reqwest::Error| CallError::Unreachable {
            server: self.base.clone(),
            reason: without_url(&e),
        };
        let resp = req.send().await.map_err(unreachable)?;
        let status = resp.status().as_u16();
        let body: Option<Value> = resp.json().await.ok();
        answer(status, body).map_err(|e| match e {
            CallError::Foreign { status, .. } => CallError::Foreign {
                server: self.base.clone(),
                status,
            },
            e => e,
        })
    }
}

/// What a status and a (JSON) body mean.
fn answer(status: u16, body: Option<Value>) -> Result<Value, CallError> {
    let foreign = || CallError::Foreign {
        server: String::new(),
        status,
    };
    let body = body.ok_or_else(foreign)?;
    if (200..300).contains(&status) {
        return Ok(body);
    }
    let error = &body["error"];
    match (error["code"].as_str(), error["message"].as_str()) {
        // Shown as the server sent them, but never more than a short message's worth.
        (Some(code), Some(message)) => Err(CallError::Api {
            status,
            code: clip(code).into_owned(),
            message: clip(message).into_owned(),
        }),
        _ => Err(foreign()),
    }
}

/// reqwest's error text without the URL (which can carry a query the user typed) repeated.
fn without_url(e: &reqwest::Error) -> String {
    let mut reason = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        reason = s.to_string();
        source = s.source();
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ListFilter, LogQuery, WaitQuery};

    #[test]
    fn answers_are_the_json_or_the_apis_error() {
        assert_eq!(answer(200, Some(json!({"a": 1}))).unwrap(), json!({"a": 1}));
        let e = answer(
            404,
            Some(json!({"error": {"code": "preview_not_found", "message": "preview x does not exist"}})),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "preview_not_found: preview x does not exist");
        assert!(matches!(
            answer(502, None),
            Err(CallError::Foreign { status: 502, .. })
        ));
        assert!(matches!(
            answer(500, Some(json!({"oops": true}))),
            Err(CallError::Foreign { .. })
        ));
        let long = "x".repeat(100_000);
        let e = answer(
            422,
            Some(json!({"error": {"code": "invalid_name", "message": format!("name: {long}")}})),
        )
        .unwrap_err();
        assert!(e.to_string().len() < 600, "a server's long message is cut");
    }

    #[test]
    fn names_are_one_path_segment() {
        assert_eq!(
            preview_path("shop-pr-1", "/wait"),
            "/previews/shop-pr-1/wait"
        );
        assert_eq!(preview_path("a/b", ""), "/previews/a%2Fb");
    }

    #[test]
    fn requests_become_the_rest_calls() {
        let c = rest_call(&Request::List(ListFilter {
            repo: Some("acme/shop".into()),
            limit: Some(5),
            ..ListFilter::default()
        }));
        assert_eq!((c.method, c.path.as_str()), (Method::GET, "/previews"));
        assert_eq!(
            c.query,
            [
                ("limit".to_owned(), "5".to_owned()),
                ("repo".to_owned(), "acme/shop".to_owned())
            ]
        );
        let c = rest_call(&Request::Logs(
            "p".into(),
            LogQuery {
                tail_lines: Some(20),
                ..LogQuery::default()
            },
        ));
        assert_eq!(c.path, "/previews/p/logs");
        assert_eq!(c.query, [("tailLines".to_owned(), "20".to_owned())]);
        let c = rest_call(&Request::Wait("p".into(), WaitQuery::default()));
        assert!(c.query.is_empty(), "the server's default: {:?}", c.query);
        let stopped = WaitQuery {
            wanted: Some(crate::WaitFor::Stopped),
            ..WaitQuery::default()
        };
        let c = rest_call(&Request::Wait("p".into(), stopped));
        assert_eq!(c.query, [("for".to_owned(), "stopped".to_owned())]);
        let c = rest_call(&Request::Delete("p".into()));
        assert_eq!((c.method, c.path.as_str()), (Method::DELETE, "/previews/p"));
        let c = rest_call(&Request::RunTest("p".into(), "smoke".into()));
        assert_eq!(
            (c.method, c.path.as_str()),
            (Method::POST, "/previews/p/tests/smoke")
        );
    }
}
