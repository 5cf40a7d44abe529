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

fn web_deployment(replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))
    .unwrap()
}

/// A one-shot Job; `fate` is a kwok test stage (see tests/kwok-stages).
fn job(name: &str, fate: Option<&str>) -> Job {
    let annotations = fate.map_or_else(|| json!({}), |f| json!({"test.sandcastle.dev/fate": f}));
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {"restartPolicy": "Never", "containers": [{"name": name, "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn deployment_with_two_replicas_becomes_available() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "it-harness-deploy").await;
    let deployments: Api<Deployment> = ns.api();
    let d = web_deployment(2);
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
    let j = job("once", None);
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
    let j = job("doomed", Some("fail"));
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
    let d = web_deployment(1);
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

#[tokio::test]
async fn claims_made_after_start_up_are_bound() {
    // The harness provisions hostPath volumes for the default StorageClass for as long as it
    // runs, not only while it starts.
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let client = client().await;
    let ns = TestNamespace::new(&client, "it-harness-pvc").await;
    let claims: Api<PersistentVolumeClaim> = ns.api();
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .unwrap();
    claims.create(&PostParams::default(), &pvc).await.unwrap();
    let bound = |c: Option<&PersistentVolumeClaim>| {
        c.and_then(|c| c.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Bound")
    };
    wait_for(&claims, "data", "claim data Bound", T, bound).await;
}
