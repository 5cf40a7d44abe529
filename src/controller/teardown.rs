//! Taking a preview down: run its pre-delete hooks (bounded), delete its namespace, wait until it
//! is gone, mark the GitHub deployment inactive; then either drop the finalizer (the resource is
//! being deleted), keep the resource as a tombstone (PR closed, expired or destroyed) until its
//! retention ends (counted from the removal), or — for a preview that came back as a new
//! incarnation — start again from nothing.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;

use super::context::Context;
use super::hooks;
use super::reconcile::{Error, remove_finalizer};
use super::report::{self, Report};
use super::status::{record, save, set_phase};
use crate::crd::{Phase, PreviewEnvironment, PreviewStatus, TeardownReason};
use crate::domain::{NamespaceName, naming};
use crate::k8s::namespace;

fn namespace_of(pe: &PreviewEnvironment, ctx: &Context) -> Option<String> {
    if let Some(ns) = pe.status.as_ref().and_then(|s| s.namespace.clone()) {
        return Some(ns);
    }
    let preview = NamespaceName::new(&pe.name_any()).ok()?;
    Some(naming::namespace_name(&ctx.settings.namespace_prefix, &preview).to_string())
}

/// Delete the namespace; `Ok(true)` once it is gone.
async fn namespace_gone(pe: &PreviewEnvironment, ctx: &Context) -> Result<bool, Error> {
    let Some(ns) = namespace_of(pe, ctx) else {
        return Ok(true);
    };
    namespace::delete(&ctx.client, &ns, &pe.name_any())
        .await
        .map_err(|e| match e {
            namespace::NamespaceError::Api(e) => Error::Kube(e),
            other => Error::Transient(other.to_string()),
        })
}

fn removal_message(pe: &PreviewEnvironment) -> String {
    let Some(t) = &pe.spec.teardown else {
        return "removed: the PreviewEnvironment was deleted".into();
    };
    let by = t
        .actor
        .as_deref()
        .map(|a| format!(" by @{a}"))
        .unwrap_or_default();
    match t.reason {
        TeardownReason::Merged => format!("removed: pull request merged{by}"),
        TeardownReason::Closed => format!("removed: pull request closed{by}"),
        TeardownReason::Expired => "removed: the preview expired".into(),
        TeardownReason::Destroyed => format!("removed: destroyed{by}"),
        TeardownReason::NoPreview => format!("removed: labelled no-preview{by}"),
        TeardownReason::Draft => format!("removed: converted to draft{by}"),
    }
}

async fn take_down(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    ctx: &Context,
    st: &mut PreviewStatus,
) -> Result<bool, Error> {
    let now = ctx.clock.now();
    if !run_hooks(api, pe, ctx, st).await? {
        return Ok(false);
    }
    if !namespace_gone(pe, ctx).await? {
        if st.phase != Some(Phase::Terminating) || st.message.as_deref() != Some(DELETING) {
            set_phase(st, Phase::Terminating, DELETING, now, None);
        }
        save(api, pe, st).await?;
        return Ok(false);
    }
    Ok(true)
}

const DELETING: &str = "deleting the namespace";

/// Run the namespace's pre-delete hooks; `Ok(true)` once they have all ended (each recorded in
/// the history), so the namespace may go.
async fn run_hooks(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    ctx: &Context,
    st: &mut PreviewStatus,
) -> Result<bool, Error> {
    let Some(ns) = namespace_of(pe, ctx) else {
        return Ok(true);
    };
    let now = ctx.clock.now();
    match hooks::run(&ctx.client, &ns, &pe.name_any(), now).await? {
        hooks::Hooks::Running(names) => {
            set_phase(
                st,
                Phase::Terminating,
                hooks::running_message(&names),
                now,
                None,
            );
            save(api, pe, st).await?;
            Ok(false)
        }
        hooks::Hooks::Done(ended) => {
            for (name, how) in ended {
                if !matches!(how, hooks::Ended::Completed) {
                    tracing::warn!(preview = %pe.name_any(), hook = %name, outcome = %how, "pre-delete hook did not complete");
                }
                record(
                    st,
                    now,
                    "sandcastle",
                    &format!("pre-delete hook {name}"),
                    None,
                    Some(&how.to_string()),
                );
            }
            Ok(true)
        }
    }
}

