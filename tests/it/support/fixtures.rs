//! The blueprint fixtures (`fixtures/blueprints/<name>/`) as a user would load them into a
//! staging namespace, and what some of them need from the cluster (more nodes, a CRD).
//!
//! A folder holds YAML documents, and optionally `blueprint.yaml` (Blueprint spec fields) and
//! `source.yaml` (the namespace the objects were read back from). Objects read back from a
//! cluster carry what that cluster added (uids, status, cluster IPs, objects its controllers
//! made); a user never writes those, so [`Fixture::as_user_wrote`] turns them back into what was
//! applied, and the test cluster adds its own.

use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use serde_json::{Map, Value, json};

use super::cluster::eventually;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/blueprints");

/// One fixture folder.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub name: String,
    pub objects: Vec<Value>,
    /// `blueprint.yaml` as JSON (an empty object without one).
    pub spec: Value,
    /// The namespace the objects were read back from (`source.yaml`).
    pub source_namespace: Option<String>,
}

impl Fixture {
    pub fn load(name: &str) -> Self {
        let dir = std::path::Path::new(DIR).join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("fixture {name}: {e}"))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        let mut fixture = Self {
            name: name.to_owned(),
            objects: Vec::new(),
            spec: json!({}),
            source_namespace: None,
        };
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            match file.file_name().and_then(|n| n.to_str()) {
                Some("blueprint.yaml") => fixture.spec = serde_saphyr::from_str(&text).unwrap(),
                Some("source.yaml") => {
                    let v: Value = serde_saphyr::from_str(&text).unwrap();
                    fixture.source_namespace = v["namespace"].as_str().map(str::to_owned);
                }
                _ => fixture.objects.extend(
                    sandcastle::domain::plan::parse_manifests(&text).expect("fixture parses"),
                ),
            }
        }
        fixture
    }

    /// The YAML documents of the fixture, joined (for a manifests ConfigMap).
    pub fn yaml(&self) -> String {
        self.objects
            .iter()
            .map(|o| serde_saphyr::to_string(o).unwrap())
            .collect::<Vec<_>>()
            .join("---\n")
    }

    /// The objects as a user applies them to `staging`: as they are for manifests; for objects
    /// read back from a namespace, renamed to `staging` and without what the API server and
    /// controllers add (see [`user_written`]).
    pub fn as_user_wrote(&self, staging: &str) -> Vec<Value> {
        let Some(source) = &self.source_namespace else {
            return self.objects.clone();
        };
        let made_by_statefulsets = claims_of_statefulsets(&self.objects);
        self.objects
            .iter()
            .filter(|o| !controller_made(o) && !made_by_statefulsets.contains(&name(o)))
            .map(|o| {
                let mut o = o.clone();
                rename(&mut o, source, staging);
                user_written(&mut o);
                o
            })
            .collect()
    }
}

