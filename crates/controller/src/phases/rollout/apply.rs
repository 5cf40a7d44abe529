//! Applying a rollout's steps in order and waiting for each to be ready, within the Blueprint's
//! readiness timeout; then the HTTP readiness gate, and Ready. A step's workloads decide the
//! pass: one failed (a Job) fails the rollout, one not ready yet keeps it deploying — saying what
//! its pods are stuck on as soon as the cluster says it — and all ready moves to the next step.
//! At the end, what an earlier plan had and this one does not is removed.

use std::time::Instant;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::super::probe;
use super::super::steps::{Step, apply_failure, progress_message};
use super::{Where, elapsed, fail_rollout, until_deadline};
use crate::error::Error;
use crate::report::Report;
use crate::verdict::{Next, Verdict, record, set_phase};
use sandcastle_crd::{Blueprint, Phase, PreviewEnvironment, PreviewStatus};
use sandcastle_domain::plan::{self, PreviewContext};
use sandcastle_github::text::statuses::Failure;
use sandcastle_kube::diagnose::{self, Logs};
use sandcastle_kube::readiness::{self, Health, WorkloadState};

/// What one pass over a rollout sees: the preview, its status so far and its Blueprint.
struct Pass<'a> {
    pe: &'a PreviewEnvironment,
    blueprint: &'a Blueprint,
    ns: &'a str,
    at: &'a Where<'a>,
    now: Timestamp,
}

impl Pass<'_> {
    /// The controller's caches of what it made, for a preview in Sandcastle's own cluster.
    fn watched(&self) -> Option<&sandcastle_kube::watched::Watched> {
        self.at.ctx.watched_in(self.at.cluster)
    }
}

/// Apply each step not applied yet and wait for it to be ready, up to the first that is not;
/// once all are, the readiness gate and Ready.
pub(super) async fn apply_and_wait(
    pe: &PreviewEnvironment,
    mut st: PreviewStatus,
    blueprint: &Blueprint,
    pctx: &PreviewContext,
    steps: &[(Step, Vec<serde_json::Value>)],
    plan: &plan::Plan,
    at: &Where<'_>,
) -> Result<Verdict, Error> {
    let pass = Pass {
        pe,
        blueprint,
        ns: pctx.namespace.as_str(),
        at,
        now: at.ctx.clock.now(),
    };
    let mut services = Vec::new();
    for (index, (step, objects)) in steps.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let rollout = st.rollout.as_ref().expect("a rollout is under way");
        let fresh = rollout.applied_steps <= index;
        if let Some(stop) = apply_step(&pass, &mut st, index, *step, objects).await? {
            return Ok(stop);
        }
        // Pre-delete hooks wait, suspended, for the teardown.
        let states = if *step == Step::Hooks {
            Vec::new()
        } else {
            readiness::workload_states(at.cluster.client(), pass.ns, objects, pass.watched())
                .await?
        };
        services.extend(
            states
                .iter()
                .filter(|w| w.kind != "Job")
                .map(WorkloadState::service_status),
        );
        let judged = Judged {
            step: *step,
            fresh,
            states: &states,
            services: &services,
        };
        if let Some(stop) = judge_step(&pass, &mut st, &judged).await {
            return Ok(stop);
        }
        let rollout = st.rollout.as_mut().expect("a rollout is under way");
        rollout.ready_steps = rollout.ready_steps.max(index + 1);
    }
    st.services = services;
    st.url = plan.url.clone();
    let keep: Vec<&serde_json::Value> = steps.iter().flat_map(|(_, o)| o).collect();
    ready(&pass, st, pctx, plan, &keep).await
}

