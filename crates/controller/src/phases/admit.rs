//! The guardrails every reconcile passes before a rollout, in this order: an expired preview is
//! marked for teardown (`spec.teardown.reason: expired`, then torn down like a closed PR); a
//! preview whose Blueprint was deleted fails with a clear message until it expires; a preview
//! without a slot under `maxPreviews` waits or is refused (`capacity`); one without a cluster is
//! placed in one, or waits for one (`place`), and one whose cluster does not answer says so and
//! waits; a preview asked to stop
//! (`spec.stopped`), idle for `stopAfterIdle` or outside its Blueprint's working hours
//! (`schedule`) has its Ingresses and HTTPRoutes sent to the waking page when
//! wake on visit is on (else to a Service with no endpoints, so nothing routes to pods that are
//! gone), then, once the ingress controller has had time to take that in, is scaled to zero
//! (`idle`); and one that was stopped and no longer should be is
//! woken before the rollout goes on (its Ingresses come back once it is Ready). A Blueprint whose
//! schedule cannot be read fails its previews, naming the field. Time comes from the clock; each
//! preview is requeued at its next deadline (a schedule's instants among them), so nothing polls
//! every preview.
//!
//! Activity is the `sandcastle.dev/last-activity` annotation, written by the entry points
//! (pushes, commands, API calls) and only read here: the controller's own writes never count.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::capacity::{self, Slot};
use super::place::{self, Placed};
use super::{idle, schedule, warn};
use crate::context::Context;
use crate::error::Error;
use crate::report::Report;
use crate::verdict::{Next, Verdict, set_phase};
use sandcastle_crd::labels::LAST_ACTIVITY;
use sandcastle_crd::{Blueprint, DEFAULT_TTL, Phase, PreviewEnvironment, PreviewStatus};
use sandcastle_domain::duration;
use sandcastle_domain::schedule::Decision;
use sandcastle_domain::wake::Parking;
use sandcastle_domain::wake::routes::RouteParking;
use sandcastle_domain::{authors, lifecycle};
use sandcastle_github::text::statuses::fit_description;
use sandcastle_kube::clusters::Cluster;
use sandcastle_kube::wake_route;
use std::sync::Arc;

/// Requeues land this long after a deadline, so the deadline has surely passed.
const SLACK: Duration = Duration::from_millis(500);
/// How often a queued preview looks at the queue again when nothing wakes it sooner.
const QUEUE_RECHECK: Duration = Duration::from_secs(300);

/// What the guardrails decided.
pub(crate) enum Guard {
    /// Nothing more to do in this reconcile but what the verdict says.
    Done(Box<Verdict>),
    /// Roll out, from this status, with the preview's Blueprint, in its cluster.
    Proceed(Box<(PreviewStatus, Blueprint, Arc<Cluster>)>),
}

/// The instants that drive a preview's lifecycle.
struct Times {
    expires_at: Timestamp,
    last_activity: Timestamp,
    stop_after_idle: Duration,
}

fn times(pe: &PreviewEnvironment, bp: Option<&Blueprint>, now: Timestamp) -> Times {
    let created = pe.creation_timestamp().map_or(now, |t| t.0);
    let class = pe.spec.author_class;
    let ttl = bp.map_or(DEFAULT_TTL.get(), |b| {
        authors::ttl(&b.spec, class, b.spec.ttl.get())
    });
    let expires_at = pe
        .spec
        .expires_at
        .as_ref()
        .map_or_else(|| lifecycle::hard_limit(created, ttl), |t| t.0);
    let last_activity = pe
        .annotations()
        .get(LAST_ACTIVITY)
        .and_then(|s| s.parse::<Timestamp>().ok())
        .map_or(created, |t| t.max(created));
    Times {
        expires_at,
        last_activity,
        // Without its Blueprint a preview is never stopped, only expired.
        stop_after_idle: bp.map_or(Duration::ZERO, |b| authors::stop_after_idle(&b.spec, class)),
    }
}

/// When to look at `pe` again: its next deadline (expiry, idle stop, the warning before expiry,
/// its schedule's next instants), but no later than `at_most`.
pub(crate) fn requeue(
    pe: &PreviewEnvironment,
    bp: &Blueprint,
    ctx: &Context,
    at_most: Duration,
) -> Duration {
    let now = ctx.clock.now();
    let t = times(pe, Some(bp), now);
    let record = pe.status.as_ref().and_then(schedule::record_of);
    let idle = lifecycle::idle_deadline(
        schedule::idle_from(t.last_activity, record),
        t.stop_after_idle,
    );
    let warned = pe.status.as_ref().and_then(|s| s.expiry_warned.as_ref());
    let warning =
        lifecycle::warning_at(t.expires_at, bp.spec.expiry_warning.get(), t.last_activity)
            .filter(|_| warned.is_none_or(|w| w.0 != t.expires_at));
    let mut deadlines = vec![Some(t.expires_at), idle, warning];
    deadlines.extend(schedule::deadlines(pe, bp, ctx, now).into_iter().map(Some));
    lifecycle::until_next(now, &deadlines).map_or(at_most, |d| (d + SLACK).min(at_most))
}

