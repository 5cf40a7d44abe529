//! The `PreviewCommand` custom resource: a `/preview` command from a pull request comment, as
//! the webhook recorded it (who, where, what they wrote) and as the controller carried it out
//! (acknowledged, authorized, done or refused, replied to). Recording it is all the webhook
//! does, so the delivery is answered at once whatever GitHub's speed; the record makes the work
//! survive a restart, and its status makes each step (reaction, writes, replies) happen once.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A `/preview` command to carry out.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "sandcastle.dev",
    version = "v1alpha1",
    kind = "PreviewCommand",
    namespaced,
    status = "PreviewCommandStatus",
    shortname = "pcmd",
    category = "sandcastle",
    doc = "A /preview command from a pull request comment, recorded by the webhook and carried out by the controller.",
    printcolumn = r#"{"name":"Repo","type":"string","jsonPath":".spec.repository"}"#,
    printcolumn = r#"{"name":"PR","type":"integer","jsonPath":".spec.pullRequest"}"#,
    printcolumn = r#"{"name":"Command","type":"string","jsonPath":".spec.command"}"#,
    printcolumn = r#"{"name":"By","type":"string","jsonPath":".spec.author"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PreviewCommandSpec {
    /// The repository `owner/name`.
    #[schemars(regex(pattern = r"^[A-Za-z0-9-]{1,39}/[A-Za-z0-9._-]{1,100}$"))]
    pub repository: String,
    /// The pull request the comment is on.
    #[schemars(range(min = 1))]
    pub pull_request: u64,
    /// The GitHub App installation that answers.
    pub installation_id: u64,
    /// GitHub's id of the comment (reactions go on it; commands on a pull request are carried
    /// out in the order of these ids).
    pub comment_id: u64,
    /// Who commented (a GitHub login).
    #[schemars(length(min = 1, max = 100))]
    pub author: String,
    /// The command line as written, e.g. `/preview extend 2d`.
    #[schemars(length(min = 1, max = 500))]
    pub command: String,
    /// The `X-GitHub-Delivery` that brought it.
    #[schemars(length(min = 1, max = 100))]
    pub delivery: String,
    /// When the webhook received it.
    pub received_at: Time,
}

/// How far a command has got.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PreviewCommandStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<CommandState>,
    /// The 👀 reaction was attempted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub acknowledged: bool,
    /// What the command came to, once carried out; the replies are written out here so that a
    /// restart posts exactly these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<CommandOutcome>,
    /// How many of the outcome's replies are posted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replies_posted: u32,
    /// Attempts that could not reach GitHub, and the last reason.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
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
pub enum CommandState {
    /// Recorded, being carried out.
    Pending,
    /// Carried out (🚀).
    Done,
    /// Refused (😕): no permission, not understood, nothing to act on.
    Refused,
    /// Given up: GitHub could not be reached for too long.
    Failed,
}

/// What a command came to.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct CommandOutcome {
    /// The canonical command name (`deploy`, `stop`, …; `unknown` when not understood).
    pub command: String,
    pub refused: bool,
    /// The replies to post, as text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replies: Vec<String>,
    /// The previews written, and what the write did (`created`, `updated`, `unchanged`…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previews: Vec<CommandWrite>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CommandWrite {
    pub preview: String,
    pub result: String,
}