/// Apply step `index` unless it was; a refusal fails the rollout (the verdict to return).
async fn apply_step(
    pass: &Pass<'_>,
    st: &mut PreviewStatus,
    index: u32,
    step: Step,
    objects: &[serde_json::Value],
) -> Result<Option<Verdict>, Error> {
    let rollout = st.rollout.as_mut().expect("a rollout is under way");
    if rollout.applied_steps > index {
        return Ok(None);
    }
    match pass.at.cluster.resolver.apply_all(pass.ns, objects).await {
        Ok(applied) => {
            if let Some(w) = pass.watched() {
                w.note_applied(pass.ns, &applied);
            }
        }
        Err(e) if e.is_transient() => return Err(Error::Transient(e.to_string())),
        Err(e) => {
            let why = apply_failure(step, &e);
            return Ok(Some(fail_rollout(
                pass.pe,
                std::mem::take(st),
                why,
                pass.blueprint,
                pass.at.ctx,
            )));
        }
    }
    rollout.applied_steps = index + 1;
    rollout.step_started_at = Time(pass.now);
    Ok(None)
}

/// One step's workloads as this pass found them.
struct Judged<'a> {
    step: Step,
    /// Applied in this very pass: its pods cannot be there yet.
    fresh: bool,
    states: &'a [WorkloadState],
    services: &'a [sandcastle_crd::ServiceStatus],
}

/// The verdict a step's workloads give when they stop this pass: one failed, or one not ready
/// (past the readiness timeout: failed; before it: deploying, saying what it is stuck on).
async fn judge_step(
    pass: &Pass<'_>,
    st: &mut PreviewStatus,
    judged: &Judged<'_>,
) -> Option<Verdict> {
    let (client, ns, ctx) = (pass.at.cluster.client(), pass.ns, pass.at.ctx);
    let Judged {
        step,
        fresh,
        states,
        services,
    } = *judged;
    if let Some(failed) = states
        .iter()
        .find(|w| matches!(w.health, Health::Failed(_)))
    {
        let why = readiness::job_failure(client, ns, failed).await;
        let message = if step == Step::Plan(plan::Stage::Seed) {
            Failure::SeedJobFailed {
                job: failed.name.clone(),
                reason: why.reason,
                exit_code: why.exit_code,
            }
            .to_string()
        } else {
            let exit = why.exit_code.map(|c| format!(" (exit {c})"));
            let exit = exit.unwrap_or_default();
            format!("job {} failed: {}{exit}", failed.name, why.reason)
        };
        st.diagnosis = diagnose::diagnose(client, ns, failed, Logs::Fetch).await;
        let st = std::mem::take(st);
        return Some(fail_rollout(pass.pe, st, message, pass.blueprint, ctx));
    }
    let waiting = states.iter().find(|w| w.health != Health::Ready)?;
    let timeout = pass.blueprint.spec.readiness_timeout.get();
    let rollout = st.rollout.as_ref().expect("a rollout is under way");
    if elapsed(&rollout.step_started_at, pass.now) > timeout {
        let found = diagnose::diagnose(client, ns, waiting, Logs::Fetch).await;
        let failure = Failure::NotReady {
            after: timeout,
            workload: format!("{}/{}", waiting.kind.to_lowercase(), waiting.name),
            ready: waiting.ready,
            desired: waiting.desired,
            cause: found.as_ref().map(|d| diagnose::cause(d).to_owned()),
        };
        st.diagnosis = found;
        let st = std::mem::take(st);
        return Some(fail_rollout(
            pass.pe,
            st,
            failure.to_string(),
            pass.blueprint,
            ctx,
        ));
    }
    // What the pods are stuck on (unschedulable, an image that cannot be pulled) is said as
    // soon as the cluster says it, not only when the readiness timeout ends: from the pass after
    // the one that applied the step (in that one, the pods are not there to be asked about), a
    // while after it and at most that often (`diagnoses::DIAGNOSE_EVERY`; the passes between keep
    // what the last one found).
    let found = if fresh {
        ctx.diagnoses.applied(&pass.pe.name_any(), Instant::now());
        None
    } else if ctx.diagnoses.due(&pass.pe.name_any(), Instant::now()) {
        diagnose::diagnose(client, ns, waiting, Logs::Skip).await
    } else {
        st.diagnosis.clone()
    };
    let blocker = found.as_ref().map(|d| diagnose::cause(d).to_owned());
    let message = progress_message(step, waiting, blocker.as_deref());
    set_phase(
        st,
        Phase::Deploying,
        message,
        pass.now,
        Some(&pass.pe.spec.sha),
    );
    st.stuck_on = blocker;
    st.diagnosis = found;
    st.services = services.to_vec();
    Some(Verdict::new(std::mem::take(st), Next::Soon).reporting(Report::InProgress))
}

