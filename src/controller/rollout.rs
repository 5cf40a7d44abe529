//! Rolling a preview out: wait for the Blueprint's required check runs on the commit, read the
//! Blueprint's source, plan, create the namespace with its guardrails, apply the plan phase by
//! phase and wait for each phase to be ready (within the Blueprint's readiness timeout), keeping
//! status and GitHub true at every step. A `/preview` on an unchanged commit starts a new
//! rollout (the `redeploy` annotation is part of the plan's hash).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::checks::{self, Gate};
use super::context::Context;
use super::hooks;
use super::reconcile::Error;
use super::report::{self, Report};
use super::status::{save, set_phase};
use crate::crd::labels::REDEPLOY;
use crate::crd::{Blueprint, Phase, PreviewEnvironment, PreviewStatus, Reported, Rollout};
use crate::domain::guardrails;
use crate::domain::naming;
use crate::domain::plan::{self, Plan, PreviewContext};
use crate::domain::{NamespaceName, PrNumber, RepoName, Sha};
use crate::github::text::statuses::{Failure, fit_description};
use crate::k8s::apply::ApplyError;
use crate::k8s::namespace::{self, NamespaceError};
use crate::k8s::readiness::{self, Health};
use crate::k8s::source;

/// Everything a rollout of one preview needs, resolved from its spec.
struct Target {
    blueprint: Blueprint,
    ctx: PreviewContext,
}

/// Outcome of trying to resolve the target: a reason to fail in words for people, or an API error.
enum Unresolved {
    Fail(String),
    Api(Error),
}

impl From<kube::Error> for Unresolved {
    fn from(e: kube::Error) -> Self {
        Self::Api(e.into())
    }
}

async fn resolve(pe: &PreviewEnvironment, ctx: &Context) -> Result<Target, Unresolved> {
    let blueprints: Api<Blueprint> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let Some(blueprint) = blueprints.get_opt(&pe.spec.blueprint).await? else {
        return Err(Unresolved::Fail(format!(
            "Blueprint {} does not exist",
            pe.spec.blueprint
        )));
    };
    let bad =
        |what: &str, e: &dyn std::fmt::Display| Unresolved::Fail(format!("invalid {what}: {e}"));
    let repo = RepoName::new(&pe.spec.repository).map_err(|e| bad("spec.repository", &e))?;
    let sha = Sha::new(&pe.spec.sha).map_err(|e| bad("spec.sha", &e))?;
    let pr = pe
        .spec
        .pull_request
        .map(PrNumber::new)
        .transpose()
        .map_err(|e| bad("spec.pullRequest", &e))?;
    let preview = NamespaceName::new(&pe.name_any()).map_err(|e| bad("metadata.name", &e))?;
    let namespace = naming::namespace_name(&ctx.settings.namespace_prefix, &preview);
    let pctx = PreviewContext {
        preview,
        namespace,
        source_namespace: blueprint.spec.source.namespace.clone(),
        blueprint: pe.spec.blueprint.clone(),
        repo,
        pr,
        sha,
        branch: pe.spec.git_ref.clone(),
        default_host: ctx.settings.default_host.clone(),
    };
    Ok(Target {
        blueprint,
        ctx: pctx,
    })
}

fn plan_hash(steps: &[(String, Vec<Value>)], redeploy: Option<&String>) -> String {
    let mut h = Sha256::new();
    if let Some(token) = redeploy {
        h.update(token.as_bytes());
    }
    for (phase, objects) in steps {
        h.update(phase.as_bytes());
        for o in objects {
            h.update(o.to_string().as_bytes());
        }
    }
    hex::encode(h.finalize())[..16].to_owned()
}

fn elapsed(since: &Time, now: Timestamp) -> Duration {
    now.duration_since(since.0).try_into().unwrap_or_default()
}

/// Fail the rollout under way with `message` ([`fail`]), and remember that it failed: it is
/// not retried, and GitHub hears no more of it, until something changes (see [`Rollout::failed`]).
async fn fail_rollout(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    ctx: &Context,
    mut st: PreviewStatus,
    message: String,
) -> Result<Action, Error> {
    if let Some(r) = st.rollout.as_mut() {
        r.failed = true;
    }
    fail(api, pe, ctx, st, message).await
}

/// Fail the preview with `message`: status, history, GitHub.
async fn fail(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    ctx: &Context,
    mut st: PreviewStatus,
    message: String,
) -> Result<Action, Error> {
    let now = ctx.clock.now();
    set_phase(
        &mut st,
        Phase::Failed,
        message.clone(),
        now,
        Some(&pe.spec.sha),
    );
    let description = failure_description(&message);
    let reported = report::sync(pe, &mut st, ctx, Report::Failure(&description)).await;
    save(api, pe, &st).await?;
    // A failure can heal (pods become ready late, the Blueprint is fixed): look again later;
    // watches on the workloads and the Blueprint bring it back sooner.
    Ok(super::after(if reported {
        Duration::from_secs(60)
    } else {
        Duration::from_secs(15)
    }))
}

