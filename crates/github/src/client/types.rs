//! The request and response bodies Sandcastle exchanges with GitHub's REST API: only the fields it
//! uses, under GitHub's exact JSON names, decoded into our identifier types.

use std::borrow::Cow;

use base64::Engine as _;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use sandcastle_domain::{IdError, PrNumber, RepoName, Sha};

/// GitHub's limit on a deployment status `description`, in characters.
pub const DESCRIPTION_MAX_CHARS: usize = 140;

/// `POST /repos/{owner}/{repo}/deployments`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewDeployment {
    /// Branch, tag or SHA to deploy.
    #[serde(rename = "ref")]
    pub ref_: String,
    pub environment: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Extra JSON passed on to the `deployment` event.
    pub payload: Value,
    pub transient_environment: bool,
    pub production_environment: bool,
    /// GitHub's default is `true`; previews must send `false` (see GITHUB.md §4.1).
    pub auto_merge: bool,
    /// Empty to bypass commit-status checks.
    pub required_contexts: Vec<String>,
}

/// A deployment as GitHub returns it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Deployment {
    pub id: u64,
    pub sha: Sha,
    #[serde(rename = "ref")]
    pub ref_: String,
    pub environment: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub payload: Value,
    #[serde(default)]
    pub transient_environment: bool,
    #[serde(default)]
    pub production_environment: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The state of a deployment status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentState {
    Error,
    Failure,
    Inactive,
    InProgress,
    Queued,
    Pending,
    Success,
}

impl DeploymentState {
    /// GitHub's name of the state (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Failure => "failure",
            Self::Inactive => "inactive",
            Self::InProgress => "in_progress",
            Self::Queued => "queued",
            Self::Pending => "pending",
            Self::Success => "success",
        }
    }
}

/// `POST /repos/{owner}/{repo}/deployments/{id}/statuses`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewStatus {
    pub state: DeploymentState,
    /// The preview URL behind "View deployment".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_url: Option<String>,
    /// Truncated to 140 characters before sending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// GitHub's default is `true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_inactive: Option<bool>,
}

impl NewStatus {
    pub fn new(state: DeploymentState) -> Self {
        Self {
            state,
            environment_url: None,
            log_url: None,
            description: None,
            auto_inactive: None,
        }
    }
}

/// A deployment status as GitHub returns it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DeploymentStatus {
    pub id: u64,
    pub state: DeploymentState,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub environment: Option<String>,
    #[serde(default)]
    pub environment_url: Option<String>,
    #[serde(default)]
    pub log_url: Option<String>,
    pub created_at: Timestamp,
}

/// Shortens `s` to at most 140 characters, ending with "…" when cut, never splitting a character.
pub fn truncate_description(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(DESCRIPTION_MAX_CHARS) {
        None => Cow::Borrowed(s),
        Some(_) => {
            let (cut, _) = s
                .char_indices()
                .nth(DESCRIPTION_MAX_CHARS - 1)
                .unwrap_or((s.len(), ' '));
            Cow::Owned(format!("{}…", &s[..cut]))
        }
    }
}

/// A user or bot as GitHub shows it on comments and pull requests.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Actor {
    pub login: String,
    /// `User`, `Bot` or `Organization`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// The App that made a comment, when an App made it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AppRef {
    pub id: u64,
    #[serde(default)]
    pub slug: Option<String>,
}

/// An issue (or pull request conversation) comment.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Comment {
    pub id: u64,
    #[serde(default)]
    pub body: String,
    pub user: Actor,
    #[serde(default)]
    pub performed_via_github_app: Option<AppRef>,
    pub html_url: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A reaction on a comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reaction {
    #[serde(rename = "+1")]
    PlusOne,
    #[serde(rename = "-1")]
    MinusOne,
    #[serde(rename = "laugh")]
    Laugh,
    #[serde(rename = "confused")]
    Confused,
    #[serde(rename = "heart")]
    Heart,
    #[serde(rename = "hooray")]
    Hooray,
    #[serde(rename = "rocket")]
    Rocket,
    #[serde(rename = "eyes")]
    Eyes,
}

/// A user's role on a repository, the highest from every source of grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    None,
    Read,
    Triage,
    Write,
    Maintain,
    Admin,
}

