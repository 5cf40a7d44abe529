//! A Blueprint's `readiness`: what must hold, beyond its workloads being ready, before a preview
//! is Ready — an HTTP probe of the preview that must answer with an accepted status and, when
//! asked, show the deployed commit.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::GoDuration;

pub const DEFAULT_PROBE_INTERVAL: GoDuration = GoDuration::from_secs(2);
pub const DEFAULT_PROBE_DEADLINE: GoDuration = GoDuration::from_secs(300);

fn default_path() -> String {
    "/".to_owned()
}
fn default_statuses() -> Vec<String> {
    vec!["200-399".to_owned()]
}
fn default_interval() -> GoDuration {
    DEFAULT_PROBE_INTERVAL
}
fn default_deadline() -> GoDuration {
    DEFAULT_PROBE_DEADLINE
}

/// Answers in a row a try must get: one more than the replicas of a preview's usual Deployment
/// plus an old pod an ingress controller may still route to (see `successThreshold`).
pub const DEFAULT_SUCCESS_THRESHOLD: u32 = 3;

fn default_success_threshold() -> u32 {
    DEFAULT_SUCCESS_THRESHOLD
}

/// What must hold before a preview is Ready, besides its workloads being ready.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessSpec {
    /// Probe the preview over HTTP once its workloads are ready: Ready (and GitHub's
    /// `success`) only once it answers as this says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpReadiness>,
}

/// An HTTP probe of the preview URL (or of its primary Service, see `--probe-via`). The host is
/// the preview's own; nothing of it comes from the pull request. Redirects to another host are
/// not followed.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpReadiness {
    /// Path (and query) to request, e.g. `/healthz`.
    #[serde(default = "default_path")]
    #[schemars(regex(pattern = r"^/([^/\s#][^\s#]*)?$"), length(max = 2048))]
    pub path: String,

    /// Statuses that pass, each a code (`204`) or a range (`200-399`).
    #[serde(default = "default_statuses")]
    #[schemars(
        length(min = 1, max = 20),
        inner(regex(pattern = r"^[1-5][0-9]{2}(-[1-5][0-9]{2})?$"))
    )]
    pub statuses: Vec<String>,

    /// Time between tries (Go duration).
    #[serde(default = "default_interval")]
    pub interval: GoDuration,

    /// How long after the workloads are ready the probe may take to pass before the preview
    /// fails with the probe's last answer.
    #[serde(default = "default_deadline")]
    pub deadline: GoDuration,

    /// Where the answer must show the deployed commit (full or short sha).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitCheck>,
    /// How many requests in a row, sent back to back in one try, must each pass. An ingress
    /// controller spreads requests over a Service's endpoints and learns of a gone pod a moment
    /// after the API server: one good answer does not prove the next visitor lands on the new
    /// commit, answers in a row do. With more replicas, set it above their number.
    #[serde(default = "default_success_threshold")]
    #[schemars(range(min = 1, max = 10))]
    pub success_threshold: u32,
}

impl Default for HttpReadiness {
    fn default() -> Self {
        Self {
            path: default_path(),
            statuses: default_statuses(),
            interval: default_interval(),
            deadline: default_deadline(),
            commit: None,
            success_threshold: default_success_threshold(),
        }
    }
}

/// Where the deployed commit must appear: exactly one of `header`, `jsonField`, `body`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[x_kube(validation = Rule::new("[has(self.header), has(self.jsonField), has(self.body) && self.body].filter(x, x).size() == 1").message("set exactly one of commit.header, commit.jsonField or commit.body: true"))]
#[serde(rename_all = "camelCase")]
pub struct CommitCheck {
    /// A response header whose value is the commit, e.g. `X-Commit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9-]{1,64}$"))]
    pub header: Option<String>,

    /// A field of a JSON answer holding the commit, as a dotted path, e.g. `build.commit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        regex(pattern = r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$"),
        length(max = 256)
    )]
    pub json_field: Option<String>,

    /// The body contains the commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<bool>,
}