pub(super) async fn run(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    ctx: &Context,
) -> Result<Action, Error> {
    let now = ctx.clock.now();
    let mut st = pe.status.clone().unwrap_or_default();
    st.observed_generation = pe.metadata.generation;

    let target = match resolve(pe, ctx).await {
        Ok(t) => t,
        Err(Unresolved::Fail(msg)) => return fail(api, pe, ctx, st, msg).await,
        Err(Unresolved::Api(e)) => return Err(e),
    };
    let pctx = &target.ctx;
    let spec = &target.blueprint.spec;
    st.namespace = Some(pctx.namespace.to_string());

    // The commit's images may not exist before its checks pass: until then, wait (a preview
    // running an older commit keeps running it).
    if spec.wait_for_checks.is_empty() {
        st.waiting_for_checks.clear();
    } else if st.checks_passed_sha.as_deref() != Some(pe.spec.sha.as_str()) {
        match checks::gate(pe, &spec.wait_for_checks, ctx).await {
            Gate::Passed => {
                st.checks_passed_sha = Some(pe.spec.sha.clone());
                st.waiting_for_checks.clear();
            }
            Gate::Waiting {
                pending,
                message,
                again,
            } => {
                set_phase(&mut st, Phase::Pending, message, now, Some(&pe.spec.sha));
                st.waiting_for_checks = pending;
                save(api, pe, &st).await?;
                return Ok(super::after(again));
            }
        }
    }

    // GitHub hears of a new commit (or of a preview back after teardown) as `queued` first:
    // accepted, not started; `in_progress` follows once cloning begins.
    let reported = st.github_reported;
    if st.github_deployment_sha.as_deref() != Some(pe.spec.sha.as_str())
        || reported.is_none()
        || reported == Some(Reported::Inactive)
    {
        let why = format!("Queued: cloning blueprint {}", pe.spec.blueprint);
        report::sync(pe, &mut st, ctx, Report::Queued(&why)).await;
    }

    // Plan first: a refused blueprint fails before anything is created.
    let objects = match source::read(&ctx.resolver, &ctx.settings.home, spec).await {
        Ok(o) => o,
        Err(e) if e.is_transient() => return Err(Error::Transient(e.to_string())),
        Err(e) => {
            return fail(
                api,
                pe,
                ctx,
                st,
                format!("blueprint {}: {e}", pe.spec.blueprint),
            )
            .await;
        }
    };
    let plan: Plan = match plan::plan(&objects, spec, pctx) {
        Ok(p) => p,
        Err(refused) => {
            return fail(api, pe, ctx, st, format!("blueprint refused: {refused}")).await;
        }
    };
    let timeout = spec.readiness_timeout.get();
    let steps = rollout_steps(
        &plan,
        guardrails::guardrail_objects(pctx, &spec.isolation, &ctx.settings.ingress_namespace),
        hooks::bound(timeout),
    );
    let hash = plan_hash(&steps, pe.annotations().get(REDEPLOY));
    let total_objects: usize = steps.iter().map(|(_, o)| o.len()).sum();

    // The Blueprint's own Namespace object (in manifests) may tighten Pod Security, never loosen.
    let mut labels = guardrails::namespace_labels_with(
        pctx,
        &spec.isolation,
        &plan::namespace_labels(&objects, spec, pctx),
    );
    // Which Sandcastle made the namespace: the orphan sweep only ever looks at its own.
    labels.insert(
        crate::crd::labels::HOME.to_owned(),
        ctx.settings.home.clone(),
    );
    let namespace_uid = match namespace::ensure(
        &ctx.client,
        pctx.namespace.as_str(),
        pctx.preview.as_str(),
        &labels,
    )
    .await
    {
        Ok(ns) => ns.metadata.uid,
        Err(NamespaceError::Api(e)) => return Err(e.into()),
        Err(NamespaceError::Terminating(ns)) => {
            set_phase(
                &mut st,
                Phase::Pending,
                format!("waiting for the old namespace {ns} to be deleted"),
                now,
                None,
            );
            save(api, pe, &st).await?;
            return Ok(super::soon(ctx));
        }
        Err(e @ NamespaceError::NotOurs { .. }) => {
            return fail(api, pe, ctx, st, e.to_string()).await;
        }
    };

    // A rollout belongs to one plan in one namespace: a namespace made anew (deleted behind
    // Sandcastle's back) holds none of what was applied, so the rollout starts over.
    let new_rollout = st.rollout.as_ref().is_none_or(|r| {
        r.plan_hash != hash || (r.namespace_uid.is_some() && r.namespace_uid != namespace_uid)
    });
    if !new_rollout && st.rollout.as_ref().is_some_and(|r| r.failed) {
        return stay_failed(api, pe, ctx, st, &target.blueprint).await;
    }
    if new_rollout {
        st.rollout = Some(Rollout {
            plan_hash: hash.clone(),
            sha: pe.spec.sha.clone(),
            applied_steps: 0,
            ready_steps: 0,
            total_steps: u32::try_from(steps.len()).unwrap_or(u32::MAX),
            objects: u32::try_from(total_objects).unwrap_or(u32::MAX),
            started_at: Time(now),
            step_started_at: Time(now),
            namespace_uid: namespace_uid.clone(),
            failed: false,
        });
        let source = spec
            .source
            .namespace
            .as_deref()
            .map_or_else(|| "manifests".to_owned(), |n| n.to_owned());
        set_phase(
            &mut st,
            Phase::Deploying,
            format!("cloning {source} ({total_objects} objects)"),
            now,
            Some(&pe.spec.sha),
        );
    } else if let Some(r) = st.rollout.as_mut() {
        r.namespace_uid = r.namespace_uid.take().or(namespace_uid);
    }
    let done = st
        .rollout
        .as_ref()
        .is_some_and(|r| r.ready_steps >= r.total_steps);
    if !done {
        report::sync(pe, &mut st, ctx, Report::InProgress).await;
    }

    let ns = pctx.namespace.as_str();
    let mut services = Vec::new();
    for (index, (phase, objects)) in steps.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let rollout = st.rollout.as_mut().expect("rollout set above");
        if rollout.applied_steps <= index {
            if let Err(e) = ctx.resolver.apply_all(ns, objects).await {
                if e.is_transient() {
                    return Err(Error::Transient(e.to_string()));
                }
                return fail_rollout(api, pe, ctx, st, apply_failure(phase, &e)).await;
            }
            rollout.applied_steps = index + 1;
            rollout.step_started_at = Time(now);
        }
        // Pre-delete hooks wait, suspended, for the teardown.
        let states = if phase == hooks::STEP {
            Vec::new()
        } else {
            readiness::workload_states(&ctx.client, ns, objects).await?
        };
        services.extend(
            states
                .iter()
                .filter(|w| w.kind != "Job")
                .map(readiness::WorkloadState::service_status),
        );
        if let Some(failed) = states
            .iter()
            .find(|w| matches!(w.health, Health::Failed(_)))
        {
            let why = readiness::job_failure(&ctx.client, ns, failed).await;
            let message = if phase == "seed" {
                Failure::SeedJobFailed {
                    job: failed.name.clone(),
                    reason: why.reason,
                    exit_code: why.exit_code,
                }
                .to_string()
            } else {
                let exit = why.exit_code.map(|c| format!(" (exit {c})"));
                format!(
                    "job {} failed: {}{}",
                    failed.name,
                    why.reason,
                    exit.unwrap_or_default()
                )
            };
            return fail_rollout(api, pe, ctx, st, message).await;
        }
        if let Some(waiting) = states.iter().find(|w| w.health != Health::Ready) {
            let rollout = st.rollout.as_ref().expect("rollout set above");
            if elapsed(&rollout.step_started_at, now) > timeout {
                let failure = Failure::NotReady {
                    after: timeout,
                    workload: format!("{}/{}", waiting.kind.to_lowercase(), waiting.name),
                    ready: waiting.ready,
                    desired: waiting.desired,
                    cause: readiness::why_not_ready(&ctx.client, ns, waiting).await,
                };
                return fail_rollout(api, pe, ctx, st, failure.to_string()).await;
            }
            // What the pods are stuck on (unschedulable, an image that cannot be pulled) is
            // said as soon as the cluster says it, not only when the readiness timeout ends.
            let blocker = readiness::blocker(&ctx.client, ns, waiting).await;
            let message = progress_message(phase, waiting, blocker.as_deref());
            st.stuck_on = blocker;
            set_phase(&mut st, Phase::Deploying, message, now, Some(&pe.spec.sha));
            st.services = services;
            save(api, pe, &st).await?;
            return Ok(super::soon(ctx));
        }
        let rollout = st.rollout.as_mut().expect("rollout set above");
        rollout.ready_steps = rollout.ready_steps.max(index + 1);
    }

    let ready = services.iter().filter(|s| s.ready >= s.desired).count();
    st.services = services;
    st.url = plan.url.clone();
    st.deployed_sha = Some(pe.spec.sha.clone());
    let message = format!("{ready}/{} services ready", st.services.len());
    set_phase(&mut st, Phase::Ready, message, now, Some(&pe.spec.sha));
    let reported = report::sync(pe, &mut st, ctx, Report::Success).await;
    save(api, pe, &st).await?;
    Ok(if reported {
        // Look again at the next lifecycle deadline (expiry, idle stop) if it comes sooner.
        super::after(super::lifecycle::requeue(
            pe,
            &target.blueprint,
            ctx,
            ctx.settings.drift_interval,
        ))
    } else {
        super::after(Duration::from_secs(15))
    })
}

