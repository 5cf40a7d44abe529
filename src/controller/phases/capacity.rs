//! Caps: a Blueprint's `maxPreviews`. A preview holds a slot from admission until it is torn
//! down (stopped and failed previews still hold theirs: their namespaces still use the cluster).
//! Requests without a slot wait in request order (creation time, then name). Over the cap,
//! `overCapacity: queue` keeps a request `Pending` with its place in line and starts it when a
//! slot frees; `reject` refuses it (phase `Failed`, no namespace) until a new commit asks again.
//! Decisions are serialized in-process (only the leader reconciles) and taken on a fresh list,
//! so two requests never take the last slot together — which is why a decision is written at
//! once, under the admission lock, rather than with the rest of the reconcile's verdict. The
//! Blueprint's status counts stay true.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::report::Report;
use crate::controller::verdict::{save, set_phase};
use crate::crd::{
    Blueprint, OverCapacity, Phase, PreviewEnvironment, PreviewStatus, SlotState, SlotStatus,
};
use crate::domain::lifecycle::{self, Admission};
use crate::github::text::statuses::fit_description;
use crate::k8s::status;

/// Field manager of the Blueprint status counts.
const COUNTS_MANAGER: &str = "sandcastle-capacity";

fn live(p: &PreviewEnvironment) -> bool {
    p.spec.teardown.is_none() && p.meta().deletion_timestamp.is_none()
}

fn slot_state(p: &PreviewEnvironment) -> Option<SlotState> {
    p.status.as_ref()?.slot.as_ref().map(|s| s.state)
}

/// Holds a slot of its Blueprint.
pub(crate) fn holds(p: &PreviewEnvironment) -> bool {
    live(p) && slot_state(p) == Some(SlotState::Held)
}

/// Refused for the commit it asks for now.
fn refused(p: &PreviewEnvironment) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.slot.as_ref())
        .is_some_and(|s| s.state == SlotState::Rejected && s.generation == p.meta().generation)
}

