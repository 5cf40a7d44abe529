//! `sandcastle mcp`: an MCP server on stdin/stdout for agents that run locally (Claude Code,
//! Cursor, Codex start it as a command), carrying out each tool call through a Sandcastle
//! server's REST API with the token it was given. Logs go to stderr; stdout is the protocol's.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use rmcp::ServiceExt;

use crate::agent::remote::Server;
use crate::config::McpArgs;
use crate::domain::clock::Clock;
use crate::mcp::{Backend, Confirmations, Mcp};

/// Serve MCP on stdio until the client goes away.
pub async fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.token.is_some(),
        "no token: pass --token or set SANDCASTLE_TOKEN (e.g. `kubectl create token NAME -n NAMESPACE`)"
    );
    let server = Server::new(&args.server, args.token).context("setting up the HTTP client")?;
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