/// The rollout of this plan failed before: it stays failed with the one `failure` GitHub was
/// given (posted again only if GitHub missed it), until the plan changes or a command asks again.
async fn stay_failed(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    ctx: &Context,
    mut st: PreviewStatus,
    blueprint: &Blueprint,
) -> Result<Action, Error> {
    let description = failure_description(st.message.as_deref().unwrap_or("deploy failed"));
    let reported = report::sync(pe, &mut st, ctx, Report::Failure(&description)).await;
    save(api, pe, &st).await?;
    Ok(super::after(if reported {
        super::lifecycle::requeue(pe, blueprint, ctx, ctx.settings.drift_interval)
    } else {
        Duration::from_secs(15)
    }))
}

/// The steps of a rollout: the guardrails, then the plan's phases, with the pre-delete hooks
/// (suspended, see [`hooks`]) right after the config phase that they may need.
fn rollout_steps(plan: &Plan, guard: Vec<Value>, hook_wait: Duration) -> Vec<(String, Vec<Value>)> {
    let mut steps: Vec<(String, Vec<Value>)> = vec![("guardrails".to_owned(), guard)];
    let mut hooks_step = (!plan.pre_delete.is_empty()).then(|| {
        (
            hooks::STEP.to_owned(),
            hooks::suspended(&plan.pre_delete, hook_wait),
        )
    });
    for step in &plan.steps {
        if step.stage > plan::Stage::Config
            && let Some(h) = hooks_step.take()
        {
            steps.push(h);
        }
        steps.push((step.stage.as_str().to_owned(), step.objects.clone()));
    }
    steps.extend(hooks_step);
    steps
}

