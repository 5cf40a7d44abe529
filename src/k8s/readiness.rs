//! Whether the workloads of a phase are ready, and when they are not, why — in one sentence taken
//! from the cluster (a pod's waiting reason, a Job's failure condition). Fetching is thin; the
//! judgement is pure and unit-tested.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::crd::ServiceStatus;

/// The readiness of one workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    Ready,
    /// Still converging; `ready/desired` counts where they apply.
    Waiting,
    /// Will not become ready by waiting (a failed Job).
    Failed(String),
}

/// One workload's observed state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadState {
    pub kind: String,
    pub name: String,
    pub ready: i32,
    pub desired: i32,
    pub health: Health,
    /// Selector (as a label query) of its pods, for diagnosis.
    pub selector: Option<String>,
}

impl WorkloadState {
    pub fn service_status(&self) -> ServiceStatus {
        ServiceStatus {
            name: self.name.clone(),
            kind: self.kind.clone(),
            ready: self.ready,
            desired: self.desired,
        }
    }
}

fn selector_query(labels: Option<&std::collections::BTreeMap<String, String>>) -> Option<String> {
    let labels = labels?;
    if labels.is_empty() {
        return None;
    }
    Some(
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

pub fn deployment_state(d: &Deployment) -> WorkloadState {
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let st = d.status.clone().unwrap_or_default();
    let generation = d.metadata.generation.unwrap_or(0);
    let observed = st.observed_generation.unwrap_or(-1) >= generation;
    let updated = st.updated_replicas.unwrap_or(0);
    let available = st.available_replicas.unwrap_or(0);
    let total = st.replicas.unwrap_or(0);
    let ready = observed && updated == desired && available == desired && total == desired;
    WorkloadState {
        kind: "Deployment".into(),
        name: d.name_any(),
        ready: available.min(desired),
        desired,
        health: if ready {
            Health::Ready
        } else {
            Health::Waiting
        },
        selector: selector_query(
            d.spec
                .as_ref()
                .and_then(|s| s.selector.match_labels.as_ref()),
        ),
    }
}

pub fn statefulset_state(s: &StatefulSet) -> WorkloadState {
    let desired = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let st = s.status.clone().unwrap_or_default();
    let generation = s.metadata.generation.unwrap_or(0);
    let observed = st.observed_generation.unwrap_or(-1) >= generation;
    let ready_replicas = st.ready_replicas.unwrap_or(0);
    let updated = st.updated_replicas.unwrap_or(0);
    let ready =
        observed && ready_replicas == desired && updated == desired && st.replicas == desired;
    WorkloadState {
        kind: "StatefulSet".into(),
        name: s.name_any(),
        ready: ready_replicas.min(desired),
        desired,
        health: if ready {
            Health::Ready
        } else {
            Health::Waiting
        },
        selector: selector_query(
            s.spec
                .as_ref()
                .and_then(|s| s.selector.match_labels.as_ref()),
        ),
    }
}

pub fn job_state(j: &Job) -> WorkloadState {
    let st = j.status.clone().unwrap_or_default();
    let conditions = st.conditions.unwrap_or_default();
    let is = |t: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == t && c.status == "True")
    };
    let health = if is("Complete").is_some() {
        Health::Ready
    } else if let Some(c) = is("Failed") {
        let mut why = c.reason.clone().unwrap_or_else(|| "Failed".into());
        if let Some(m) = c.message.as_deref().filter(|m| !m.is_empty()) {
            why = format!("{why}: {m}");
        }
        Health::Failed(why)
    } else {
        Health::Waiting
    };
    let selector = j
        .metadata
        .uid
        .as_ref()
        .map(|uid| format!("batch.kubernetes.io/controller-uid={uid}"));
    WorkloadState {
        kind: "Job".into(),
        name: j.name_any(),
        ready: i32::from(health == Health::Ready),
        desired: 1,
        health,
        selector,
    }
}

/// The first thing wrong with any of `pods`, in the words of the cluster: a container's waiting
/// reason and image or message, a terminated container's reason and exit code, or why the pod
/// cannot be scheduled.
pub fn pod_problem(pods: &[Pod]) -> Option<String> {
    for pod in pods {
        let Some(st) = &pod.status else { continue };
        let statuses = st
            .init_container_statuses
            .iter()
            .flatten()
            .chain(st.container_statuses.iter().flatten());
        for cs in statuses {
            let Some(state) = &cs.state else { continue };
            if let Some(w) = &state.waiting {
                let reason = w.reason.clone().unwrap_or_default();
                if reason.is_empty() || reason == "ContainerCreating" || reason == "PodInitializing"
                {
                    continue;
                }
                let detail = if reason.contains("Image") {
                    cs.image.clone()
                } else {
                    w.message.clone().unwrap_or_default()
                };
                return Some(if detail.is_empty() {
                    reason
                } else {
                    format!("{reason} {detail}")
                });
            }
            if let Some(t) = &state.terminated
                && t.exit_code != 0
            {
                let reason = t.reason.clone().unwrap_or_else(|| "Error".into());
                return Some(format!("{reason} (exit {})", t.exit_code));
            }
        }
        for c in st.conditions.iter().flatten() {
            if c.type_ == "PodScheduled" && c.status == "False" {
                return Some(
                    c.message
                        .clone()
                        .or_else(|| c.reason.clone())
                        .unwrap_or_else(|| "Unschedulable".into()),
                );
            }
        }
    }
    None
}

