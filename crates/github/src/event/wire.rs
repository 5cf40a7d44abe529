//! The subset of GitHub's payloads that Sandcastle reads. Field types validate on the way in
//! (`RepoName`, `Sha`, `PrNumber`, `BranchName`), so a bad value is reported with its path.

use jiff::Timestamp;
use sandcastle_domain::authors::Association;
use serde::Deserialize;

use super::{BaseInfo, HeadInfo, ParseError, PullRequestEvent};
use super::{CheckRunAction, CheckRunEvent, CommentAction, CommentEvent, PrAction, PrState};
use sandcastle_domain::{BranchName, PrNumber, RepoName, Sha};

#[derive(Deserialize)]
pub(super) struct RepoRef {
    pub(super) full_name: RepoName,
}

#[derive(Deserialize)]
pub(super) struct Login {
    login: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct InstallationRef {
    pub(super) id: u64,
}

#[derive(Deserialize)]
struct LabelRef {
    name: String,
}

#[derive(Deserialize)]
pub(super) struct PullRequestPayload {
    number: PrNumber,
    pull_request: PullRequest,
    repository: RepoRef,
    sender: Login,
    #[serde(default)]
    installation: Option<InstallationRef>,
    #[serde(default)]
    label: Option<LabelRef>,
    #[serde(default)]
    changes: Option<Changes>,
    /// A `synchronize`'s previous head.
    #[serde(default)]
    before: Option<Sha>,
}

#[derive(Deserialize)]
struct Changes {
    #[serde(default)]
    base: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct PullRequest {
    /// The same number as the delivery's `number`, checked to agree.
    number: PrNumber,
    html_url: String,
    state: PrState,
    #[serde(default)]
    draft: bool,
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    merged_by: Option<Login>,
    #[serde(default)]
    labels: Vec<LabelRef>,
    user: Login,
    #[serde(default)]
    author_association: Option<String>,
    #[serde(default)]
    changed_files: Option<u64>,
    updated_at: Timestamp,
    head: Head,
    base: Base,
}

#[derive(Deserialize)]
struct Head {
    sha: Sha,
    #[serde(rename = "ref")]
    ref_: BranchName,
    repo: Option<RepoRef>,
}

#[derive(Deserialize)]
struct Base {
    #[serde(rename = "ref")]
    ref_: BranchName,
    repo: RepoRef,
}

impl PullRequestPayload {
    pub(super) fn into_event(self, action: PrAction) -> Result<PullRequestEvent, ParseError> {
        let pr = self.pull_request;
        if pr.number != self.number {
            return Err(ParseError::Field {
                path: "pull_request.number".to_owned(),
                message: format!("{} is not the delivery's number {}", pr.number, self.number),
            });
        }
        let action = match action {
            PrAction::Edited { .. } => PrAction::Edited {
                base_changed: self.changes.is_some_and(|c| c.base.is_some()),
            },
            other => other,
        };
        Ok(PullRequestEvent {
            action,
            repo: self.repository.full_name,
            number: self.number,
            installation_id: self.installation.map(|i| i.id),
            head: HeadInfo {
                sha: pr.head.sha,
                ref_: pr.head.ref_.into(),
                repo: pr.head.repo.map(|r| r.full_name),
            },
            base: BaseInfo {
                ref_: pr.base.ref_.into(),
                repo: pr.base.repo.full_name,
            },
            draft: pr.draft,
            state: pr.state,
            merged: pr.merged.unwrap_or(false),
            merged_by: pr.merged_by.map(|u| u.login),
            labels: pr.labels.into_iter().map(|l| l.name).collect(),
            label: self.label.map(|l| l.name),
            before: self.before,
            changed_files: pr.changed_files,
            author_is_bot: pr.user.kind.as_deref() == Some("Bot"),
            author_association: Association::parse(pr.author_association.as_deref().unwrap_or("")),
            author: pr.user.login,
            sender: self.sender.login,
            updated_at: pr.updated_at,
            html_url: pr.html_url,
        })
    }
}

#[derive(Deserialize)]
pub(super) struct CommentPayload {
    issue: Issue,
    comment: Comment,
    repository: RepoRef,
    #[serde(default)]
    installation: Option<InstallationRef>,
}

#[derive(Deserialize)]
struct Issue {
    number: PrNumber,
    #[serde(default)]
    pull_request: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Comment {
    id: u64,
    #[serde(default)]
    body: Option<String>,
    user: User,
    #[serde(default)]
    performed_via_github_app: Option<AppRef>,
}

#[derive(Deserialize)]
struct AppRef {
    id: u64,
}

#[derive(Deserialize)]
struct User {
    login: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

impl CommentPayload {
    pub(super) fn into_event(self, action: CommentAction) -> CommentEvent {
        let c = self.comment;
        CommentEvent {
            action,
            repo: self.repository.full_name,
            number: self.issue.number,
            on_pull_request: self.issue.pull_request.is_some(),
            comment_id: c.id,
            body: c.body.unwrap_or_default(),
            author_is_bot: c.user.kind.as_deref() == Some("Bot")
                || c.performed_via_github_app.is_some(),
            via_app: c.performed_via_github_app.map(|a| a.id),
            author: c.user.login,
            installation_id: self.installation.map(|i| i.id),
        }
    }
}

#[derive(Deserialize)]
pub(super) struct CheckRunPayload {
    check_run: CheckRun,
    repository: RepoRef,
    #[serde(default)]
    installation: Option<InstallationRef>,
}

#[derive(Deserialize)]
struct CheckRun {
    head_sha: Sha,
    name: String,
    status: String,
    #[serde(default)]
    conclusion: Option<String>,
    #[serde(default)]
    pull_requests: Vec<PrRef>,
}

#[derive(Deserialize)]
struct PrRef {
    number: PrNumber,
}

impl CheckRunPayload {
    pub(super) fn into_event(self, action: CheckRunAction) -> CheckRunEvent {
        let run = self.check_run;
        CheckRunEvent {
            action,
            repo: self.repository.full_name,
            head_sha: run.head_sha,
            name: run.name,
            status: run.status,
            conclusion: run.conclusion,
            pull_requests: run.pull_requests.into_iter().map(|p| p.number).collect(),
            installation_id: self.installation.map(|i| i.id),
        }
    }
}

#[derive(Deserialize)]
pub(super) struct InstallationPayload {
    pub(super) installation: InstallationRef,
    #[serde(default)]
    pub(super) repositories: Vec<RepoRef>,
}

#[derive(Deserialize)]
pub(super) struct InstallationReposPayload {
    pub(super) installation: InstallationRef,
    #[serde(default)]
    pub(super) repositories_added: Vec<RepoRef>,
    #[serde(default)]
    pub(super) repositories_removed: Vec<RepoRef>,
}

#[derive(Deserialize)]
pub(super) struct PingPayload {
    pub(super) zen: String,
    pub(super) hook_id: u64,
    #[serde(default)]
    pub(super) hook: Option<Hook>,
}

#[derive(Deserialize)]
pub(super) struct Hook {
    #[serde(default)]
    pub(super) app_id: Option<u64>,
}
