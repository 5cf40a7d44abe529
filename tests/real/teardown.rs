//! Teardown on the real node leaves nothing behind: after the pull request is merged, its
//! preview namespace is gone and so are its pods, containerd's containers and sandboxes, the
//! kube-proxy rules of its Services and the kubelet's directories of its pods (their volumes).

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use sandcastle::crd::Phase;
use serde_json::json;

use crate::support::eventually;
use crate::support::world::{pr, sha};
use crate::tier::{self, T, open_at};

#[tokio::test]
async fn a_merged_pull_requests_preview_leaves_no_pod_container_rule_or_volume() {
    let tier = tier::tier();
    let world = tier::world(&tier, "gone", json!({})).await;
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_phase("gone-pr-1", Phase::Ready, T).await;
    let ns = world.namespace_of("gone-pr-1");

    // What the preview has on the node while it runs.
    let uids: Vec<String> = Api::<Pod>::namespaced(world.client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect();
    assert!(uids.len() >= 2, "the app and Redis run: {uids:?}");
    assert!(!tier.containers_of(&ns).is_empty());
    assert!(
        !tier.service_rules_of(&ns).is_empty(),
        "kube-proxy has rules for the preview's Services"
    );
    for uid in &uids {
        assert!(tier.pod_dir(uid).is_dir(), "{uid}");
    }

    let merged = world.gh.close(&world.repo, pr(1), true);
    let (status, body) = world.deliver(&merged).await;
    assert_eq!(status, 200, "{body}");
    eventually("the preview namespace is gone", T, || async {
        if world.namespace_exists(&ns).await {
            Err(format!("{ns} still exists"))
        } else {
            Ok(())
        }
    })
    .await;
    eventually("nothing of the preview is left on the node", T, || async {
        let containers = tier.containers_of(&ns);
        let rules = tier.service_rules_of(&ns);
        let dirs: Vec<_> = uids
            .iter()
            .map(|u| tier.pod_dir(u))
            .filter(|d| d.exists())
            .collect();
        if containers.is_empty() && rules.is_empty() && dirs.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "containers {containers:?}, rules {rules:?}, directories {dirs:?}"
            ))
        }
    })
    .await;
}
