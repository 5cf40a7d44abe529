//! Server-side apply of the same object twice changes nothing: the basis of idempotent
//! reconciling.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::conditions;
use serde_json::json;

use crate::support::{TestNamespace, client, wait_for};

#[tokio::test]
async fn applying_the_same_object_twice_is_a_no_op() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "it-ssa").await;
    let params = PatchParams::apply("sandcastle").force();

    let cms: Api<ConfigMap> = ns.api();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}});
    let first = cms.patch("cfg", &params, &Patch::Apply(&cm)).await.unwrap();
    let second = cms.patch("cfg", &params, &Patch::Apply(&cm)).await.unwrap();
    assert_eq!(
        first.metadata.resource_version,
        second.metadata.resource_version
    );
    let cm_version = second.metadata.resource_version;

    let deployments: Api<Deployment> = ns.api();
    let d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    });
    deployments
        .patch("web", &params, &Patch::Apply(&d))
        .await
        .unwrap();
    // Controllers write the status until the rollout settles; compare once it has.
    wait_for(
        &deployments,
        "web",
        "deployment web Available",
        Duration::from_secs(60),
        conditions::is_deployment_completed(),
    )
    .await;
    let settled = deployments.get("web").await.unwrap();
    let again = deployments
        .patch("web", &params, &Patch::Apply(&d))
        .await
        .unwrap();
    assert_eq!(
        settled.metadata.resource_version,
        again.metadata.resource_version
    );
    assert_eq!(settled.metadata.generation, again.metadata.generation);

    // A real change does bump it: the comparison above can fail.
    let mut changed = cm.clone();
    changed["data"]["a"] = json!("2");
    let third = cms
        .patch("cfg", &params, &Patch::Apply(&changed))
        .await
        .unwrap();
    assert_ne!(third.metadata.resource_version, cm_version);
}
