//! The MCP server proper (an rmcp `ServerHandler`): lists the tools on offer, carries out tool
//! calls through the [`Backend`] (refusals become tool errors `code: message`), sends progress
//! while `wait_for_preview` waits, runs the two steps of `destroy`, and offers each preview as
//! the resource `sandcastle://previews/{name}`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::backend::{Backend, Refusal};
use super::confirm::{Confirmations, VALID_FOR_SECONDS};
use super::diagnose;
use super::tools::{Request, Tool};
use sandcastle_agent::remote::Request as Api;
use sandcastle_agent::{Caller, ListFilter, LogQuery};
use sandcastle_domain::clock::Clock;
use sandcastle_domain::quote::short;

const URI_PREFIX: &str = "sandcastle://previews/";
/// How often a waiting `wait_for_preview` reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// One MCP session's server. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Mcp {
    pub backend: Backend,
    /// Whether write tools are offered (`--mcp-write`).
    pub writes: bool,
    pub confirmations: Arc<Confirmations>,
    pub clock: Clock,
}

/// The caller `/mcp` authenticated for this request (absent over stdio).
fn caller(ctx: &RequestContext<RoleServer>) -> Option<Caller> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<Caller>().cloned())
}

fn refused(r: &Refusal) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: {}",
        r.code, r.message
    ))]);
    result.structured_content = Some(json!({"error": {"code": r.code, "message": r.message}}));
    result
}

