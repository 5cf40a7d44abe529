//! Caps: a Blueprint's `maxPreviews`. A preview holds a slot from admission until it is torn
//! down (stopped and failed previews still hold theirs: their namespaces still use the cluster).
//! Requests without a slot wait in request order (creation time, then name). Over the cap,
//! `overCapacity: queue` keeps a request `Pending` with its place in line and starts it when a
//! slot frees; `reject` refuses it (phase `Failed`, no namespace) until a new commit asks again.
//! Decisions are serialized in-process (only the leader reconciles) and taken on a fresh list,
//! so two requests never take the last slot together — which is why a decision is written at
//! once, under the admission lock, rather than with the rest of the reconcile's verdict; a
//! preview admitted with only Sandcastle's own cluster to go to is placed by that same write
//! (`place::place_with_slot`). The Blueprint's status counts stay true.

pub(crate) mod line;

use line::Ask;
pub(crate) use line::Slot;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::error::Error;
use crate::report::Report;
use crate::verdict::{save, set_phase};
use sandcastle_crd::AuthorClass;
use sandcastle_crd::{
    Blueprint, OverCapacity, Phase, PreviewEnvironment, PreviewStatus, SlotState, SlotStatus,
};
use sandcastle_domain::authors;
use sandcastle_domain::lifecycle::{self, Admission};
use sandcastle_domain::ordinal::ordinal;
use sandcastle_github::text::statuses::fit_description;
use sandcastle_kube::status;
use std::collections::BTreeMap;

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

/// Make sure `pe` holds a slot of `bp`, or record in `st` why it waits or was refused. A new
/// decision is written before the admission lock is released (`persisted` follows).
///
/// Decisions are taken in batches: every preview asking while a decision is under way waits
/// for the next one, which lists the previews once and decides for all of them in line order,
/// as one by one would have (a burst of N previews costs a few lists, not N lists of N).
pub(crate) async fn admit(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    bp: &Blueprint,
    st: &mut PreviewStatus,
    persisted: &mut Option<PreviewStatus>,
    ctx: &Context,
) -> Result<Slot, Error> {
    if sandcastle_domain::pool::is_member(pe) {
        return Ok(pool_slot(pe, bp, st, ctx));
    }
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
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let mut asking = pe.clone();
    asking.status = persisted.clone();
    ctx.admission.ask(Ask {
        pe: asking,
        bp: bp.clone(),
        st: st.clone(),
        answer: tx,
    });
    let answer = tokio::select! {
        biased;
        answer = &mut rx => answer,
        decide = ctx.admission.decide.lock() => match rx.try_recv() {
            Ok(answer) => Ok(answer),
            // Not decided by the batch before: this one decides.
            Err(_) => {
                decide_batch(api, ctx, decide).await?;
                rx.await
            }
        },
    };
    let answer = answer.map_err(|_| Error::Transient("a slot decision was dropped".into()))?;
    let (decided, slot) = answer?;
    *st = decided.clone();
    *persisted = Some(decided);
    Ok(slot)
}

/// A warm pool's preview holds a slot of the pool, not of `maxPreviews` (the pool keeper makes
/// no more than `pool.size` of them): admitted at once, and placed.
fn pool_slot(
    pe: &PreviewEnvironment,
    bp: &Blueprint,
    st: &mut PreviewStatus,
    ctx: &Context,
) -> Slot {
    if st.slot.as_ref().map(|s| s.state) != Some(SlotState::Held) {
        let cap = bp.spec.pool.as_ref().map_or(0, |p| p.size);
        st.slot = Some(SlotStatus {
            state: SlotState::Held,
            position: None,
            in_use: cap,
            cap,
            generation: None,
            since: Time(ctx.clock.now()),
        });
        crate::phases::place::place_with_slot(pe, bp, st, ctx);
    }
    Slot::Held
}

