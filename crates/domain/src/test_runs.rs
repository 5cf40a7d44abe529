//! Tests run inside a preview, as rules: a test's name ([`TestName`], held inline so that a
//! `/preview test NAME` command stays `Copy`), its check run's name, the requests left on a
//! preview (`sandcastle.dev/test-requests`), and how a preview's runs change — queued after a
//! Ready rollout or on request, started, finished, timed out, cancelled by a newer commit or
//! a new run — without I/O. The controller does what these decide (`controller::phases::tests`).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use sandcastle_crd::labels::TEST_REQUESTS;
use sandcastle_crd::{
    PreviewEnvironment, RunOn, TEST_NAME_MAX, TestConclusion, TestRun, TestSpec, TestState,
};

use super::quote::short;

/// What every test's check run is called before the test's name.
pub const CHECK_PREFIX: &str = "Sandcastle / ";

/// Runs kept per test: the latest, and older ones GitHub has not heard the end of yet.
const RUNS_PER_TEST: usize = 3;

/// A test's name: a DNS label of at most 40 characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TestName {
    bytes: [u8; TEST_NAME_MAX],
    len: u8,
}

/// Why a string is not a test's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{:?} is not a test name (a-z, 0-9 and '-', starting and ending with a letter or digit, at most 40 characters)",
    short(.0)
)]
pub struct TestNameError(pub String);

impl TestName {
    pub fn new(s: &str) -> Result<Self, TestNameError> {
        let ok = !s.is_empty()
            && s.len() <= TEST_NAME_MAX
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-');
        if !ok {
            return Err(TestNameError(s.to_owned()));
        }
        let mut bytes = [0u8; TEST_NAME_MAX];
        bytes[..s.len()].copy_from_slice(s.as_bytes());
        Ok(Self {
            bytes,
            len: u8::try_from(s.len()).unwrap_or(u8::MAX),
        })
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII is ever stored.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl fmt::Display for TestName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for TestName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TestName({:?})", self.as_str())
    }
}

/// The check run of test `test`: `Sandcastle / smoke`.
pub fn check_name(test: &str) -> String {
    format!("{CHECK_PREFIX}{test}")
}

/// The check run's `external_id`: the preview, the test and the run, which find a check run a
/// crashed leader created again.
pub fn external_id(preview: &str, run: &TestRun) -> String {
    format!("{preview}/{}/{}", run.name, run.run)
}

/// The tests asked to run on `pe` (test → the token of the last request).
pub fn requests(pe: &PreviewEnvironment) -> BTreeMap<String, String> {
    pe.annotations()
        .get(TEST_REQUESTS)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// Ask for a run of `test` on `pe` (the token tells this request from the last).
pub fn ask(pe: &mut PreviewEnvironment, test: &TestName, token: &str) {
    let mut asked = requests(pe);
    asked.insert(test.to_string(), token.to_owned());
    let value = serde_json::to_string(&asked).unwrap_or_default();
    pe.annotations_mut().insert(TEST_REQUESTS.to_owned(), value);
}

/// The latest run of `test` among `runs`.
pub fn latest<'a>(runs: &'a [TestRun], test: &str) -> Option<&'a TestRun> {
    runs.iter().filter(|r| r.name == test).max_by_key(|r| r.run)
}

/// How long a run took: from its pod's start (or its queueing) to its end, or to `now`.
pub fn took(run: &TestRun, now: Timestamp) -> Duration {
    let from = run.started_at.as_ref().unwrap_or(&run.queued_at).0;
    let to = run.finished_at.as_ref().map_or(now, |t| t.0);
    Duration::try_from(to.duration_since(from)).unwrap_or_default()
}

/// What a run's Job shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// No Job (deleted behind Sandcastle's back).
    Gone,
    /// Made, no pod started yet.
    Waiting,
    /// A pod of it started at this time.
    Started(Timestamp),
    Succeeded {
        started: Option<Timestamp>,
        at: Timestamp,
    },
    Failed {
        started: Option<Timestamp>,
        at: Timestamp,
        exit_code: Option<i32>,
        /// The Job's failure reason (`BackoffLimitExceeded`, `DeadlineExceeded`).
        reason: String,
    },
}

