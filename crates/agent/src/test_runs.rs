//! A preview's tests as agents and people use them: run one now (`run_test`, the request left on
//! the preview for the controller, like a `/preview test` comment), each test's last run as the
//! API shows it, and when a `wait` for a test is over — only on a run that answers the last
//! request (or, for a `runOn: ready` test, follows the preview's current rollout), never on one
//! from before.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::write::{through, token};
use super::{Agent, AgentError, Caller, Operation, PreviewView};
use sandcastle_crd::{
    Blueprint, Phase, PreviewEnvironment, PreviewStatus, RunOn, TestConclusion, TestSpec, TestState,
};
use sandcastle_domain::test_runs::{self, TestName, check_name};

/// A test's last run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestRunView {
    /// The test's name.
    pub name: String,
    /// Its check run's name on the commit: `Sandcastle / <name>`.
    pub check_run: String,
    /// 1, 2, …: the Job is `test-<name>-<run>`.
    pub run: u32,
    /// The commit tested.
    pub commit: String,
    pub state: TestState,
    pub conclusion: Option<TestConclusion>,
    /// GitHub's id of the check run, once made.
    pub check_run_id: Option<u64>,
    /// RFC 3339.
    pub queued_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// How long it ran, once it ended (from its pod's start, or its queueing when none started).
    pub duration_seconds: Option<u64>,
    pub exit_code: Option<i32>,
    /// Why it ended so, in a few words.
    pub message: Option<String>,
}

/// The last run of each test of `st`.
pub fn views(st: &PreviewStatus) -> Vec<TestRunView> {
    let names: std::collections::BTreeSet<&str> =
        st.tests.iter().map(|r| r.name.as_str()).collect();
    names
        .into_iter()
        .filter_map(|n| test_runs::latest(&st.tests, n))
        .map(|r| TestRunView {
            name: r.name.clone(),
            check_run: check_name(&r.name),
            run: r.run,
            commit: r.sha.clone(),
            state: r.state,
            conclusion: r.conclusion,
            check_run_id: r.check_run_id,
            queued_at: r.queued_at.0.to_string(),
            started_at: r.started_at.as_ref().map(|t| t.0.to_string()),
            finished_at: r.finished_at.as_ref().map(|t| t.0.to_string()),
            duration_seconds: r
                .finished_at
                .as_ref()
                .map(|end| test_runs::took(r, end.0).as_secs()),
            exit_code: r.exit_code,
            message: r.message.clone(),
        })
        .collect()
}

fn unknown_test(test: &str, known: &[TestSpec]) -> AgentError {
    let have = if known.is_empty() {
        "its Blueprint has no tests".to_owned()
    } else {
        let names: Vec<&str> = known.iter().map(|t| t.name.as_str()).collect();
        format!("its tests are {}", names.join(", "))
    };
    AgentError::invalid(
        "unknown_test",
        "test",
        format!(
            "the preview has no test {:?}: {have}",
            sandcastle_domain::quote::short(test)
        ),
    )
}

impl Agent {
    /// The test `test` of `pe`'s Blueprint, or `unknown_test`.
    pub(super) async fn test_of(
        &self,
        pe: &PreviewEnvironment,
        test: &str,
    ) -> Result<TestSpec, AgentError> {
        let tests = self.tests_of(pe).await?;
        tests
            .iter()
            .find(|t| t.name == test)
            .cloned()
            .ok_or_else(|| unknown_test(test, &tests))
    }

    /// Every test of `pe`'s Blueprint, or `unknown_test` when it has none.
    pub(super) async fn all_tests_of(
        &self,
        pe: &PreviewEnvironment,
    ) -> Result<Vec<TestSpec>, AgentError> {
        let tests = self.tests_of(pe).await?;
        if tests.is_empty() {
            return Err(AgentError::invalid(
                "unknown_test",
                "test",
                "the preview has no tests: its Blueprint has none",
            ));
        }
        Ok(tests)
    }

    async fn tests_of(&self, pe: &PreviewEnvironment) -> Result<Vec<TestSpec>, AgentError> {
        let api: kube::Api<Blueprint> = kube::Api::namespaced(self.client.clone(), &self.home);
        Ok(api
            .get_opt(&pe.spec.blueprint)
            .await?
            .map(|b| b.spec.tests)
            .unwrap_or_default())
    }

    /// Run test `test` in preview `name` now: the controller starts a run once the preview is
    /// Ready (at once when it is), cancelling one of the same test still running. The answer is
    /// the preview as it is (its `tests` show the last runs); wait for this one with
    /// `wait?for=test&test=NAME`.
    pub async fn run_test(
        &self,
        caller: &Caller,
        name: &str,
        test: &str,
    ) -> Result<PreviewView, AgentError> {
        let pe = self.authorized(caller, Operation::RunTest, name).await?;
        let spec = self.test_of(&pe, test).await?;
        let test = TestName::new(&spec.name)
            .map_err(|e| AgentError::invalid("unknown_test", "test", e.to_string()))?;
        let asked = token(self.clock.now());
        let note = format!("run test {test} {}", through(caller));
        self.write(caller, Operation::RunTest, &pe, note, |next| {
            test_runs::ask(next, &test, &asked);
            Ok(())
        })
        .await
    }
}

