//! Pure types and rules with no I/O: identifiers, durations, naming, templates, intents, the clone
//! plan and the guardrails of a preview namespace.

pub mod duration;
pub mod guardrails;
pub mod ids;
pub mod naming;
pub mod plan;
pub mod template;

pub use ids::{IdError, NamespaceName, PrNumber, RepoName, Sha};
