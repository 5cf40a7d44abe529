//! What the pods of a test's namespace log. [`pod_logs`] makes every container of every pod in
//! the namespace, now and later, log the given lines (`kubectl logs`, `Api::<Pod>::logs`);
//! [`set_pod_logs`] gives containers their own lines, lines from a previous run and an age;
//! [`set_one_pod_logs`] overrides them for one pod; [`read_logs`] waits until kwok serves a pod's
//! logs and returns them.
//!
//! kwok plays the kubelet: it answers the apiserver's `pods/log` with the CRI-format file that a
//! `kwok.x-k8s.io/v1alpha1` object points at, a `ClusterLogs` selecting the namespace
//! (`spec.selector.matchNamespaces`) or a `Logs` named after one pod, which wins over it. Both
//! list `spec.logs[]` entries of `containers` (none: every other container), `logsFile` and
//! `previousLogsFile`; kwok applies `tailLines`, `sinceSeconds`/`sinceTime` (against the lines'
//! timestamps), `limitBytes` and `previous` to the file. See `tests/kwok-stages/README.md`.
//!
//! Calling again for the same namespace (or pod) replaces the lines at once. A new object takes
//! kwok a moment to see: read with [`read_logs`] (or `eventually`). The objects go with the
//! namespace (the `ClusterLogs` is owned by it) and the files with its [`TestNamespace`].
//! This needs the local control plane (`scripts/kube-harness`): kwok reads the files from this
//! machine.
//!
//! [`TestNamespace`]: super::TestNamespace

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, LogParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::cluster::eventually;

/// What some containers log.
#[derive(Debug, Clone, Copy, Default)]
pub struct ContainerLogs<'a> {
    /// The containers that log these lines; empty: every container no other entry names.
    pub containers: &'a [&'a str],
    /// The lines, on stdout, oldest first.
    pub lines: &'a [&'a str],
    /// What `previous=true` returns (the container's last terminated run); with none, asking
    /// for it fails, as it does for a container that never restarted.
    pub previous: &'a [&'a str],
    /// How long ago the lines were written, which `sinceSeconds` and `sinceTime` compare with.
    pub age: Duration,
}

/// Every container of every pod in `namespace` logs `lines`.
pub async fn pod_logs(client: &Client, namespace: &str, lines: &[&str]) {
    set_pod_logs(
        client,
        namespace,
        &[ContainerLogs {
            lines,
            ..Default::default()
        }],
    )
    .await;
}

/// The pods of `namespace` log what `logs` says, container by container.
pub async fn set_pod_logs(client: &Client, namespace: &str, logs: &[ContainerLogs<'_>]) {
    let entries = write_files(namespace, "namespace", logs);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let uid = namespaces
        .get(namespace)
        .await
        .unwrap_or_else(|e| panic!("namespace {namespace}: {e}"))
        .metadata
        .uid
        .expect("a namespace has a uid");
    let object = json!({
        "apiVersion": API_VERSION,
        "kind": "ClusterLogs",
        "metadata": {
            "name": namespace,
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Namespace", "name": namespace, "uid": uid,
            }],
        },
        "spec": {"selector": {"matchNamespaces": [namespace]}, "logs": entries},
    });
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource("ClusterLogs"));
    apply(&api, namespace, object).await;
}

/// Pod `pod` of `namespace` logs what `logs` says, whatever its namespace's pods log.
pub async fn set_one_pod_logs(
    client: &Client,
    namespace: &str,
    pod: &str,
    logs: &[ContainerLogs<'_>],
) {
    let entries = write_files(namespace, &format!("pod-{pod}"), logs);
    let object = json!({
        "apiVersion": API_VERSION,
        "kind": "Logs",
        "metadata": {"name": pod, "namespace": namespace},
        "spec": {"logs": entries},
    });
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource("Logs"));
    apply(&api, pod, object).await;
}

/// The logs of `pod` with `params`, once kwok serves them (it may not yet know a new object).
pub async fn read_logs(pods: &Api<Pod>, pod: &str, params: &LogParams) -> String {
    eventually(
        &format!("logs of pod {pod} served"),
        Duration::from_secs(30),
        || async move { pods.logs(pod, params).await.map_err(|e| e.to_string()) },
    )
    .await
}

/// Where the log files of `namespace` are; [`super::TestNamespace`] removes them with it.
pub fn dir(namespace: &str) -> PathBuf {
    std::env::temp_dir()
        .join("sandcastle-pod-logs")
        .join(namespace)
}

const API_VERSION: &str = "kwok.x-k8s.io/v1alpha1";

fn resource(kind: &str) -> ApiResource {
    ApiResource {
        group: "kwok.x-k8s.io".to_owned(),
        version: "v1alpha1".to_owned(),
        api_version: API_VERSION.to_owned(),
        kind: kind.to_owned(),
        plural: kind.to_lowercase(),
    }
}

async fn apply(api: &Api<DynamicObject>, name: &str, object: Value) {
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    api.patch(
        name,
        &PatchParams::apply("sandcastle-tests").force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "applying kwok {kind} {name}: {e} (kwok's log resources come with the local control \
             plane: scripts/kube-harness start)"
        )
    });
}

/// Write each entry's files as `<prefix>-<i>.log` (and `.previous.log`) and return the entries
/// of `spec.logs` pointing at them.
fn write_files(namespace: &str, prefix: &str, logs: &[ContainerLogs<'_>]) -> Vec<Value> {
    let dir = dir(namespace);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    logs.iter()
        .enumerate()
        .map(|(i, log)| {
            let written = SystemTime::now() - log.age;
            let current = dir.join(format!("{prefix}-{i}.log"));
            write_cri(&current, log.lines, written);
            let mut entry = json!({"logsFile": current});
            if !log.containers.is_empty() {
                entry["containers"] = json!(log.containers);
            }
            let previous = dir.join(format!("{prefix}-{i}.previous.log"));
            if log.previous.is_empty() {
                let _ = std::fs::remove_file(&previous);
            } else {
                write_cri(&previous, log.previous, written);
                entry["previousLogsFile"] = json!(previous);
            }
            entry
        })
        .collect()
}

/// Write `lines` in the container runtime's log format (`<RFC 3339 time> stdout F <line>`), all
/// stamped `at`, replacing the file at once so that kwok never reads half of it.
fn write_cri(path: &std::path::Path, lines: &[&str], at: SystemTime) {
    let stamp = jiff::Timestamp::try_from(at).expect("a time after 1970");
    let text: String = lines
        .iter()
        .map(|line| {
            assert!(!line.contains('\n'), "one line at a time: {line:?}");
            format!("{stamp} stdout F {line}\n")
        })
        .collect();
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text).unwrap_or_else(|e| panic!("{}: {e}", partial.display()));
    std::fs::rename(&partial, path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
