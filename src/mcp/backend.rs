//! Where a tool call is carried out: in this process, as the `agent` operation for the caller
//! `/mcp` authenticated, or by a Sandcastle server's REST API with the token `sandcastle mcp`
//! was given. Both answer the REST API's JSON, and refuse with its stable codes.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde::Serialize;
use serde_json::{Value, json};

use super::tools::Request;
use crate::agent::remote::{Call, CallError, Server, preview_path};
use crate::agent::{Agent, AgentError, Caller, Operation};

/// A refusal, as a tool error says it: `code: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: String,
    pub message: String,
}

impl Refusal {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

impl From<AgentError> for Refusal {
    fn from(e: AgentError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

impl From<CallError> for Refusal {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Api { code, message, .. } => Self { code, message },
            CallError::NoToken => Self::new("unauthenticated", e.to_string()),
            e => Self::new("sandcastle_unavailable", e.to_string()),
        }
    }
}

/// Where calls go.
#[derive(Clone)]
pub enum Backend {
    /// This process's operations (the caller comes with each call).
    Local(Box<Agent>),
    /// A Sandcastle server's REST API, with its token.
    Remote(Arc<Server>),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local(_) => f.write_str("Backend::Local"),
            Self::Remote(server) => f.debug_tuple("Backend::Remote").field(server).finish(),
        }
    }
}

fn json_of<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

impl Backend {
    /// Run `request` for `caller` (absent for a remote backend: its token is the caller).
    /// `Diagnose` and the confirmation step of `Destroy` are the server's, not here.
    pub async fn run(&self, caller: Option<&Caller>, request: &Request) -> Result<Value, Refusal> {
        match self {
            Self::Local(agent) => {
                let caller = caller.ok_or_else(|| {
                    Refusal::new("unauthenticated", "send a Kubernetes bearer token")
                })?;
                local(agent, caller, request).await.map_err(Refusal::from)
            }
            Self::Remote(server) => Ok(server.call(remote(request)).await?),
        }
    }

    /// Whether the caller may delete `name` (the first step of `destroy`): the preview as it is.
    pub async fn may_delete(&self, caller: Option<&Caller>, name: &str) -> Result<Value, Refusal> {
        match (self, caller) {
            (Self::Local(agent), Some(caller)) => Ok(json_of(
                &agent.check(caller, Operation::Delete, name).await?,
            )),
            // A server answers whether a deletion is allowed only by deleting; its RBAC decides at
            // the second step.
            _ => self.run(caller, &Request::Get(name.to_owned())).await,
        }
    }
}

async fn local(agent: &Agent, caller: &Caller, request: &Request) -> Result<Value, AgentError> {
    Ok(match request {
        Request::List(filter) => json_of(&agent.list(caller, filter).await?),
        Request::Get(name) | Request::Diagnose(name) => json_of(&agent.get(caller, name).await?),
        Request::Wait(name, q) => json_of(
            &agent
                .wait(caller, name, q.wanted, q.timeout.as_deref())
                .await?,
        ),
        Request::Logs(name, q) => json_of(&agent.logs(caller, name, q).await?),
        Request::Events(name) => json_of(&agent.events(caller, name).await?),
        Request::Create(body, key) => json_of(&agent.create(caller, body, key.as_deref()).await?.0),
        Request::Redeploy(name, body) => {
            json_of(&agent.redeploy(caller, name, body.commit.as_deref()).await?)
        }
        Request::Extend(name, body) => json_of(&agent.extend(caller, name, &body.duration).await?),
        Request::Stop(name) => json_of(&agent.stop(caller, name).await?),
        Request::Wake(name) => json_of(&agent.wake(caller, name).await?),
        Request::Reset(name) => json_of(&agent.reset(caller, name).await?),
        Request::Destroy(name, _) => json_of(&agent.delete(caller, name).await?),
        Request::Token(name, body) => json_of(&agent.token(caller, name, body).await?),
    })
}

/// A query pair for each field of `v` that is set (the REST API's query parameters).
fn query_of<T: Serialize>(v: &T) -> Vec<(String, String)> {
    let Value::Object(map) = json_of(v) else {
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

/// The REST call a request is.
fn remote(request: &Request) -> Call<'static> {
    let post =
        |name: &str, rest: &str, body: Value| Call::post(preview_path(name, rest), Some(body));
    match request {
        Request::List(filter) => Call {
            query: query_of(filter),
            ..Call::get("/previews".to_owned())
        },
        Request::Get(name) | Request::Diagnose(name) => Call::get(preview_path(name, "")),
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
            ..Call::post("/previews".to_owned(), Some(json_of(body)))
        },
        Request::Redeploy(name, body) => post(name, "/redeploy", json_of(body)),
        Request::Extend(name, body) => post(name, "/extend", json_of(body)),
        Request::Stop(name) => post(name, "/stop", json!({})),
        Request::Wake(name) => post(name, "/wake", json!({})),
        Request::Reset(name) => post(name, "/reset", json!({})),
        Request::Destroy(name, _) => Call {
            method: Method::DELETE,
            ..Call::get(preview_path(name, ""))
        },
        Request::Token(name, body) => post(name, "/token", json_of(body)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{ListFilter, LogQuery, WaitQuery};

    #[test]
    fn requests_become_the_rest_calls() {
        let c = remote(&Request::List(ListFilter {
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
        let c = remote(&Request::Logs(
            "p".into(),
            LogQuery {
                tail_lines: Some(20),
                ..LogQuery::default()
            },
        ));
        assert_eq!(c.path, "/previews/p/logs");
        assert_eq!(c.query, [("tailLines".to_owned(), "20".to_owned())]);
        let c = remote(&Request::Wait("p".into(), WaitQuery::default()));
        assert_eq!(c.query, [("for".to_owned(), "ready".to_owned())]);
        let c = remote(&Request::Destroy("p".into(), Some("x".into())));
        assert_eq!((c.method, c.path.as_str()), (Method::DELETE, "/previews/p"));
    }
}
