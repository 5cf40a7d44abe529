//! Carrying out pull request events, recorded by the webhook as `PreviewEvent`s: each pull
//! request's events one at a time, in GitHub's order (`updated_at`, then the order they were
//! recorded), each by `act` — the repository's configuration, the triggers, the changed files,
//! the desired-state writes. What GitHub cannot give now is asked again after a growing pause,
//! the record saying what it waits for (and so does each preview of the pull request); after
//! [`GIVE_UP`] the event fails with the reason. A finished record is deleted after [`KEEP`];
//! until then a redelivery of its delivery is recognised by its name.

mod act;

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::controller::Action;

use super::context::Context;
use super::error::Error;
use sandcastle_crd::labels::{FIELD_MANAGER, PR, REPO};
use sandcastle_crd::{EventState, PreviewEvent, PreviewEventStatus};
use sandcastle_domain::RepoName;
use sandcastle_domain::naming::repo_label_value;
use sandcastle_domain::transitions::Outcome;
use sandcastle_kube::status;

/// How long a finished event's record is kept.
pub const KEEP: Duration = Duration::from_secs(3600);
/// How long GitHub may stay unreachable before an event is given up.
pub const GIVE_UP: Duration = Duration::from_secs(3600);
/// The longest pause between two tries while GitHub does not answer.
const MAX_PAUSE: Duration = Duration::from_secs(60);