fn name(o: &Value) -> String {
    o["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Objects that controllers or running programs make, or that Kubernetes puts in every
/// namespace.
fn controller_made(o: &Value) -> bool {
    let kind = o["kind"].as_str().unwrap_or_default();
    let owned = o["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|refs| refs.iter().any(|r| r["controller"] == true));
    owned
        || matches!(
            kind,
            "Pod"
                | "ReplicaSet"
                | "ControllerRevision"
                | "Endpoints"
                | "EndpointSlice"
                | "Event"
                | "Lease"
        )
        || (kind == "ConfigMap" && name(o) == "kube-root-ca.crt")
        || (kind == "ServiceAccount" && name(o) == "default")
}

/// Names of claims a StatefulSet of `objects` makes from its templates (`<template>-<sts>-<n>`).
fn claims_of_statefulsets(objects: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for sts in objects.iter().filter(|o| o["kind"] == "StatefulSet") {
        let replicas = sts["spec"]["replicas"].as_u64().unwrap_or(1);
        for t in sts["spec"]["volumeClaimTemplates"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for n in 0..replicas {
                out.push(format!("{}-{}-{n}", name(t), name(sts)));
            }
        }
    }
    out
}

/// Replace the namespace name `from` by `to` in every string, and in the decoded text of Secret
/// data.
fn rename(v: &mut Value, from: &str, to: &str) {
    let is_secret = v["kind"] == "Secret";
    replace_strings(v, from, to);
    if is_secret && let Some(data) = v.get_mut("data").and_then(Value::as_object_mut) {
        let b64 = base64::engine::general_purpose::STANDARD;
        for value in data.values_mut() {
            let Some(text) = value
                .as_str()
                .and_then(|s| b64.decode(s).ok())
                .and_then(|b| String::from_utf8(b).ok())
            else {
                continue;
            };
            *value = Value::from(b64.encode(text.replace(from, to)));
        }
    }
}

fn replace_strings(v: &mut Value, from: &str, to: &str) {
    match v {
        Value::String(s) if s.contains(from) => *s = s.replace(from, to),
        Value::Array(items) => items.iter_mut().for_each(|i| replace_strings(i, from, to)),
        Value::Object(map) => map.values_mut().for_each(|i| replace_strings(i, from, to)),
        _ => {}
    }
}

fn remove(map: &mut Value, keys: &[&str]) {
    if let Some(m) = map.as_object_mut() {
        for k in keys {
            m.remove(*k);
        }
    }
}

/// What a user wrote before the API server and controllers added theirs: no server metadata or
/// status, no allocated cluster IPs or node ports, no claim binding, no generated Job selector,
/// and storage of the test cluster (the fixture's cluster had `local-path`).
fn user_written(o: &mut Value) {
    remove(
        &mut o["metadata"],
        &[
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
            "ownerReferences",
            "finalizers",
            "selfLink",
        ],
    );
    if let Some(annotations) = o["metadata"]["annotations"].as_object_mut() {
        annotations.retain(|k, _| {
            !(k.starts_with("pv.kubernetes.io/")
                || k.starts_with("volume.")
                || k == "deployment.kubernetes.io/revision"
                || k == "kubernetes.io/service-account.uid")
        });
    }
    remove(o, &["status"]);
    match o["kind"].as_str().unwrap_or_default() {
        "Service" => {
            if o["spec"]["clusterIP"] != "None" {
                remove(&mut o["spec"], &["clusterIP", "clusterIPs"]);
            }
            remove(&mut o["spec"], &["healthCheckNodePort"]);
            for port in o["spec"]["ports"].as_array_mut().into_iter().flatten() {
                remove(port, &["nodePort"]);
            }
        }
        "PersistentVolumeClaim" => {
            remove(&mut o["spec"], &["volumeName"]);
            if o["spec"]["storageClassName"] == "local-path" {
                remove(&mut o["spec"], &["storageClassName"]);
            }
        }
        "Job" => {
            remove(&mut o["spec"], &["selector", "manualSelector"]);
            for path in ["/metadata/labels", "/spec/template/metadata/labels"] {
                if let Some(l) = o.pointer_mut(path).and_then(Value::as_object_mut) {
                    l.retain(|k, _| {
                        !sandcastle::crd::labels::JOB_CONTROLLER_LABELS.contains(&k.as_str())
                    });
                }
            }
        }
        "Secret" if o["type"] == "kubernetes.io/service-account-token" => {
            // The token controller fills these in.
            remove(o, &["data"]);
        }
        "StatefulSet" => {
            for t in o["spec"]["volumeClaimTemplates"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                remove(t, &["status"]);
            }
        }
        _ => {}
    }
    if o["metadata"]["annotations"]
        .as_object()
        .is_some_and(Map::is_empty)
    {
        remove(&mut o["metadata"], &["annotations"]);
    }
}

/// The harness's fake node shape, shared with `kube-harness up` (`${NAME}` is the node's name,
/// `${ZONE}` its zone).
const FAKE_NODE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tools/kube-harness/fake-node.json"
));

/// The `i`-th fake node, as `kube-harness up` makes it (see `fakeNode` in
/// tools/kube-harness/cluster.go): zones local-1a, local-1b, local-1c in turn.
pub fn fake_node(i: usize) -> Node {
    let zone = ["local-1a", "local-1b", "local-1c"][i % 3];
    let text = FAKE_NODE
        .replace("${NAME}", &format!("kwok-node-{i}"))
        .replace("${ZONE}", zone);
    serde_json::from_str(&text).expect("tools/kube-harness/fake-node.json is a Node")
}

/// Make sure the cluster has at least `n` fake nodes (a StatefulSet whose pods keep apart by
/// hostname needs one node per replica), ready for pods.
pub async fn ensure_nodes(client: &Client, n: usize) {
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 1..n {
        let node = fake_node(i);
        match nodes.create(&Default::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(r)) if r.code == 409 => {}
            Err(e) => panic!("creating node kwok-node-{i}: {e}"),
        }
    }
    eventually(
        &format!("{n} nodes ready for pods"),
        Duration::from_secs(60),
        || {
            let nodes = nodes.clone();
            async move {
                let list = nodes
                    .list(&Default::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let usable = list
                    .items
                    .iter()
                    .filter(|node| {
                        let ready = node
                            .status
                            .as_ref()
                            .and_then(|s| s.conditions.as_ref())
                            .is_some_and(|cs| {
                                cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                            });
                        let tainted = node
                            .spec
                            .as_ref()
                            .and_then(|s| s.taints.as_ref())
                            .is_some_and(|ts| {
                                ts.iter().any(|t| t.key.starts_with("node.kubernetes.io/"))
                            });
                        ready && !tainted
                    })
                    .count();
                if usable >= n {
                    Ok(())
                } else {
                    Err(format!("{usable} usable nodes"))
                }
            }
        },
    )
    .await;
}

/// Make sure cert-manager's `Certificate` kind is served (a CRD that keeps any fields), for
/// blueprints that list it in `allowKinds`.
pub async fn ensure_certificate_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "certificates.cert-manager.io"},
        "spec": {
            "group": "cert-manager.io",
            "names": {"kind": "Certificate", "listKind": "CertificateList", "plural": "certificates", "singular": "certificate"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    });
    crds.patch(
        "certificates.cert-manager.io",
        &PatchParams::apply("sandcastle-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("Certificate CRD accepted");
    let gvk = GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate");
    eventually("Certificate served", Duration::from_secs(60), || {
        let client = client.clone();
        let gvk = gvk.clone();
        async move {
            pinned_kind(&client, &gvk)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    })
    .await;
}

/// One Deployment of one small container: the least a Blueprint can clone.
pub const TINY_APP: &str = r"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example.com/shop/web:1.0}]
";

/// [`TINY_APP`] whose pod becomes ready `after` (e.g. `4s`) it starts.
pub fn slow_app(after: &str) -> String {
    let slow = NEVER_READY_APP.replace(
        "test.sandcastle.dev/fate: never-ready",
        &format!("test.sandcastle.dev/fate: slow, test.sandcastle.dev/ready-after: {after}"),
    );
    assert!(slow.contains("ready-after"), "the fixture changed");
    slow
}

/// [`TINY_APP`] whose pod runs but never becomes ready (a deploy that stays in flight).
pub const NEVER_READY_APP: &str = r"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {test.sandcastle.dev/fate: never-ready}
    spec:
      containers: [{name: web, image: registry.example.com/shop/web:1.0}]
";

/// A web Deployment behind a Service and an Ingress (the host is the Blueprint's).
pub const WEB_APP: &str = r"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example.com/shop/web:1.0}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  rules:
  - host: web.staging.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
";