/// Decide for every preview asking, on one fresh list; write each decision (at once, in
/// parallel) before the lock is released, then the Blueprints' counts.
async fn decide_batch(
    api: &Api<PreviewEnvironment>,
    ctx: &Context,
    mut decide: tokio::sync::MutexGuard<'_, u64>,
) -> Result<(), Error> {
    let asks = ctx.admission.take();
    let all = match api.list(&ListParams::default()).await {
        Ok(all) => all,
        Err(e) => {
            let why = e.to_string();
            for ask in asks {
                let _ = ask
                    .answer
                    .send(Err(Error::Transient(format!("listing previews: {why}"))));
            }
            return Err(e.into());
        }
    };
    *decide += 1;
    let seq = Some(*decide);
    let now = ctx.clock.now();
    let mut by_blueprint: BTreeMap<String, Vec<Ask>> = BTreeMap::new();
    for ask in asks {
        by_blueprint
            .entry(ask.pe.spec.blueprint.clone())
            .or_default()
            .push(ask);
    }
    let mut writes = Vec::new();
    let mut tallies = Vec::new();
    for (blueprint, asks) in by_blueprint {
        // A warm pool's previews count against the pool, never against `maxPreviews`.
        let peers: Vec<&PreviewEnvironment> = all
            .items
            .iter()
            .filter(|p| p.spec.blueprint == blueprint && !sandcastle_domain::pool::is_member(p))
            .collect();
        let bp = asks[0].bp.clone();
        let (decided, tally) = decide_in_line(&peers, asks, now);
        tallies.push((bp, tally));
        writes.extend(decided);
    }
    futures::future::join_all(writes.into_iter().map(|(ask, mut st, slot)| async move {
        if matches!(slot, Slot::Held) {
            crate::phases::place::place_with_slot(&ask.pe, &ask.bp, &mut st, ctx);
        }
        let result = save(api, &ask.pe, &st, &ctx.echoes)
            .await
            .map(|()| (st, slot));
        let _ = ask.answer.send(result.map_err(Error::from));
    }))
    .await;
    // The counts are not part of the decision: the next one need not wait for them.
    drop(decide);
    for (bp, (holders, waiting)) in tallies {
        counts(ctx, &bp, holders, waiting, seq).await;
    }
    Ok(())
}

type Decided = (Ask, PreviewStatus, Slot);

/// Decide for `asks` (previews of one Blueprint) as if one at a time in line order, each on
/// the list `peers` as the decisions before it left it. Returns each decision and the
/// Blueprint's previews holding a slot and waiting after them.
fn decide_in_line(
    peers: &[&PreviewEnvironment],
    asks: Vec<Ask>,
    now: jiff::Timestamp,
) -> (Vec<Decided>, (u32, u32)) {
    let holders = peers.iter().filter(|p| holds(p)).count();
    let mut line: Vec<&PreviewEnvironment> = peers.iter().copied().filter(|p| waits(p)).collect();
    line.sort_by_key(|p| (p.creation_timestamp().map(|t| t.0), p.name_any()));
    let place = |name: &str| {
        line.iter()
            .position(|p| p.name_any() == name)
            .unwrap_or(line.len())
    };
    let mut asks: Vec<(usize, Ask)> = asks
        .into_iter()
        .map(|a| (place(&a.pe.name_any()), a))
        .collect();
    asks.sort_by_key(|(index, _)| *index);
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let (mut admitted, mut left) = (0, 0);
    let mut admitted_of: BTreeMap<AuthorClass, u32> = BTreeMap::new();
    let mut out = Vec::with_capacity(asks.len());
    for (index, ask) in asks {
        let mut st = ask.st.clone();
        let in_line = index < line.len();
        let class = ask.pe.spec.author_class;
        if let (Some(class), Some(cap)) = (class, authors::cap(&ask.bp.spec, class)) {
            let of_class = |p: &PreviewEnvironment| p.spec.author_class == Some(class);
            let held = peers.iter().filter(|p| holds(p) && of_class(p)).count();
            let in_use = count(held) + admitted_of.get(&class).copied().unwrap_or(0);
            if in_use >= cap && st.rollout.is_none() {
                let before = &line[..index.min(line.len())];
                let ahead = before.iter().filter(|p| of_class(p)).count();
                let slot = queue_for_class(&ask.pe, &mut st, class, in_use, cap, count(ahead), now);
                out.push((ask, st, slot));
                continue;
            }
        }
        // Those decided before it in this batch are ahead of it and have left the line.
        let ahead = count(index.saturating_sub(left));
        let slot = decide_one(
            &ask.pe,
            &ask.bp,
            &mut st,
            count(holders + admitted),
            ahead,
            now,
        );
        let stays = st
            .slot
            .as_ref()
            .is_some_and(|s| s.state == SlotState::Queued);
        if in_line && !stays {
            left += 1;
        }
        if matches!(slot, Slot::Held) {
            admitted += 1;
            if let Some(class) = class {
                *admitted_of.entry(class).or_default() += 1;
            }
        }
        out.push((ask, st, slot));
    }
    let waiting = count(line.len().saturating_sub(left));
    (out, (count(holders + admitted), waiting))
}

