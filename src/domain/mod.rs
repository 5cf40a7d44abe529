//! Pure types and rules with no I/O: identifiers, durations, naming, intents and the clone plan.

pub mod duration;
pub mod guardrails;
pub mod ids;
pub mod naming;
pub mod plan;
pub mod template;

pub use ids::{IdError, NamespaceName, PrNumber, RepoName, Sha};
