//! Sandcastle's commands besides `serve`: `render` (the plan of a preview, printed), `previews`
//! (the REST API from a shell), `mcp` (an MCP server on stdio), `setup` (the GitHub App from its
//! manifest) and `demo` (the whole loop on a local control plane against the GitHub stand-in).

#[cfg(feature = "demo")]
pub mod demo;
pub mod mcp;
pub mod previews;
pub mod render;
pub mod setup;
