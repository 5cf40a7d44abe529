//! Taking a preview down, one pass at a time, in the cluster it lives in: run its pre-delete
//! hooks (bounded), delete its namespace (and the ReferenceGrant its stopped HTTPRoutes had in
//! Sandcastle's namespace), wait until it is gone (a cluster that does not answer
//! is waited for; one no longer registered cannot be reached, and its namespace is left there,
//! said in the history), release what bound the Blueprint's data snapshots into it, mark the GitHub deployment inactive; then either let the
//! resource go (it is being deleted: the finalizer is removed), keep it as a tombstone (PR
//! closed, expired or destroyed) until its retention ends (counted from the removal), or — for a
//! preview that came back as a new incarnation — start again from nothing.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};

use super::{hooks, place};
use crate::context::Context;
use crate::error::Error;
use crate::report::Report;
use crate::verdict::{Next, Verdict, record, set_phase};
use sandcastle_crd::{Phase, PreviewEnvironment, PreviewStatus, Reported, TeardownReason};
use sandcastle_domain::{NamespaceName, naming};
use sandcastle_github::text::teardown::{Style, what_happened};
use sandcastle_kube::clusters::Cluster;
use sandcastle_kube::{namespace, wake_route};
use std::sync::Arc;

fn namespace_of(pe: &PreviewEnvironment, ctx: &Context) -> Option<String> {
    if let Some(ns) = pe.status.as_ref().and_then(|s| s.namespace.clone()) {
        return Some(ns);
    }
    if let Some(a) = &pe.spec.adopts {
        return Some(a.namespace.clone());
    }
    let preview = NamespaceName::new(&pe.name_any()).ok()?;
    Some(naming::namespace_name(&ctx.settings.namespace_prefix, &preview).to_string())
}

/// A sandbox taken over by a pull request's preview: its namespace is that preview's now, and
/// nothing of it is run or deleted on its way out.
fn handed_over(pe: &PreviewEnvironment) -> bool {
    pe.spec
        .teardown
        .as_ref()
        .is_some_and(|t| t.reason == TeardownReason::Adopted)
}

/// Delete the namespace; `Ok(true)` once it is gone.
async fn namespace_gone(
    pe: &PreviewEnvironment,
    cluster: &Cluster,
    ctx: &Context,
) -> Result<bool, Error> {
    let Some(ns) = namespace_of(pe, ctx) else {
        return Ok(true);
    };
    namespace::delete(cluster.client(), &ns, &pe.name_any())
        .await
        .map_err(|e| match e {
            namespace::NamespaceError::Api(e) => Error::Kube(e),
            other => Error::Transient(other.to_string()),
        })
}

/// Where the preview's namespace is to be taken down: its cluster; or why not now (as a
/// verdict); or `Ok(None)` when there is nothing to take down there any more (its cluster no
/// longer registered: nothing can reach it, and the namespace is left, recorded as such).
async fn cluster_of(
    pe: &PreviewEnvironment,
    ctx: &Context,
    st: &mut PreviewStatus,
) -> Result<Result<Option<Arc<Cluster>>, Verdict>, Error> {
    let name = place::placed_in(st)
        .unwrap_or(sandcastle_crd::IN_CLUSTER)
        .to_owned();
    let now = ctx.clock.now();
    match ctx.clusters.get(&name) {
        Ok(c) if c.is_local() || c.reachable() => Ok(Ok(Some(c))),
        Ok(_) => {
            let message = format!(
                "waiting for cluster {name} to answer, to delete the namespace{}",
                namespace_of(pe, ctx)
                    .map(|n| format!(" {n}"))
                    .unwrap_or_default()
            );
            place::reachability(
                st,
                &name,
                Some(&format!("cluster {name} is unreachable")),
                ctx,
            );
            set_phase(st, Phase::Terminating, message, now, None);
            Ok(Err(Verdict::new(
                st.clone(),
                Next::After(Duration::from_secs(30)),
            )))
        }
        Err(sandcastle_domain::placement::Standing::Unregistered) => {
            tracing::warn!(preview = %pe.name_any(), cluster = %name, "the preview's cluster is no longer registered; its namespace is left there");
            let note =
                format!("cluster {name} is no longer registered: its namespace is left there");
            record(st, now, "sandcastle", "NamespaceLeft", None, Some(&note));
            Ok(Ok(None))
        }
        Err(_) => {
            let message = format!(
                "waiting for the Secret of cluster {name} to be usable, to delete the namespace"
            );
            set_phase(st, Phase::Terminating, message, now, None);
            Ok(Err(Verdict::new(
                st.clone(),
                Next::After(Duration::from_secs(60)),
            )))
        }
    }
}

