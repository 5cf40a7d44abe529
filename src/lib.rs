//! Sandcastle gives every pull request its own isolated, short-lived copy of an application
//! stack on Kubernetes.
//!
//! Data flows through the modules in this order:
//! - [`config`]: the only reader of flags and environment.
//! - [`domain`]: pure types and rules (identifiers, naming, durations, intents, the clone plan).
//! - [`github`]: the GitHub App client and a local stand-in for GitHub used by tests and the demo.
//! - [`k8s`]: custom resources and everything done through the Kubernetes API.
//!
//! Every entry point writes desired state (a `PreviewEnvironment`); one controller makes it true.

pub mod config;
pub mod domain;
pub mod github;
pub mod k8s;
