//! Sandcastle gives every pull request its own isolated, short-lived copy of an application
//! stack on Kubernetes.
//!
//! Data flows through the modules in this order, each layer importing only those below it
//! (`tests/layers.rs` checks it; `docs/development.md` maps every file):
//! - [`cli`]: `render` and `demo`, the commands besides `serve`; [`serve`] assembles a running
//!   process; [`config`] is the only reader of flags and environment.
//! - [`http`]: the axum router — the GitHub webhook (pull request events written as desired
//!   state, `/preview` commands recorded, check runs), the REST API, health, metrics, preview
//!   pages; [`mcp`]: the MCP server (`/mcp`, and over stdio for `sandcastle mcp`).
//! - [`controller`]: the reconcile loop that makes each preview true (one verdict per pass,
//!   reported to GitHub once and saved once), carries out recorded commands, and housekeeping.
//! - [`agent`]: the operations on previews agents and people run (authenticated by TokenReview,
//!   authorized by SubjectAccessReview, audited), and a client of a server's API.
//! - [`github`]: webhook verification and parsing, triggers, the command parser, a repository's
//!   `.github/sandcastle.yml`, who may run commands, what people read, the App client.
//! - [`k8s`]: everything done through the Kubernetes API (desired-state writes, sources,
//!   apply, readiness, namespaces, Events, RBAC); [`probe`]: the HTTP readiness probe's request.
//! - [`domain`]: pure types and rules (identifiers, secrets, the clock, durations, naming,
//!   intents, transitions, lifecycle, guardrails, the clone plan); [`metrics`]: the Prometheus
//!   families the layers above count into.
//! - [`crd`]: the custom resources' types and label keys, importing nothing of Sandcastle's.
//! - `fake_github` (feature `demo`): a stand-in of GitHub's API for the demo and the tests.
//!
//! Every entry point writes desired state (a `PreviewEnvironment`, or a `PreviewCommand`); one
//! controller makes it true.

pub mod agent;
pub mod cli;
pub mod config;
pub mod controller;
pub mod crd;
pub mod domain;
#[cfg(feature = "demo")]
pub mod fake_github;
pub mod github;
pub mod http;
pub mod k8s;
pub mod mcp;
pub mod metrics;
pub mod probe;
pub mod serve;

#[cfg(test)]
mod hostile;
