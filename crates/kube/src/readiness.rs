//! Whether the workloads of a phase are ready, and when they are not, the facts a diagnosis
//! (`diagnose`) rests on: a Job's failure condition and exit code, why pods could not be created. Fetching is thin; the
//! judgement is pure and unit-tested.

use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::Value;

use sandcastle_crd::ServiceStatus;

use crate::watched::Watched;

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

/// A label selector as a query (`app=web,tier=front`); `None` for none or an empty one.
pub fn selector_query(
    labels: Option<&std::collections::BTreeMap<String, String>>,
) -> Option<String> {
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
    // Pods of the old revision still terminating may still be routed to (an ingress controller
    // drops an endpoint a moment after the API does): the rollout is over once they are gone.
    let terminating = st.terminating_replicas.unwrap_or(0);
    let ready = observed
        && updated == desired
        && available == desired
        && total == desired
        && terminating == 0;
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

/// A ReplicaSet of its own (a preview's ReplicaSets with a Deployment are judged through it):
/// ready when it has seen its spec and every desired pod is there, ready and available.
pub fn replicaset_state(rs: &ReplicaSet) -> WorkloadState {
    let desired = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let st = rs.status.clone().unwrap_or_default();
    let generation = rs.metadata.generation.unwrap_or(0);
    let observed = st.observed_generation.unwrap_or(-1) >= generation;
    let ready_replicas = st.ready_replicas.unwrap_or(0);
    let available = st.available_replicas.unwrap_or(0);
    let ready = observed
        && st.replicas == desired
        && ready_replicas == desired
        && available == desired
        && st.terminating_replicas.unwrap_or(0) == 0;
    WorkloadState {
        kind: "ReplicaSet".into(),
        name: rs.name_any(),
        ready: ready_replicas.min(available).min(desired),
        desired,
        health: if ready {
            Health::Ready
        } else {
            Health::Waiting
        },
        selector: selector_query(
            rs.spec
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
        // The reason is the short, stable word (`BackoffLimitExceeded`, `DeadlineExceeded`);
        // its message only repeats it in a sentence.
        let why = c
            .reason
            .clone()
            .filter(|r| !r.is_empty())
            .or_else(|| c.message.clone().filter(|m| !m.is_empty()))
            .unwrap_or_else(|| "Failed".into());
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

/// Whether a Job is suspended (it runs no pods until resumed).
pub fn job_suspended(j: &Job) -> bool {
    j.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
}

/// The exit code of the first container of `pods` that terminated with one other than 0.
pub fn exit_code(pods: &[Pod]) -> Option<i32> {
    pods.iter()
        .filter_map(|p| p.status.as_ref())
        .flat_map(|st| {
            st.init_container_statuses
                .iter()
                .flatten()
                .chain(st.container_statuses.iter().flatten())
        })
        .filter_map(|cs| {
            let state = cs.state.as_ref()?;
            state
                .terminated
                .as_ref()
                .or(cs.last_state.as_ref().and_then(|l| l.terminated.as_ref()))
        })
        .map(|t| t.exit_code)
        .find(|code| *code != 0)
}

/// The current state of the workloads among `objects` (Deployments, StatefulSets, ReplicaSets,
/// Jobs): from `watched` where it holds them as last applied, otherwise from the API. Objects
/// not found yet count as waiting.
pub async fn workload_states(
    client: &Client,
    namespace: &str,
    objects: &[Value],
    watched: Option<&Watched>,
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
            "Deployment" => {
                let cached = watched.and_then(|w| w.deployment(namespace, name));
                state_of(client, namespace, name, cached, deployment_state).await?
            }
            "StatefulSet" => {
                let cached = watched.and_then(|w| w.statefulset(namespace, name));
                state_of(client, namespace, name, cached, statefulset_state).await?
            }
            "ReplicaSet" => state_of(client, namespace, name, None, replicaset_state).await?,
            "Job" => {
                let cached = watched.and_then(|w| w.job(namespace, name));
                state_of(client, namespace, name, cached, job_state).await?
            }
            _ => continue,
        };
        out.push(state.unwrap_or_else(|| missing(kind)));
    }
    Ok(out)
}

/// The state of workload `name` of kind `K`: from `cached` when given, else from the API;
/// `None` when it does not exist (yet).
async fn state_of<K>(
    client: &Client,
    namespace: &str,
    name: &str,
    cached: Option<Arc<K>>,
    state: fn(&K) -> WorkloadState,
) -> Result<Option<WorkloadState>, kube::Error>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    if let Some(k) = cached {
        return Ok(Some(state(&k)));
    }
    let found = Api::<K>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?;
    Ok(found.as_ref().map(state))
}

/// Why the pods of `w` could not be created: a ReplicaSet (a Deployment's, or one of its own)
/// says so in its `ReplicaFailure` condition; StatefulSets and Jobs in a `FailedCreate` event.
pub async fn creation_failure(
    client: &Client,
    namespace: &str,
    w: &WorkloadState,
) -> Option<String> {
    if w.kind == "ReplicaSet" {
        let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
        let rs = sets.get_opt(&w.name).await.ok()??;
        return replica_failure(&[rs]);
    }
    if w.kind == "Deployment" {
        let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
        let list = sets
            .list(&ListParams::default().labels(w.selector.as_deref()?))
            .await
            .ok()?;
        return replica_failure(&list.items);
    }
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let fields = format!(
        "involvedObject.kind={},involvedObject.name={},reason=FailedCreate",
        w.kind, w.name
    );
    let list = events
        .list(&ListParams::default().fields(&fields))
        .await
        .ok()?;
    latest_message(&list.items)
}

/// The message of the `ReplicaFailure` condition of any of `sets`.
pub fn replica_failure(sets: &[ReplicaSet]) -> Option<String> {
    sets.iter()
        .filter_map(|rs| rs.status.as_ref()?.conditions.as_ref())
        .flatten()
        .find(|c| c.type_ == "ReplicaFailure" && c.status == "True")
        .and_then(|c| c.message.clone().or_else(|| c.reason.clone()))
}

/// The message of the most recent of `events`.
fn latest_message(events: &[Event]) -> Option<String> {
    events
        .iter()
        .max_by_key(|e| {
            e.last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or(e.event_time.as_ref().map(|t| t.0))
        })
        .and_then(|e| e.message.clone())
}

/// Why a failed Job failed: its condition's reason and the exit code of its failed container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFailure {
    /// e.g. `BackoffLimitExceeded`.
    pub reason: String,
    pub exit_code: Option<i32>,
}

