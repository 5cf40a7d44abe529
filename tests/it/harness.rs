//! The control plane is real: controllers, scheduler and kwok turn a Deployment into ready pods,
//! run a Job to completion, and delete a namespace with everything in it.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::wait::conditions;
use serde_json::json;

use crate::support::{TestNamespace, client, eventually, wait_for};

const T: Duration = Duration::from_secs(60);

#[tokio::test]
async fn deployment_with_two_replicas_becomes_available() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "it-harness-deploy").await;
    let deployments: Api<Deployment> = ns.api();
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    wait_for(
        &deployments,
        "web",
        "deployment web Available",
        T,
        conditions::is_deployment_completed(),
    )
    .await;

    let d = deployments.get("web").await.unwrap();
    let status = d.status.unwrap();
    assert_eq!(
        status.available_replicas,
        Some(2),
        "both replicas available"
    );
    let pods: Api<Pod> = ns.api();
    let pods = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 2);
    for p in pods.items {
        let st = p.status.unwrap();
        assert_eq!(st.phase.as_deref(), Some("Running"));
        // kwok-node-0, or another fake node a test added (the fidelity tests add two).
        let node = p.spec.unwrap().node_name.unwrap_or_default();
        assert!(
            node.starts_with("kwok-node-"),
            "scheduled onto a fake node, not {node:?}"
        );
    }
}

#[tokio::test]
async fn job_runs_to_completion() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "it-harness-job").await;
    let jobs: Api<Job> = ns.api();
    let j: Job = serde_json::from_value(json!({
        "metadata": {"name": "once"},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "once", "image": "registry.k8s.io/pause:3.10"}]
            }}
        }
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &j).await.unwrap();
    wait_for(
        &jobs,
        "once",
        "job once Complete",
        T,
        conditions::is_job_completed(),
    )
    .await;
    assert_eq!(
        jobs.get("once").await.unwrap().status.unwrap().succeeded,
        Some(1)
    );
}

#[tokio::test]
async fn a_pod_given_the_fail_fate_fails_its_job() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "it-harness-fail").await;
    let jobs: Api<Job> = ns.api();
    let j: Job = serde_json::from_value(json!({
        "metadata": {"name": "doomed"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"test.sandcastle.dev/fate": "fail"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "doomed", "image": "registry.k8s.io/pause:3.10"}]
                }
            }
        }
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &j).await.unwrap();
    let failed = |job: Option<&Job>| {
        job.and_then(|j| j.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Failed" && c.status == "True"))
    };
    wait_for(&jobs, "doomed", "job doomed Failed", T, failed).await;
    let job = jobs.get("doomed").await.unwrap();
    let reason = job
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap()
        .reason;
    assert_eq!(reason.as_deref(), Some("BackoffLimitExceeded"));
}

#[tokio::test]
async fn deleting_a_namespace_removes_it_and_its_pods() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "it-harness-delete").await;
    let deployments: Api<Deployment> = ns.api();
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    wait_for(
        &deployments,
        "web",
        "deployment web Available",
        T,
        conditions::is_deployment_completed(),
    )
    .await;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let uid = namespaces
        .get(&ns.name)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    namespaces
        .delete(&ns.name, &DeleteParams::foreground())
        .await
        .unwrap();
    wait_for(
        &namespaces,
        &ns.name,
        "namespace gone",
        Duration::from_secs(120),
        conditions::is_deleted(&uid),
    )
    .await;
    let pods: Api<Pod> = Api::all(client.clone());
    eventually("no pods left in the deleted namespace", T, || {
        let pods = pods.clone();
        let name = ns.name.clone();
        async move {
            let left = pods
                .list(&ListParams::default().fields(&format!("metadata.namespace={name}")))
                .await;
            match left {
                Ok(l) if l.items.is_empty() => Ok(()),
                Ok(l) => Err(format!("{} pods left", l.items.len())),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await;
}

#[tokio::test]
async fn the_fake_node_renews_its_lease() {
    // Without lease renewals the node lifecycle controller marks the node NotReady after ~50 s,
    // and with it every pod, which kwok never makes ready again.
    use k8s_openapi::api::coordination::v1::Lease;
    let client = client().await;
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let first = leases
        .get("kwok-node-0")
        .await
        .expect("the node has a lease")
        .spec
        .unwrap()
        .renew_time
        .unwrap();
    let renewed = eventually("the node lease is renewed", T, || {
        let leases = leases.clone();
        let first = first.clone();
        async move {
            let now = leases
                .get("kwok-node-0")
                .await
                .map_err(|e| e.to_string())?
                .spec
                .unwrap()
                .renew_time
                .unwrap();
            if now.0 > first.0 {
                Ok(now)
            } else {
                Err(format!("still {:?}", now.0))
            }
        }
    })
    .await;
    assert!(renewed.0 > first.0);
}