/// Waits for a slot (queued, or not looked at yet).
pub(crate) fn waits(p: &PreviewEnvironment) -> bool {
    live(p) && !holds(p) && !refused(p)
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// What the reconcile should do after asking for a slot.
pub(crate) enum Slot {
    Held,
    /// Queued or refused (`st` says so); GitHub should show this.
    Waiting(Option<Report>),
}

/// Make sure `pe` holds a slot of `bp`, or record in `st` why it waits or was refused. A new
/// decision is written before the admission lock is released (`persisted` follows).
pub(crate) async fn admit(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    bp: &Blueprint,
    st: &mut PreviewStatus,
    persisted: &mut Option<PreviewStatus>,
    ctx: &Context,
) -> Result<Slot, Error> {
    match st.slot.as_ref().map(|s| s.state) {
        Some(SlotState::Held) => return Ok(Slot::Held),
        Some(SlotState::Rejected) if refused(pe) => {
            // The refusal stands: GitHub keeps showing it (posted again only if it was missed).
            let why = fit_description(st.message.as_deref().unwrap_or("over maxPreviews"));
            let report = Report::Failure {
                why,
                rollout: false,
            };
            return Ok(Slot::Waiting(Some(report)));
        }
        _ => {}
    }
    let now = ctx.clock.now();
    let _decide = ctx.admission.lock().await;
    let all = api.list(&ListParams::default()).await?;
    let peers: Vec<&PreviewEnvironment> = all
        .items
        .iter()
        .filter(|p| p.spec.blueprint == pe.spec.blueprint)
        .collect();
    let holders = u32::try_from(peers.iter().filter(|p| holds(p)).count()).unwrap_or(u32::MAX);
    let mut line: Vec<&PreviewEnvironment> = peers.into_iter().filter(|p| waits(p)).collect();
    line.sort_by_key(|p| (p.creation_timestamp().map(|t| t.0), p.name_any()));
    let name = pe.name_any();
    let index = line
        .iter()
        .position(|p| p.name_any() == name)
        .unwrap_or(line.len());
    let waiting = u32::try_from(line.len()).unwrap_or(u32::MAX);
    let index = u32::try_from(index).unwrap_or(u32::MAX);
    let cap = bp.spec.max_previews;
    let queue = bp.spec.over_capacity == OverCapacity::Queue;
    // A preview rolled out before slots were recorded already has its namespace: it keeps it.
    let decision = if st.rollout.is_some() {
        Admission::Admitted
    } else {
        lifecycle::admission(cap, holders, index, queue)
    };
    let slot = |state, position, in_use| SlotStatus {
        state,
        position,
        in_use,
        cap,
        generation: (state == SlotState::Rejected)
            .then_some(pe.meta().generation)
            .flatten(),
        since: Time(now),
    };
    let result = match decision {
        Admission::Admitted => {
            st.slot = Some(slot(SlotState::Held, None, holders + 1));
            commit(api, pe, st, persisted).await?;
            counts(ctx, bp, holders + 1, waiting.saturating_sub(1)).await;
            return Ok(Slot::Held);
        }
        Admission::Queued {
            position,
            in_use,
            cap,
        } => {
            let message = format!(
                "{} in line; {in_use}/{cap} previews of {} in use",
                ordinal(position),
                pe.spec.blueprint
            );
            let keep = st.slot.as_ref().is_some_and(|s| {
                s.state == SlotState::Queued && s.position == Some(position) && s.in_use == in_use
            });
            if !keep {
                st.slot = Some(slot(SlotState::Queued, Some(position), in_use));
            }
            set_phase(st, Phase::Pending, message, now, Some(&pe.spec.sha));
            let why = format!(
                "Waiting for a free slot ({in_use}/{cap} previews of {} in use)",
                pe.spec.blueprint
            );
            (holders, waiting, Report::Queued(why))
        }
        Admission::Rejected { in_use, cap } => {
            let message = format!(
                "not deployed: {in_use}/{cap} previews of blueprint {} are in use (maxPreviews); \
                 close another preview or ask an admin to raise the limit",
                pe.spec.blueprint
            );
            st.slot = Some(slot(SlotState::Rejected, None, in_use));
            set_phase(st, Phase::Failed, message.clone(), now, Some(&pe.spec.sha));
            let report = Report::Failure {
                why: fit_description(&message),
                rollout: false,
            };
            (holders, waiting.saturating_sub(1), report)
        }
    };
    commit(api, pe, st, persisted).await?;
    counts(ctx, bp, result.0, result.1).await;
    Ok(Slot::Waiting(Some(result.2)))
}

/// Write the decision in `st` now (it is `pe`'s status from here on).
async fn commit(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    st: &PreviewStatus,
    persisted: &mut Option<PreviewStatus>,
) -> Result<(), Error> {
    let mut current = pe.clone();
    current.status = persisted.clone();
    save(api, &current, st).await?;
    *persisted = Some(st.clone());
    Ok(())
}

/// A torn-down or deleted preview gives its slot (or place in line) back: cleared from `st`.
/// Returns whether it held one; once saved, [`poke_queue`] wakes the queue behind it.
pub(crate) fn release(st: &mut PreviewStatus) -> bool {
    st.slot.take().is_some()
}

/// Look at the queue behind a released slot again, and update the Blueprint's counts.
pub(crate) async fn poke_queue(pe: &PreviewEnvironment, ctx: &Context) {
    let Some(store) = &ctx.previews else {
        return;
    };
    let peers: Vec<_> = store
        .state()
        .into_iter()
        .filter(|p| p.spec.blueprint == pe.spec.blueprint && p.name_any() != pe.name_any())
        .collect();
    let mut queued = 0;
    for p in peers.iter().filter(|p| waits(p)) {
        queued += 1;
        if let Some(pokes) = &ctx.pokes {
            let _ = pokes.unbounded_send(ObjectRef::from_obj(&**p));
        }
    }
    let active = peers.iter().filter(|p| holds(p)).count();
    let blueprints: Api<Blueprint> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    if let Ok(Some(bp)) = blueprints.get_opt(&pe.spec.blueprint).await {
        counts(ctx, &bp, u32::try_from(active).unwrap_or(u32::MAX), queued).await;
    }
}

/// Keep `status.activePreviews` and `status.queuedPreviews` of the Blueprint true.
async fn counts(ctx: &Context, bp: &Blueprint, active: u32, queued: u32) {
    let now = bp.status.as_ref();
    if now.is_some_and(|s| s.active_previews == active && s.queued_previews == queued) {
        return;
    }
    let api: Api<Blueprint> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let counts = json!({"activePreviews": active, "queuedPreviews": queued});
    if let Err(e) = status::apply(&api, &bp.name_any(), COUNTS_MANAGER, &counts).await {
        tracing::warn!(blueprint = %bp.name_any(), error = %e, "updating the preview counts failed");
    }
}
