//! Rolling a preview out: wait for the Blueprint's required check runs on the commit, read the
//! Blueprint's source (or render it at the commit, `render`), plan, create the namespace with its guardrails, apply the plan step by
//! step and wait for each step to be ready (within the Blueprint's readiness timeout). Each pass
//! ends in one [`Verdict`]: waiting (for checks, an old namespace), deploying (with what the
//! pods are stuck on), ready, or failed with the reason. A `/preview` on an unchanged commit
//! starts a new rollout (the `redeploy` annotation is part of the plan's hash); a failed rollout
//! stays failed, with its one `failure`, until the plan changes or the preview is woken.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::checks::{self, Gate};
use super::hooks;
use super::steps::{apply_order, failure_description, plan_hash, rollout_steps};
use super::{adopt, data, reset};
use crate::context::Context;
use crate::error::Error;
use crate::report::Report;
use crate::verdict::{Next, Verdict, record, set_phase};
use sandcastle_crd::labels::REDEPLOY;
use sandcastle_crd::{Blueprint, Phase, PreviewEnvironment, PreviewStatus, Rollout};
use sandcastle_domain::guardrails;
use sandcastle_domain::naming;
use sandcastle_domain::plan::{self, PreviewContext};
use sandcastle_domain::{NamespaceName, PrNumber, RepoName, Sha};
use sandcastle_kube::clusters::Cluster;
use sandcastle_kube::namespace::{self, NamespaceError};
use sandcastle_kube::tls::NoCertificate;
use std::sync::Arc;

mod apply;
pub(crate) mod line;
mod render;

use apply::apply_and_wait;
use line::Turn;

/// How soon a failure that may heal by itself (a Blueprint fixed, a source readable again) is
/// looked at again when nothing wakes it sooner.
const RECHECK_FAILED: Duration = Duration::from_secs(60);
/// How soon a preview waiting for its Blueprint's first data snapshot looks again.
const DATA_WAIT: Duration = Duration::from_secs(2);

/// Who the preview is for and where it goes, from its spec; a reason for people when the spec
/// cannot be used.
fn context_of(
    pe: &PreviewEnvironment,
    blueprint: &Blueprint,
    ctx: &Context,
    edge: sandcastle_domain::edge::Edge,
) -> Result<PreviewContext, String> {
    let bad = |what: &str, e: &dyn std::fmt::Display| format!("invalid {what}: {e}");
    let repo = RepoName::new(&pe.spec.repository).map_err(|e| bad("spec.repository", &e))?;
    let sha = Sha::new(&pe.spec.sha).map_err(|e| bad("spec.sha", &e))?;
    let pr = pe
        .spec
        .pull_request
        .map(PrNumber::new)
        .transpose()
        .map_err(|e| bad("spec.pullRequest", &e))?;
    let preview = NamespaceName::new(&pe.name_any()).map_err(|e| bad("metadata.name", &e))?;
    let namespace = match &pe.spec.adopts {
        Some(a) => {
            NamespaceName::new(&a.namespace).map_err(|e| bad("spec.adopts.namespace", &e))?
        }
        None => naming::namespace_name(&ctx.settings.namespace_prefix, &preview),
    };
    Ok(PreviewContext {
        preview,
        namespace,
        source_namespace: blueprint.spec.source.namespace.clone(),
        blueprint: pe.spec.blueprint.clone(),
        repo,
        pr,
        sha,
        branch: pe.spec.git_ref.clone(),
        default_host: ctx.settings.default_host.clone(),
        edge,
        pool_member: sandcastle_domain::pool::host_label(pe),
        data: Default::default(),
    })
}

