//! Strip what the API server, controllers and other tools own from an object, so that the copy
//! describes only what its author wrote: identity and history metadata, `status`, allocated IPs
//! and ports, volume bindings, Job selectors and the controllers' labels and annotations.
//!
//! Finalizers are all removed: those found in a namespace belong to controllers
//! (`kubernetes.io/pvc-protection`, `foregroundDeletion`…), which add them again to the copy
//! when they need them; a copied foreign finalizer could only block the preview's teardown.

use serde_json::{Map, Value};

use super::Obj;
use super::kinds::{Builtin, Class};
use super::pods::{get_mut, template_paths};
use sandcastle_crd::labels;

/// Metadata fields the API server sets.
const SERVER_METADATA: [&str; 12] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "ownerReferences",
    "selfLink",
    "finalizers",
    "generateName",
    "namespace",
];

/// Annotations removed by exact key.
const ANNOTATIONS: [&str; 7] = [
    labels::LAST_APPLIED,
    labels::HELM_RELEASE_NAME,
    labels::HELM_RELEASE_NAMESPACE,
    labels::STORAGE_PROVISIONER_BETA,
    labels::STORAGE_PROVISIONER,
    labels::SELECTED_NODE,
    labels::JOB_TRACKING,
];

/// Annotations removed by prefix.
const ANNOTATION_PREFIXES: [&str; 4] = [
    labels::DEPLOYMENT_ANNOTATION_PREFIX,
    labels::PV_ANNOTATION_PREFIX,
    labels::AUTOSCALING_ALPHA_PREFIX,
    labels::EXTERNAL_DNS_PREFIX,
];

/// Service fields that describe a load balancer; they go when the Service becomes `ClusterIP`.
const LOAD_BALANCER_FIELDS: [&str; 6] = [
    "loadBalancerIP",
    "loadBalancerSourceRanges",
    "loadBalancerClass",
    "allocateLoadBalancerNodePorts",
    "externalTrafficPolicy",
    "healthCheckNodePort",
];

pub(crate) fn strip(obj: &mut Obj, class: Class) {
    let paths = template_paths(obj, class);
    // The Deployment controller labels the ReplicaSets it makes (and their selectors and pods)
    // with `pod-template-hash`; those are never copied. On a ReplicaSet without a Deployment
    // nothing of the server wrote it: its author did (or a Deployment deleted with
    // `--cascade=orphan` left it), and its selector needs it on the pods.
    let hash_is_the_authors = class == Class::Builtin(Builtin::ReplicaSet);
    let value = &mut obj.value;
    if let Some(o) = value.as_object_mut() {
        o.remove("status");
    }
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in SERVER_METADATA {
            meta.remove(key);
        }
        strip_annotations(meta);
        if !hash_is_the_authors {
            remove_labels(meta, &[labels::POD_TEMPLATE_HASH]);
        }
    }
    if let Class::Builtin(Builtin::CronJob) = class
        && let Some(meta) = get_mut(value, &["spec", "jobTemplate", "metadata"])
    {
        strip_template_metadata(meta, false);
    }
    for path in paths {
        if let Some(meta) = get_mut(value, path).and_then(|t| t.get_mut("metadata")) {
            strip_template_metadata(meta, hash_is_the_authors);
        }
    }
    let Class::Builtin(kind) = class else {
        return;
    };
    match kind {
        Builtin::Service => strip_service(value),
        Builtin::PersistentVolumeClaim => remove(value, &["spec"], &["volumeName"]),
        Builtin::StatefulSet => strip_claim_templates(value),
        Builtin::Job => strip_job(value),
        Builtin::ServiceAccount => remove(value, &[], &["secrets"]),
        _ => {}
    }
}

fn remove(value: &mut Value, path: &[&str], keys: &[&str]) {
    if let Some(o) = get_mut(value, path).and_then(Value::as_object_mut) {
        for key in keys {
            o.remove(*key);
        }
    }
}

fn strip_annotations(meta: &mut Map<String, Value>) {
    let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) else {
        return;
    };
    annotations.retain(|k, _| {
        !ANNOTATIONS.contains(&k.as_str()) && !ANNOTATION_PREFIXES.iter().any(|p| k.starts_with(p))
    });
    if annotations.is_empty() {
        meta.remove("annotations");
    }
}

fn remove_labels(meta: &mut Map<String, Value>, keys: &[&str]) {
    let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) else {
        return;
    };
    labels.retain(|k, _| !keys.contains(&k.as_str()));
    if labels.is_empty() {
        meta.remove("labels");
    }
}

