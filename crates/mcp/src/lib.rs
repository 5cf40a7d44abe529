//! The MCP server: Sandcastle's operations on previews as Model Context Protocol tools and
//! resources, for agents in Claude Code, Cursor, Codex and the like. Served over Streamable HTTP
//! at `/mcp` (authenticated and authorized like the REST API) and over stdio by
//! `sandcastle mcp` (which calls a Sandcastle server's REST API with a token). Built on rmcp,
//! the official Rust SDK. Read-only unless writes are turned on, and never more than the
//! caller's RBAC allows: each tool call is an `agent` operation.

mod backend;
mod confirm;
mod diagnose;
mod http;
mod server;
mod sessions;
pub mod tools;

pub use backend::Backend;
pub use confirm::Confirmations;
pub use http::router;
pub use server::Mcp;
pub use sessions::SessionLimits;