/// Every step is ready: the HTTP readiness gate (when the Blueprint has one), the hosts back
/// from the waking page, and Ready.
async fn ready(
    pass: &Pass<'_>,
    mut st: PreviewStatus,
    pctx: &PreviewContext,
    plan: &plan::Plan,
    keep: &[&serde_json::Value],
) -> Result<Verdict, Error> {
    let (pe, ctx, cluster) = (pass.pe, pass.at.ctx, pass.at.cluster);
    let http = pass
        .blueprint
        .spec
        .readiness
        .as_ref()
        .and_then(|r| r.http.as_ref());
    if let Some(http) = http {
        let at = probe::Probed {
            url: plan.url.as_deref(),
            backend: plan.backend(),
            namespace: pass.ns,
            local: cluster.is_local(),
            secret: crate::edge::probe_secret(
                pe,
                pctx.edge.access == sandcastle_crd::Access::SignedIn,
                ctx,
            ),
            roots: crate::edge::probe_roots(ctx),
        };
        let rollout = st.rollout.as_mut().expect("a rollout is under way");
        match probe::gate(http, rollout, &pctx.sha, &at, ctx).await {
            probe::Gate::Passed => {}
            probe::Gate::Waiting {
                message,
                seen,
                again,
            } => {
                set_phase(
                    &mut st,
                    Phase::Deploying,
                    message,
                    pass.now,
                    Some(&pe.spec.sha),
                );
                st.diagnosis = Some(diagnose::http_probe(&seen));
                st.stuck_on = Some(seen);
                return Ok(Verdict::new(st, Next::After(again)).reporting(Report::InProgress));
            }
            probe::Gate::Failed(why) => {
                st.diagnosis = Some(diagnose::http_probe(&why));
                return Ok(fail_rollout(pe, st, why, pass.blueprint, ctx));
            }
        }
    }
    // Woken and Ready: the hosts go back from the waking page to the app.
    if st.wake_page {
        // The preview's ReferenceGrant for its HTTPRoutes lives in Sandcastle's own namespace.
        let home = cluster.is_local().then_some(ctx.settings.home.as_str());
        let restored =
            sandcastle_kube::wake_route::unpark(cluster.client(), pass.ns, &pe.name_any(), home)
                .await?;
        tracing::debug!(preview = %pe.name_any(), restored, "ingresses and routes routed back to the app");
        st.wake_page = false;
    }
    prune_dropped(pass, &mut st, keep).await?;
    let count = st.services.iter().filter(|s| s.ready >= s.desired).count();
    st.deployed_sha = Some(pe.spec.sha.clone());
    let message = format!("{count}/{} services ready", st.services.len());
    set_phase(&mut st, Phase::Ready, message, pass.now, Some(&pe.spec.sha));
    let next = until_deadline(pe, pass.blueprint, ctx);
    Ok(Verdict::new(st, next).reporting(Report::Success))
}

/// A rollout after an earlier deploy that reaches its end removes what its plan no longer has
/// (once: a Ready preview's drift repairs find nothing to remove), saying so in the history.
async fn prune_dropped(
    pass: &Pass<'_>,
    st: &mut PreviewStatus,
    keep: &[&serde_json::Value],
) -> Result<(), Error> {
    if st.deployed_sha.is_none() || st.phase == Some(Phase::Ready) {
        return Ok(());
    }
    let removed = sandcastle_kube::prune::prune(
        &pass.at.cluster.resolver,
        pass.ns,
        &pass.pe.name_any(),
        keep,
        &pass.blueprint.spec.allow_kinds,
    )
    .await?;
    if !removed.is_empty() {
        let note = format!(
            "removed what the plan no longer has: {}",
            removed.join(", ")
        );
        record(
            st,
            pass.now,
            "sandcastle",
            "Pruned",
            Some(&pass.pe.spec.sha),
            Some(&note),
        );
    }
    Ok(())
}
