//! Sandcastle's commands besides `serve`: `render` (the plan of a preview, printed) and `demo`
//! (the whole loop on a local control plane against the GitHub stand-in).

#[cfg(feature = "demo")]
pub mod demo;
pub mod render;
