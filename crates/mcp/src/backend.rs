//! Where a tool call is carried out: in this process, as the `agent` operation for the caller
//! `/mcp` authenticated, or by a Sandcastle server's REST API with the token `sandcastle mcp`
//! was given. Both answer the REST API's JSON, and refuse with its stable codes.

use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

use sandcastle_agent::remote::{CallError, Request, Server};
use sandcastle_agent::{Agent, AgentError, Caller, Operation};

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
    pub async fn run(&self, caller: Option<&Caller>, request: &Request) -> Result<Value, Refusal> {
        match self {
            Self::Local(agent) => {
                let caller = caller.ok_or_else(|| {
                    Refusal::new("unauthenticated", "send a Kubernetes bearer token")
                })?;
                local(agent, caller, request).await.map_err(Refusal::from)
            }
            Self::Remote(server) => Ok(server.call(request.call()).await?),
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
        Request::Get(name) => json_of(&agent.get(caller, name).await?),
        Request::Wait(name, q) => json_of(&agent.wait(caller, name, q).await?),
        Request::RunTest(name, test) => json_of(&agent.run_test(caller, name, test).await?),
        Request::Logs(name, q) => json_of(&agent.logs(caller, name, q).await?),
        Request::Events(name) => json_of(&agent.events(caller, name).await?),
        Request::Create(body, key) => json_of(&agent.create(caller, body, key.as_deref()).await?.0),
        Request::Redeploy(name, body) => {
            json_of(&agent.redeploy(caller, name, body.commit.as_deref()).await?)
        }
        Request::Extend(name, body) => json_of(&agent.extend(caller, name, &body.duration).await?),
        Request::Stop(name) => json_of(&agent.stop(caller, name).await?),
        Request::Wake(name) => json_of(&agent.wake(caller, name).await?),
        Request::Reset(name, body) => json_of(&agent.reset(caller, name, body).await?),
        Request::RefreshData(blueprint) => json_of(&agent.refresh_data(caller, blueprint).await?),
        Request::Delete(name) => json_of(&agent.delete(caller, name).await?),
        Request::Token(name, body) => json_of(&agent.token(caller, name, body).await?),
        Request::Share(name, body) => json_of(&agent.share(caller, name, body).await?),
        Request::Unshare(name, id) => json_of(&agent.unshare(caller, name, id).await?),
        Request::HeaderSecret(name) => json_of(&agent.header_secret(caller, name).await?),
    })
}