/// Fetch the current state of the workloads among `objects` (Deployments, StatefulSets, Jobs).
/// Objects not found yet count as waiting.
pub async fn workload_states(
    client: &Client,
    namespace: &str,
    objects: &[Value],
) -> Result<Vec<WorkloadState>, kube::Error> {
    let mut out = Vec::new();
    for obj in objects {
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let missing = |kind: &str| WorkloadState {
            kind: kind.into(),
            name: name.into(),
            ready: 0,
            desired: 1,
            health: Health::Waiting,
            selector: None,
        };
        let state = match kind {
            "Deployment" => Api::<Deployment>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await?
                .map_or_else(|| missing(kind), |d| deployment_state(&d)),
            "StatefulSet" => Api::<StatefulSet>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await?
                .map_or_else(|| missing(kind), |s| statefulset_state(&s)),
            "Job" => Api::<Job>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await?
                .map_or_else(|| missing(kind), |j| job_state(&j)),
            _ => continue,
        };
        out.push(state);
    }
    Ok(out)
}

/// Why `w` is not ready, from its pods: e.g. `deployment/api 0/2 (ImagePullBackOff ghcr.io/acme/api:abc1234)`.
pub async fn diagnose(client: &Client, namespace: &str, w: &WorkloadState) -> String {
    let head = format!(
        "{}/{} {}/{}",
        w.kind.to_lowercase(),
        w.name,
        w.ready,
        w.desired
    );
    if let Health::Failed(why) = &w.health {
        return format!("{head}: {why}");
    }
    let Some(selector) = &w.selector else {
        return head;
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    match pods.list(&ListParams::default().labels(selector)).await {
        Ok(list) => match pod_problem(&list.items) {
            Some(p) => format!("{head} ({p})"),
            None if list.items.is_empty() => format!("{head} (no pods created)"),
            None => head,
        },
        Err(_) => head,
    }
}

/// For a failed Job: the failure condition plus the failing container's exit, e.g.
/// `BackoffLimitExceeded: Job has reached the specified backoff limit (exit 1)`.
pub async fn job_failure(client: &Client, namespace: &str, w: &WorkloadState) -> String {
    let Health::Failed(why) = &w.health else {
        return String::new();
    };
    let Some(selector) = &w.selector else {
        return why.clone();
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let exit = pods
        .list(&ListParams::default().labels(selector))
        .await
        .ok()
        .and_then(|l| pod_problem(&l.items));
    match exit {
        Some(p) => format!("{why} ({p})"),
        None => why.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(v: Value) -> Deployment {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn deployment_is_ready_only_when_the_rollout_is_complete() {
        let ready = deployment(json!({
            "metadata": {"name": "api", "generation": 2},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "api"}}, "template": {}},
            "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}
        }));
        let s = deployment_state(&ready);
        assert_eq!(s.health, Health::Ready);
        assert_eq!((s.ready, s.desired), (2, 2));
        assert_eq!(s.selector.as_deref(), Some("app=api"));

        let old_generation = deployment(json!({
            "metadata": {"name": "api", "generation": 3},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}
        }));
        assert_eq!(deployment_state(&old_generation).health, Health::Waiting);

        let rolling = deployment(json!({
            "metadata": {"name": "api", "generation": 2},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 2}
        }));
        assert_eq!(deployment_state(&rolling).health, Health::Waiting);
    }

    #[test]
    fn zero_replicas_is_ready() {
        let d = deployment(json!({
            "metadata": {"name": "api", "generation": 1},
            "spec": {"replicas": 0, "selector": {}, "template": {}},
            "status": {"observedGeneration": 1}
        }));
        assert_eq!(deployment_state(&d).health, Health::Ready);
    }

    #[test]
    fn failed_jobs_say_why() {
        let j: Job = serde_json::from_value(json!({
            "metadata": {"name": "seed", "uid": "u1"},
            "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit"}]}
        }))
        .unwrap();
        let s = job_state(&j);
        assert_eq!(
            s.health,
            Health::Failed(
                "BackoffLimitExceeded: Job has reached the specified backoff limit".into()
            )
        );
        assert_eq!(
            s.selector.as_deref(),
            Some("batch.kubernetes.io/controller-uid=u1")
        );
    }

    #[test]
    fn pod_problems_come_from_the_cluster() {
        let pull: Pod = serde_json::from_value(json!({"status": {"phase": "Pending", "containerStatuses": [
            {"name": "api", "image": "ghcr.io/acme/api:abc1234", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}}))
        .unwrap();
        assert_eq!(
            pod_problem(&[pull]).as_deref(),
            Some("ImagePullBackOff ghcr.io/acme/api:abc1234")
        );

        let crash: Pod = serde_json::from_value(json!({"status": {"containerStatuses": [
            {"name": "api", "image": "x", "imageID": "", "ready": false, "restartCount": 5,
             "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container=api"}}}]}}))
        .unwrap();
        assert_eq!(
            pod_problem(&[crash]).as_deref(),
            Some("CrashLoopBackOff back-off 5m0s restarting failed container=api")
        );

        let exited: Pod = serde_json::from_value(json!({"status": {"containerStatuses": [
            {"name": "seed", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}}))
        .unwrap();
        assert_eq!(pod_problem(&[exited]).as_deref(), Some("Error (exit 1)"));

        let unschedulable: Pod = serde_json::from_value(json!({"status": {"conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available"}]}}))
        .unwrap();
        assert_eq!(
            pod_problem(&[unschedulable]).as_deref(),
            Some("0/1 nodes are available")
        );

        let fine: Pod = serde_json::from_value(json!({"status": {"containerStatuses": [
            {"name": "api", "image": "x", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]}}))
        .unwrap();
        assert_eq!(pod_problem(&[fine]), None);
    }
}
