//! The line of previews asking for a slot: the admission lock (one decision at a time, each
//! numbered), the asks waiting for the next decision, and what a decision answers (`Slot`).
//! Data only, below the phase that decides (`capacity`), so that the context can hold it.

use sandcastle_crd::{Blueprint, PreviewEnvironment, PreviewStatus};

use crate::error::Error;
use crate::report::Report;

/// Slot decisions, one at a time, each numbered; and the number of the last decision whose
/// counts reached the Blueprint. Counts are written after the decision lock is released (the
/// next decision need not wait for them), so an older decision's counts, late, are skipped
/// rather than written over a newer one's.
#[derive(Default)]
pub(crate) struct Admissions {
    pub(super) decide: tokio::sync::Mutex<u64>,
    pub(super) counted: tokio::sync::Mutex<u64>,
    pub(super) asking: std::sync::Mutex<Vec<Ask>>,
}

/// What the reconcile should do after asking for a slot.
pub(crate) enum Slot {
    Held,
    /// Queued or refused (`st` says so); GitHub should show this.
    Waiting(Option<Report>),
}

/// A preview asking for a slot, with its status as last written (`pe.status`) and as the
/// reconcile has it (`st`).
pub(crate) struct Ask {
    pub(super) pe: PreviewEnvironment,
    pub(super) bp: Blueprint,
    pub(super) st: PreviewStatus,
    pub(super) answer: tokio::sync::oneshot::Sender<Result<(PreviewStatus, Slot), Error>>,
}

impl Admissions {
    pub(super) fn ask(&self, ask: Ask) {
        self.asking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(ask);
    }

    pub(super) fn take(&self) -> Vec<Ask> {
        std::mem::take(
            &mut *self
                .asking
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}
