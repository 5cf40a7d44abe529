//! Everything Sandcastle does through the Kubernetes API: custom resource types, labels,
//! desired-state writes, reading blueprints, applying, readiness and diagnosis, namespaces, Events on previews,
//! a stopped preview's route to the waking page, the access Sandcastle itself needs (RBAC) and the
//! fence on preview tokens, and the
//! clusters it works in (its own and those registered as Secrets).

pub mod app_secret;
pub mod apply;
pub mod clusters;
pub mod crd_install;
pub mod diagnose;
pub mod events;
pub mod fence;
pub mod namespace;
pub mod previews;
pub mod prune;
pub mod rbac;
pub mod readiness;
pub mod snapshots;
pub mod source;
pub mod status;
pub mod test_jobs;
pub mod tls;
pub mod wake_route;
pub mod watched;
