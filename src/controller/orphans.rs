//! Orphan namespaces: namespaces this Sandcastle made (`app.kubernetes.io/managed-by=sandcastle`,
//! `sandcastle.dev/preview`, and `sandcastle.dev/home` naming this Sandcastle's namespace) with no
//! PreviewEnvironment behind them — left by a finalizer someone removed by hand, or a resource
//! deleted while Sandcastle was down. The first sweep that finds one marks it with the time
//! (`sandcastle.dev/orphaned-since`, from the clock); a sweep after the grace period deletes it,
//! after checking once more that no preview has appeared. A namespace without all three labels
//! is never touched, and a preview that comes back clears the mark.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::context::Context;
use crate::crd::PreviewEnvironment;
use crate::crd::labels::{HOME, MANAGED_BY, MANAGER, ORPHANED_SINCE, PREVIEW};
use crate::domain::lifecycle;

/// What one sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    /// Orphans seen for the first time (the grace period starts).
    pub marked: usize,
    /// Orphans still within their grace period.
    pub waiting: usize,
    pub deleted: Vec<String>,
    /// Marks removed because the preview exists again.
    pub cleared: usize,
}

async fn annotate(api: &Api<Namespace>, name: &str, value: Value) -> Result<(), kube::Error> {
    let patch = json!({"metadata": {"annotations": {ORPHANED_SINCE: value}}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Mark new orphans and delete those older than `grace`.
pub async fn sweep(ctx: &Context, grace: Duration) -> Result<SweepReport, kube::Error> {
    let mut report = SweepReport::default();
    let home = &ctx.settings.home;
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    let selector = format!("{MANAGED_BY}={MANAGER},{HOME}={home},{PREVIEW}");
    let ours = namespaces
        .list(&ListParams::default().labels(&selector))
        .await?;
    if ours.items.is_empty() {
        return Ok(report);
    }
    let previews: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), home);
    let known: BTreeSet<String> = previews
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    let now = ctx.clock.now();
    for ns in ours.items {
        if ns.meta().deletion_timestamp.is_some() {
            continue;
        }
        let name = ns.name_any();
        let Some(preview) = ns.labels().get(PREVIEW).cloned() else {
            continue;
        };
        let since = ns
            .annotations()
            .get(ORPHANED_SINCE)
            .map(|s| s.parse::<Timestamp>());
        if known.contains(&preview) {
            if since.is_some() {
                annotate(&namespaces, &name, Value::Null).await?;
                report.cleared += 1;
            }
            continue;
        }
        // First seen (or a mark that does not parse): the grace period starts now.
        let Some(Ok(since)) = since else {
            annotate(&namespaces, &name, json!(now.to_string())).await?;
            report.marked += 1;
            continue;
        };
        if !lifecycle::is_expired(lifecycle::hard_limit(since, grace), now) {
            report.waiting += 1;
            continue;
        }
        if previews.get_opt(&preview).await?.is_some() {
            annotate(&namespaces, &name, Value::Null).await?;
            report.cleared += 1;
            continue;
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: ns.uid(),
                resource_version: ns.resource_version(),
            }),
            ..DeleteParams::background()
        };
        match namespaces.delete(&name, &dp).await {
            Ok(_) => {
                tracing::info!(target: "audit", actor = "sandcastle", action = "delete-orphan", namespace = %name, preview = %preview, result = "deleted", "orphan namespace deleted");
                report.deleted.push(name);
            }
            // Changed or gone meanwhile: look again next sweep.
            Err(kube::Error::Api(r)) if r.code == 404 || r.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(report)
}