/// When the change this rollout carries out was asked for (the newest request left on the
/// preview), for its place in line; else when the preview was made.
fn asked_at(pe: &PreviewEnvironment) -> Timestamp {
    sandcastle_kube::events::requests_of(pe)
        .last()
        .map(|r| r.at)
        .or_else(|| pe.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .unwrap_or_default()
}

/// After any pass over preview `name`: unless it waits in line (`in_line`), it has no place
/// in the line any more; and unless it is rolling out (Ready, failed, stopped, removed, or
/// waiting for something else), its rollout's turn is over and the previews next in line look
/// again now.
pub(crate) fn done(ctx: &Context, name: &str, st: &mut PreviewStatus, in_line: bool) {
    if in_line {
        return;
    }
    st.in_line = None;
    if st.phase == Some(Phase::Deploying) {
        return;
    }
    for next in ctx.rollouts.leave(name) {
        ctx.poke_name(&next);
    }
}

fn elapsed(since: &Time, now: Timestamp) -> Duration {
    now.duration_since(since.0).try_into().unwrap_or_default()
}

/// The preview failed with `message`; GitHub hears it. Such a failure may heal (the Blueprint
/// fixed): it is looked at again after a while, and watches bring it back sooner.
fn fail(pe: &PreviewEnvironment, mut st: PreviewStatus, message: String, ctx: &Context) -> Verdict {
    set_phase(
        &mut st,
        Phase::Failed,
        message.clone(),
        ctx.clock.now(),
        Some(&pe.spec.sha),
    );
    Verdict::new(st, Next::After(RECHECK_FAILED)).reporting(Report::Failure {
        why: failure_description(&message),
        rollout: false,
    })
}

/// The rollout under way failed with `message`, and is remembered as failed: it is not retried,
/// and GitHub hears no more of it, until something changes (see [`Rollout::failed`]).
fn fail_rollout(
    pe: &PreviewEnvironment,
    mut st: PreviewStatus,
    message: String,
    blueprint: &Blueprint,
    ctx: &Context,
) -> Verdict {
    if let Some(r) = st.rollout.as_mut() {
        r.failed = true;
    }
    let mut verdict = fail(pe, st, message, ctx);
    verdict.next = until_deadline(pe, blueprint, ctx);
    if let Some(Report::Failure { rollout, .. }) = verdict.report.as_mut() {
        *rollout = true;
    }
    verdict
}

/// Look again at the preview's next lifecycle deadline (expiry, idle stop), or to repair drift.
fn until_deadline(pe: &PreviewEnvironment, blueprint: &Blueprint, ctx: &Context) -> Next {
    Next::After(super::admit::requeue(
        pe,
        blueprint,
        ctx,
        ctx.settings.drift_interval,
    ))
}

pub(crate) async fn run(
    pe: &PreviewEnvironment,
    mut st: PreviewStatus,
    blueprint: Blueprint,
    cluster: &Cluster,
    ctx: &Context,
) -> Result<Verdict, Error> {
    let now = ctx.clock.now();
    st.observed_generation = pe.metadata.generation;
    let edge = match crate::edge::edge_of(&blueprint, ctx) {
        Ok(edge) => edge,
        Err(e @ NoCertificate::NotReadYet(_)) => return Err(Error::Transient(e.to_string())),
        Err(NoCertificate::Unusable(why)) => return Ok(fail(pe, st, why, ctx)),
    };
    let mut pctx = match context_of(pe, &blueprint, ctx, edge) {
        Ok(c) => c,
        Err(why) => return Ok(fail(pe, st, why, ctx)),
    };
    let spec = &blueprint.spec;
    st.namespace = Some(pctx.namespace.to_string());

    if let Some(wait) = wait_for_checks(pe, &mut st, &blueprint, ctx).await {
        return Ok(Verdict::new(st, wait));
    }
    let mut latest = false;
    if let Some(token) = reset::asked(pe, &st) {
        let left = reset::wipe(cluster.client(), pctx.namespace.as_str()).await?;
        if left > 0 {
            let why = format!("resetting: throwing the data away ({left} objects left)");
            set_phase(&mut st, Phase::Deploying, why, now, Some(&pe.spec.sha));
            return Ok(Verdict::new(st, Next::Soon).reporting(Report::InProgress));
        }
        // The data is gone: roll out again from nothing, seeding afresh.
        st.reset_done = Some(token);
        st.rollout = None;
        latest = reset::latest(pe);
        let note = reset::note(&blueprint, latest);
        record(
            &mut st,
            now,
            "sandcastle",
            "Reset",
            Some(&pe.spec.sha),
            Some(note),
        );
    }
    // The data the claims start with: a snapshot of the Blueprint's, or nothing.
    let restore = data::decide(&mut st, &blueprint, cluster, latest);
    match &restore {
        data::Restore::Wait(why) => {
            set_phase(
                &mut st,
                Phase::Pending,
                why.clone(),
                now,
                Some(&pe.spec.sha),
            );
            return Ok(Verdict::new(st, Next::After(DATA_WAIT)));
        }
        data::Restore::Fail(why) => return Ok(fail(pe, st, why.clone(), ctx)),
        data::Restore::Empty | data::Restore::Set(_) | data::Restore::Kept(_) => {
            pctx.data = restore.claims();
        }
    }

    // Plan first: a refused blueprint fails before anything is created.
    let source = match source_cluster(&blueprint, ctx) {
        Ok(c) => c,
        Err(why) => return Ok(fail(pe, st, why, ctx)),
    };
    let objects = if spec.source.is_rendered() {
        match render::objects(pe, spec, &pctx, ctx).await {
            Ok(o) => Arc::new(o),
            Err(render::Failure::Passing(e)) => return Err(e),
            Err(render::Failure::Preview(why)) => return Ok(fail(pe, st, why, ctx)),
        }
    } else {
        match ctx
            .sources
            .read(&source.resolver, &ctx.settings.home, spec)
            .await
        {
            Ok(o) => o,
            Err(e) if e.is_transient() => return Err(Error::Transient(e.to_string())),
            Err(e) => {
                let why = format!("blueprint {}: {e}", pe.spec.blueprint);
                return Ok(fail(pe, st, why, ctx));
            }
        }
    };
    let plan = match plan::plan(&objects, spec, &pctx) {
        Ok(p) => p,
        Err(refused) => return Ok(fail(pe, st, format!("blueprint refused: {refused}"), ctx)),
    };
    if let Some(why) = needs_cilium(&pctx, spec, cluster).await? {
        return Ok(fail(pe, st, why, ctx));
    }
    let timeout = spec.readiness_timeout.get();
    let steps = rollout_steps(
        &plan,
        apply_order(spec.order, pe.spec.adopts.is_some()),
        guardrails::guardrail_objects(&pctx, &spec.isolation, &ctx.settings.ingress_namespace),
        hooks::bound(timeout),
    );
    let hash = plan_hash(&steps, pe.annotations().get(REDEPLOY));
    let total_objects: usize = steps.iter().map(|(_, o)| o.len()).sum();
    // Under a burst, new rollouts start in the order they were asked for.
    let starting = st.rollout.as_ref().is_none_or(|r| r.plan_hash != hash);
    let asked = asked_at(pe);
    let turn = ctx
        .rollouts
        .turn(&pe.name_any(), asked, starting, std::time::Instant::now());
    if let Turn::Wait { place, rolling } = turn {
        // Said once, when it joins the line (a status write for every move would cost each
        // waiting preview a write per rollout ahead); views count its place from `in_line`.
        if st.in_line.is_none() {
            let why = format!(
                "in line to roll out (joined {}, {rolling} rollout{} under way)",
                sandcastle_domain::ordinal::ordinal(u64::try_from(place).unwrap_or(u64::MAX)),
                if rolling == 1 { "" } else { "s" }
            );
            set_phase(&mut st, Phase::Pending, why, now, Some(&pe.spec.sha));
            let asked_ns = i64::try_from(asked.as_nanosecond()).unwrap_or(i64::MAX);
            st.in_line = Some(sandcastle_crd::InLine { asked_ns });
        }
        return Ok(Verdict::new(st, Next::After(line::WAIT_POLL)).waiting_in_line());
    }

    // The Blueprint's own Namespace object (in manifests) may tighten Pod Security, never loosen.
    let declared = plan::namespace_labels(&objects, spec, &pctx);
    // A sandbox taken over: its namespace becomes this preview's, and the sandbox goes.
    let previous = pe.spec.adopts.as_ref().map(|a| a.preview.as_str());
    if let Some(a) = &pe.spec.adopts {
        adopt::hand_over(pe, a, ctx).await?;
    }
    let at = Where { cluster, ctx };
    let namespace_uid = match ensure_namespace(&pctx, &blueprint, &declared, previous, &at).await {
        Ok(uid) => uid,
        Err(NamespaceError::Api(e)) => return Err(e.into()),
        Err(NamespaceError::Terminating(ns)) => {
            let why = format!("waiting for the old namespace {ns} to be deleted");
            set_phase(&mut st, Phase::Pending, why, now, None);
            return Ok(Verdict::new(st, Next::Soon));
        }
        Err(e @ NamespaceError::NotOurs { .. }) => return Ok(fail(pe, st, e.to_string(), ctx)),
    };

    // A rollout belongs to one plan in one namespace: a namespace made anew (deleted behind
    // Sandcastle's back) holds none of what was applied, so the rollout starts over.
    let new_rollout = st.rollout.as_ref().is_none_or(|r| {
        r.plan_hash != hash || (r.namespace_uid.is_some() && r.namespace_uid != namespace_uid)
    });
    if !new_rollout && st.rollout.as_ref().is_some_and(|r| r.failed) {
        // The one failure stands (posted again only if GitHub missed it).
        let why = failure_description(st.message.as_deref().unwrap_or("deploy failed"));
        let next = until_deadline(pe, &blueprint, ctx);
        let report = Report::Failure { why, rollout: true };
        return Ok(Verdict::new(st, next).reporting(report));
    }
    if new_rollout {
        // A namespace taken over (a warm pool's preview, a sandbox) may have been stopped: its
        // workloads scaled back and its routes back before the first rollout applies over them.
        if let (Some(a), None) = (&pe.spec.adopts, &st.rollout) {
            adopt::start_again(cluster, pctx.namespace.as_str(), a, ctx).await?;
        }
        st.rollout = Some(Rollout {
            plan_hash: hash,
            sha: pe.spec.sha.clone(),
            applied_steps: 0,
            ready_steps: 0,
            total_steps: u32::try_from(steps.len()).unwrap_or(u32::MAX),
            objects: u32::try_from(total_objects).unwrap_or(u32::MAX),
            started_at: Time(now),
            step_started_at: Time(now),
            namespace_uid,
            failed: false,
            probe: None,
        });
        let source = spec.source.describe();
        let message = format!("cloning {source} ({total_objects} objects)");
        set_phase(&mut st, Phase::Deploying, message, now, Some(&pe.spec.sha));
        // The wildcard certificate's copy, before any route names it.
        crate::edge::copy_certificate(ctx, cluster.client(), pctx.namespace.as_str()).await?;
        // The snapshot the claims restore, bound into the namespace before they name it.
        if let data::Restore::Set(set) = &restore {
            let ns = pctx.namespace.as_str();
            if let Err(why) = data::bind(pe, set, ns, &pctx.blueprint, cluster).await? {
                return Ok(fail_rollout(pe, st, why, &blueprint, ctx));
            }
        }
    } else if let Some(r) = st.rollout.as_mut() {
        r.namespace_uid = r.namespace_uid.take().or(namespace_uid);
    }
    let mut verdict = apply_and_wait(pe, st, &blueprint, &pctx, &steps, &plan, &at).await?;
    if verdict.status.phase == Some(Phase::Deploying)
        && matches!(restore, data::Restore::Set(_))
        && let Some(why) = data::restore_failure(cluster, pctx.namespace.as_str()).await?
    {
        return Ok(fail_rollout(pe, verdict.status, why, &blueprint, ctx));
    }
    if verdict.status.phase == Some(Phase::Ready) {
        let st = &mut verdict.status;
        super::test_runs::start(pe, st, &blueprint, (&pctx, &plan), cluster, ctx).await?;
    }
    Ok(verdict)
}

/// The cluster a preview lives in, and the controller's context.
struct Where<'a> {
    cluster: &'a Cluster,
    ctx: &'a Context,
}

