//! A pull request's preview taking a sandbox over (the sandbox of its branch, made through the
//! API): the preview lives in the sandbox's namespace (`spec.adopts`), relabelled as its own,
//! and the sandbox is torn down as `Adopted` — which deletes nothing, since its namespace lives
//! on. Idempotent: each pass makes sure the sandbox is marked.

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
