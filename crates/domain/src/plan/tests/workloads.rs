//! Workloads without a controller: an ownerless ReplicaSet is copied like a Deployment, a bare
//! Pod is refused (Helm test hooks are left out); and a blueprint with nothing to run.

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
    let apps = p.steps.iter().find(|s| s.stage == Stage::Apps).unwrap();
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
        template["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "sandcastle"
    );
    for changing in [
        "sandcastle.dev/sha",
        "sandcastle.dev/preview",
        "sandcastle.dev/pr",
    ] {
        assert!(template["metadata"]["labels"].get(changing).is_none());
    }
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

const CONFIG_ONLY: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n";

#[test]
fn a_blueprint_with_nothing_to_run_is_refused() {
    let none = "Blueprint shop: spec.source: nothing to run: the source has no Deployment, StatefulSet, ReplicaSet, Job or CronJob";
    let web = deployment("web", "      containers: [{name: c, image: x}]\n");
    let dump = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: dump, annotations: {sandcastle.dev/hook: pre-delete}}\nspec: {template: {spec: {containers: [{name: d, image: d}]}}}\n";
    let table = [
        (CONFIG_ONLY.to_owned(), "", format!("{none} (2 objects read)")),
        (String::new(), "", format!("{none} (0 objects read)")),
        (
            format!("{CONFIG_ONLY}---\n{web}"),
            "skip: [web]",
            format!("{none} to copy (3 objects read); left out: Deployment web (named in spec.skip)"),
        ),
        (
            format!("{CONFIG_ONLY}---\n{dump}"),
            "",
            format!("{none} to copy (3 objects read); pre-delete hooks, run only at teardown: Job dump"),
        ),
        (
            CONFIG_ONLY.to_owned(),
            "allowKinds: [{apiVersion: argoproj.io/v1alpha1, kind: Rollout}]",
            "Blueprint shop: spec.source: nothing to run: the source has no Deployment, StatefulSet, ReplicaSet, Job, CronJob or object of spec.allowKinds (2 objects read)".to_owned(),
        ),
    ];
    for (yaml, extra, want) in table {
        let err = run(&yaml, extra).unwrap_err();
        assert_eq!(err.to_string(), want, "{yaml}");
        assert_eq!(err.problems.len(), 1);
        assert_eq!(
            (err.problems[0].kind.as_str(), err.problems[0].name.as_str()),
            ("Blueprint", "shop")
        );
    }
}

#[test]
fn any_workload_or_allowed_kind_is_something_to_run() {
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: once}\nspec: {template: {spec: {containers: [{name: o, image: o}]}}}\n";
    let rollout =
        "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: api}\nspec: {}\n";
    let allow = "allowKinds: [{apiVersion: argoproj.io/v1alpha1, kind: Rollout}]";
    for (yaml, extra) in [
        (format!("{CONFIG_ONLY}---\n{job}"), ""),
        (format!("{CONFIG_ONLY}---\n{BARE_REPLICASET}"), ""),
        (format!("{CONFIG_ONLY}---\n{rollout}"), allow),
    ] {
        run(&yaml, extra).unwrap_or_else(|e| panic!("{yaml}: {e}"));
    }
    // Other problems are what the blueprint hears: what it would run is not known until they
    // are fixed (the refused object may be the workload).
    let daemonset = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\n";
    assert_eq!(
        refusal(&format!("{CONFIG_ONLY}---\n{daemonset}"), ""),
        "DaemonSet agent is not allowed: DaemonSets run on every node and cannot be copied (list it in spec.skip to leave it out)"
    );
}