impl Mcp {
    async fn call(
        &self,
        request: Request,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Value, Refusal> {
        let who = caller(ctx);
        match &request {
            Request::Api(wait @ Api::Wait(..)) => self.wait(who.as_ref(), wait, ctx).await,
            Request::Api(api) => self.backend.run(who.as_ref(), api).await,
            Request::Diagnose(name) => self.diagnose(who.as_ref(), name).await,
            Request::Destroy(name, confirm) => {
                self.destroy(who.as_ref(), name, confirm.as_deref()).await
            }
        }
    }

    /// The wait, with a progress notification at once and every few seconds while it lasts.
    async fn wait(
        &self,
        who: Option<&Caller>,
        request: &Api,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Value, Refusal> {
        let token = ctx.meta.get_progress_token();
        let started = tokio::time::Instant::now();
        let progress = |message: String| {
            let token = token.clone();
            async move {
                if let Some(token) = token {
                    let waited = started.elapsed().as_secs_f64();
                    let note = ProgressNotificationParam::new(token, waited).with_message(message);
                    let _ = ctx.peer.notify_progress(note).await;
                }
            }
        };
        progress("waiting".to_owned()).await;
        let work = self.backend.run(who, request);
        tokio::pin!(work);
        let mut tick = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
        loop {
            tokio::select! {
                answer = &mut work => return answer,
                _ = tick.tick() => {
                    let waited = started.elapsed().as_secs();
                    progress(format!("still waiting ({waited}s so far)")).await;
                }
            }
        }
    }

    async fn diagnose(&self, who: Option<&Caller>, name: &str) -> Result<Value, Refusal> {
        let preview = self.backend.run(who, &Api::Get(name.to_owned())).await?;
        let events = self
            .backend
            .run(who, &Api::Events(name.to_owned()))
            .await
            .unwrap_or(Value::Null);
        let failing = diagnose::failing_workloads(&preview);
        let mut logs = Vec::new();
        for workload in failing.iter().take(3) {
            let q = LogQuery {
                workload: Some(workload.clone()),
                tail_lines: Some(diagnose::TAIL_LINES),
                ..LogQuery::default()
            };
            let lines = self.backend.run(who, &Api::Logs(name.to_owned(), q)).await;
            logs.push(match lines {
                Ok(v) => json!({"workload": workload, "entries": v["entries"]}),
                Err(e) => {
                    json!({"workload": workload, "error": format!("{}: {}", e.code, e.message)})
                }
            });
        }
        Ok(diagnose::report(&preview, &events, logs))
    }

    async fn destroy(
        &self,
        who: Option<&Caller>,
        name: &str,
        confirm: Option<&str>,
    ) -> Result<Value, Refusal> {
        let user = who.map_or("sandcastle mcp", |c| c.user.as_str());
        let now = self.clock.now();
        let Some(token) = confirm else {
            self.backend.may_delete(who, name).await?;
            return Ok(json!({
                "confirm": self.confirmations.issue(user, name, now),
                "expiresInSeconds": VALID_FOR_SECONDS,
                "message": format!("nothing deleted yet: call destroy again with this `confirm` within a minute to tear {name} down"),
            }));
        };
        self.confirmations
            .check(token, user, name, now)
            .map_err(|e| Refusal::new("confirmation_invalid", e.to_string()))?;
        self.backend.run(who, &Api::Delete(name.to_owned())).await
    }
}

impl ServerHandler for Mcp {
    fn get_info(&self) -> InitializeResult {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        let writes = if self.writes {
            "Write tools are on; destroy takes two calls."
        } else {
            "This server is read-only: write tools are off (--mcp-write)."
        };
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("sandcastle", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Sandcastle preview environments: list, inspect, wait for, diagnose and read the logs of previews (a copy of an application stack per pull request or task). {writes} Access follows the caller's Kubernetes RBAC."
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = Tool::offered(self.writes)
            .into_iter()
            .map(Tool::describe)
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(tool) = Tool::from_name(&request.name) else {
            return Ok(refused(&Refusal::new(
                "unknown_tool",
                format!(
                    "no tool {}; list the tools to see which there are",
                    short(&request.name)
                ),
            ))
            .into());
        };
        if tool.writes() && !self.writes {
            return Ok(refused(&Refusal::new(
                "writes_disabled",
                format!(
                    "{} changes previews, and this server is read-only; an operator turns writes on with --mcp-write",
                    tool.name()
                ),
            ))
            .into());
        }
        let parsed = match tool.request(request.arguments) {
            Ok(r) => r,
            Err(e) => return Ok(refused(&Refusal::new("invalid_arguments", e)).into()),
        };
        Ok(match self.call(parsed, &ctx).await {
            Ok(v) => CallToolResult::structured(v),
            Err(r) => refused(&r),
        }
        .into())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let template = ResourceTemplate::new(format!("{URI_PREFIX}{{name}}"), "preview")
            .with_description(
                "A preview environment's state: phase, URL, commits, services, expiry, history",
            )
            .with_mime_type("application/json");
        Ok(ListResourceTemplatesResult::with_all_items(vec![template]))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let filter = ListFilter {
            limit: Some(500),
            ..ListFilter::default()
        };
        let page = self
            .backend
            .run(caller(&ctx).as_ref(), &Api::List(filter))
            .await
            .map_err(|r| McpError::internal_error(format!("{}: {}", r.code, r.message), None))?;
        let resources = page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str())
            .map(|name| {
                Resource::new(format!("{URI_PREFIX}{name}"), name)
                    .with_mime_type("application/json")
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let Some(name) = request.uri.strip_prefix(URI_PREFIX) else {
            return Err(McpError::resource_not_found(
                format!(
                    "{} is not a Sandcastle preview (sandcastle://previews/NAME)",
                    short(&request.uri)
                ),
                None,
            ));
        };
        let preview = self
            .backend
            .run(caller(&ctx).as_ref(), &Api::Get(name.to_owned()))
            .await
            .map_err(|r| {
                McpError::resource_not_found(format!("{}: {}", r.code, r.message), None)
            })?;
        let text = serde_json::to_string_pretty(&preview).unwrap_or_default();
        let contents = ResourceContents::TextResourceContents {
            uri: request.uri.clone(),
            mime_type: Some("application/json".to_owned()),
            text,
            meta: None,
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}