/// Decide `pe`'s slot into `st`, with `holders` previews holding one and `ahead` waiting
/// before it.
fn decide_one(
    pe: &PreviewEnvironment,
    bp: &Blueprint,
    st: &mut PreviewStatus,
    holders: u32,
    ahead: u32,
    now: jiff::Timestamp,
) -> Slot {
    let cap = bp.spec.max_previews;
    let queue = bp.spec.over_capacity == OverCapacity::Queue;
    // A preview rolled out before slots were recorded already has its namespace: it keeps it.
    let decision = if st.rollout.is_some() {
        Admission::Admitted
    } else {
        lifecycle::admission(cap, holders, ahead, queue)
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
    match decision {
        Admission::Admitted => {
            st.slot = Some(slot(SlotState::Held, None, holders + 1));
            Slot::Held
        }
        Admission::Queued {
            position,
            in_use,
            cap,
        } => {
            let message = format!(
                "{} in line; {in_use}/{cap} previews of {} in use",
                ordinal(u64::from(position)),
                pe.spec.blueprint
            );
            wait_in_line(pe, st, (position, in_use, cap), message, now);
            let why = format!(
                "Waiting for a free slot ({in_use}/{cap} previews of {} in use)",
                pe.spec.blueprint
            );
            Slot::Waiting(Some(Report::Queued(why)))
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
            Slot::Waiting(Some(report))
        }
    }
}

/// Queue `pe` behind its author class's cap (`authors.<class>.maxPreviews`): `in_use` of `cap`
/// previews of the class hold a slot, `ahead` of its class wait before it. It stays in the
/// Blueprint's line meanwhile, so it starts as soon as one of its class goes.
fn queue_for_class(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    class: AuthorClass,
    in_use: u32,
    cap: u32,
    ahead: u32,
    now: jiff::Timestamp,
) -> Slot {
    let position = ahead + 1;
    let message = format!(
        "{} in line for {}; {in_use}/{cap} of their previews of {} in use (authors.{}.maxPreviews)",
        ordinal(u64::from(position)),
        class.words(),
        pe.spec.blueprint,
        class.field()
    );
    wait_in_line(pe, st, (position, in_use, cap), message, now);
    let why = format!(
        "Waiting for a free slot ({in_use}/{cap} previews by {} in use)",
        class.words()
    );
    Slot::Waiting(Some(Report::Queued(why)))
}

/// Record in `st` that `pe` waits in line: `(position, in_use, cap)`, phase `Pending` with
/// `message`. The slot (and its `since`) is left as it is while its place has not changed.
fn wait_in_line(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    (position, in_use, cap): (u32, u32, u32),
    message: String,
    now: jiff::Timestamp,
) {
    let keep = st.slot.as_ref().is_some_and(|s| {
        s.state == SlotState::Queued && s.position == Some(position) && s.in_use == in_use
    });
    if !keep {
        st.slot = Some(SlotStatus {
            state: SlotState::Queued,
            position: Some(position),
            in_use,
            cap,
            generation: None,
            since: Time(now),
        });
    }
    set_phase(st, Phase::Pending, message, now, Some(&pe.spec.sha));
}

/// A torn-down or deleted preview gives its slot (or place in line) back: cleared from `st`.
/// Returns whether it held one; once saved, [`poke_queue`] wakes the queue behind it.
pub(crate) fn release(st: &mut PreviewStatus) -> bool {
    st.slot.take().is_some()
}

/// Look at the queue behind a released slot again, and update the Blueprint's counts.
pub(crate) async fn poke_queue(pe: &PreviewEnvironment, ctx: &Context) {
    // A warm pool's preview held one of the pool's slots: nobody waits in line for it.
    let (Some(store), false) = (&ctx.previews, sandcastle_domain::pool::is_member(pe)) else {
        return;
    };
    let peers: Vec<_> = store
        .state()
        .into_iter()
        .filter(|p| p.spec.blueprint == pe.spec.blueprint && p.name_any() != pe.name_any())
        // A warm pool's previews hold the pool's slots, never `maxPreviews`'.
        .filter(|p| !sandcastle_domain::pool::is_member(p))
        .collect();
    let mut queued = 0;
    for p in peers.iter().filter(|p| waits(p)) {
        queued += 1;
        ctx.poke(p);
    }
    let active = peers.iter().filter(|p| holds(p)).count();
    if let Ok(Some(bp)) = ctx.blueprint(&pe.spec.blueprint).await {
        counts(
            ctx,
            &bp,
            u32::try_from(active).unwrap_or(u32::MAX),
            queued,
            None,
        )
        .await;
    }
}

/// Keep `status.activePreviews` and `status.queuedPreviews` of the Blueprint true: as decision
/// `seq` left them (skipped if a later decision's counts were written already), or as the cache
/// says (`None`, after a release).
async fn counts(ctx: &Context, bp: &Blueprint, active: u32, queued: u32, seq: Option<u64>) {
    let mut counted = ctx.admission.counted.lock().await;
    if let Some(seq) = seq {
        if seq < *counted {
            return;
        }
        *counted = seq;
    }
    // Written even when `bp` shows these counts: it may come from the watch cache, a moment
    // behind the last write (the API server stores nothing for an unchanged apply).
    let api: Api<Blueprint> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let counts = json!({"activePreviews": active, "queuedPreviews": queued});
    if let Err(e) = status::apply(&api, &bp.name_any(), COUNTS_MANAGER, &counts).await {
        tracing::warn!(blueprint = %bp.name_any(), error = %e, "updating the preview counts failed");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn preview(name: &str, created: &str, slot: Option<SlotState>) -> PreviewEnvironment {
        let status = slot.map(|state| {
            json!({"slot": {"state": state, "inUse": 1, "cap": 1, "since": "2026-12-01T00:00:00Z"}})
        });
        serde_json::from_value(json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEnvironment",
            "metadata": {"name": name, "creationTimestamp": created, "generation": 1},
            "spec": {"blueprint": "shop", "repository": "acme/shop", "ref": "f",
                     "sha": "a".repeat(40), "requestedBy": {"kind": "github-user", "name": "al"}},
            "status": status,
        }))
        .unwrap()
    }

    fn blueprint(cap: u32, over: &str) -> Blueprint {
        serde_json::from_value(json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
            "metadata": {"name": "shop"},
            "spec": {"source": {"namespace": "staging"}, "repositories": ["acme/shop"],
                     "maxPreviews": cap, "overCapacity": over},
        }))
        .unwrap()
    }

    fn ask(pe: &PreviewEnvironment, bp: &Blueprint) -> Ask {
        Ask {
            pe: pe.clone(),
            bp: bp.clone(),
            st: pe.status.clone().unwrap_or_default(),
            answer: tokio::sync::oneshot::channel().0,
        }
    }

    fn outcome(decided: &[Decided]) -> Vec<(String, SlotState, Option<u32>, u32)> {
        decided
            .iter()
            .map(|(a, st, _)| {
                let slot = st.slot.as_ref().unwrap();
                (a.pe.name_any(), slot.state, slot.position, slot.in_use)
            })
            .collect()
    }

    #[test]
    fn an_author_class_over_its_own_cap_queues_while_others_start() {
        let mut bp = blueprint(10, "queue");
        bp.spec.authors.agents.max_previews = Some(1);
        let agent = |name: &str, created: &str, slot| {
            let mut p = preview(name, created, slot);
            p.spec.author_class = Some(AuthorClass::Agent);
            p
        };
        let held = agent("held", "2026-12-01T10:00:00Z", Some(SlotState::Held));
        let a1 = agent("a1", "2026-12-01T10:01:00Z", None);
        let a2 = agent("a2", "2026-12-01T10:02:00Z", None);
        let mut m = preview("m", "2026-12-01T10:03:00Z", None);
        m.spec.author_class = Some(AuthorClass::Member);
        let peers = [&held, &a1, &a2, &m];
        let asks = [&a1, &a2, &m].map(|p| ask(p, &bp)).into();
        let (decided, tally) = decide_in_line(&peers, asks, jiff::Timestamp::UNIX_EPOCH);
        use SlotState::{Held, Queued};
        assert_eq!(
            outcome(&decided),
            [
                ("a1".to_owned(), Queued, Some(1), 1),
                ("a2".to_owned(), Queued, Some(2), 1),
                ("m".to_owned(), Held, None, 2),
            ],
            "agents wait behind their own cap; the member behind them starts"
        );
        assert_eq!(
            decided[0].1.message.as_deref(),
            Some(
                "1st in line for coding agents; 1/1 of their previews of shop in use (authors.agents.maxPreviews)"
            )
        );
        assert_eq!(tally, (2, 2));
    }

    #[test]
    fn a_batch_decides_in_line_order_as_one_by_one_would() {
        let bp = blueprint(3, "queue");
        let held = preview("held", "2026-12-01T10:00:00Z", Some(SlotState::Held));
        // Asked in another order than they came.
        let e = preview("e", "2026-12-01T10:05:00Z", None);
        let b = preview("b", "2026-12-01T10:01:00Z", None);
        let d = preview("d", "2026-12-01T10:04:00Z", None);
        let c = preview("c", "2026-12-01T10:02:00Z", None);
        // Waiting too, but not in this batch: it keeps its place ahead of d and e.
        let x = preview("x", "2026-12-01T10:03:00Z", None);
        let peers = [&held, &e, &b, &d, &c, &x];
        let asks = [&e, &d, &b, &c].map(|p| ask(p, &bp)).into();
        let (decided, tally) = decide_in_line(&peers, asks, jiff::Timestamp::UNIX_EPOCH);
        use SlotState::{Held, Queued};
        assert_eq!(
            outcome(&decided),
            [
                ("b".to_owned(), Held, None, 2),
                ("c".to_owned(), Held, None, 3),
                ("d".to_owned(), Queued, Some(2), 3),
                ("e".to_owned(), Queued, Some(3), 3),
            ]
        );
        // Held: held, b, c; waiting: x, d, e.
        assert_eq!(tally, (3, 3));
    }

    #[test]
    fn refused_previews_leave_the_line() {
        let bp = blueprint(1, "reject");
        let a = preview("a", "2026-12-01T10:00:00Z", None);
        let b = preview("b", "2026-12-01T10:01:00Z", None);
        let c = preview("c", "2026-12-01T10:02:00Z", None);
        let peers = [&a, &b, &c];
        let asks = [&c, &b, &a].map(|p| ask(p, &bp)).into();
        let (decided, tally) = decide_in_line(&peers, asks, jiff::Timestamp::UNIX_EPOCH);
        use SlotState::{Held, Rejected};
        assert_eq!(
            outcome(&decided),
            [
                ("a".to_owned(), Held, None, 1),
                ("b".to_owned(), Rejected, None, 1),
                ("c".to_owned(), Rejected, None, 1),
            ]
        );
        assert!(
            decided[1]
                .1
                .message
                .as_deref()
                .unwrap()
                .contains("1/1 previews")
        );
        assert_eq!(tally, (1, 0));
    }
}