fn end(run: &mut TestRun, conclusion: TestConclusion, at: Timestamp, message: Option<String>) {
    run.state = TestState::Completed;
    run.conclusion = Some(conclusion);
    run.finished_at = Some(Time(at));
    run.message = message;
}

/// Take in what `run`'s Job shows, and its timeout; returns whether the run ended now (its Job
/// may go unless it succeeded or failed on its own: then its logs are read first).
pub fn observe(run: &mut TestRun, seen: &Seen, timeout: Duration, now: Timestamp) -> bool {
    if run.state == TestState::Completed {
        return false;
    }
    let started = |run: &mut TestRun, at: Option<Timestamp>| {
        if let Some(at) = at
            && run.started_at.is_none()
        {
            run.started_at = Some(Time(at));
        }
    };
    match seen {
        Seen::Succeeded { started: s, at } => {
            started(run, *s);
            run.exit_code = Some(0);
            end(run, TestConclusion::Success, *at, None);
            return true;
        }
        Seen::Failed {
            started: s,
            at,
            exit_code,
            reason,
        } => {
            started(run, *s);
            run.exit_code = *exit_code;
            let conclusion = if reason == "DeadlineExceeded" {
                TestConclusion::TimedOut
            } else {
                TestConclusion::Failure
            };
            end(run, conclusion, *at, Some(reason.clone()));
            return true;
        }
        Seen::Started(at) => {
            started(run, Some(*at));
            run.state = TestState::Running;
        }
        Seen::Waiting => {}
        Seen::Gone => {
            end(
                run,
                TestConclusion::Failure,
                now,
                Some("its Job was deleted".to_owned()),
            );
            return true;
        }
    }
    if past(run, timeout, now) {
        let message = format!("timed out after {}", super::duration::human(timeout));
        end(run, TestConclusion::TimedOut, now, Some(message));
        return true;
    }
    false
}

fn past(run: &TestRun, timeout: Duration, now: Timestamp) -> bool {
    let since = Duration::try_from(now.duration_since(run.queued_at.0)).unwrap_or_default();
    since >= timeout
}

/// How long until the first unfinished run of `runs` is past its timeout (`timeout_of` its
/// test's), if one is unfinished.
pub fn next_deadline(
    runs: &[TestRun],
    timeout_of: impl Fn(&str) -> Duration,
    now: Timestamp,
) -> Option<Duration> {
    runs.iter()
        .filter(|r| r.state != TestState::Completed)
        .map(|r| {
            let since = Duration::try_from(now.duration_since(r.queued_at.0)).unwrap_or_default();
            timeout_of(&r.name).saturating_sub(since)
        })
        .min()
}

/// Cancel `run` (unless it ended): `why` in a few words. Returns whether it was cancelled.
pub fn cancel(run: &mut TestRun, why: &str, now: Timestamp) -> bool {
    if run.state == TestState::Completed {
        return false;
    }
    end(run, TestConclusion::Cancelled, now, Some(why.to_owned()));
    true
}

/// What a preview's runs may go on with: its commit and rollout, and whether it is stopped or
/// being removed.
#[derive(Debug, Clone, Copy)]
pub struct Standing<'a> {
    pub sha: &'a str,
    /// The rollout under way or done (its plan hash), if any.
    pub rollout: Option<&'a str>,
    /// Stopped, torn down: nothing runs any more (the reason).
    pub halted: Option<&'a str>,
}

