//! When each deploying preview was last diagnosed: data below the phase that diagnoses
//! (`rollout`), so that the context can hold it (kept in `marks`).

use std::time::{Duration, Instant};

/// How often a preview's waiting workloads are diagnosed at most while it deploys, and how long
/// after a step is applied they are first: a pass comes with each status change of its
/// workloads (in a burst of 100 previews, three a preview, each listing pods and Events or
/// ReplicaSets), and pods that simply start are ready within it.
const DIAGNOSE_EVERY: Duration = Duration::from_secs(5);

/// When each deploying preview was last diagnosed (or its step applied), by the system's
/// monotonic clock; forgotten with the preview.
#[derive(Debug, Default, Clone)]
pub(crate) struct Diagnoses(super::marks::Marks);

impl Diagnoses {
    /// Whether `preview` may be diagnosed `now` (noted as diagnosed if so).
    pub(crate) fn due(&self, preview: &str, now: Instant) -> bool {
        self.0.with(preview, |at| {
            let due = at.is_none_or(|at| now.saturating_duration_since(at) >= DIAGNOSE_EVERY);
            if due {
                *at = Some(now);
            }
            due
        })
    }

    /// A step of `preview` was applied `now`: its pods are first looked at a while later.
    pub(crate) fn applied(&self, preview: &str, now: Instant) {
        self.0.with(preview, |at| *at = Some(now));
    }

    pub(crate) fn forget(&self, preview: &str) {
        self.0.forget(preview);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_is_diagnosed_a_while_after_its_step_is_applied_and_at_most_that_often() {
        let d = Diagnoses::default();
        let t0 = Instant::now();
        assert!(d.due("p", t0), "never diagnosed");
        assert!(!d.due("p", t0 + Duration::from_secs(1)));
        assert!(d.due("p", t0 + DIAGNOSE_EVERY));
        d.applied("p", t0 + Duration::from_secs(10));
        assert!(!d.due("p", t0 + Duration::from_secs(11)), "just applied");
        assert!(d.due("p", t0 + Duration::from_secs(10) + DIAGNOSE_EVERY));
        d.forget("p");
        assert!(d.due("p", t0 + Duration::from_secs(16)), "forgotten");
    }
}