/// Pod and job templates: the server writes `creationTimestamp: null` into them, the Job
/// controller its labels, and the Deployment controller `pod-template-hash` (unless
/// `keep_hash`: see [`strip`]).
fn strip_template_metadata(meta: &mut Value, keep_hash: bool) {
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    meta.remove("creationTimestamp");
    let mut keys = Vec::new();
    if !keep_hash {
        keys.push(labels::POD_TEMPLATE_HASH);
    }
    keys.extend(labels::JOB_CONTROLLER_LABELS);
    remove_labels(meta, &keys);
}

/// Cluster IPs and node ports are allocated afresh (a headless Service keeps `clusterIP: None`);
/// a `LoadBalancer` becomes a `ClusterIP` Service; a `NodePort` Service keeps its type and gets
/// new ports; `externalIPs` belong to the source's network and are dropped.
fn strip_service(value: &mut Value) {
    let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    spec.remove("clusterIPs");
    spec.remove("externalIPs");
    if !headless {
        spec.remove("clusterIP");
    }
    spec.remove("healthCheckNodePort");
    if spec.get("type").and_then(Value::as_str) == Some("LoadBalancer") {
        spec.insert("type".to_owned(), Value::String("ClusterIP".to_owned()));
        for key in LOAD_BALANCER_FIELDS {
            spec.remove(key);
        }
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports {
            if let Some(port) = port.as_object_mut() {
                port.remove("nodePort");
            }
        }
    }
}

/// Claim templates stay (each replica gets a fresh empty volume) without what the server adds.
fn strip_claim_templates(value: &mut Value) {
    let Some(templates) =
        get_mut(value, &["spec", "volumeClaimTemplates"]).and_then(Value::as_array_mut)
    else {
        return;
    };
    for template in templates {
        let Some(t) = template.as_object_mut() else {
            continue;
        };
        t.remove("status");
        if let Some(meta) = t.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.retain(|k, _| matches!(k.as_str(), "name" | "labels" | "annotations"));
            strip_annotations(meta);
        }
        if let Some(spec) = t.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("volumeName");
        }
    }
}