/// Cancel the unfinished runs that no longer concern the preview: of an older commit, of
/// another rollout, of a stopped or removed preview. Returns the runs cancelled (their Jobs
/// go).
pub fn cancel_stale(runs: &mut [TestRun], standing: Standing<'_>, now: Timestamp) -> Vec<String> {
    let mut cancelled = Vec::new();
    for run in runs.iter_mut() {
        let why = if let Some(halted) = standing.halted {
            halted.to_owned()
        } else if run.sha != standing.sha {
            format!(
                "superseded by {}",
                standing.sha.get(..7).unwrap_or(standing.sha)
            )
        } else if standing.rollout.is_some_and(|r| r != run.rollout) {
            "superseded by a new rollout".to_owned()
        } else {
            continue;
        };
        if cancel(run, &why, now) {
            cancelled.push(run.job_name());
        }
    }
    cancelled
}

/// The runs to start now on a preview Ready with rollout `rollout` of commit `sha`: each
/// `runOn: ready` test not run after this rollout yet, and each test asked for with a request
/// it has not taken in. Unfinished runs they replace are cancelled (returned for their Jobs to
/// go).
pub fn start_due(
    tests: &[TestSpec],
    runs: &mut Vec<TestRun>,
    asked: &BTreeMap<String, String>,
    (sha, rollout): (&str, &str),
    now: Timestamp,
) -> (Vec<TestRun>, Vec<String>) {
    let mut started = Vec::new();
    let mut cancelled = Vec::new();
    for test in tests {
        let last = latest(runs, &test.name);
        let taken = last.and_then(|r| r.request.as_deref());
        let request = asked.get(&test.name).filter(|t| Some(t.as_str()) != taken);
        let after_rollout =
            test.run_on == RunOn::Ready && last.is_none_or(|r| r.rollout != rollout);
        if request.is_none() && !after_rollout {
            continue;
        }
        let number = last.map_or(1, |r| r.run.saturating_add(1));
        let new = TestRun {
            name: test.name.clone(),
            run: number,
            sha: sha.to_owned(),
            rollout: rollout.to_owned(),
            request: request.cloned().or_else(|| taken.map(str::to_owned)),
            state: TestState::Queued,
            conclusion: None,
            queued_at: Time(now),
            started_at: None,
            finished_at: None,
            exit_code: None,
            message: None,
            check_run_id: None,
            reported: None,
        };
        for run in runs.iter_mut().filter(|r| r.name == test.name) {
            if cancel(run, &format!("replaced by run {number}"), now) {
                cancelled.push(run.job_name());
            }
        }
        runs.push(new.clone());
        started.push(new);
    }
    keep_bounded(runs, tests);
    (started, cancelled)
}