/// For a failed Job: the failure condition's reason and the failing container's exit code.
pub async fn job_failure(client: &Client, namespace: &str, w: &WorkloadState) -> JobFailure {
    let reason = match &w.health {
        Health::Failed(why) => why.clone(),
        _ => String::new(),
    };
    let exit_code = match &w.selector {
        Some(selector) => Api::<Pod>::namespaced(client.clone(), namespace)
            .list(&ListParams::default().labels(selector))
            .await
            .ok()
            .and_then(|l| exit_code(&l.items)),
        None => None,
    };
    JobFailure { reason, exit_code }
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

        // The new pods are all there, an old one is still shutting down.
        let draining = deployment(json!({
            "metadata": {"name": "api", "generation": 2},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2,
                       "availableReplicas": 2, "terminatingReplicas": 1}
        }));
        assert_eq!(deployment_state(&draining).health, Health::Waiting);
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
    fn a_replicaset_is_ready_when_all_its_pods_are() {
        let rs = |status: Value| -> ReplicaSet {
            serde_json::from_value(json!({
                "metadata": {"name": "legacy", "generation": 2},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "legacy"}}},
                "status": status
            }))
            .unwrap()
        };
        let ready = replicaset_state(&rs(json!({
            "observedGeneration": 2, "replicas": 2, "readyReplicas": 2, "availableReplicas": 2
        })));
        assert_eq!(ready.health, Health::Ready);
        assert_eq!(
            (ready.kind.as_str(), ready.ready, ready.desired),
            ("ReplicaSet", 2, 2)
        );
        assert_eq!(ready.selector.as_deref(), Some("app=legacy"));
        for waiting in [
            json!({"observedGeneration": 2, "replicas": 2, "readyReplicas": 1, "availableReplicas": 1}),
            json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "availableReplicas": 2}),
            json!({"observedGeneration": 2, "replicas": 2, "readyReplicas": 2, "availableReplicas": 1}),
            json!({"observedGeneration": 2, "replicas": 3, "readyReplicas": 2, "availableReplicas": 2}),
            json!({"observedGeneration": 2, "replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "terminatingReplicas": 1}),
            json!({"replicas": 0}),
        ] {
            assert_eq!(
                replicaset_state(&rs(waiting.clone())).health,
                Health::Waiting,
                "{waiting}"
            );
        }
        let none: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "off", "generation": 1},
            "spec": {"replicas": 0, "selector": {}},
            "status": {"observedGeneration": 1, "replicas": 0}
        }))
        .unwrap();
        assert_eq!(
            replicaset_state(&none).health,
            Health::Ready,
            "a stopped one too"
        );
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
        assert_eq!(s.health, Health::Failed("BackoffLimitExceeded".into()));
        assert_eq!(
            s.selector.as_deref(),
            Some("batch.kubernetes.io/controller-uid=u1")
        );
    }

    #[test]
    fn a_failed_job_gives_its_exit_code() {
        let pods: Vec<Pod> = serde_json::from_value(json!([
            {"status": {"phase": "Running", "containerStatuses": [
                {"name": "a", "image": "x", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]}},
            {"status": {"phase": "Failed", "containerStatuses": [
                {"name": "seed", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]}}
        ]))
        .unwrap();
        assert_eq!(exit_code(&pods), Some(3));
        let restarted: Vec<Pod> = serde_json::from_value(json!([
            {"status": {"containerStatuses": [
                {"name": "seed", "image": "x", "imageID": "", "ready": false, "restartCount": 2,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}}
        ]))
        .unwrap();
        assert_eq!(exit_code(&restarted), Some(137));
        assert_eq!(exit_code(&[]), None);
    }

    #[test]
    fn pods_that_cannot_be_created_say_why() {
        let sets: Vec<ReplicaSet> = serde_json::from_value(json!([
            {"metadata": {"name": "api-1"}, "status": {"replicas": 0}},
            {"metadata": {"name": "api-2"}, "status": {"replicas": 0, "conditions": [
                {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                 "message": "pods \"api-2-x\" is forbidden: exceeded quota: sandcastle-quota"}]}}
        ]))
        .unwrap();
        assert_eq!(
            replica_failure(&sets).as_deref(),
            Some("pods \"api-2-x\" is forbidden: exceeded quota: sandcastle-quota")
        );
        assert_eq!(replica_failure(&sets[..1]), None);
    }

    #[test]
    fn suspended_jobs_are_told_apart() {
        let j: Job = serde_json::from_value(
            json!({"metadata": {"name": "dump"}, "spec": {"suspend": true, "template": {}}}),
        )
        .unwrap();
        assert!(job_suspended(&j));
        let j: Job =
            serde_json::from_value(json!({"metadata": {"name": "dump"}, "spec": {"template": {}}}))
                .unwrap();
        assert!(!job_suspended(&j));
    }
}
