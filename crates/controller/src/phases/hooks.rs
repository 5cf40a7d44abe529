//! Pre-delete hooks: Jobs annotated `sandcastle.dev/hook: pre-delete`. A rollout applies them
//! *suspended*, right after the config phase, so the API server checks them early and the
//! preview namespace itself remembers them: teardown needs neither the Blueprint (it may have
//! changed or been deleted since) nor a copy in the preview's status. Teardown resumes them,
//! waits for them — bounded by the smaller of two minutes and the Blueprint's readiness timeout,
//! recorded on each Job — and carries on whatever they do.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use sandcastle_crd::labels::{
    HOOK, HOOK_PRE_DELETE, HOOK_STARTED, HOOK_TIMEOUT, MANAGED_BY, MANAGER,
};
use sandcastle_domain::duration;
use sandcastle_kube::namespace;
use sandcastle_kube::readiness::{self, Health, JobFailure};

/// Name of the rollout step that applies the suspended hooks.
pub(super) const STEP: &str = "hooks";

/// The longest teardown waits for pre-delete hooks.
pub(super) const MAX_WAIT: Duration = Duration::from_secs(120);

/// Field manager of the resume patch (apart from the rollout's server-side apply, whose
/// ownership of `spec.suspend` must not make the next apply suspend the Job again mid-run).
const RESUME_MANAGER: &str = "sandcastle-teardown";

/// How long teardown waits for hooks of a Blueprint with this readiness timeout.
pub(super) fn bound(readiness_timeout: Duration) -> Duration {
    readiness_timeout.min(MAX_WAIT)
}

/// The plan's pre-delete Jobs as a rollout applies them: suspended, with the time teardown
/// waits for them.
pub(super) fn suspended(jobs: &[Value], wait: Duration) -> Vec<Value> {
    jobs.iter()
        .map(|job| {
            let mut job = job.clone();
            job["spec"]["suspend"] = Value::Bool(true);
            job["metadata"]["annotations"][HOOK_TIMEOUT] = Value::from(duration::go_style(wait));
            job
        })
        .collect()
}

/// How one hook ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ended {
    Completed,
    Failed(JobFailure),
    /// Still running when its time was up.
    GaveUp(Duration),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Completed => f.write_str("completed"),
            Self::Failed(JobFailure { reason, exit_code }) => {
                write!(f, "failed: {reason}")?;
                if let Some(code) = exit_code {
                    write!(f, " (exit {code})")?;
                }
                Ok(())
            }
            Self::GaveUp(after) => write!(
                f,
                "still running after {}; teardown went on without it",
                duration::go_style(*after)
            ),
        }
    }
}

/// Where the hooks of a preview namespace stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Hooks {
    /// These hooks are still running (or were just resumed).
    Running(Vec<String>),
    /// Every hook has ended (none, when the namespace has none or is already going away).
    Done(Vec<(String, Ended)>),
}

/// What to do with one hook Job, judged from its state.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Resume,
    Wait,
    Ended(Ended),
    /// Failed: ask its pods for the exit code.
    Failed(String),
}

fn judge(job: &Job, now: Timestamp) -> Step {
    let annotations = job.annotations();
    let Some(started) = annotations
        .get(HOOK_STARTED)
        .and_then(|t| t.parse::<Timestamp>().ok())
    else {
        return Step::Resume;
    };
    let wait = annotations
        .get(HOOK_TIMEOUT)
        .and_then(|d| duration::parse(d, true).ok())
        .unwrap_or(MAX_WAIT);
    match readiness::job_state(job).health {
        Health::Ready => Step::Ended(Ended::Completed),
        Health::Failed(reason) => Step::Failed(reason),
        Health::Waiting => {
            let waited: Duration = now.duration_since(started).try_into().unwrap_or_default();
            if waited >= wait {
                Step::Ended(Ended::GaveUp(wait))
            } else {
                Step::Wait
            }
        }
    }
}