/// Drop the runs GitHub needs to hear no more of: each test's latest stays, older ones go once
/// settled (and the oldest past a few, whatever they are); runs of tests the Blueprint no
/// longer has go once settled.
pub fn keep_bounded(runs: &mut Vec<TestRun>, tests: &[TestSpec]) {
    let latest_of: BTreeMap<String, u32> = runs.iter().fold(BTreeMap::new(), |mut m, r| {
        let e = m.entry(r.name.clone()).or_insert(r.run);
        *e = (*e).max(r.run);
        m
    });
    runs.retain(|r| {
        let known = tests.iter().any(|t| t.name == r.name);
        let is_latest = latest_of.get(&r.name) == Some(&r.run);
        !r.settled() || (known && is_latest)
    });
    for (name, last) in latest_of {
        let mut older: Vec<u32> = runs
            .iter()
            .filter(|r| r.name == name && r.run != last)
            .map(|r| r.run)
            .collect();
        older.sort_unstable();
        let excess = older.len().saturating_sub(RUNS_PER_TEST - 1);
        let dropped: Vec<u32> = older.into_iter().take(excess).collect();
        runs.retain(|r| r.name != name || !dropped.contains(&r.run));
    }
    runs.sort_by(|a, b| (a.name.as_str(), a.run).cmp(&(b.name.as_str(), b.run)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn spec(name: &str, run_on: RunOn) -> TestSpec {
        TestSpec {
            name: name.to_owned(),
            template: serde_json::json!({}),
            run_on,
            timeout: sandcastle_crd::DEFAULT_TEST_TIMEOUT,
        }
    }

    const SHA: &str = "abc1234def5678abc1234def5678abc1234def56";
    const NEWER: &str = "fedcba9876543210fedcba9876543210fedcba98";

    #[test]
    fn test_names_are_short_dns_labels_held_inline() {
        let n = TestName::new("smoke-1").unwrap();
        assert_eq!(n.as_str(), "smoke-1");
        assert_eq!(n.to_string(), "smoke-1");
        let copy = n;
        assert_eq!(copy, n);
        assert!(TestName::new(&"a".repeat(40)).is_ok());
        for bad in ["", "Smoke", "-a", "a-", "a_b", "a b", &"a".repeat(41), "é"] {
            assert!(TestName::new(bad).is_err(), "{bad:?}");
        }
        assert_eq!(check_name("smoke"), "Sandcastle / smoke");
    }

    #[test]
    fn a_ready_rollout_starts_ready_tests_once_and_requests_start_any_test() {
        let tests = [spec("smoke", RunOn::Ready), spec("e2e", RunOn::Request)];
        let mut runs = Vec::new();
        let now = at("2026-11-29T12:00:00Z");
        let none = BTreeMap::new();
        let (started, _) = start_due(&tests, &mut runs, &none, (SHA, "r1"), now);
        assert_eq!(started.len(), 1);
        assert_eq!((started[0].name.as_str(), started[0].run), ("smoke", 1));
        assert_eq!(started[0].job_name(), "test-smoke-1");
        // The same rollout again: nothing more.
        let (started, _) = start_due(&tests, &mut runs, &none, (SHA, "r1"), now);
        assert!(started.is_empty());
        // A request runs e2e, once per token.
        let asked = BTreeMap::from([("e2e".to_owned(), "t1".to_owned())]);
        let (started, _) = start_due(&tests, &mut runs, &asked, (SHA, "r1"), now);
        assert_eq!(started.len(), 1);
        assert_eq!(started[0].request.as_deref(), Some("t1"));
        let (started, _) = start_due(&tests, &mut runs, &asked, (SHA, "r1"), now);
        assert!(started.is_empty(), "the token was taken in");
        // A request for a running test replaces it.
        let asked = BTreeMap::from([("smoke".to_owned(), "t2".to_owned())]);
        let (started, cancelled) = start_due(&tests, &mut runs, &asked, (SHA, "r1"), now);
        assert_eq!(started[0].run, 2);
        assert_eq!(cancelled, ["test-smoke-1"]);
        // A new rollout runs smoke again, carrying the request it took in.
        let (started, _) = start_due(&tests, &mut runs, &asked, (SHA, "r2"), now);
        assert_eq!(started[0].run, 3);
        assert_eq!(started[0].request.as_deref(), Some("t2"));
    }

    #[test]
    fn runs_end_by_their_job_or_their_timeout() {
        let tests = [spec("smoke", RunOn::Ready)];
        let mut runs = Vec::new();
        let t0 = at("2026-11-29T12:00:00Z");
        start_due(&tests, &mut runs, &BTreeMap::new(), (SHA, "r1"), t0);
        let run = &mut runs[0];
        let timeout = Duration::from_secs(60);
        let t1 = at("2026-11-29T12:00:05Z");
        assert!(!observe(run, &Seen::Started(t1), timeout, t1));
        assert_eq!(run.state, TestState::Running);
        let t2 = at("2026-11-29T12:00:20Z");
        let failed = Seen::Failed {
            started: Some(t1),
            at: t2,
            exit_code: Some(3),
            reason: "BackoffLimitExceeded".into(),
        };
        assert!(observe(run, &failed, timeout, t2));
        assert_eq!(run.conclusion, Some(TestConclusion::Failure));
        assert_eq!(
            (run.exit_code, took(run, t2)),
            (Some(3), Duration::from_secs(15))
        );
        assert!(!observe(run, &Seen::Waiting, timeout, t2), "ended once");

        let mut runs = Vec::new();
        start_due(&tests, &mut runs, &BTreeMap::new(), (SHA, "r1"), t0);
        let run = &mut runs[0];
        let late = at("2026-11-29T12:01:00Z");
        assert_eq!(
            next_deadline(std::slice::from_ref(run), |_| timeout, t1),
            Some(Duration::from_secs(55))
        );
        assert!(observe(run, &Seen::Waiting, timeout, late));
        assert_eq!(run.conclusion, Some(TestConclusion::TimedOut));
        assert_eq!(run.message.as_deref(), Some("timed out after 1m"));
        let deadline = Seen::Failed {
            started: None,
            at: late,
            exit_code: None,
            reason: "DeadlineExceeded".into(),
        };
        let mut other = runs[0].clone();
        other.state = TestState::Queued;
        observe(&mut other, &deadline, Duration::from_secs(600), late);
        assert_eq!(other.conclusion, Some(TestConclusion::TimedOut));
    }

    #[test]
    fn a_newer_commit_or_a_stop_cancels_what_runs() {
        let tests = [spec("smoke", RunOn::Ready)];
        let mut runs = Vec::new();
        let t0 = at("2026-11-29T12:00:00Z");
        start_due(&tests, &mut runs, &BTreeMap::new(), (SHA, "r1"), t0);
        let same = Standing {
            sha: SHA,
            rollout: Some("r1"),
            halted: None,
        };
        assert!(cancel_stale(&mut runs, same, t0).is_empty());
        let pushed = Standing {
            sha: NEWER,
            rollout: Some("r2"),
            halted: None,
        };
        assert_eq!(cancel_stale(&mut runs, pushed, t0), ["test-smoke-1"]);
        assert_eq!(runs[0].conclusion, Some(TestConclusion::Cancelled));
        assert_eq!(runs[0].message.as_deref(), Some("superseded by fedcba9"));
        let mut runs2 = Vec::new();
        start_due(&tests, &mut runs2, &BTreeMap::new(), (SHA, "r1"), t0);
        let stopped = Standing {
            halted: Some("the preview was stopped"),
            ..same
        };
        assert_eq!(cancel_stale(&mut runs2, stopped, t0).len(), 1);
    }

    #[test]
    fn settled_runs_go_and_each_test_keeps_its_latest() {
        let tests = [spec("smoke", RunOn::Ready)];
        let mut runs = Vec::new();
        let t0 = at("2026-11-29T12:00:00Z");
        for r in ["r1", "r2", "r3", "r4", "r5"] {
            start_due(&tests, &mut runs, &BTreeMap::new(), (SHA, r), t0);
        }
        // GitHub heard of none: the latest and the two before it are kept.
        assert_eq!(
            runs.iter().map(|r| r.run).collect::<Vec<_>>(),
            [3, 4, 5],
            "bounded"
        );
        for r in &mut runs {
            r.reported = Some(r.state);
        }
        keep_bounded(&mut runs, &tests);
        assert_eq!(runs.iter().map(|r| r.run).collect::<Vec<_>>(), [5]);
        keep_bounded(&mut runs, &[]);
        assert_eq!(runs.len(), 1, "unsettled: kept until GitHub hears it ended");
    }

    #[test]
    fn requests_are_an_annotation_of_tokens() {
        let mut pe: PreviewEnvironment = serde_json::from_value(serde_json::json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEnvironment",
            "metadata": {"name": "p"},
            "spec": {"blueprint": "b", "repository": "acme/shop", "ref": "main", "sha": SHA,
                "requestedBy": {"kind": "github-user", "name": "maria"}}
        }))
        .unwrap();
        assert!(requests(&pe).is_empty());
        ask(&mut pe, &TestName::new("smoke").unwrap(), "t1");
        ask(&mut pe, &TestName::new("e2e").unwrap(), "t2");
        ask(&mut pe, &TestName::new("smoke").unwrap(), "t3");
        let asked = requests(&pe);
        assert_eq!(asked.get("smoke").map(String::as_str), Some("t3"));
        assert_eq!(asked.len(), 2);
    }
}