fn removal_message(pe: &PreviewEnvironment) -> String {
    let Some(t) = &pe.spec.teardown else {
        return "removed: the PreviewEnvironment was deleted".into();
    };
    let what = what_happened(t.into(), Style::Plain);
    match t.reason {
        TeardownReason::Merged | TeardownReason::Closed => format!("removed: pull request {what}"),
        TeardownReason::Expired => "removed: the preview expired".into(),
        TeardownReason::Adopted => format!("{what}: its namespace lives on there"),
        TeardownReason::Destroyed | TeardownReason::NoPreview | TeardownReason::Draft => {
            format!("removed: {what}")
        }
    }
}

/// The next step of taking the preview's namespace down, as a verdict; `None` once hooks have
/// ended (each recorded in `st`'s history) and the namespace is gone.
async fn take_down(
    pe: &PreviewEnvironment,
    ctx: &Context,
    st: &mut PreviewStatus,
) -> Result<Option<Verdict>, Error> {
    let now = ctx.clock.now();
    if handed_over(pe) {
        forget_grant(pe, ctx).await?;
        return Ok(None);
    }
    let cluster = match cluster_of(pe, ctx, st).await? {
        Ok(Some(c)) => c,
        Ok(None) => return Ok(None),
        Err(waiting) => return Ok(Some(waiting)),
    };
    if let Some(ns) = namespace_of(pe, ctx) {
        match hooks::run(cluster.client(), &ns, &pe.name_any(), now).await? {
            hooks::Hooks::Running(names) => {
                let message = hooks::running_message(&names);
                set_phase(st, Phase::Terminating, message, now, None);
                return Ok(Some(Verdict::new(st.clone(), Next::Soon)));
            }
            hooks::Hooks::Done(ended) => {
                for (name, how) in ended {
                    if !matches!(how, hooks::Ended::Completed) {
                        tracing::warn!(preview = %pe.name_any(), hook = %name, outcome = %how, "pre-delete hook did not complete");
                    }
                    let action = format!("pre-delete hook {name}");
                    record(st, now, "sandcastle", &action, None, Some(&how.to_string()));
                }
            }
        }
    }
    if !namespace_gone(pe, &cluster, ctx).await? {
        if st.phase != Some(Phase::Terminating) || st.message.as_deref() != Some(DELETING) {
            set_phase(st, Phase::Terminating, DELETING, now, None);
        }
        return Ok(Some(Verdict::new(st.clone(), Next::Soon)));
    }
    // The contents that bound the Blueprint's data snapshots into the namespace are
    // cluster-scoped: they outlive it, and go now (retained: the snapshots themselves stay).
    let restored = st.data.as_ref().is_some_and(|d| d.snapshot.is_some());
    if restored
        && sandcastle_kube::snapshots::release(cluster.client(), &pe.name_any(), None).await? > 0
    {
        return Ok(Some(Verdict::new(st.clone(), Next::Soon)));
    }
    forget_grant(pe, ctx).await?;
    Ok(None)
}

/// The ReferenceGrant a stopped preview's HTTPRoutes had in Sandcastle's namespace goes with it
/// (there is none unless it was stopped with `--wake-route-service` in Sandcastle's cluster).
async fn forget_grant(pe: &PreviewEnvironment, ctx: &Context) -> Result<(), Error> {
    wake_route::forget_grant(&ctx.client, &ctx.settings.home, &pe.name_any())
        .await
        .map_err(Error::Kube)
}

const DELETING: &str = "deleting the namespace";

/// What a removed namespace took with it: the rollout, the URL, the services.
fn forget_rollout(st: &mut PreviewStatus) {
    st.url = None;
    st.services.clear();
    st.rollout = None;
}

/// Whether the preview came back after a teardown (`spec.incarnation` moved on) while its status
/// still describes the old incarnation: that one is taken down before anything is rolled out.
pub(crate) fn outlived(pe: &PreviewEnvironment) -> bool {
    let recorded = pe.status.as_ref().map_or(0, |s| s.incarnation);
    pe.spec.incarnation != recorded
}

