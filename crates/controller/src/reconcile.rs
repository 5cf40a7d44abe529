//! One reconcile of one PreviewEnvironment (counted and timed). It reads the preview fresh,
//! keeps its Kubernetes Events in line with what the last pass saved, then
//! asks the one phase that applies what to do — finalize a deleted preview, tear down one asked
//! to go, take down an outlived incarnation, wait while a fork awaits approval, pass the
//! guardrails (expiry, Blueprint, slot, stop and wake), roll out — and gets a [`Verdict`] back.
//! [`finish`] then reports to GitHub once (the deployment, and the check runs of the
//! Blueprint's tests), brings the sticky comment in line with the verdict,
//! and writes the status once, with what the comment shows. (The one other status
//! write is a slot taken under `maxPreviews`, which must be written before the admission lock is
//! released: see `phases::capacity`.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::context::Context;
use super::error::Error;
use super::phases::admit::{self, Guard};
use super::phases::{capacity, place, rollout, teardown, test_runs};
use super::verdict::{Next, Verdict, record_requests, save, set_phase};
use super::{finalizer, report, sticky, test_checks};
use sandcastle_crd::labels::REDEPLOY;
use sandcastle_crd::{Phase, PreviewEnvironment, PreviewStatus};
use sandcastle_domain::{Sha, running};

/// How soon to look again when GitHub could not be told.
const REPORT_RETRY: Duration = Duration::from_secs(15);

pub(super) async fn reconcile(
    cached: Arc<PreviewEnvironment>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_one(cached, Arc::clone(&ctx)).await;
    ctx.metrics.reconciled(result.is_ok(), started.elapsed());
    result
}