/// The cluster the Blueprint's source is read from, or why it cannot be.
fn source_cluster(blueprint: &Blueprint, ctx: &Context) -> Result<Arc<Cluster>, String> {
    let name = blueprint.spec.source_cluster();
    let cluster = ctx.clusters.get(name).map_err(|standing| {
        let why = sandcastle_domain::placement::Refusal {
            cluster: sandcastle_domain::placement::ClusterName::new(name)
                .unwrap_or_else(|_| sandcastle_domain::placement::ClusterName::in_cluster()),
            why: sandcastle_domain::placement::Why::Standing(standing),
        };
        format!("blueprint {}: source.cluster: {why}", blueprint.name_any())
    })?;
    if !cluster.is_local() && !cluster.reachable() {
        return Err(format!(
            "blueprint {}: source.cluster: cluster {name} is unreachable",
            blueprint.name_any()
        ));
    }
    Ok(cluster)
}

/// The commit's images may not exist before its checks pass: until then, wait (a preview
/// running an older commit keeps running it). `Some`: wait, and look again then.
async fn wait_for_checks(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    blueprint: &Blueprint,
    ctx: &Context,
) -> Option<Next> {
    let required = &blueprint.spec.wait_for_checks;
    if required.is_empty() {
        st.waiting_for_checks.clear();
        return None;
    }
    if st.checks_passed_sha.as_deref() == Some(pe.spec.sha.as_str()) {
        return None;
    }
    match checks::gate(pe, required, ctx).await {
        Gate::Passed => {
            st.checks_passed_sha = Some(pe.spec.sha.clone());
            st.waiting_for_checks.clear();
            None
        }
        Gate::Waiting {
            pending,
            message,
            again,
        } => {
            let now = ctx.clock.now();
            set_phase(st, Phase::Pending, message, now, Some(&pe.spec.sha));
            st.waiting_for_checks = pending;
            Some(Next::After(again))
        }
    }
}