/// What a removed namespace took with it: the rollout, the URL, the services.
fn forget_rollout(st: &mut PreviewStatus) {
    st.url = None;
    st.services.clear();
    st.rollout = None;
}

/// Whether the preview came back after a teardown (`spec.incarnation` moved on) while its status
/// still describes the old incarnation: that one is taken down before anything is rolled out.
pub(super) fn outlived(pe: &PreviewEnvironment) -> bool {
    let recorded = pe.status.as_ref().map_or(0, |s| s.incarnation);
    pe.spec.incarnation != recorded
}

/// Take down what the previous incarnation left (pre-delete hooks, the namespace, GitHub's
/// deployment marked inactive), whatever it had got to, then start the new incarnation from
/// nothing: no rollout, no URL, and a new GitHub deployment for its first status.
pub(super) async fn retire(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    ctx: &Context,
) -> Result<Action, Error> {
    let mut st = pe.status.clone().unwrap_or_default();
    if !take_down(api, pe, ctx, &mut st).await? {
        return Ok(super::soon(ctx));
    }
    if !report::sync(pe, &mut st, ctx, Report::Inactive).await {
        save(api, pe, &st).await?;
        return Ok(super::after(Duration::from_secs(10)));
    }
    forget_rollout(&mut st);
    st.deployed_sha = None;
    st.removed_at = None;
    st.incarnation = pe.spec.incarnation;
    set_phase(
        &mut st,
        Phase::Pending,
        "back after a teardown: deploying again into a new namespace",
        ctx.clock.now(),
        Some(&pe.spec.sha),
    );
    save(api, pe, &st).await?;
    Ok(super::soon(ctx))
}

/// The resource is being deleted: take everything down, then let it go.
pub(super) async fn finalize(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    ctx: &Context,
) -> Result<Action, Error> {
    let mut st = pe.status.clone().unwrap_or_default();
    if !take_down(api, pe, ctx, &mut st).await? {
        return Ok(super::soon(ctx));
    }
    if !report::sync(pe, &mut st, ctx, Report::Inactive).await {
        // GitHub is unreachable: keep the finalizer a little longer so "inactive" is not lost.
        save(api, pe, &st).await?;
        return Ok(super::after(Duration::from_secs(10)));
    }
    remove_finalizer(api, pe).await?;
    Ok(Action::await_change())
}

/// The preview should be gone but its record kept for a while.
pub(super) async fn tombstone(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    ctx: &Context,
) -> Result<Action, Error> {
    let now = ctx.clock.now();
    let mut st = pe.status.clone().unwrap_or_default();
    if st.phase != Some(Phase::Removed) {
        if !take_down(api, pe, ctx, &mut st).await? {
            return Ok(super::soon(ctx));
        }
        let reported = report::sync(pe, &mut st, ctx, Report::Inactive).await;
        set_phase(&mut st, Phase::Removed, removal_message(pe), now, None);
        forget_rollout(&mut st);
        st.removed_at = Some(Time(now));
        save(api, pe, &st).await?;
        if !reported {
            return Ok(super::after(Duration::from_secs(10)));
        }
    } else if !report::sync(pe, &mut st, ctx, Report::Inactive).await {
        save(api, pe, &st).await?;
        return Ok(super::after(Duration::from_secs(10)));
    }
    // Retention counts from the removal, never from the event's own time: a replayed or late
    // `closed` must not make the tombstone go at once, letting an older `opened` bring it back.
    let Some(removed_at) = st.removed_at.clone() else {
        st.removed_at = Some(Time(now));
        save(api, pe, &st).await?;
        return Ok(super::after(ctx.settings.tombstone_retention));
    };
    let age: Duration = now
        .duration_since(removed_at.0)
        .try_into()
        .unwrap_or_default();
    let retention = ctx.settings.tombstone_retention;
    if age >= retention {
        match api
            .delete(&pe.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(r)) if r.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(Action::await_change());
    }
    Ok(super::after(retention - age))
}
