//! Pure types and rules with no I/O: identifiers, secrets, durations, the clock, naming,
//! templates, intents, the clone plan, the guardrails of a preview namespace and the lifecycle
//! rules (expiry, idle, slots, running time, wake on visit), and where a new preview is placed.

pub mod authors;
pub mod clock;
pub mod data;
pub mod diagnosis;
pub mod duration;
pub mod edge;
pub mod guardrails;
pub mod ids;
pub mod intent;
pub mod lifecycle;
pub mod naming;
pub mod ordinal;
pub mod paths;
pub mod placement;
pub mod plan;
pub mod pool;
pub mod preview;
pub mod probe;
pub mod redact;
pub mod running;
pub mod schedule;
mod secret;
pub mod template;
pub mod test_runs;
pub mod transitions;
pub mod wake;

pub use ids::{BranchName, IdError, NamespaceName, PrNumber, RepoName, Sha};
pub use sandcastle_crd::quote;
pub use secret::Secret;