impl Permission {
    /// From the permission endpoint's `permission` (legacy base role: admin, write, read, none;
    /// maintain shows as write, triage as read) and `role_name` (the real role, or a custom role's
    /// name). `role_name` wins when it names a built-in role.
    pub fn from_api(permission: &str, role_name: Option<&str>) -> Self {
        match role_name.map(str::to_ascii_lowercase).as_deref() {
            Some("admin") => Self::Admin,
            Some("maintain") => Self::Maintain,
            Some("write" | "push") => Self::Write,
            Some("triage") => Self::Triage,
            Some("read" | "pull") => Self::Read,
            _ => match permission.to_ascii_lowercase().as_str() {
                "admin" => Self::Admin,
                "maintain" => Self::Maintain,
                "write" | "push" => Self::Write,
                "triage" => Self::Triage,
                "read" | "pull" => Self::Read,
                _ => Self::None,
            },
        }
    }

    /// Write, maintain or admin: allowed to run preview commands.
    pub fn can_write(self) -> bool {
        self >= Self::Write
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct PermissionWire {
    pub permission: String,
    #[serde(default)]
    pub role_name: Option<String>,
}

/// Open or closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullState {
    Open,
    Closed,
}

/// The head of a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullHead {
    pub sha: Sha,
    pub ref_: String,
    /// `None` when the fork it came from was deleted.
    pub repo: Option<RepoName>,
}

/// The base of a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullBase {
    pub sha: Sha,
    pub ref_: String,
    pub repo: RepoName,
}

/// A pull request, as `GET /repos/{o}/{r}/pulls/{n}` and the list endpoint return it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "PullWire")]
pub struct PullRequest {
    pub number: PrNumber,
    pub state: PullState,
    pub draft: bool,
    pub merged: bool,
    pub head: PullHead,
    pub base: PullBase,
    pub labels: Vec<String>,
    pub author: String,
    /// GitHub says the author is a `Bot`.
    pub author_is_bot: bool,
    pub author_association: sandcastle_domain::authors::Association,
    pub html_url: String,
    pub updated_at: Timestamp,
}

impl PullRequest {
    /// From a fork: the head repository differs from the base one, or is gone (GITHUB.md §2.2).
    pub fn is_from_fork(&self) -> bool {
        self.head.repo.as_ref() != Some(&self.base.repo)
    }
}

#[derive(Deserialize)]
struct PullWire {
    number: u64,
    state: PullState,
    #[serde(default)]
    draft: Option<bool>,
    /// Present on the single-PR endpoint only; the list endpoint has `merged_at`.
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    merged_at: Option<Timestamp>,
    #[serde(default)]
    labels: Vec<LabelWire>,
    user: Actor,
    #[serde(default)]
    author_association: Option<String>,
    html_url: String,
    updated_at: Timestamp,
    head: RefWire,
    base: RefWire,
}

#[derive(Deserialize)]
struct LabelWire {
    name: String,
}

#[derive(Deserialize)]
struct RefWire {
    #[serde(rename = "ref")]
    ref_: String,
    sha: String,
    repo: Option<RepoWire>,
}

#[derive(Deserialize)]
pub(crate) struct RepoWire {
    pub full_name: String,
}

impl TryFrom<PullWire> for PullRequest {
    type Error = IdError;

    fn try_from(w: PullWire) -> Result<Self, Self::Error> {
        let base_repo = w
            .base
            .repo
            .ok_or_else(|| IdError::Repo("<missing base repository>".to_owned()))?;
        Ok(Self {
            number: PrNumber::new(w.number)?,
            state: w.state,
            draft: w.draft.unwrap_or(false),
            merged: w.merged.unwrap_or(w.merged_at.is_some()),
            head: PullHead {
                sha: Sha::new(&w.head.sha)?,
                ref_: w.head.ref_,
                repo: w
                    .head
                    .repo
                    .map(|r| RepoName::new(&r.full_name))
                    .transpose()?,
            },
            base: PullBase {
                sha: Sha::new(&w.base.sha)?,
                ref_: w.base.ref_,
                repo: RepoName::new(&base_repo.full_name)?,
            },
            labels: w.labels.into_iter().map(|l| l.name).collect(),
            author_is_bot: w.user.kind == "Bot",
            author_association: sandcastle_domain::authors::Association::parse(
                w.author_association.as_deref().unwrap_or(""),
            ),
            author: w.user.login,
            html_url: w.html_url,
            updated_at: w.updated_at,
        })
    }
}