/// The Job controller generates the selector and labels its pods with the Job's uid; the copy
/// is a new Job and gets new ones. Hook Jobs lose `suspend`: a blueprint namespace keeps its
/// hooks suspended so that they do not run there, but a preview must run them (a suspended seed
/// would hold the seed phase until it times out).
fn strip_job(value: &mut Value) {
    let hook = value["metadata"]["annotations"][labels::HOOK].as_str();
    if matches!(hook, Some(labels::HOOK_SEED | labels::HOOK_PRE_DELETE)) {
        remove(value, &["spec"], &["suspend"]);
    }
    remove(value, &["spec"], &["selector", "manualSelector"]);
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        remove_labels(meta, &labels::JOB_CONTROLLER_LABELS);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stripped(class: Class, value: Value) -> Value {
        let mut obj = Obj {
            group: String::new(),
            kind: String::new(),
            name: String::new(),
            value,
        };
        strip(&mut obj, class);
        obj.value
    }

    #[test]
    fn server_metadata_and_status_go() {
        let got = stripped(
            Class::Builtin(Builtin::ConfigMap),
            json!({
                "metadata": {
                    "name": "app", "namespace": "staging", "uid": "u", "resourceVersion": "1",
                    "generation": 2, "creationTimestamp": "t", "managedFields": [],
                    "ownerReferences": [], "selfLink": "/x", "finalizers": ["f"],
                    "deletionTimestamp": "t", "deletionGracePeriodSeconds": 30,
                    "labels": {"app": "web", "pod-template-hash": "abc"},
                    "annotations": {
                        "kubectl.kubernetes.io/last-applied-configuration": "{}",
                        "meta.helm.sh/release-name": "shop",
                        "meta.helm.sh/release-namespace": "staging",
                        "pv.kubernetes.io/bind-completed": "yes",
                        "external-dns.alpha.kubernetes.io/hostname": "shop.example.com",
                        "team": "core"
                    }
                },
                "data": {"a": "b"},
                "status": {"x": 1}
            }),
        );
        assert_eq!(
            got,
            json!({
                "metadata": {"name": "app", "labels": {"app": "web"}, "annotations": {"team": "core"}},
                "data": {"a": "b"}
            })
        );
    }

    #[test]
    fn services_lose_allocations_but_stay_headless() {
        let table = [
            (
                json!({"type": "ClusterIP", "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "ports": [{"port": 80}]}),
                json!({"type": "ClusterIP", "ports": [{"port": 80}]}),
            ),
            (
                json!({"clusterIP": "None", "clusterIPs": ["None"]}),
                json!({"clusterIP": "None"}),
            ),
            (
                json!({"type": "NodePort", "clusterIP": "10.0.0.2", "externalTrafficPolicy": "Local",
                       "ports": [{"port": 80, "nodePort": 30080}]}),
                json!({"type": "NodePort", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}),
            ),
            (
                json!({"type": "LoadBalancer", "clusterIP": "10.0.0.3", "loadBalancerIP": "1.2.3.4",
                       "loadBalancerSourceRanges": ["0.0.0.0/0"], "loadBalancerClass": "x",
                       "allocateLoadBalancerNodePorts": true, "externalTrafficPolicy": "Local",
                       "healthCheckNodePort": 32000, "externalIPs": ["1.2.3.5"],
                       "ports": [{"port": 443, "nodePort": 31443}]}),
                json!({"type": "ClusterIP", "ports": [{"port": 443}]}),
            ),
        ];
        for (spec, want) in table {
            let got = stripped(Class::Builtin(Builtin::Service), json!({"spec": spec}));
            assert_eq!(got["spec"], want);
        }
    }

    #[test]
    fn claims_lose_their_binding() {
        let got = stripped(
            Class::Builtin(Builtin::PersistentVolumeClaim),
            json!({
                "metadata": {"name": "uploads", "finalizers": ["kubernetes.io/pvc-protection"],
                    "annotations": {
                        "pv.kubernetes.io/bind-completed": "yes",
                        "pv.kubernetes.io/bound-by-controller": "yes",
                        "volume.beta.kubernetes.io/storage-provisioner": "x",
                        "volume.kubernetes.io/storage-provisioner": "x",
                        "volume.kubernetes.io/selected-node": "node-1"
                    }},
                "spec": {"volumeName": "pvc-123", "resources": {"requests": {"storage": "1Gi"}}},
                "status": {"phase": "Bound"}
            }),
        );
        assert_eq!(
            got,
            json!({"metadata": {"name": "uploads"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}})
        );
    }

    #[test]
    fn jobs_lose_selector_and_controller_labels() {
        let uid = "batch.kubernetes.io/controller-uid";
        let got = stripped(
            Class::Builtin(Builtin::Job),
            json!({
                "metadata": {"name": "seed", "labels": {uid: "u", "job-name": "seed", "controller-uid": "u",
                    "batch.kubernetes.io/job-name": "seed", "app": "seed"}},
                "spec": {
                    "manualSelector": false,
                    "selector": {"matchLabels": {uid: "u"}},
                    "template": {"metadata": {"creationTimestamp": null, "labels": {uid: "u", "job-name": "seed",
                        "controller-uid": "u", "batch.kubernetes.io/job-name": "seed"}},
                        "spec": {"containers": []}}
                }
            }),
        );
        assert_eq!(
            got,
            json!({
                "metadata": {"name": "seed", "labels": {"app": "seed"}},
                "spec": {"template": {"metadata": {}, "spec": {"containers": []}}}
            })
        );
    }

    #[test]
    fn hooks_are_never_suspended() {
        let job = |hook: &str| {
            json!({"metadata": {"name": "j", "annotations": {"sandcastle.dev/hook": hook}},
                   "spec": {"suspend": true}})
        };
        for (hook, suspended) in [("seed", false), ("pre-delete", false), ("other", true)] {
            let got = stripped(Class::Builtin(Builtin::Job), job(hook));
            assert_eq!(got["spec"].get("suspend").is_some(), suspended, "{hook}");
        }
    }

    #[test]
    fn claim_templates_keep_only_their_own_metadata() {
        let got = stripped(
            Class::Builtin(Builtin::StatefulSet),
            json!({"spec": {"volumeClaimTemplates": [{
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "creationTimestamp": null, "labels": {"app": "db"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"},
                "status": {"phase": "Pending"}
            }]}}),
        );
        assert_eq!(
            got["spec"]["volumeClaimTemplates"],
            json!([{
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "labels": {"app": "db"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"}
            }])
        );
    }

    #[test]
    fn service_accounts_lose_token_references() {
        let got = stripped(
            Class::Builtin(Builtin::ServiceAccount),
            json!({"metadata": {"name": "api"}, "secrets": [{"name": "api-token-x"}],
                   "imagePullSecrets": [{"name": "regcred"}]}),
        );
        assert_eq!(
            got,
            json!({"metadata": {"name": "api"}, "imagePullSecrets": [{"name": "regcred"}]})
        );
    }
}
