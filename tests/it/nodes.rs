//! The fake nodes look like real workers: real apps request ephemeral storage and select nodes
//! by the labels a worker carries (os, role, zone), and their pods must schedule here as they do
//! on a real cluster.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use crate::support::fixtures;
use crate::support::{TestNamespace, client, eventually};

const T: Duration = Duration::from_secs(60);

/// A Deployment of `replicas` pods asking for ephemeral storage, confined to Linux workers, with
/// `extra` merged into the pod spec.
fn deployment(name: &str, replicas: i32, extra: Value) -> Deployment {
    let mut pod = json!({
        "nodeSelector": {"kubernetes.io/os": "linux", "node-role.kubernetes.io/worker": ""},
        "containers": [{
            "name": "app",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {
                "requests": {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "1Gi"},
                "limits": {"memory": "128Mi", "ephemeral-storage": "2Gi"},
            },
        }],
    });
    for (k, v) in extra.as_object().unwrap() {
        match (pod.get_mut(k), v) {
            (Some(Value::Object(have)), Value::Object(more)) => have.extend(more.clone()),
            _ => pod[k] = v.clone(),
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
        }
    }))
    .unwrap()
}

fn condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Wait until `n` pods labelled `app=<app>` are scheduled and Ready; on timeout, say why the
/// scheduler left them pending. Returns the nodes they run on.
async fn wait_scheduled_and_ready(pods: &Api<Pod>, app: &str, n: usize) -> Vec<String> {
    eventually(
        &format!("{n} pods of {app} scheduled and Ready"),
        T,
        || async move {
            let list = pods
                .list(&ListParams::default().labels(&format!("app={app}")))
                .await
                .map_err(|e| e.to_string())?;
            let mut nodes = Vec::new();
            let mut waiting = Vec::new();
            for pod in &list.items {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let scheduled = condition(pod, "PodScheduled");
                if scheduled.is_none_or(|c| c.status != "True") {
                    let why = scheduled
                        .and_then(|c| c.message.clone())
                        .unwrap_or_default();
                    waiting.push(format!("{name} not scheduled: {why}"));
                    continue;
                }
                if condition(pod, "Ready").is_none_or(|c| c.status != "True") {
                    waiting.push(format!("{name} scheduled but not Ready"));
                    continue;
                }
                nodes.push(
                    pod.spec
                        .as_ref()
                        .and_then(|s| s.node_name.clone())
                        .unwrap_or_default(),
                );
            }
            if nodes.len() == n && list.items.len() == n {
                Ok(nodes)
            } else {
                Err(format!(
                    "{} pods, {} ready; {waiting:?}",
                    list.items.len(),
                    nodes.len()
                ))
            }
        },
    )
    .await
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

#[tokio::test]
async fn a_pod_asking_for_ephemeral_storage_on_a_linux_worker_in_a_zone_becomes_ready() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "it-nodes-storage").await;
    let deployments: Api<Deployment> = ns.api();
    let d = deployment(
        "app",
        1,
        json!({"nodeSelector": {"topology.kubernetes.io/zone": "local-1a"}}),
    );
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let on = wait_scheduled_and_ready(&ns.api(), "app", 1).await;

    let node = Api::<Node>::all(client).get(&on[0]).await.unwrap();
    assert_eq!(label(&node, "kubernetes.io/hostname"), Some(on[0].as_str()));
    assert_eq!(
        label(&node, "topology.kubernetes.io/zone"),
        Some("local-1a")
    );
}

#[tokio::test]
async fn replicas_spread_over_three_zones_become_ready() {
    let client = client().await;
    fixtures::ensure_nodes(&client, 3).await;
    let ns = TestNamespace::new(&client, "it-nodes-zones").await;
    let deployments: Api<Deployment> = ns.api();
    let d = deployment(
        "spread",
        3,
        json!({"topologySpreadConstraints": [{
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "nodeTaintsPolicy": "Honor",
            "labelSelector": {"matchLabels": {"app": "spread"}},
        }]}),
    );
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let on = wait_scheduled_and_ready(&ns.api(), "spread", 3).await;

    let nodes: Api<Node> = Api::all(client);
    let mut zones = BTreeSet::new();
    for name in &on {
        let node = nodes.get(name).await.unwrap();
        zones.insert(label(&node, "topology.kubernetes.io/zone").map(str::to_owned));
    }
    assert_eq!(zones.len(), 3, "one replica per zone, got {zones:?}");
}

#[tokio::test]
async fn the_harness_node_is_the_shape_the_tests_add() {
    // The tests add nodes from the same definition (tools/kube-harness/fake-node.json) as the
    // harness; kwok keeps what the node was created with.
    let client = client().await;
    let node = Api::<Node>::all(client).get("kwok-node-0").await.unwrap();
    let want = fixtures::fake_node(0);
    let labels = node.metadata.labels.clone().unwrap_or_default();
    for (k, v) in want.metadata.labels.as_ref().unwrap() {
        assert_eq!(labels.get(k), Some(v), "label {k}");
    }
    let (status, want_status) = (node.status.unwrap(), want.status.unwrap());
    assert_eq!(status.capacity, want_status.capacity, "capacity");
    assert_eq!(status.allocatable, want_status.allocatable, "allocatable");
    let (info, want_info) = (status.node_info.unwrap(), want_status.node_info.unwrap());
    assert_eq!(info.kubelet_version, want_info.kubelet_version);
    assert_eq!(info.kernel_version, want_info.kernel_version);
    assert_eq!(info.os_image, want_info.os_image);
    assert_eq!(
        info.container_runtime_version,
        want_info.container_runtime_version
    );
    let addresses = status.addresses.unwrap_or_default();
    for a in want_status.addresses.unwrap_or_default() {
        assert!(addresses.contains(&a), "address {a:?} in {addresses:?}");
    }
    // kwok gives every node it manages the port of its kubelet API (pods/log goes there).
    let kubelet_port = status
        .daemon_endpoints
        .and_then(|d| d.kubelet_endpoint)
        .map(|e| e.port);
    assert!(
        kubelet_port.is_some_and(|p| p > 0),
        "kubelet port {kubelet_port:?}"
    );

    // What a typical worker has.
    let allocatable = status.allocatable.unwrap();
    assert!(
        allocatable.contains_key("ephemeral-storage"),
        "allocatable {allocatable:?} has ephemeral-storage"
    );
    for key in [
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "node-role.kubernetes.io/worker",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
    ] {
        assert!(labels.contains_key(key), "label {key} in {labels:?}");
    }
    assert_eq!(info.kubelet_version, "v1.36.3");
}