/// How a wait for a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Waited {
    Passed,
    Failed,
    Removed,
}

/// How a wait for test `test` (of kind `run_on`) ended, if it did: passed or failed on a run
/// that counts, failed when the preview failed (the test will not run), removed. `current`:
/// whether `pe`'s status has taken in every write made to it.
pub(super) fn outcome(
    pe: Option<&PreviewEnvironment>,
    current: impl Fn(&PreviewEnvironment) -> bool,
    test: &str,
    run_on: RunOn,
) -> Option<Waited> {
    let Some(pe) = pe else {
        return Some(Waited::Removed);
    };
    let st = pe.status.as_ref()?;
    if st.phase == Some(Phase::Removed) {
        return Some(Waited::Removed);
    }
    if !current(pe) {
        return None;
    }
    if st.phase == Some(Phase::Failed) {
        return Some(Waited::Failed);
    }
    let run = test_runs::latest(&st.tests, test)?;
    let asked = test_runs::requests(pe);
    let answers = match asked.get(test) {
        Some(token) => run.request.as_ref() == Some(token),
        None => true,
    };
    let after_rollout = match run_on {
        RunOn::Ready if !asked.contains_key(test) => {
            st.phase == Some(Phase::Ready)
                && st.rollout.as_ref().map(|r| r.plan_hash.as_str()) == Some(run.rollout.as_str())
        }
        _ => run.sha == pe.spec.sha,
    };
    if !(answers && after_rollout) || run.state != TestState::Completed {
        return None;
    }
    Some(match run.conclusion {
        Some(TestConclusion::Success) => Waited::Passed,
        _ => Waited::Failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use sandcastle_crd::{Rollout, TestRun};

    const SHA: &str = "abc1234def5678abc1234def5678abc1234def56";

    fn current(_: &PreviewEnvironment) -> bool {
        true
    }

    fn pe(phase: Phase, run: Option<TestRun>) -> PreviewEnvironment {
        let mut pe: PreviewEnvironment = serde_json::from_value(serde_json::json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEnvironment",
            "metadata": {"name": "s", "generation": 1},
            "spec": {"blueprint": "shop", "repository": "acme/shop", "ref": "b", "sha": SHA,
                "requestedBy": {"kind": "github-user", "name": "octocat"}},
        }))
        .unwrap();
        let at = Time("2026-11-29T12:00:00Z".parse().unwrap());
        pe.status = Some(PreviewStatus {
            phase: Some(phase),
            observed_generation: Some(1),
            rollout: Some(Rollout {
                plan_hash: "r2".into(),
                sha: SHA.into(),
                applied_steps: 1,
                ready_steps: 1,
                total_steps: 1,
                objects: 1,
                started_at: at.clone(),
                step_started_at: at,
                namespace_uid: None,
                failed: false,
                probe: None,
            }),
            tests: run.into_iter().collect(),
            ..PreviewStatus::default()
        });
        pe
    }

    fn run(rollout: &str, state: TestState, conclusion: Option<TestConclusion>) -> TestRun {
        TestRun {
            name: "smoke".into(),
            run: 1,
            sha: SHA.into(),
            rollout: rollout.into(),
            request: None,
            state,
            conclusion,
            queued_at: Time("2026-11-29T12:00:00Z".parse().unwrap()),
            started_at: None,
            finished_at: None,
            exit_code: None,
            message: None,
            check_run_id: None,
            reported: None,
        }
    }

    #[test]
    fn a_wait_for_a_test_ends_on_a_run_of_the_current_rollout_or_request() {
        let passed = run("r2", TestState::Completed, Some(TestConclusion::Success));
        let ready = pe(Phase::Ready, Some(passed));
        assert_eq!(
            outcome(Some(&ready), current, "smoke", RunOn::Ready),
            Some(Waited::Passed)
        );
        // A run of an earlier rollout does not count for a test run after each rollout.
        let old = pe(
            Phase::Ready,
            Some(run(
                "r1",
                TestState::Completed,
                Some(TestConclusion::Success),
            )),
        );
        assert_eq!(outcome(Some(&old), current, "smoke", RunOn::Ready), None);
        // Still running.
        let running = pe(Phase::Ready, Some(run("r2", TestState::Running, None)));
        assert_eq!(
            outcome(Some(&running), current, "smoke", RunOn::Ready),
            None
        );
        // A request not taken in yet: not this run.
        let mut asked = ready;
        test_runs::ask(&mut asked, &TestName::new("smoke").unwrap(), "t1");
        assert_eq!(
            outcome(Some(&asked), current, "smoke", RunOn::Request),
            None
        );
        let mut answered = asked.clone();
        let st = answered.status.as_mut().unwrap();
        st.tests[0].request = Some("t1".into());
        st.tests[0].conclusion = Some(TestConclusion::TimedOut);
        assert_eq!(
            outcome(Some(&answered), current, "smoke", RunOn::Request),
            Some(Waited::Failed)
        );
        // A failed preview runs no test; a removed one is over.
        assert_eq!(
            outcome(
                Some(&pe(Phase::Failed, None)),
                current,
                "smoke",
                RunOn::Ready
            ),
            Some(Waited::Failed)
        );
        assert_eq!(
            outcome(None, current, "smoke", RunOn::Ready),
            Some(Waited::Removed)
        );
    }
}
