//! A preview's diagnosis in its status: why it is not Ready, classified (a stable code), in one
//! sentence, with the failing container's last log lines (redacted).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a preview is not Ready, as a stable code for agents and dashboards.
#[derive(
    JsonSchema, utoipa::ToSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq,
)]
#[serde(rename_all = "camelCase")]
pub enum DiagnosisReason {
    /// An image cannot be pulled (wrong tag, no access).
    ImagePull,
    /// A container keeps crashing (its last exit and reason, such as `OOMKilled`).
    CrashLoop,
    /// A container stopped with an error and is not restarted.
    Exited,
    /// Containers run but their readiness probe fails.
    ReadinessProbe,
    /// The scheduler cannot place the pods.
    Unschedulable,
    /// The pods were refused (a quota, the LimitRange, Pod Security admission).
    CreateRefused,
    /// A container cannot start for another reason (`CreateContainerConfigError`, …).
    ContainerWaiting,
    /// A Job (a seed Job among them) failed.
    JobFailed,
    /// The Blueprint's HTTP readiness probe does not pass.
    HttpProbe,
}

impl DiagnosisReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ImagePull => "imagePull",
            Self::CrashLoop => "crashLoop",
            Self::Exited => "exited",
            Self::ReadinessProbe => "readinessProbe",
            Self::Unschedulable => "unschedulable",
            Self::CreateRefused => "createRefused",
            Self::ContainerWaiting => "containerWaiting",
            Self::JobFailed => "jobFailed",
            Self::HttpProbe => "httpProbe",
        }
    }
}

/// Why a preview is not Ready.
#[derive(JsonSchema, utoipa::ToSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    pub reason: DiagnosisReason,
    /// One sentence naming the workload, e.g. `deployment/api: container api keeps crashing
    /// (OOMKilled, exit 137, 5 restarts)`.
    pub summary: String,
    /// `deployment/api`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The last lines the failing container logged (its previous run, for a crash loop),
    /// with the namespace's Secret values and token-shaped strings redacted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_tail: Vec<String>,
    /// The log tail is of the container's previous run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub previous: bool,
}
