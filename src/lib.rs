//! Sandcastle gives every pull request its own isolated, short-lived copy of an application
//! stack on Kubernetes.
//!
//! Data flows through the modules in this order:
//! - [`config`]: the only reader of flags and environment.
//! - [`http`]: the axum router — GitHub webhook (pull request events, `/preview` commands, check
//!   runs), health, metrics, preview pages.
//! - [`github`]: webhook verification and parsing, events to intents, commands and who may run
//!   them, a repository's `.github/sandcastle.yml`, what people read, the App client.
//! - [`domain`]: pure types and rules (identifiers, naming, durations, the clone plan,
//!   guardrails).
//! - [`k8s`]: custom resources and everything done through the Kubernetes API (desired-state
//!   writes, sources, apply, readiness, namespaces).
//! - [`controller`]: the reconcile loop that makes each preview true and reports it to GitHub
//!   (deployment statuses and the sticky comment).
//! - [`metrics`]: the Prometheus metrics that `http`, the GitHub client and `controller` count
//!   into, served at `GET /metrics`.
//! - [`app`]: assembles a running process from those parts.
//! - [`render`]: `sandcastle render`, the plan of a preview printed without applying it.
//!
//! Every entry point writes desired state (a `PreviewEnvironment`); one controller makes it true.

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
pub mod metrics;
pub mod serve;