/// A text file read through the contents API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContent {
    pub text: String,
    /// The blob SHA.
    pub sha: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ContentWire {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub encoding: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    pub sha: String,
}

/// Decodes the contents API's base64, which GitHub wraps with `\n` every 60 characters.
pub fn decode_base64_content(content: &str) -> Result<Vec<u8>, base64::DecodeError> {
    let compact: String = content.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(compact)
}

/// Whether a check run has finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Queued,
    InProgress,
    Completed,
    Waiting,
    Requested,
    Pending,
    #[serde(other)]
    Unknown,
}

/// How a completed check run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckConclusion {
    ActionRequired,
    Cancelled,
    Failure,
    Neutral,
    Success,
    Skipped,
    Stale,
    TimedOut,
    StartupFailure,
    #[serde(other)]
    Unknown,
}

/// A check run on a commit.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CheckRun {
    /// Ids grow with time: of several runs with one name (re-runs), the highest is the newest.
    #[serde(default)]
    pub id: u64,
    pub name: String,
    pub status: CheckStatus,
    #[serde(default)]
    pub conclusion: Option<CheckConclusion>,
    /// The integrator's id of the run (Sandcastle's: `<preview>/<test>/<run>`).
    #[serde(default)]
    pub external_id: Option<String>,
}

/// An installation of the App, from `GET /app/installations`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InstallationInfo {
    pub id: u64,
    pub account: Actor,
    #[serde(default)]
    pub repository_selection: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_cut_to_140_characters() {
        let short = "Preview ready";
        assert!(matches!(truncate_description(short), Cow::Borrowed(_)));
        let exact = "x".repeat(140);
        assert_eq!(truncate_description(&exact), exact.as_str());
        let long = "y".repeat(141);
        let cut = truncate_description(&long);
        assert_eq!(cut.chars().count(), 140);
        assert!(cut.ends_with("yy…"));
        // multi-byte characters are never split
        let wide = "é".repeat(200);
        let cut = truncate_description(&wide);
        assert_eq!(cut.chars().count(), 140);
        assert_eq!(cut.chars().filter(|c| *c == 'é').count(), 139);
    }

    #[test]
    fn base64_with_newlines_decodes() {
        // as the contents API sends it: wrapped every 60 characters plus a trailing newline
        let text =
            "blueprint: shop\nservices:\n  - web\n  - worker\nttl: 48h\nallow:\n  - acme/*\n";
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        let wrapped: String = encoded
            .as_bytes()
            .chunks(60)
            .map(|c| format!("{}\n", std::str::from_utf8(c).unwrap()))
            .collect();
        assert!(wrapped.matches('\n').count() >= 2);
        assert_eq!(decode_base64_content(&wrapped).unwrap(), text.as_bytes());
        assert!(decode_base64_content("not base64!").is_err());
    }

    #[test]
    fn permissions_follow_role_name_then_base_role() {
        assert_eq!(
            Permission::from_api("admin", Some("admin")),
            Permission::Admin
        );
        assert_eq!(
            Permission::from_api("write", Some("maintain")),
            Permission::Maintain
        );
        assert_eq!(
            Permission::from_api("read", Some("triage")),
            Permission::Triage
        );
        assert_eq!(
            Permission::from_api("write", Some("write")),
            Permission::Write
        );
        assert_eq!(
            Permission::from_api("write", Some("deployer")),
            Permission::Write
        );
        assert_eq!(Permission::from_api("read", None), Permission::Read);
        assert_eq!(Permission::from_api("none", None), Permission::None);
        assert!(Permission::Maintain.can_write());
        assert!(!Permission::Triage.can_write());
    }

    #[test]
    fn reactions_use_github_names() {
        assert_eq!(serde_json::to_string(&Reaction::PlusOne).unwrap(), "\"+1\"");
        assert_eq!(serde_json::to_string(&Reaction::Eyes).unwrap(), "\"eyes\"");
        let status = NewStatus {
            description: Some("d".to_owned()),
            ..NewStatus::new(DeploymentState::InProgress)
        };
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            serde_json::json!({"state": "in_progress", "description": "d"})
        );
    }
}
