//! A preview taking a namespace over — a pull request's taking the sandbox of its branch (made
//! through the API), or a new preview taking a warm pool's: the preview lives in that namespace
//! (`spec.adopts`), relabelled as its own, and the one it took over is torn down as `Adopted` —
//! which deletes nothing, since its namespace lives on. Idempotent: each pass makes sure the
//! sandbox is marked. Before the first rollout, what the previous owner stopped runs again.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::context::Context;
use crate::error::Error;
use sandcastle_crd::{Adoption, Interface, PreviewEnvironment, Teardown, TeardownReason};

/// Mark the sandbox `a` names as taken over by `pe`, unless it already is (or is gone).
pub(crate) async fn hand_over(
    pe: &PreviewEnvironment,
    a: &Adoption,
    ctx: &Context,
) -> Result<(), Error> {
    let api: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let Some(sandbox) = api.get_opt(&a.preview).await? else {
        return Ok(());
    };
    if sandbox.spec.teardown.is_some() {
        return Ok(());
    }
    let by = match pe.spec.pull_request {
        Some(n) => format!("pull request #{n} ({})", pe.name_any()),
        None => pe.name_any(),
    };
    let teardown = Teardown {
        reason: TeardownReason::Adopted,
        actor: Some(by),
        via: Some(Interface::Sandcastle),
        at: Time(ctx.clock.now()),
    };
    let patch = json!({
        "metadata": {"resourceVersion": sandbox.resource_version()},
        "spec": {"teardown": teardown},
    });
    match api
        .patch(&a.preview, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!(target: "audit", actor = %pe.name_any(), action = "adopt", preview = %a.preview, namespace = %a.namespace, result = "taken over", "sandbox taken over by a pull request's preview");
            Ok(())
        }
        // Changed meanwhile: the next pass looks again.
        Err(kube::Error::Api(r)) if r.code == 409 || r.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Before the first rollout into namespace `ns` taken over as `a` says: workloads its previous
/// owner stopped (a `stopped` pool, an idle sandbox) scaled back, and routes it parked back.
pub(crate) async fn start_again(
    cluster: &sandcastle_kube::clusters::Cluster,
    ns: &str,
    a: &Adoption,
    ctx: &Context,
) -> Result<(), Error> {
    let restored = super::idle::wake(cluster.client(), ns).await?;
    let home = cluster.is_local().then_some(ctx.settings.home.as_str());
    let routes =
        sandcastle_kube::wake_route::unpark(cluster.client(), ns, &a.preview, home).await?;
    if restored + routes > 0 {
        tracing::info!(preview = %a.preview, namespace = ns, restored, routes, "a stopped namespace taken over: started again");
    }
    Ok(())
}
