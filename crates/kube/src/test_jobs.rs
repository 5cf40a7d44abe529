//! The Jobs that run a preview's tests (`domain::plan::test_job` makes them): created once per
//! run, read back as what a run's check run must say (`domain::test_runs::Seen`: waiting, its pod
//! started, succeeded, failed with its exit code), deleted when a run is cancelled or timed out
//! or a newer run of the same test starts; and the tail of a finished run's logs, redacted with
//! the namespace's Secret values and token shapes, for its check run.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::diagnose::secret_values;
use sandcastle_crd::labels::TEST;
use sandcastle_domain::diagnosis::tail_within;
use sandcastle_domain::redact::Redactor;
use sandcastle_domain::test_runs::Seen;

/// Lines of a finished test's log its check run shows, and the bytes they may take.
pub const LOG_LINES: usize = 50;
pub const LOG_BYTES: usize = 16 * 1024;

/// Make the Job `job` (a run's; one made before, by a pass whose status write was lost, is
/// the same run's).
pub async fn create(client: &Client, ns: &str, job: &Value) -> Result<(), kube::Error> {
    let typed: Job = serde_json::from_value(job.clone())
        .map_err(|e| kube::Error::Service(format!("a test Job that is no Job: {e}").into()))?;
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    match api.create(&PostParams::default(), &typed).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Delete Job `name` and its pods; one already gone (or a namespace gone) is deleted.
pub async fn delete(client: &Client, ns: &str, name: &str) -> Result<(), kube::Error> {
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Delete the Jobs of test `test` but `keep`: one Job per test stays (its logs are the last
/// run's).
pub async fn delete_older(
    client: &Client,
    ns: &str,
    test: &str,
    keep: &str,
) -> Result<(), kube::Error> {
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    let jobs = api
        .list(&ListParams::default().labels(&format!("{TEST}={test}")))
        .await?;
    for job in jobs.items.iter().filter(|j| j.name_any() != keep) {
        delete(client, ns, &job.name_any()).await?;
    }
    Ok(())
}

/// What Job `name` shows of its run.
pub async fn observe(client: &Client, ns: &str, name: &str) -> Result<Seen, kube::Error> {
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    let Some(job) = api.get_opt(name).await? else {
        return Ok(Seen::Gone);
    };
    let pods = pods_of(client, ns, &job).await?;
    let started = started_at(&pods);
    let st = job.status.clone().unwrap_or_default();
    let conditions = st.conditions.unwrap_or_default();
    let condition = |t: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == t && c.status == "True")
    };
    if let Some(c) = condition("Complete") {
        let at = st
            .completion_time
            .map(|t| t.0)
            .or(c.last_transition_time.as_ref().map(|t| t.0))
            .unwrap_or_else(Timestamp::now);
        return Ok(Seen::Succeeded { started, at });
    }
    if let Some(c) = condition("Failed") {
        let reason = c
            .reason
            .clone()
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "Failed".to_owned());
        let at = c
            .last_transition_time
            .as_ref()
            .map_or_else(Timestamp::now, |t| t.0);
        return Ok(Seen::Failed {
            started,
            at,
            exit_code: super::readiness::exit_code(&pods),
            reason,
        });
    }
    Ok(match started {
        Some(at) => Seen::Started(at),
        None => Seen::Waiting,
    })
}

async fn pods_of(client: &Client, ns: &str, job: &Job) -> Result<Vec<Pod>, kube::Error> {
    let Some(uid) = job.metadata.uid.as_deref() else {
        return Ok(Vec::new());
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let selector = format!("batch.kubernetes.io/controller-uid={uid}");
    let mut pods = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    pods.sort_by_key(|p| p.creation_timestamp().map(|t| t.0));
    Ok(pods)
}

/// When the first of `pods` started running (a container started, or the pod left `Pending`).
fn started_at(pods: &[Pod]) -> Option<Timestamp> {
    pods.iter()
        .filter_map(|p| p.status.as_ref())
        .filter(|s| s.phase.as_deref().is_some_and(|p| p != "Pending"))
        .filter_map(|s| {
            let containers = s.container_statuses.iter().flatten().filter_map(|c| {
                let state = c.state.as_ref()?;
                state
                    .running
                    .as_ref()
                    .and_then(|r| r.started_at.as_ref())
                    .or_else(|| {
                        state
                            .terminated
                            .as_ref()
                            .and_then(|t| t.started_at.as_ref())
                    })
                    .map(|t| t.0)
            });
            containers.min().or(s.start_time.as_ref().map(|t| t.0))
        })
        .min()
}

/// The last lines of a finished run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLogs {
    pub pod: String,
    pub container: String,
    pub lines: Vec<String>,
    pub redacted: u32,
}

/// The tail of Job `name`'s logs, redacted: its last pod's failing container (the first one
/// when none failed). `None` when there is no pod to ask, or the Secrets cannot be read (no line
/// is shown rather than one unredacted).
pub async fn log_tail(client: &Client, ns: &str, name: &str) -> Option<RunLogs> {
    let job = Api::<Job>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .ok()??;
    let pods = pods_of(client, ns, &job).await.ok()?;
    let pod = pods.last()?;
    let failing = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| {
                    c.state
                        .as_ref()
                        .and_then(|s| s.terminated.as_ref())
                        .is_some_and(|t| t.exit_code != 0)
                })
                .map(|c| c.name.clone())
        });
    let container = failing.or_else(|| {
        pod.spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .map(|c| c.name.clone())
    })?;
    let params = LogParams {
        container: Some(container.clone()),
        tail_lines: Some(i64::try_from(LOG_LINES).unwrap_or(50)),
        limit_bytes: Some(4 * i64::try_from(LOG_BYTES).unwrap_or(65_536)),
        ..LogParams::default()
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let text = api.logs(&pod.name_any(), &params).await.unwrap_or_default();
    let redactor = Redactor::new(secret_values(client, ns).await.ok()?);
    let (lines, redacted) = tail_within(&text, LOG_LINES, LOG_BYTES, &redactor);
    Some(RunLogs {
        pod: pod.name_any(),
        container,
        lines,
        redacted,
    })
}