/// Why the preview cannot be made here, when its Blueprint names egress hosts (`fqdns`) and the
/// cluster does not serve Cilium's policy: refused before anything is created.
async fn needs_cilium(
    pctx: &PreviewContext,
    spec: &sandcastle_crd::BlueprintSpec,
    cluster: &Cluster,
) -> Result<Option<String>, Error> {
    use guardrails::egress::{CILIUM_API_VERSION, CILIUM_POLICY_KIND, FQDN_POLICY};
    if guardrails::egress::fqdn_policy(pctx, &spec.isolation).is_none() {
        return Ok(None);
    }
    match cluster
        .resolver
        .resolve(CILIUM_API_VERSION, CILIUM_POLICY_KIND, FQDN_POLICY)
        .await
    {
        Ok(_) => Ok(None),
        Err(e) if e.is_transient() => Err(Error::Transient(e.to_string())),
        Err(_) => Ok(Some(format!(
            "Blueprint {}: spec.isolation.egress allows hosts by name (fqdns), which needs Cilium, \
             and cluster {} does not serve {CILIUM_API_VERSION} {CILIUM_POLICY_KIND}; \
             allow their addresses with cidrs instead, or install Cilium",
            pctx.blueprint, cluster.name
        ))),
    }
}

/// Create or update the preview namespace with its labels (the guardrails', tightened by the
/// Blueprint's own Namespace object, and which Sandcastle made it); returns its uid.
async fn ensure_namespace(
    pctx: &PreviewContext,
    blueprint: &Blueprint,
    declared: &std::collections::BTreeMap<String, String>,
    previous: Option<&str>,
    at: &Where<'_>,
) -> Result<Option<String>, NamespaceError> {
    let (cluster, ctx) = (at.cluster, at.ctx);
    let mut labels = guardrails::namespace_labels_with(pctx, &blueprint.spec.isolation, declared);
    // Which Sandcastle made the namespace: the orphan sweep only ever looks at its own.
    labels.insert(
        sandcastle_crd::labels::HOME.to_owned(),
        ctx.settings.home.clone(),
    );
    // In a cluster other installations may share, which one exactly.
    if !cluster.is_local() {
        let installation = ctx.clusters.installation().ok_or_else(|| {
            NamespaceError::Api(kube::Error::Service(
                "the uid of Sandcastle's namespace is not known yet".into(),
            ))
        })?;
        labels.insert(
            sandcastle_crd::labels::INSTALLATION.to_owned(),
            installation,
        );
    }
    let cached = (ctx.watched_in(cluster)).and_then(|w| w.namespace(pctx.namespace.as_str()));
    let ns = namespace::ensure(
        cluster.client(),
        pctx.namespace.as_str(),
        pctx.preview.as_str(),
        previous,
        &labels,
        cached.as_deref(),
    )
    .await?;
    Ok(ns.metadata.uid)
}