pub(super) async fn reconcile(
    cached: Arc<PreviewEvent>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let api: Api<PreviewEvent> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    // A record is finished once and for good: the cache saying so is enough.
    if let Some(at) = cached.status.as_ref().and_then(|s| s.finished_at.as_ref()) {
        return forget_when_kept(&api, &cached, at, &ctx).await;
    }
    // One not finished as far as the cache knows is read again: it may have just finished.
    let Some(record) = api.get_opt(&cached.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let mut st = record.status.clone().unwrap_or_default();
    if let Some(at) = &st.finished_at {
        return forget_when_kept(&api, &record, at, &ctx).await;
    }
    if let Some(earlier) = earlier_unfinished(&api, &record, &ctx).await? {
        // The pull request's earlier events come first; the earlier one finishing pokes this
        // one (the requeue is a safety net).
        tracing::debug!(event = %record.name_any(), earlier, "waiting for an earlier event");
        return Ok(Action::requeue(Duration::from_secs(30)));
    }
    let ev = match sandcastle_github::event::from_record(&record.spec.event) {
        Ok(ev) => ev,
        Err(why) => {
            st.message = Some(format!("the record cannot be read: {why}"));
            return finish(&api, &record, st, EventState::Failed, &ctx).await;
        }
    };
    // Asked when the webhook received it (nanoseconds: many arrive within a second), whenever
    // it is carried out.
    let asked = Some(record.spec.received_ns)
        .filter(|ns| *ns > 0)
        .and_then(|ns| jiff::Timestamp::from_nanosecond(i128::from(ns)).ok())
        .unwrap_or_else(|| ctx.clock.now());
    match act::carry_out(&ctx, &ev, &record.spec.delivery, asked).await {
        Ok(outcome) => {
            // A preview this event created carries nothing to take back.
            let created: Vec<&str> = (outcome.previews.iter())
                .filter(|w| w.result == Outcome::Created.as_str())
                .map(|w| w.preview.as_str())
                .collect();
            act::waiting_said(&ctx, &ev, None, &created).await;
            st.outcome = Some(outcome);
            st.message = None;
            finish(&api, &record, st, EventState::Done, &ctx).await
        }
        Err(act::Later::Kube(e)) => Err(e.into()),
        Err(act::Later::Retry(why)) => {
            act::waiting_said(&ctx, &ev, Some(&why), &[]).await;
            retry(&api, &record, st, why, &ctx).await
        }
    }
}

pub(super) fn error_policy(record: Arc<PreviewEvent>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(event = %record.name_any(), error = %err, "carrying out a pull request event failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// Where an event stands in its pull request's order: GitHub's time (whole seconds), then the
/// pull request's `opened` before anything else of its second (it is always the first event),
/// then when the webhook received it (nanoseconds: GitHub delivers a pull request's events in
/// order, so two of the same second are carried out as they came), then its name.
fn order_key(e: &PreviewEvent) -> (i64, bool, i64, String) {
    (
        e.spec.updated_at.0.as_second(),
        e.spec.action != "opened",
        e.spec.received_ns,
        e.name_any(),
    )
}

/// The name of an event of the same pull request that goes before `record` and is not finished:
/// none when the controller's cache knows none (an earlier event was recorded, and so seen by
/// the watch, before this one; a finished one never becomes unfinished), otherwise as a fresh
/// list says (the cache may not show its finish yet).
async fn earlier_unfinished(
    api: &Api<PreviewEvent>,
    record: &PreviewEvent,
    ctx: &Context,
) -> Result<Option<String>, kube::Error> {
    let mine = order_key(record);
    let earlier = |other: &PreviewEvent| {
        same_pull_request(other, record)
            && order_key(other) < mine
            && other
                .status
                .as_ref()
                .is_none_or(|s| s.finished_at.is_none())
    };
    if let Some(cached) = cached_records(ctx)
        && !cached.iter().any(|o| earlier(o))
    {
        return Ok(None);
    }
    let Some(selector) = pull_request_selector(record) else {
        return Ok(None);
    };
    let list = api.list(&ListParams::default().labels(&selector)).await?;
    Ok(list
        .items
        .iter()
        .find(|other| earlier(other))
        .map(ResourceExt::name_any))
}

/// The records the controller's cache holds, once it is filled.
fn cached_records(ctx: &Context) -> Option<Vec<Arc<PreviewEvent>>> {
    let store = ctx.records.as_ref()?;
    let filled = store
        .wait_until_ready()
        .now_or_never()
        .is_some_and(|r| r.is_ok());
    filled.then(|| store.state())
}

fn same_pull_request(a: &PreviewEvent, b: &PreviewEvent) -> bool {
    a.spec.repository == b.spec.repository && a.spec.pull_request == b.spec.pull_request
}

/// The label selector of `record`'s pull request's records.
fn pull_request_selector(record: &PreviewEvent) -> Option<String> {
    let repo = RepoName::new(&record.spec.repository).ok()?;
    Some(format!(
        "{REPO}={},{PR}={}",
        repo_label_value(&repo),
        record.spec.pull_request
    ))
}

/// GitHub could not give what the event needs: try again after a pause that grows with the
/// attempts (at most [`MAX_PAUSE`]), or give up once the event is older than [`GIVE_UP`].
async fn retry(
    api: &Api<PreviewEvent>,
    record: &PreviewEvent,
    mut st: PreviewEventStatus,
    why: String,
    ctx: &Context,
) -> Result<Action, Error> {
    tracing::warn!(event = %record.name_any(), attempt = st.attempts + 1, error = %why, "a pull request event waits for GitHub");
    st.attempts += 1;
    st.message = Some(format!("waiting for GitHub: {why}"));
    let age: Duration = ctx
        .clock
        .now()
        .duration_since(record.spec.received_at.0)
        .try_into()
        .unwrap_or_default();
    if age >= GIVE_UP {
        st.message = Some(format!("gave up waiting for GitHub: {why}"));
        return finish(api, record, st, EventState::Failed, ctx).await;
    }
    st.state = Some(EventState::WaitingForGitHub);
    save(api, record, &st).await?;
    Ok(Action::requeue(pause(st.attempts)))
}

/// The pause before try `attempts + 1`: 1 s, 2 s, 4 s, … up to [`MAX_PAUSE`].
fn pause(attempts: u32) -> Duration {
    Duration::from_secs(2u64.saturating_pow(attempts.saturating_sub(1).min(10))).min(MAX_PAUSE)
}

async fn finish(
    api: &Api<PreviewEvent>,
    record: &PreviewEvent,
    mut st: PreviewEventStatus,
    state: EventState,
    ctx: &Context,
) -> Result<Action, Error> {
    st.state = Some(state);
    st.finished_at = Some(Time(ctx.clock.now()));
    let writes = st
        .outcome
        .as_ref()
        .map(|o| serde_json::to_string(&o.previews).unwrap_or_default())
        .unwrap_or_default();
    tracing::info!(target: "audit", action = %record.spec.action, repo = %record.spec.repository, pr = record.spec.pull_request, result = ?state, previews = %writes, delivery = %record.spec.delivery, "pull request event carried out");
    save(api, record, &st).await?;
    poke_next(api, record, ctx).await;
    Ok(Action::requeue(KEEP))
}

/// Look at once at the pull request's events that waited for `record` (those the cache knows;
/// one it does not know yet comes to its own reconcile when it does).
async fn poke_next(api: &Api<PreviewEvent>, record: &PreviewEvent, ctx: &Context) {
    let Some(pokes) = &ctx.event_pokes else {
        return;
    };
    let others: Vec<Arc<PreviewEvent>> = match cached_records(ctx) {
        Some(cached) => cached,
        None => {
            let Some(selector) = pull_request_selector(record) else {
                return;
            };
            let Ok(list) = api.list(&ListParams::default().labels(&selector)).await else {
                return;
            };
            list.items.into_iter().map(Arc::new).collect()
        }
    };
    for other in others.iter().filter(|o| {
        same_pull_request(o, record)
            && o.name_any() != record.name_any()
            && o.status.as_ref().is_none_or(|s| s.finished_at.is_none())
    }) {
        let _ = pokes.unbounded_send(kube::runtime::reflector::ObjectRef::from_obj(&**other));
    }
}

/// A finished record goes [`KEEP`] after it finished.
async fn forget_when_kept(
    api: &Api<PreviewEvent>,
    record: &PreviewEvent,
    finished: &Time,
    ctx: &Context,
) -> Result<Action, Error> {
    let age: Duration = ctx
        .clock
        .now()
        .duration_since(finished.0)
        .try_into()
        .unwrap_or_default();
    if age < KEEP {
        return Ok(Action::requeue(KEEP - age));
    }
    match api
        .delete(&record.name_any(), &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(r)) if r.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::await_change())
}

async fn save(
    api: &Api<PreviewEvent>,
    record: &PreviewEvent,
    st: &PreviewEventStatus,
) -> Result<(), kube::Error> {
    if record.status.as_ref() == Some(st) {
        return Ok(());
    }
    status::apply(api, &record.name_any(), FIELD_MANAGER, st).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_grows_to_a_minute() {
        let pauses: Vec<u64> = (1..=9).map(|a| pause(a).as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