fn until(now: Timestamp, at: Timestamp, at_most: Duration) -> Duration {
    lifecycle::until_next(now, &[Some(at)]).map_or(at_most, |d| (d + SLACK).min(at_most))
}

/// Mark an expired preview for teardown; the change brings it back to be torn down.
async fn expire(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    now: Timestamp,
) -> Result<(), Error> {
    let patch = json!({
        "metadata": {"resourceVersion": pe.resource_version()},
        "spec": {"teardown": {"reason": "expired", "at": Time(now)}},
    });
    match api
        .patch(
            &pe.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {
            tracing::info!(target: "audit", actor = "sandcastle", action = "expire", preview = %pe.name_any(), sha = %pe.spec.sha, result = "teardown", "preview expired");
            Ok(())
        }
        // Changed meanwhile (that change brings it back) or gone.
        Err(kube::Error::Api(r)) if r.code == 409 || r.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

pub(crate) async fn guard(
    api: &Api<PreviewEnvironment>,
    pe: &mut PreviewEnvironment,
    persisted: &mut Option<PreviewStatus>,
    ctx: &Context,
) -> Result<Guard, Error> {
    let now = ctx.clock.now();
    let bp = ctx.blueprint(&pe.spec.blueprint).await?;
    let t = times(pe, bp.as_ref(), now);
    let mut st = pe.status.clone().unwrap_or_default();
    if lifecycle::is_expired(t.expires_at, now) {
        expire(api, pe, now).await?;
        return Ok(Guard::Done(Box::new(Verdict::new(st, Next::Change))));
    }
    st.last_activity = Some(Time(t.last_activity));
    let sha = pe.spec.sha.clone();

    let Some(bp) = bp else {
        let message = format!(
            "Blueprint {} was deleted; this preview is removed when it expires ({})",
            pe.spec.blueprint,
            t.expires_at.strftime("%a %d %b %H:%M UTC")
        );
        set_phase(&mut st, Phase::Failed, message.clone(), now, Some(&sha));
        let next = Next::After(until(now, t.expires_at, ctx.settings.drift_interval));
        let report = Report::Failure {
            why: fit_description(&message),
            rollout: false,
        };
        return Ok(Guard::Done(Box::new(
            Verdict::new(st, next).reporting(report),
        )));
    };

    let off_hours = match schedule::of(&bp, ctx) {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            let message = schedule::refusal(&bp, &e);
            set_phase(&mut st, Phase::Failed, message.clone(), now, Some(&sha));
            let next = Next::After(until(now, t.expires_at, ctx.settings.drift_interval));
            let report = Report::Failure {
                why: fit_description(&message),
                rollout: false,
            };
            return Ok(Guard::Done(Box::new(
                Verdict::new(st, next).reporting(report),
            )));
        }
        None => None,
    };

    if let Slot::Waiting(report) = capacity::admit(api, pe, &bp, &mut st, persisted, ctx).await? {
        let verdict = Verdict::new(st, Next::After(requeue(pe, &bp, ctx, QUEUE_RECHECK)));
        return Ok(Guard::Done(Box::new(match report {
            Some(r) => verdict.reporting(r),
            None => verdict,
        })));
    }

    let cluster = match place::place(api, pe, &bp, &mut st, persisted, ctx).await? {
        Placed::At(c) => c,
        Placed::Waiting(verdict) => return Ok(Guard::Done(verdict)),
    };
    if !cluster.reachable() {
        return Ok(Guard::Done(Box::new(place::unreachable(
            &mut st, &cluster, ctx,
        ))));
    }
    if !cluster.is_local() {
        place::reachability(&mut st, cluster.name.as_str(), None, ctx);
    }

    warn::expiry(pe, &bp, &mut st, t.expires_at, t.last_activity, ctx).await;
    let decision = off_hours
        .as_ref()
        .map(|s| schedule::judge(s, pe, &st, &bp, t.last_activity, now));
    if let Some(d) = decision {
        let record = d.record(schedule::record_of(&st));
        schedule::remember(&mut st, record);
    }
    let idle_from = schedule::idle_from(t.last_activity, schedule::record_of(&st));
    let idle = lifecycle::is_idle(idle_from, t.stop_after_idle, now);
    let settled = matches!(
        st.phase,
        Some(Phase::Ready | Phase::Failed | Phase::Stopped)
    );
    let stop = if pe.spec.stopped {
        Some("on request".to_owned())
    } else if let (Some(s), Some(Decision::Stop { since })) = (&off_hours, decision) {
        Some(s.stop_reason(since))
    } else if idle && settled {
        Some(format!(
            "after {} without activity",
            duration::go_style(t.stop_after_idle)
        ))
    } else {
        None
    };
    if let Some(reason) = stop {
        let why = format!("Stopped {reason}");
        let parking = match wake_target(&cluster, ctx) {
            Some(target) => Parking::WakePage(target),
            None => Parking::Closed,
        };
        let mut wakes = parking.wakes();
        if let Some(ns) = st.namespace.clone() {
            let routes = route_parking(&cluster, ctx);
            let parked =
                wake_route::park(cluster.client(), &ns, &pe.name_any(), parking, routes).await?;
            st.hosts = parked.hosts;
            wakes = parked.wakes;
            st.wake_page = true;
            // Routes first, pods after (`idle::ROUTE_DRAIN`).
            if st.phase != Some(Phase::Stopped)
                && let Some(left) = ctx.drains.remaining(&pe.name_any(), Instant::now())
            {
                st.message = Some(format!(
                    "Stopping {reason}: routing visitors away before the pods stop"
                ));
                return Ok(Guard::Done(Box::new(Verdict::new(st, Next::After(left)))));
            }
            ctx.drains.forget(&pe.name_any());
            st.services = idle::stop(cluster.client(), &ns).await?;
        }
        let sandbox = pe.spec.pull_request.is_none().then(|| pe.name_any());
        let message = sandcastle_github::text::statuses::stopped_message(
            &why,
            wakes && st.wake_page && !pe.spec.stopped,
            sandbox.as_deref(),
        );
        if st.phase != Some(Phase::Stopped) {
            let by = match decision {
                Some(Decision::Stop { .. }) if !pe.spec.stopped => "schedule",
                _ => "lifecycle",
            };
            tracing::info!(target: "audit", actor = "sandcastle", action = "stop", preview = %pe.name_any(), sha = %sha, result = %why, by, "preview stopped");
        }
        set_phase(&mut st, Phase::Stopped, message.clone(), now, Some(&sha));
        let next = Next::After(requeue(pe, &bp, ctx, ctx.settings.drift_interval));
        return Ok(Guard::Done(Box::new(
            Verdict::new(st, next).reporting(Report::Stopped(message)),
        )));
    }
    // Not stopping (or no longer): a drain under way is called off.
    ctx.drains.forget(&pe.name_any());
    if st.phase == Some(Phase::Stopped) {
        let restored = match st.namespace.clone() {
            Some(ns) => idle::wake(cluster.client(), &ns).await?,
            None => 0,
        };
        let by_schedule = match (&off_hours, decision) {
            (Some(s), Some(Decision::Wake { .. })) => Some(s.wake_reason()),
            _ => None,
        };
        tracing::info!(target: "audit", actor = "sandcastle", action = "wake", preview = %pe.name_any(), sha = %sha, result = restored, by = if by_schedule.is_some() { "schedule" } else { "activity" }, "preview woken");
        // Waking is asking again: a rollout that had failed starts over, and the readiness
        // timeout counts from now (not from when the workloads were first applied, which may
        // be hours ago: the woken pods would fail at once, while still starting).
        if st.rollout.as_ref().is_some_and(|r| r.failed) {
            st.rollout = None;
        }
        if let Some(r) = st.rollout.as_mut() {
            r.step_started_at = Time(now);
        }
        set_phase(
            &mut st,
            Phase::Deploying,
            match by_schedule {
                Some(why) => format!("Waking up {why}: {restored} workloads restored"),
                None => format!("Waking up: {restored} workloads restored"),
            },
            now,
            Some(&sha),
        );
    }
    Ok(Guard::Proceed(Box::new((st, bp, cluster))))
}

/// Where a stopped preview's HTTPRoutes go in `cluster`: the wake route Service of Sandcastle's
/// namespace (`--wake-route-service`), reached through a ReferenceGrant there, in Sandcastle's
/// own cluster; else a Service with no endpoints in the preview's namespace (a ReferenceGrant in
/// another cluster could only name a Service of that cluster).
fn route_parking<'a>(cluster: &Cluster, ctx: &'a Context) -> RouteParking<'a> {
    match &ctx.settings.wake_route {
        Some(service) if cluster.is_local() => RouteParking::WakePage {
            service,
            home: &ctx.settings.home,
        },
        _ => RouteParking::Closed,
    }
}

/// Where a stopped preview's hosts go in `cluster`: Sandcastle's wake listener as that
/// cluster's ingress controller reaches it (`--wake-service` in Sandcastle's own cluster, the
/// cluster Secret's `sandcastle.dev/wake-service` in another). `None`: parked on nothing.
fn wake_target<'a>(
    cluster: &'a Cluster,
    ctx: &'a Context,
) -> Option<&'a sandcastle_domain::wake::WakeTarget> {
    if cluster.is_local() {
        ctx.settings.wake.as_ref()
    } else {
        ctx.settings.wake.as_ref().and(cluster.wake.as_ref())
    }
}
