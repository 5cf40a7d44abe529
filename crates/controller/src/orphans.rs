//! Orphan namespaces: namespaces this Sandcastle made (`app.kubernetes.io/managed-by=sandcastle`,
//! `sandcastle.dev/preview`, and `sandcastle.dev/home` naming this Sandcastle's namespace) with no
//! PreviewEnvironment behind them — left by a finalizer someone removed by hand, or a resource
//! deleted while Sandcastle was down. The first sweep that finds one marks it with the time
//! (`sandcastle.dev/orphaned-since`, from the clock); a sweep after the grace period deletes it,
//! after checking once more that no preview has appeared. A namespace without all three labels
//! is never touched, and a preview that comes back clears the mark. Every cluster that answers is
//! swept; in another cluster only the namespaces carrying this installation's uid
//! (`sandcastle.dev/installation`) are Sandcastle's, and a preview owns namespaces only in the
//! cluster it lives in. ReferenceGrants Sandcastle made in its own namespace for stopped
//! previews' HTTPRoutes (labelled as the preview's) are deleted once no such preview exists:
//! they grant nothing anyone else relies on, so they need no grace period.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::context::Context;
use sandcastle_crd::PreviewEnvironment;
use sandcastle_crd::labels::{HOME, INSTALLATION, MANAGED_BY, MANAGER, ORPHANED_SINCE, PREVIEW};
use sandcastle_domain::lifecycle;
use sandcastle_kube::clusters::Cluster;
use sandcastle_kube::wake_route;

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
    /// ReferenceGrants of previews that are gone, deleted.
    pub grants: Vec<String>,
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

/// Mark new orphans and delete those older than `grace`, in every cluster that answers.
pub async fn sweep(ctx: &Context, grace: Duration) -> Result<SweepReport, kube::Error> {
    let mut report = SweepReport::default();
    let previews: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let mut clusters = vec![ctx.clusters.local().clone()];
    clusters.extend(
        ctx.clusters
            .registered()
            .into_iter()
            .filter(|c| c.reachable()),
    );
    let mut known: Option<BTreeMap<String, Option<String>>> = None;
    for cluster in clusters {
        if let Err(e) = sweep_in(ctx, &cluster, &previews, &mut known, grace, &mut report).await {
            if cluster.is_local() {
                return Err(e);
            }
            tracing::warn!(cluster = %cluster.name, error = %e, "orphan sweep failed in a cluster");
        }
    }
    sweep_grants(ctx, &previews, &mut report).await?;
    Ok(report)
}

/// Delete the ReferenceGrants in Sandcastle's namespace whose preview is gone (a teardown that
/// never ran to its end: the resource deleted while Sandcastle was down, its finalizer removed).
/// They are listed before the previews (afresh): a grant is made only for a preview that exists.
async fn sweep_grants(
    ctx: &Context,
    previews: &Api<PreviewEnvironment>,
    report: &mut SweepReport,
) -> Result<(), kube::Error> {
    let home = &ctx.settings.home;
    let grants = wake_route::grants(&ctx.client, home).await?;
    if grants.is_empty() {
        return Ok(());
    }
    let known = known_previews(previews).await?;
    for (name, preview) in grants {
        if known.contains_key(&preview) {
            continue;
        }
        wake_route::forget_grant(&ctx.client, home, &name).await?;
        tracing::info!(target: "audit", actor = "sandcastle", action = "delete-orphan", namespace = %home, preview = %preview, result = "deleted", "orphan ReferenceGrant {name} deleted");
        report.grants.push(name);
    }
    Ok(())
}

/// Whether a preview placed as `placed` (`None`: not placed yet) may own a namespace in
/// `cluster`: a preview owns namespaces only where it lives (one not placed yet is given the
/// benefit of the doubt).
fn owns_there(placed: Option<&str>, cluster: &str) -> bool {
    placed.is_none_or(|c| c == cluster)
}

/// The previews by name, with the cluster each lives in (listed once per sweep).
async fn known_previews(
    previews: &Api<PreviewEnvironment>,
) -> Result<BTreeMap<String, Option<String>>, kube::Error> {
    Ok(previews
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|p| {
            let placed = p
                .status
                .as_ref()
                .and_then(|s| crate::phases::place::placed_in(s).map(str::to_owned));
            (p.name_any(), placed)
        })
        .collect())
}

async fn sweep_in(
    ctx: &Context,
    cluster: &Cluster,
    previews: &Api<PreviewEnvironment>,
    known: &mut Option<BTreeMap<String, Option<String>>>,
    grace: Duration,
    report: &mut SweepReport,
) -> Result<(), kube::Error> {
    let home = &ctx.settings.home;
    let namespaces: Api<Namespace> = Api::all(cluster.client().clone());
    let mut selector = format!("{MANAGED_BY}={MANAGER},{HOME}={home},{PREVIEW}");
    if !cluster.is_local() {
        // Other installations may share this cluster: only this one's.
        let Some(installation) = ctx.clusters.installation() else {
            return Ok(());
        };
        selector.push_str(&format!(",{INSTALLATION}={installation}"));
    }
    let ours = namespaces
        .list(&ListParams::default().labels(&selector))
        .await?;
    if ours.items.is_empty() {
        return Ok(());
    }
    if known.is_none() {
        *known = Some(known_previews(previews).await?);
    }
    let known = known.as_ref().expect("listed above");
    let here = cluster.name.as_str();
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
        let owned = known
            .get(&preview)
            .is_some_and(|placed| owns_there(placed.as_deref(), here));
        if owned {
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
        let again = previews.get_opt(&preview).await?;
        let placed = again
            .as_ref()
            .and_then(|p| p.status.as_ref())
            .and_then(|s| crate::phases::place::placed_in(s));
        if again.is_some() && owns_there(placed, here) {
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
                tracing::info!(target: "audit", actor = "sandcastle", action = "delete-orphan", cluster = %here, namespace = %name, preview = %preview, result = "deleted", "orphan namespace deleted");
                report.deleted.push(name);
            }
            // Changed or gone meanwhile: look again next sweep.
            Err(kube::Error::Api(r)) if r.code == 404 || r.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_owns_namespaces_only_where_it_lives() {
        assert!(owns_there(Some("b"), "b"));
        assert!(
            !owns_there(Some("b"), "in-cluster"),
            "left behind in another cluster"
        );
        assert!(owns_there(None, "b"), "not placed yet: not an orphan");
    }
}
