//! Workloads without a controller: an ownerless ReplicaSet is copied like a Deployment, a bare
//! Pod is refused (Helm test hooks are left out).

use super::*;

/// A ReplicaSet as read back from a live namespace, with no owner: left behind by a Deployment
/// deleted with `--cascade=orphan`, so it still carries the Deployment controller's hash label
/// (in its selector too) and annotations.
const BARE_REPLICASET: &str = "\
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: legacy-7d9f8c6b5d
  namespace: shop-staging
  uid: 0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e
  resourceVersion: \"4242\"
  generation: 3
  creationTimestamp: \"2026-11-02T09:01:15Z\"
  managedFields: [{manager: kube-controller-manager, operation: Update}]
  labels: {app: legacy, pod-template-hash: 7d9f8c6b5d}
  annotations:
    deployment.kubernetes.io/desired-replicas: \"2\"
    deployment.kubernetes.io/max-replicas: \"3\"
    deployment.kubernetes.io/revision: \"4\"
    team: core
spec:
  replicas: 2
  selector: {matchLabels: {app: legacy, pod-template-hash: 7d9f8c6b5d}}
  template:
    metadata:
      creationTimestamp: null
      labels: {app: legacy, pod-template-hash: 7d9f8c6b5d}
    spec:
      containers:
      - name: legacy
        image: ghcr.io/acme/legacy:1.0
        resources: {requests: {cpu: '4'}}
status: {replicas: 2, readyReplicas: 2, availableReplicas: 2, fullyLabeledReplicas: 2, observedGeneration: 3}
";

const IMAGES: &str = "images: [{repository: ghcr.io/acme/legacy, tag: \"{{shortSha}}\"}]";

#[test]
fn an_ownerless_replicaset_is_copied_like_a_deployment() {
    let p = run(BARE_REPLICASET, IMAGES).unwrap();
    let apps = p.steps.iter().find(|s| s.phase == Phase::Apps).unwrap();
    let rs = apps
        .objects
        .iter()
        .find(|o| o["kind"] == "ReplicaSet")
        .expect("the ReplicaSet is applied with the apps");
    let meta = &rs["metadata"];
    for server in [
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
    ] {
        assert!(meta.get(server).is_none(), "{server} is the server's");
    }
    assert!(rs.get("status").is_none());
    assert_eq!(meta["namespace"], "shop-pr-42");
    assert_eq!(
        meta["annotations"],
        serde_json::json!({"sandcastle.dev/repository": "acme/shop", "team": "core"}),
        "the Deployment controller's annotations go"
    );
    // Nothing of the server writes `pod-template-hash` on a ReplicaSet without a Deployment: it
    // is the selector's, and the template must still match it.
    assert_eq!(meta["labels"]["pod-template-hash"], "7d9f8c6b5d");
    assert_eq!(
        rs["spec"]["selector"],
        serde_json::json!({"matchLabels": {"app": "legacy", "pod-template-hash": "7d9f8c6b5d"}})
    );
    let template = &rs["spec"]["template"];
    assert!(template["metadata"].get("creationTimestamp").is_none());
    assert_eq!(
        template["metadata"]["labels"]["pod-template-hash"],
        "7d9f8c6b5d"
    );
    assert_eq!(template["metadata"]["labels"]["app"], "legacy");
    assert_eq!(
        template["metadata"]["labels"]["sandcastle.dev/preview"],
        "shop-pr-42"
    );
    assert!(
        template["metadata"]["labels"]
            .get("sandcastle.dev/sha")
            .is_none()
    );
    let container = &template["spec"]["containers"][0];
    assert_eq!(container["image"], "ghcr.io/acme/legacy:0123456");
    assert_eq!(
        container["envFrom"],
        serde_json::json!([{"configMapRef": {"name": "sandcastle-env"}}])
    );
    assert_eq!(
        container["resources"]["limits"]["cpu"], "4",
        "a request above the LimitRange's default limit gets a limit of its own"
    );
}

#[test]
fn replicasets_and_pods_made_by_controllers_are_left_out() {
    let yaml = "\
apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web-5d8f, ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: u, controller: true}]}\n---
apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: api-6c7d, ownerReferences: [{apiVersion: argoproj.io/v1alpha1, kind: Rollout, name: api, uid: u, controller: true}]}\n---
apiVersion: v1\nkind: Pod\nmetadata: {name: web-5d8f-x, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f, uid: u, controller: true}]}\n---
apiVersion: v1\nkind: Pod\nmetadata: {name: shop-test-connection, annotations: {helm.sh/hook: test}}\nspec: {containers: [{name: wget, image: busybox}]}\n---
apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate}\nspec: {template: {spec: {containers: [{name: m, image: m}]}}}\n";
    let p = run(yaml, "").unwrap();
    let table = [
        (
            "ReplicaSet",
            "web-5d8f",
            "ReplicaSets are created by their Deployment",
        ),
        ("ReplicaSet", "api-6c7d", "owned by Rollout api"),
        ("Pod", "web-5d8f-x", "Pods are created by their workloads"),
        (
            "Pod",
            "shop-test-connection",
            "a Helm hook (helm.sh/hook: test): Helm runs it, a preview does not",
        ),
    ];
    for (kind, name, want) in table {
        assert_eq!(left_out(&p, kind, name), Some(want), "{kind} {name}");
    }
}

#[test]
fn a_bare_pod_is_refused_with_advice() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: debug}\nspec: {containers: [{name: sh, image: busybox}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: helper, ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: x, uid: u}]}\n";
    assert_eq!(
        refusal(yaml, ""),
        "Pod debug is not allowed: it has no owner, and a bare Pod is not copied; run it from a Deployment or a Job\n\
         Pod helper is not allowed: it has no owner, and a bare Pod is not copied; run it from a Deployment or a Job"
    );
}

#[test]
fn a_replicaset_goes_through_the_same_checks_and_skips() {
    let privileged = BARE_REPLICASET.replace(
        "        resources: {requests: {cpu: '4'}}\n",
        "        securityContext: {privileged: true}\n",
    );
    assert_eq!(
        refusal(&privileged, ""),
        "ReplicaSet legacy-7d9f8c6b5d: spec.template.spec.containers[0].securityContext.privileged: privileged containers are forbidden by Pod Security level baseline"
    );
    let with_service = format!(
        "{BARE_REPLICASET}---\napiVersion: v1\nkind: Service\nmetadata: {{name: legacy}}\nspec: {{selector: {{app: legacy}}, ports: [{{port: 80}}]}}\n---\n{}",
        deployment("web", "      containers: [{name: c, image: x}]\n")
    );
    let p = run(&with_service, "skip: [legacy-7d9f8c6b5d]").unwrap();
    assert_eq!(
        left_out(&p, "ReplicaSet", "legacy-7d9f8c6b5d"),
        Some("named in spec.skip")
    );
    assert_eq!(
        left_out(&p, "Service", "legacy"),
        Some("selects only pods of skipped workloads (ReplicaSet legacy-7d9f8c6b5d)")
    );
}
