//! One reconcile of one PreviewEnvironment (counted and timed): keep its sticky comment and its
//! Kubernetes Events in line with what the last reconcile saved, finalize when deleted, tear down when asked, wait while a
//! fork's pull request awaits a maintainer's approval, otherwise roll the preview out towards its
//! spec.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::lifecycle::{self, Guard};
use super::status::{save, set_phase};
use super::{capacity, rollout, sticky, teardown};
use crate::crd::labels::FINALIZER;
use crate::crd::{Phase, PreviewEnvironment};
use crate::domain::Sha;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Transient(String),
}

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
    let Some(pe) = api.get_opt(&cached.name_any()).await? else {
        return Ok(Action::await_change());
    };
    if pe.meta().deletion_timestamp.is_some() {
        let pe = capacity::release(&api, pe, &ctx).await?;
        ctx.events.forget(&pe.name_any());
        ctx.checks_asked.forget(&pe.name_any());
        return teardown::finalize(&api, &pe, &ctx).await;
    }
    // Every status change (saved by the previous reconcile) brings a reconcile here, so the
    // comment follows the status without a GitHub call on every pass.
    let pe = sticky::sync(&api, pe, &ctx).await?;
    ctx.events.sync(&pe).await;
    if pe.spec.teardown.is_some() {
        let pe = capacity::release(&api, pe, &ctx).await?;
        return teardown::tombstone(&api, &pe, &ctx).await;
    }
    if teardown::outlived(&pe) {
        return teardown::retire(&api, &pe, &ctx).await;
    }
    if pe.spec.awaiting_approval {
        return await_approval(&api, &pe, &ctx).await;
    }
    if !pe.finalizers().iter().any(|f| f == FINALIZER) {
        add_finalizer(&api, &pe).await?;
        // The update triggers another reconcile with the finalizer in place.
        return Ok(Action::await_change());
    }
    // Lifecycle guardrails: expiry, a deleted Blueprint, the cap, stop and wake.
    let pe = match lifecycle::guard(&api, pe, &ctx).await? {
        Guard::Done(action) => return Ok(action),
        Guard::Proceed(pe) => *pe,
    };
    rollout::run(&api, &pe, &ctx).await
}

/// A fork's pull request nobody permitted has approved: nothing is deployed.
async fn await_approval(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    ctx: &Context,
) -> Result<Action, Error> {
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
    save(api, pe, &st).await?;
    Ok(Action::await_change())
}

pub(super) fn error_policy(pe: Arc<PreviewEnvironment>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(preview = %pe.name_any(), error = %err, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

async fn add_finalizer(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
) -> Result<(), kube::Error> {
    let mut finalizers = pe.finalizers().to_vec();
    finalizers.push(FINALIZER.to_owned());
    let patch = json!({
        "metadata": {"finalizers": finalizers, "resourceVersion": pe.resource_version()}
    });
    api.patch(
        &pe.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

pub(super) async fn remove_finalizer(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
) -> Result<(), kube::Error> {
    let finalizers: Vec<String> = pe
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    let patch = json!({
        "metadata": {"finalizers": finalizers, "resourceVersion": pe.resource_version()}
    });
    match api
        .patch(
            &pe.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
