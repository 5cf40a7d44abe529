//! Everything Sandcastle does through the Kubernetes API: custom resource types, labels,
//! desired-state writes, reading blueprints, applying, readiness and namespaces.

pub mod apply;
pub mod crd;
pub mod labels;
pub mod namespace;
pub mod previews;
pub mod readiness;
pub mod source;
