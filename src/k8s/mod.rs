//! Everything Sandcastle does through the Kubernetes API: custom resource types, labels,
//! reading blueprints, applying, readiness, teardown and guardrails.

pub mod crd;
pub mod labels;