/// Run the pre-delete hooks of namespace `ns` (of `preview`): resume the suspended ones, and
/// tell whether they have all ended. A namespace that is gone, already being deleted, or not
/// Sandcastle's has no hooks to run.
pub(super) async fn run(
    client: &Client,
    ns: &str,
    preview: &str,
    now: Timestamp,
) -> Result<Hooks, kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.get_opt(ns).await? {
        Some(n) if n.metadata.deletion_timestamp.is_none() && namespace::is_ours(&n, preview) => {}
        _ => return Ok(Hooks::Done(Vec::new())),
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let mut hooks: Vec<Job> = jobs
        .list(&ListParams::default().labels(&format!("{MANAGED_BY}={MANAGER}")))
        .await?
        .items
        .into_iter()
        .filter(|j| j.annotations().get(HOOK).map(String::as_str) == Some(HOOK_PRE_DELETE))
        .collect();
    hooks.sort_by_key(ResourceExt::name_any);
    let mut running = Vec::new();
    let mut ended = Vec::new();
    for job in hooks {
        let name = job.name_any();
        match judge(&job, now) {
            Step::Resume => {
                let patch = json!({
                    "metadata": {"annotations": {HOOK_STARTED: now.to_string()}},
                    "spec": {"suspend": false},
                });
                let params = PatchParams {
                    field_manager: Some(RESUME_MANAGER.into()),
                    ..PatchParams::default()
                };
                match jobs.patch(&name, &params, &Patch::Merge(&patch)).await {
                    Ok(_) => running.push(name),
                    // Gone in the meantime: nothing left to run.
                    Err(kube::Error::Api(r)) if r.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            Step::Wait => running.push(name),
            Step::Ended(how) => ended.push((name, how)),
            Step::Failed(reason) => {
                let state = readiness::job_state(&job);
                let mut failure = readiness::job_failure(client, ns, &state).await;
                failure.reason = reason;
                ended.push((name, Ended::Failed(failure)));
            }
        }
    }
    Ok(if running.is_empty() {
        Hooks::Done(ended)
    } else {
        Hooks::Running(running)
    })
}

/// The status message while hooks run: `running pre-delete hook db-dump`.
pub(super) fn running_message(names: &[String]) -> String {
    let s = if names.len() == 1 { "" } else { "s" };
    format!("running pre-delete hook{s} {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(v: Value) -> Job {
        serde_json::from_value(v).unwrap()
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn hooks_are_applied_suspended_with_their_bound() {
        let planned = vec![json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "db-dump", "annotations": {HOOK: HOOK_PRE_DELETE}},
            "spec": {"template": {}},
        })];
        let applied = suspended(&planned, bound(Duration::from_secs(600)));
        assert_eq!(applied[0]["spec"]["suspend"], true);
        assert_eq!(applied[0]["metadata"]["annotations"][HOOK_TIMEOUT], "2m");
        assert_eq!(applied[0]["metadata"]["annotations"][HOOK], HOOK_PRE_DELETE);
        assert_eq!(bound(Duration::from_secs(30)), Duration::from_secs(30));
    }

    #[test]
    fn a_hook_is_resumed_then_waited_for_within_its_bound() {
        let now = at("2026-11-29T12:00:00Z");
        let fresh =
            job(json!({"metadata": {"name": "dump"}, "spec": {"suspend": true, "template": {}}}));
        assert_eq!(judge(&fresh, now), Step::Resume);

        let started = |conditions: Value| {
            job(json!({
                "metadata": {"name": "dump", "annotations": {
                    HOOK_STARTED: "2026-11-29T12:00:00Z", HOOK_TIMEOUT: "1m"}},
                "spec": {"template": {}},
                "status": {"conditions": conditions},
            }))
        };
        let running = started(json!([]));
        assert_eq!(judge(&running, at("2026-11-29T12:00:59Z")), Step::Wait);
        assert_eq!(
            judge(&running, at("2026-11-29T12:01:00Z")),
            Step::Ended(Ended::GaveUp(Duration::from_secs(60)))
        );
        let done = started(json!([{"type": "Complete", "status": "True"}]));
        assert_eq!(
            judge(&done, at("2026-11-29T12:05:00Z")),
            Step::Ended(Ended::Completed)
        );
        let failed = started(
            json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]),
        );
        assert_eq!(
            judge(&failed, now),
            Step::Failed("BackoffLimitExceeded".into())
        );
    }

    #[test]
    fn endings_read_as_sentences() {
        let failed = Ended::Failed(JobFailure {
            reason: "BackoffLimitExceeded".into(),
            exit_code: Some(1),
        });
        assert_eq!(failed.to_string(), "failed: BackoffLimitExceeded (exit 1)");
        assert_eq!(
            Ended::GaveUp(Duration::from_secs(120)).to_string(),
            "still running after 2m; teardown went on without it"
        );
        assert_eq!(
            running_message(&["a".into(), "b".into()]),
            "running pre-delete hooks a, b"
        );
    }
}
