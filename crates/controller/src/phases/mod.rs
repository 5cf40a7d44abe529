//! What a reconcile does to a preview, one phase of its life at a time: the guardrails before a
//! rollout (`admit`: expiry, a deleted Blueprint, the slot under `maxPreviews` in `capacity`,
//! the cluster it lives in in `place`,
//! stop and wake in `idle`, off-hours schedules in `schedule`, the reply before expiry in `warn`), the rollout itself (`rollout`, its `steps`, the `checks` it waits
//! for, the pre-delete `hooks` it applies suspended, the Blueprint's tests it runs once Ready
//! in `test_runs`), and the teardown (`teardown`). Each returns a verdict; the reconcile reports
//! and saves it.

pub(super) mod admit;
pub(super) mod adopt;
pub(super) mod capacity;
pub(super) mod check_answers;
pub(super) mod checks;
pub(super) mod data;
pub(super) mod diagnoses;
pub(super) mod hooks;
pub(super) mod idle;
pub(super) mod marks;
pub(crate) mod place;
pub(super) mod probe;
pub(super) mod reset;
pub(super) mod rollout;
pub(super) mod schedule;
pub(super) mod steps;
pub(super) mod teardown;
pub(super) mod test_runs;
pub(super) mod warn;
