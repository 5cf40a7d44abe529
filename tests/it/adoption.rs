//! A pull request taking a sandbox over at the same commit changes no pod template: every pod
//! the sandbox ran (a database without a volume among them) keeps running, untouched.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use sandcastle::crd::Phase;
use sandcastle_fake_github::PrSpec;
use serde_json::json;

use crate::support::api::{ALL, account, call};
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);

const APP_AND_CACHE: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: ghcr.io/acme/web:1.0}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: cache}
spec:
  serviceName: cache
  selector: {matchLabels: {app: cache}}
  template:
    metadata: {labels: {app: cache}}
    spec:
      containers: [{name: redis, image: redis:7}]
";

/// Each workload's generation, and the uids of the namespace's pods.
async fn fingerprint(world: &World, ns: &str) -> (i64, i64, BTreeSet<String>) {
    let c = world.client.clone();
    let web = Api::<Deployment>::namespaced(c.clone(), ns)
        .get("web")
        .await
        .unwrap();
    let cache = Api::<StatefulSet>::namespaced(c.clone(), ns)
        .get("cache")
        .await
        .unwrap();
    let pods = Api::<Pod>::namespaced(c, ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect();
    (
        web.metadata.generation.unwrap(),
        cache.metadata.generation.unwrap(),
        pods,
    )
}

#[tokio::test]
async fn adopting_a_sandbox_restarts_no_pod() {
    let world = World::new("adopt", APP_AND_CACHE, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let head = sha();
    world.gh.set_branch(&world.repo, "agent/task", &head);
    let created = call(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(json!({"blueprint": "adopt", "repository": world.repo.as_str(), "branch": "agent/task"})),
    )
    .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let sandbox = created.body["name"].as_str().unwrap().to_owned();
    let ready = world.wait_phase(&sandbox, Phase::Ready, T).await;
    let ns = ready.status.unwrap().namespace.unwrap();
    let before = fingerprint(&world, &ns).await;
    assert_eq!(before.2.len(), 2, "one pod each");

    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(9), head.clone(), "agent/task"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    let adopted = world.wait_phase("adopt-pr-9", Phase::Ready, T).await;
    assert_eq!(
        adopted.status.unwrap().namespace.as_deref(),
        Some(ns.as_str())
    );
    world.wait_phase(&sandbox, Phase::Removed, T).await;

    let after = fingerprint(&world, &ns).await;
    assert_eq!(
        (after.0, after.1),
        (before.0, before.1),
        "a pod template changed on adoption"
    );
    assert_eq!(after.2, before.2, "pods were recreated on adoption");
}
