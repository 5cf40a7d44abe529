//! A Blueprint's `tests` (Jobs run inside each preview after its rollout is Ready, or on
//! request) and a preview's `status.tests`: the last run of each, small enough to sit in every
//! preview's status, with what its GitHub check run (`Sandcastle / <test>`) shows.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::GoDuration;

/// A test's name: a DNS label of at most [`TEST_NAME_MAX`] characters (it names the Job and the
/// check run).
pub const TEST_NAME: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// The longest test name: `test-<name>-<run>` stays a valid Job (and `job-name` label) name.
pub const TEST_NAME_MAX: usize = 40;
/// The most tests a Blueprint holds (each keeps a run in every preview's status).
pub const MAX_TESTS: usize = 10;
/// How long a test may run unless it says (Go duration).
pub const DEFAULT_TEST_TIMEOUT: GoDuration = GoDuration::from_secs(600);
/// The longest `timeout` a test may ask for.
pub const MAX_TEST_TIMEOUT: GoDuration = GoDuration::from_secs(3600);

fn default_test_timeout() -> GoDuration {
    DEFAULT_TEST_TIMEOUT
}

/// One test: a Job run in the preview's namespace (under its ResourceQuota and LimitRange) as
/// its `preview-agent` ServiceAccount, with `SANDCASTLE_URL` set; its result is the commit's
/// check run `Sandcastle / <name>`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new("duration(self.timeout) >= duration('1s') && duration(self.timeout) <= duration('1h')").message("timeout must be between 1s and 1h").field_path(".timeout"))]
#[serde(rename_all = "camelCase")]
pub struct TestSpec {
    /// The test's name (a DNS label of at most 40 characters, unique in the Blueprint): the
    /// check run is `Sandcastle / <name>`, the Job `test-<name>-<run>`.
    #[schemars(regex(pattern = TEST_NAME), length(min = 1, max = 40))]
    pub name: String,

    /// What runs: a Job spec (`{template: {spec: {containers: …}}, backoffLimit: …}`) or a Job
    /// template (`{metadata: …, spec: <Job spec>}`). Its pods run as the preview's
    /// `preview-agent`, get the preview's variables (`SANDCASTLE_URL` among them) and the
    /// Blueprint's image rules; they may mount only Secrets the preview has copied.
    #[schemars(schema_with = "crate::any_object")]
    pub template: serde_json::Value,

    /// `ready`: after each rollout reaches Ready (a new commit, a redeploy); `request`: only
    /// when asked (`/preview test NAME`, the API, MCP's `run_tests`). Either can be asked for.
    #[serde(default)]
    pub run_on: RunOn,

    /// How long the test may take from its Job's creation, pending pods included (Go
    /// duration, 1s to 1h; default 10m); past it the run is `timed_out` and its Job deleted.
    #[serde(default = "default_test_timeout")]
    pub timeout: GoDuration,
}

/// When a test runs on its own.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum RunOn {
    #[default]
    Ready,
    Request,
}

/// Where a test run stands; also what its check run shows on GitHub.
#[derive(
    JsonSchema, utoipa::ToSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq,
)]
#[serde(rename_all = "camelCase")]
pub enum TestState {
    /// Its Job is made; no pod of it has started.
    Queued,
    /// Its pod started.
    Running,
    /// Over: see the conclusion.
    Completed,
}

/// How a completed test run ended (its check run's conclusion).
#[derive(
    JsonSchema, utoipa::ToSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq,
)]
#[serde(rename_all = "camelCase")]
pub enum TestConclusion {
    Success,
    /// The Job failed (or the test could not be run: see the message).
    Failure,
    /// Past its timeout.
    TimedOut,
    /// A newer commit, a new rollout or a new run replaced it, or the preview was stopped or
    /// removed.
    Cancelled,
}

/// One run of a test, as a preview's status keeps it (the latest run of each test, and older
/// ones until GitHub has been told they ended).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TestRun {
    pub name: String,
    /// 1, 2, …: the Job is `test-<name>-<run>`.
    pub run: u32,
    /// The commit tested.
    pub sha: String,
    /// The rollout it ran after (its plan hash).
    pub rollout: String,
    /// The last request (a token of the `sandcastle.dev/test-requests` annotation) this test
    /// took in, carried from run to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    pub state: TestState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<TestConclusion>,
    pub queued_at: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why it ended so, in a few words (`superseded by abc1234`, `BackoffLimitExceeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Its check run on GitHub, once created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_run_id: Option<u64>,
    /// What the check run last showed (so each step is posted once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported: Option<TestState>,
}

impl TestRun {
    /// The Job that runs it.
    pub fn job_name(&self) -> String {
        format!("test-{}-{}", self.name, self.run)
    }

    /// Whether GitHub has been told it ended.
    pub fn settled(&self) -> bool {
        self.state == TestState::Completed && self.reported == Some(TestState::Completed)
    }
}
