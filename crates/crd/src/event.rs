//! The `PreviewEvent` custom resource: a pull request event, as the webhook recorded it (which
//! pull request, which action, the event itself in Sandcastle's own form) and as the controller
//! carried it out (what GitHub was asked, which previews it wrote, or what it waits for).
//! Recording it is all the webhook does for a pull request event, so every delivery is answered
//! after one write to Kubernetes and no GitHub call; the record survives a restart, and its
//! status makes each step happen once.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A pull request event to carry out.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "sandcastle.dev",
    version = "v1alpha1",
    kind = "PreviewEvent",
    namespaced,
    status = "PreviewEventStatus",
    shortname = "pevt",
    category = "sandcastle",
    doc = "A pull request event, recorded by the webhook and carried out by the controller.",
    printcolumn = r#"{"name":"Repo","type":"string","jsonPath":".spec.repository"}"#,
    printcolumn = r#"{"name":"PR","type":"integer","jsonPath":".spec.pullRequest"}"#,
    printcolumn = r#"{"name":"Action","type":"string","jsonPath":".spec.action"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Message","type":"string","jsonPath":".status.message","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PreviewEventSpec {
    /// The repository `owner/name`.
    #[schemars(regex(pattern = r"^[A-Za-z0-9-]{1,39}/[A-Za-z0-9._-]{1,100}$"))]
    pub repository: String,
    #[schemars(range(min = 1))]
    pub pull_request: u64,
    /// GitHub's action (`opened`, `synchronize`, `closed`, …).
    #[schemars(length(min = 1, max = 40))]
    pub action: String,
    /// The pull request's head commit after the event.
    #[schemars(regex(pattern = r"^[0-9a-f]{40}$"))]
    pub sha: String,
    /// GitHub's `pull_request.updated_at`: the pull request's events are carried out in this
    /// order (then in the order they were recorded).
    pub updated_at: Time,
    /// The `X-GitHub-Delivery` that brought it.
    #[schemars(length(min = 1, max = 100))]
    pub delivery: String,
    /// When the webhook received it.
    pub received_at: Time,
    /// The same, in nanoseconds since 1970: the order of two events of one second (GitHub's
    /// `updated_at` has whole seconds, and so does `receivedAt`).
    #[serde(default)]
    pub received_ns: i64,
    /// The event in Sandcastle's own form (no payload text beyond what Sandcastle reads).
    #[schemars(schema_with = "crate::any_object")]
    pub event: serde_json::Value,
}

/// How far an event has got.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PreviewEventStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<EventState>,
    /// What it came to, once carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<EventOutcome>,
    /// Attempts that could not get what they needed from GitHub.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
    /// While waiting: what for (`waiting for GitHub: reading .github/sandcastle.yml: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it was finished (the record is deleted an hour later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventState {
    /// Recorded; waiting for the pull request's earlier events, or being carried out.
    Pending,
    /// Waiting for GitHub (the repository's configuration, the changed files); tried again.
    WaitingForGitHub,
    /// Carried out.
    Done,
    /// Given up: GitHub could not be reached for too long, or the record is unusable.
    Failed,
}

/// What an event came to: each preview written and what the write did, and why Blueprints that
/// cover the repository were passed over.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct EventOutcome {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previews: Vec<super::CommandWrite>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<EventSkip>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct EventSkip {
    pub blueprint: String,
    pub reason: String,
}
