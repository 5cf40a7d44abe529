//! Sandcastle gives every pull request its own isolated, short-lived copy of an application
//! stack on Kubernetes. This crate is the server people deploy: its command line ([`cli`], with
//! each command's flags beside it), the process a running Sandcastle is ([`serve`]), and the
//! crates below it, re-exported under the names of the layers they are.
//!
//! The workspace's crates are the layers, each depending only on those below it
//! (docs/development.md draws the map):
//! - [`http`] (the webhook, REST API, dashboard, health, metrics, wake page) and [`mcp`] (the MCP
//!   server); [`controller`] (the reconcile loop, recorded commands, housekeeping);
//! - [`agent`]: the operations on previews agents and people run, authorized and audited;
//! - [`github`] (GitHub's API and what people read), [`k8s`] (Kubernetes' API) and [`probe`]
//!   (the HTTP readiness request);
//! - [`domain`] (pure rules and types) and [`metrics`] (the Prometheus families);
//! - [`crd`]: the custom resources' types, importing nothing of Sandcastle's.
//!
//! The GitHub stand-in and the demo are crates of their own (`sandcastle-fake-github`,
//! `sandcastle-demo`), outside this one: nothing of them is in the server.
//!
//! Every entry point writes desired state (a `PreviewEnvironment`, or a `PreviewCommand`); one
//! controller makes it true.

pub mod cli;
pub mod serve;

pub use sandcastle_agent as agent;
pub use sandcastle_controller as controller;
pub use sandcastle_crd as crd;
pub use sandcastle_domain as domain;
pub use sandcastle_github as github;
pub use sandcastle_http as http;
pub use sandcastle_kube as k8s;
pub use sandcastle_mcp as mcp;
pub use sandcastle_metrics as metrics;
pub use sandcastle_probe as probe;
pub use sandcastle_render as render;
