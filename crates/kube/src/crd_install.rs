//! Installing Sandcastle's CustomResourceDefinitions (`crd::definitions`) into a cluster and
//! waiting until the API server serves them.

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};

use sandcastle_crd::definitions;
use sandcastle_crd::labels::FIELD_MANAGER;

/// Install (or update) every definition with server-side apply and wait until the API server
/// serves them.
pub async fn install(client: &Client, timeout: Duration) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for crd in definitions() {
        let name = crd.name_any();
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("applying CustomResourceDefinition {name}"))?;
        tokio::time::timeout(
            timeout,
            await_condition(api.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .with_context(|| {
            format!("CustomResourceDefinition {name} not established after {timeout:?}")
        })??;
    }
    Ok(())
}
