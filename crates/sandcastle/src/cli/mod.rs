//! Sandcastle's commands besides `serve`: `render` (the plan of a preview, printed), `previews`
//! (the REST API from a shell), `mcp` (an MCP server on stdio) and `setup` (the GitHub App from
//! its manifest). `demo` is in the development build only (`cargo run -- demo`).

pub mod mcp;
pub mod previews;
pub mod render;
pub mod setup;

mod run;

pub use run::{init_tracing, main};