async fn reconcile_one(
    cached: Arc<PreviewEnvironment>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let api: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    // The watch cache can lag behind this controller's own last status write; decisions that
    // must happen once (creating a GitHub deployment, recording history) are taken on a fresh
    // read.
    let Some(mut pe) = api.get_opt(&cached.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let mut persisted = pe.status.clone();
    if pe.meta().deletion_timestamp.is_some() {
        ctx.events.forget(&pe.name_any());
        ctx.checks_asked.forget(&pe.name_any());
        ctx.drains.forget(&pe.name_any());
        ctx.diagnoses.forget(&pe.name_any());
        let (mut verdict, gone) = teardown::finalize(&pe, &ctx).await?;
        let released = capacity::release(&mut verdict.status);
        let (action, reported) = finish(&api, &mut persisted, &mut pe, verdict, &ctx).await?;
        if released {
            capacity::poke_queue(&pe, &ctx).await;
        }
        if gone && reported {
            finalizer::remove(&api, &pe).await?;
            ctx.echoes.forget(&pe.name_any());
            if let (Some(w), Some(ns)) = (&ctx.watched, persisted.and_then(|s| s.namespace)) {
                w.forget(&ns);
            }
            place::poke_waiting(&ctx);
            return Ok(Action::await_change());
        }
        return Ok(action);
    }
    ctx.events.sync(&pe).await;
    record_requests(&mut pe);
    let verdict = if pe.spec.teardown.is_some() {
        let mut verdict = teardown::tombstone(&api, &pe, &ctx).await?;
        if capacity::release(&mut verdict.status) {
            let (action, _) = finish(&api, &mut persisted, &mut pe, verdict, &ctx).await?;
            capacity::poke_queue(&pe, &ctx).await;
            return Ok(action);
        }
        verdict
    } else if teardown::outlived(&pe) {
        teardown::retire(&pe, &ctx).await?
    } else if pe.spec.awaiting_approval {
        await_approval(&pe, &ctx)
    } else {
        if !finalizer::present(&pe) {
            // In place before anything is rolled out; the same pass goes on with the object as
            // written, so that a new preview does not wait for the next pass to start.
            let Some(written) = finalizer::add(&api, &pe).await? else {
                return Ok(Action::await_change());
            };
            ctx.term.finalized(&pe);
            pe.metadata = written.metadata;
        }
        match admit::guard(&api, &mut pe, &mut persisted, &ctx).await? {
            Guard::Done(verdict) => *verdict,
            Guard::Proceed(next) => {
                let (st, blueprint, cluster) = *next;
                rollout::run(&pe, st, blueprint, &cluster, &ctx).await?
            }
        }
    };
    Ok(finish(&api, &mut persisted, &mut pe, verdict, &ctx)
        .await?
        .0)
}

/// Report what the verdict asks of GitHub, write its status (if it changed from `persisted`),
/// and say when to look again. Also returns whether GitHub was told.
async fn finish(
    api: &Api<PreviewEnvironment>,
    persisted: &mut Option<PreviewStatus>,
    pe: &mut PreviewEnvironment,
    verdict: Verdict,
    ctx: &Context,
) -> Result<(Action, bool), Error> {
    let Verdict {
        mut status,
        report,
        next,
        in_line,
    } = verdict;
    rollout::done(ctx, &pe.name_any(), &mut status, in_line);
    let reported = match &report {
        Some(r) => report::sync(pe, &mut status, &ctx.reporting(), r).await,
        None => true,
    };
    // The Blueprint's tests: what no longer concerns the preview cancelled, what runs looked at,
    // and their check runs brought in line.
    let settled = test_runs::settle(pe, &mut status, ctx).await;
    let reported = test_checks::sync(pe, &mut status, ctx, &settled.logs).await && reported;
    let next = match (next, settled.next) {
        (Next::After(d), Some(t)) => Next::After(d.min(t)),
        (Next::Change, Some(t)) => Next::After(t),
        (next, _) => next,
    };
    let ended = running::accrue(&mut status, ctx.clock.now());
    // Whatever this pass decided, it decided on this spec and these requests: a `wait` after a
    // write ends only on a status that has taken the write in.
    status.observed_generation = pe.metadata.generation;
    status.observed_redeploy = pe.annotations().get(REDEPLOY).cloned();
    if pe.meta().deletion_timestamp.is_none() {
        // The comment follows the status it is saved with: what it shows is recorded in that
        // same write, not in a second one after it (GitHub is called only when what it shows
        // changes).
        pe.status = Some(status);
        sticky::sync(pe, ctx).await?;
        status = pe.status.take().unwrap_or_default();
    }
    let was = persisted.as_ref().and_then(|s| s.phase);
    pe.status = persisted.clone();
    save(api, pe, &status, &ctx.echoes).await?;
    if !reported {
        // GitHub could not be told: the write's echo brings the next try at once, as any
        // change does, and the requeue below is the fallback.
        ctx.echoes.forget(&pe.name_any());
    }
    if status.phase == Some(Phase::Removed) && was != Some(Phase::Removed) {
        // Its cluster has room again.
        place::poke_waiting(ctx);
    }
    if ended > 0 {
        ctx.metrics.previews.ended(
            &pe.spec.blueprint,
            sandcastle_metrics::preview_class(pe),
            ended,
        );
    }
    *persisted = Some(status.clone());
    pe.status = Some(status);
    // Its new history goes out as Events now: the write's own echo starts no pass to do it.
    // (A preview being deleted publishes none, as before: it is forgotten.)
    if pe.meta().deletion_timestamp.is_none() {
        ctx.events.sync(pe).await;
    }
    let action = match (next, reported) {
        (Next::Soon, _) => super::soon(ctx),
        (Next::After(d), true) => Action::requeue(d),
        (Next::After(d), false) => Action::requeue(d.min(REPORT_RETRY)),
        (Next::Change, true) => Action::await_change(),
        (Next::Change, false) => Action::requeue(REPORT_RETRY),
    };
    Ok((action, reported))
}

/// A fork's pull request nobody permitted has approved: nothing is deployed.
fn await_approval(pe: &PreviewEnvironment, ctx: &Context) -> Verdict {
    let mut st = pe.status.clone().unwrap_or_default();
    let short =
        Sha::new(&pe.spec.sha).map_or_else(|_| pe.spec.sha.clone(), |s| s.short().to_owned());
    set_phase(
        &mut st,
        Phase::Pending,
        format!(
            "pull request from a fork: waiting for someone with write access to comment /preview to deploy {short}"
        ),
        ctx.clock.now(),
        Some(&pe.spec.sha),
    );
    Verdict::new(st, Next::Change)
}

pub(super) fn error_policy(pe: Arc<PreviewEnvironment>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(preview = %pe.name_any(), error = %err, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}