/// What GitHub shows for a failure (one line of at most 140 characters): the message, or for a
/// refusal listing several problems, the first and how many more.
fn failure_description(message: &str) -> String {
    let mut lines = message.lines();
    let first = lines.next().unwrap_or_default();
    let more = lines.count();
    let text = match more {
        0 => first.to_owned(),
        1 => format!("{first} (and 1 more problem)"),
        n => format!("{first} (and {n} more problems)"),
    };
    fit_description(&text)
}

fn apply_failure(phase: &str, e: &ApplyError) -> String {
    format!("{phase} phase: {e}")
}

fn progress_message(phase: &str, w: &readiness::WorkloadState, blocker: Option<&str>) -> String {
    let verb = match phase {
        "data" => "starting data stores",
        "seed" => "seeding",
        "apps" => "starting apps",
        _ => "applying",
    };
    let progress = if w.kind == "Job" {
        format!("{verb}: job {} running", w.name)
    } else {
        format!("{verb}: {} {}/{} ready", w.name, w.ready, w.desired)
    };
    match blocker {
        Some(why) => format!("{progress}: {why}"),
        None => progress,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(name: &str) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {}})
    }

    #[test]
    fn hooks_are_applied_right_after_the_config_phase() {
        let step = |stage, name: &str| plan::Step {
            stage,
            objects: vec![job(name)],
        };
        let mut p = Plan {
            steps: vec![
                step(plan::Stage::Config, "c"),
                step(plan::Stage::Seed, "s"),
                step(plan::Stage::Apps, "a"),
            ],
            pre_delete: vec![job("dump")],
            url: None,
            left_out: Vec::new(),
        };
        let names = |steps: &[(String, Vec<Value>)]| {
            steps.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>()
        };
        let steps = rollout_steps(&p, Vec::new(), Duration::from_secs(60));
        assert_eq!(
            names(&steps),
            ["guardrails", "config", "hooks", "seed", "apps"]
        );
        assert_eq!(steps[2].1[0]["spec"]["suspend"], true);
        p.pre_delete.clear();
        let steps = rollout_steps(&p, Vec::new(), Duration::from_secs(60));
        assert_eq!(names(&steps), ["guardrails", "config", "seed", "apps"]);
    }

    #[test]
    fn github_hears_the_first_problem_and_how_many_more() {
        assert_eq!(
            failure_description(
                "blueprint refused: DaemonSet a is not allowed: x\nClusterRole b is not allowed: y\nPod c: z"
            ),
            "blueprint refused: DaemonSet a is not allowed: x (and 2 more problems)"
        );
        assert_eq!(
            failure_description("seed job db-seed failed: BackoffLimitExceeded (exit 1)"),
            "seed job db-seed failed: BackoffLimitExceeded (exit 1)"
        );
        assert!(failure_description(&"x".repeat(300)).chars().count() <= 140);
    }
}