/// Take down what the previous incarnation left (pre-delete hooks, the namespace, GitHub's
/// deployment marked inactive), whatever it had got to, then start the new incarnation from
/// nothing: no rollout, no URL, and a new GitHub deployment for its first status.
pub(crate) async fn retire(pe: &PreviewEnvironment, ctx: &Context) -> Result<Verdict, Error> {
    let mut st = pe.status.clone().unwrap_or_default();
    if let Some(progress) = take_down(pe, ctx, &mut st).await? {
        return Ok(progress);
    }
    if st.github_deployment_id.is_some() && st.github_reported != Some(Reported::Inactive) {
        // GitHub hears of the old incarnation's end before the new one starts.
        return Ok(Verdict::new(st, Next::Soon).reporting(Report::Inactive));
    }
    forget_rollout(&mut st);
    st.deployed_sha = None;
    st.removed_at = None;
    st.incarnation = pe.spec.incarnation;
    // A new life, placed anew (maybe elsewhere) and rolled out into a new namespace.
    st.cluster = None;
    st.waiting_for_cluster = None;
    st.namespace = None;
    st.conditions.retain(|c| c.type_ != place::CONDITION);
    set_phase(
        &mut st,
        Phase::Pending,
        "back after a teardown: deploying again into a new namespace",
        ctx.clock.now(),
        Some(&pe.spec.sha),
    );
    Ok(Verdict::new(st, Next::Soon))
}

/// The resource is being deleted: take everything down, then tell GitHub. Returns the verdict
/// and whether the finalizer may go (once GitHub was told, which the reconcile checks).
pub(crate) async fn finalize(
    pe: &PreviewEnvironment,
    ctx: &Context,
) -> Result<(Verdict, bool), Error> {
    let mut st = pe.status.clone().unwrap_or_default();
    if let Some(progress) = take_down(pe, ctx, &mut st).await? {
        return Ok((progress, false));
    }
    Ok((
        Verdict::new(st, Next::After(Duration::from_secs(10))).reporting(Report::Inactive),
        true,
    ))
}

/// The preview should be gone but its record kept for a while.
pub(crate) async fn tombstone(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    ctx: &Context,
) -> Result<Verdict, Error> {
    let now = ctx.clock.now();
    let mut st = pe.status.clone().unwrap_or_default();
    let retention = ctx.settings.tombstone_retention;
    if st.phase != Some(Phase::Removed) {
        if let Some(progress) = take_down(pe, ctx, &mut st).await? {
            return Ok(progress);
        }
        set_phase(&mut st, Phase::Removed, removal_message(pe), now, None);
        forget_rollout(&mut st);
        st.removed_at = Some(Time(now));
        return Ok(Verdict::new(st, Next::After(retention)).reporting(Report::Inactive));
    }
    // Retention counts from the removal, never from the event's own time: a replayed or late
    // `closed` must not make the tombstone go at once, letting an older `opened` bring it back.
    let Some(removed_at) = st.removed_at.clone() else {
        st.removed_at = Some(Time(now));
        return Ok(Verdict::new(st, Next::After(retention)).reporting(Report::Inactive));
    };
    let age: Duration = now
        .duration_since(removed_at.0)
        .try_into()
        .unwrap_or_default();
    if age < retention {
        return Ok(Verdict::new(st, Next::After(retention - age)).reporting(Report::Inactive));
    }
    if ctx.settings.delete_github_environments {
        delete_environment(pe, ctx).await?;
    }
    match api
        .delete(&pe.name_any(), &DeleteParams::background())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(r)) if r.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Verdict::new(st, Next::Change))
}

/// The tombstone goes: so does the preview's GitHub environment. A permission the App lacks is
/// said and left at that (the tombstone goes anyway); GitHub being unavailable is retried.
async fn delete_environment(pe: &PreviewEnvironment, ctx: &Context) -> Result<(), Error> {
    let (Some(installation), Ok(repo)) = (
        pe.spec.installation_id,
        sandcastle_domain::RepoName::new(&pe.spec.repository),
    ) else {
        return Ok(());
    };
    let environment = sandcastle_domain::naming::github_environment(&pe.name_any());
    let gh = ctx.github.installation(installation);
    match gh.delete_environment(&repo, &environment).await {
        Ok(()) => {
            tracing::info!(preview = %pe.name_any(), %environment, "deleted the GitHub environment");
            Ok(())
        }
        Err(e) if e.is_retryable() => Err(Error::Transient(format!(
            "deleting GitHub environment {environment}: {e}"
        ))),
        Err(e) => {
            tracing::warn!(
                preview = %pe.name_any(), %environment, error = %e,
                "could not delete the GitHub environment (the App needs the Administration permission)"
            );
            Ok(())
        }
    }
}
