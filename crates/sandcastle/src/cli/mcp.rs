//! `sandcastle mcp`: an MCP server on stdin/stdout for agents that run locally (Claude Code,
//! Cursor, Codex start it as a command), carrying out each tool call through a Sandcastle
//! server's REST API with the token it was given; its writes are attributed to MCP. Logs go to
//! stderr; stdout is the protocol's. Without a token it says why on stderr and as the error of
//! the client's first request (which is what clients show), then exits.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, DiscoverResult, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};

use crate::agent::Via;
use crate::agent::remote::{CallError, Server};
use clap::Args;

use crate::domain::Secret;
use crate::domain::clock::Clock;
use crate::mcp::{Backend, Confirmations, Mcp};

/// `sandcastle mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Sandcastle's address (its `--listen`, or the Service or Ingress in front of it).
    #[arg(
        long,
        env = "SANDCASTLE_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,

    /// Kubernetes bearer token to call the API with.
    #[arg(long, env = "SANDCASTLE_TOKEN", hide_env_values = true)]
    pub token: Option<Secret>,

    /// Offer write tools too (the token's RBAC still decides each call).
    #[arg(long, env = "SANDCASTLE_MCP_WRITE")]
    pub write: bool,
}

/// Serve MCP on stdio until the client goes away.
pub async fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    if args.token.is_none() {
        let reason = CallError::NoToken.to_string();
        eprintln!("sandcastle mcp: {reason}");
        return refuse(reason).await;
    }
    let server = Server::new(&args.server, args.token)
        .context("setting up the HTTP client")?
        .relaying(Via::Mcp);
    let mcp = Mcp {
        backend: Backend::Remote(Arc::new(server)),
        writes: args.write,
        confirmations: Arc::new(Confirmations::random()),
        clock: Clock::system(),
    };
    let running = mcp
        .serve(rmcp::transport::io::stdio())
        .await
        .context("starting the MCP session on stdio")?;
    running.waiting().await.context("serving MCP on stdio")?;
    Ok(ExitCode::SUCCESS)
}

/// Answer the client's requests with `reason` until it gives up (or asked to initialize).
async fn refuse(reason: String) -> anyhow::Result<ExitCode> {
    if let Ok(running) = (Unusable { reason })
        .serve(rmcp::transport::io::stdio())
        .await
    {
        let _ = running.waiting().await;
    }
    Ok(ExitCode::FAILURE)
}

/// The server that cannot work: every request is answered with why.
#[derive(Debug, Clone)]
struct Unusable {
    reason: String,
}

impl Unusable {
    fn error(&self) -> McpError {
        McpError::invalid_request(self.reason.clone(), None)
    }
}

impl ServerHandler for Unusable {
    async fn initialize(
        &self,
        _request: InitializeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        Err(self.error())
    }

    async fn discover(&self, _ctx: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        Err(self.error())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Err(self.error())
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        Err(self.error())
    }
}
