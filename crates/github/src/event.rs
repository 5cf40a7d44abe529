//! Webhook payloads parsed into Sandcastle's own event types. Only the fields Sandcastle uses are
//! read; no raw payload travels past this module. Events and actions Sandcastle does not act on
//! become [`Event::Ignored`], never errors, because GitHub keeps adding both.

use jiff::Timestamp;
use sandcastle_domain::authors::Association;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use sandcastle_domain::{PrNumber, RepoName, Sha};

pub use record::{from_record, to_record};

mod record;
mod wire;

#[cfg(test)]
mod hostile;

/// A webhook delivery, in Sandcastle's terms.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Boxed: by far the largest.
    PullRequest(Box<PullRequestEvent>),
    IssueComment(CommentEvent),
    CheckRun(CheckRunEvent),
    Installation {
        action: InstallationAction,
        installation_id: u64,
        repos: Vec<RepoName>,
    },
    InstallationRepositories {
        action: InstallationReposAction,
        installation_id: u64,
        added: Vec<RepoName>,
        removed: Vec<RepoName>,
    },
    Ping {
        zen: String,
        hook_id: u64,
        /// Present for GitHub App webhooks (`hook.app_id`).
        app_id: Option<u64>,
    },
    /// An event or action Sandcastle does not use; answered with a 2xx and otherwise dropped.
    Ignored {
        event: String,
        action: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrAction {
    Opened,
    Reopened,
    Synchronize,
    ReadyForReview,
    ConvertedToDraft,
    Closed,
    Labeled,
    Unlabeled,
    /// Title, body or base branch edited; only a base change matters to a preview.
    Edited {
        base_changed: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrState {
    Open,
    Closed,
}

/// Read from a string, so that a value of another type is refused as the field at fault:
/// serde_json reports an enum given anything but a string or an object as invalid JSON.
impl<'de> Deserialize<'de> for PrState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        match &*s {
            "open" => Ok(Self::Open),
            "closed" => Ok(Self::Closed),
            other => Err(serde::de::Error::unknown_variant(
                other,
                &["open", "closed"],
            )),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PullRequestEvent {
    pub action: PrAction,
    pub repo: RepoName,
    pub number: PrNumber,
    pub installation_id: Option<u64>,
    pub head: HeadInfo,
    pub base: BaseInfo,
    pub draft: bool,
    pub state: PrState,
    pub merged: bool,
    pub merged_by: Option<String>,
    /// Every label on the pull request after this event.
    pub labels: Vec<String>,
    /// The label added or removed, for `labeled` and `unlabeled`.
    pub label: Option<String>,
    pub author: String,
    /// GitHub says the author is a `Bot` (`user.type`).
    pub author_is_bot: bool,
    /// A `synchronize`'s previous head commit.
    pub before: Option<Sha>,
    /// How many files the pull request changes, as GitHub counts them.
    pub changed_files: Option<u64>,
    /// GitHub's `author_association` of the pull request.
    pub author_association: Association,
    pub sender: String,
    /// GitHub's `pull_request.updated_at`, used to drop events older than the last one applied.
    pub updated_at: Timestamp,
    pub html_url: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadInfo {
    pub sha: Sha,
    pub ref_: String,
    /// `None` when the fork the pull request came from has been deleted.
    pub repo: Option<RepoName>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseInfo {
    pub ref_: String,
    pub repo: RepoName,
}

impl PullRequestEvent {
    /// Whether the head commit lives outside the base repository (a fork, possibly deleted).
    /// `head.repo.fork` is deliberately not used: it says the head repository is a fork of
    /// something, not that this pull request crosses repositories.
    pub fn is_fork(&self) -> bool {
        self.head.repo.as_ref() != Some(&self.base.repo)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentAction {
    Created,
    Edited,
    Deleted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentEvent {
    pub action: CommentAction,
    pub repo: RepoName,
    /// The issue number, which is the pull request number when `on_pull_request`.
    pub number: PrNumber,
    pub on_pull_request: bool,
    pub comment_id: u64,
    pub body: String,
    pub author: String,
    /// Written by a bot or through an App (possibly Sandcastle itself). Other bots and agents
    /// are held to the same permission rule as people; Sandcastle's own comments are never
    /// commands (see `via_app`).
    pub author_is_bot: bool,
    /// The App the comment was made through (`performed_via_github_app.id`), if any.
    pub via_app: Option<u64>,
    pub installation_id: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckRunAction {
    Created,
    Completed,
    Rerequested,
    RequestedAction,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRunEvent {
    pub action: CheckRunAction,
    pub repo: RepoName,
    pub head_sha: Sha,
    pub name: String,
    /// `queued`, `in_progress`, `completed`, … (kept as text: GitHub adds values).
    pub status: String,
    pub conclusion: Option<String>,
    /// Empty for check runs on forks (GitHub does not link them).
    pub pull_requests: Vec<PrNumber>,
    pub installation_id: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallationAction {
    Created,
    Deleted,
    Suspend,
    Unsuspend,
    NewPermissionsAccepted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallationReposAction {
    Added,
    Removed,
}

/// Why a payload could not be read. The message names the place: line and column for broken
/// JSON, the field path (`pull_request.head.sha`) for a missing or mistyped field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("body is not valid JSON: {message} at line {line} column {column}")]
    Syntax {
        message: String,
        line: usize,
        column: usize,
    },
    #[error("{path}: {message}")]
    Field { path: String, message: String },
}

impl ParseError {
    /// A stable machine-readable code for the HTTP error body and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Syntax { .. } => "invalid_json",
            Self::Field { .. } => "invalid_payload",
        }
    }
}

/// Parse the body of a delivery whose `X-GitHub-Event` header is `event`. Call only after the
/// signature has been verified.
pub fn parse(event: &str, body: &[u8]) -> Result<Event, ParseError> {
    // Read the action first so that an action Sandcastle ignores is never held to the shape of
    // the actions it uses. GitHub writes `action` as the first key, which saves a full pass over
    // the payload; anything else is read the long way.
    let action = match leading_action(body) {
        Some(a) => Some(a.to_owned()),
        None => from_slice::<ActionOnly>(body)?.action,
    };
    let ignored = || Event::Ignored {
        event: event.to_owned(),
        action: action.clone(),
    };
    let act = action.as_deref().unwrap_or("");
    Ok(match event {
        "pull_request" => match pr_action(act) {
            Some(a) => Event::PullRequest(Box::new(
                from_slice::<wire::PullRequestPayload>(body)?.into_event(a)?,
            )),
            None => ignored(),
        },
        "issue_comment" => match comment_action(act) {
            Some(a) => Event::IssueComment(from_slice::<wire::CommentPayload>(body)?.into_event(a)),
            None => ignored(),
        },
        "check_run" => match check_run_action(act) {
            Some(a) => Event::CheckRun(from_slice::<wire::CheckRunPayload>(body)?.into_event(a)),
            None => ignored(),
        },
        "installation" => match installation_action(act) {
            Some(action) => {
                let p = from_slice::<wire::InstallationPayload>(body)?;
                Event::Installation {
                    action,
                    installation_id: p.installation.id,
                    repos: names(p.repositories),
                }
            }
            None => ignored(),
        },
        "installation_repositories" => match act {
            "added" | "removed" => {
                let p = from_slice::<wire::InstallationReposPayload>(body)?;
                Event::InstallationRepositories {
                    action: if act == "added" {
                        InstallationReposAction::Added
                    } else {
                        InstallationReposAction::Removed
                    },
                    installation_id: p.installation.id,
                    added: names(p.repositories_added),
                    removed: names(p.repositories_removed),
                }
            }
            _ => ignored(),
        },
        "ping" => {
            let p = from_slice::<wire::PingPayload>(body)?;
            Event::Ping {
                zen: p.zen,
                hook_id: p.hook_id,
                app_id: p.hook.and_then(|h| h.app_id),
            }
        }
        _ => ignored(),
    })
}

impl PrAction {
    /// GitHub's name of the action (`opened`, `synchronize`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Opened => "opened",
            Self::Reopened => "reopened",
            Self::Synchronize => "synchronize",
            Self::ReadyForReview => "ready_for_review",
            Self::ConvertedToDraft => "converted_to_draft",
            Self::Closed => "closed",
            Self::Labeled => "labeled",
            Self::Unlabeled => "unlabeled",
            Self::Edited { .. } => "edited",
        }
    }
}

pub(crate) fn pr_action(action: &str) -> Option<PrAction> {
    Some(match action {
        "opened" => PrAction::Opened,
        "reopened" => PrAction::Reopened,
        "synchronize" => PrAction::Synchronize,
        "ready_for_review" => PrAction::ReadyForReview,
        "converted_to_draft" => PrAction::ConvertedToDraft,
        "closed" => PrAction::Closed,
        "labeled" => PrAction::Labeled,
        "unlabeled" => PrAction::Unlabeled,
        // Filled in from `changes` once the payload is read.
        "edited" => PrAction::Edited {
            base_changed: false,
        },
        _ => return None,
    })
}

fn comment_action(action: &str) -> Option<CommentAction> {
    Some(match action {
        "created" => CommentAction::Created,
        "edited" => CommentAction::Edited,
        "deleted" => CommentAction::Deleted,
        _ => return None,
    })
}

fn check_run_action(action: &str) -> Option<CheckRunAction> {
    Some(match action {
        "created" => CheckRunAction::Created,
        "completed" => CheckRunAction::Completed,
        "rerequested" => CheckRunAction::Rerequested,
        "requested_action" => CheckRunAction::RequestedAction,
        _ => return None,
    })
}

fn installation_action(action: &str) -> Option<InstallationAction> {
    Some(match action {
        "created" => InstallationAction::Created,
        "deleted" => InstallationAction::Deleted,
        "suspend" => InstallationAction::Suspend,
        "unsuspend" => InstallationAction::Unsuspend,
        "new_permissions_accepted" => InstallationAction::NewPermissionsAccepted,
        _ => return None,
    })
}

fn names(repos: Vec<wire::RepoRef>) -> Vec<RepoName> {
    repos.into_iter().map(|r| r.full_name).collect()
}

/// The `action` of a delivery, read leniently so that an event Sandcastle ignores cannot fail
/// here: a body that is not an object, or an `action` that is not a string, reads as none.
struct ActionOnly {
    action: Option<String>,
}

impl<'de> Deserialize<'de> for ActionOnly {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ActionVisitor)
            .map(|action| Self { action })
    }
}

struct ActionVisitor;

impl<'de> serde::de::Visitor<'de> for ActionVisitor {
    type Value = Option<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut action = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "action" {
                action = match map.next_value::<serde_json::Value>()? {
                    serde_json::Value::String(s) => Some(s),
                    _ => None,
                };
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(action)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// The value of `action` when it is the object's first member and a plain string (no escapes),
/// as GitHub sends it: `{"action":"opened",…`. `None` means "look properly".
fn leading_action(body: &[u8]) -> Option<&str> {
    let skip_ws = |b: &[u8]| -> usize { b.iter().take_while(|c| c.is_ascii_whitespace()).count() };
    let mut rest = body;
    rest = &rest[skip_ws(rest)..];
    rest = rest.strip_prefix(b"{")?;
    rest = &rest[skip_ws(rest)..];
    rest = rest.strip_prefix(b"\"action\"")?;
    rest = &rest[skip_ws(rest)..];
    rest = rest.strip_prefix(b":")?;
    rest = &rest[skip_ws(rest)..];
    rest = rest.strip_prefix(b"\"")?;
    let end = rest
        .iter()
        .position(|c| *c == b'"' || *c == b'\\' || *c < 0x20)?;
    if rest[end] != b'"' {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok()
}

fn from_slice<T: DeserializeOwned>(body: &[u8]) -> Result<T, ParseError> {
    // The common case goes straight through serde_json; only a failure is parsed again, with
    // path tracking, to name the field at fault.
    if let Ok(value) = serde_json::from_slice(body) {
        return Ok(value);
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    let result: Result<T, _> = serde_path_to_error::deserialize(de);
    let value = result.map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let message = clip(strip_position(&inner.to_string()).to_owned());
        match inner.classify() {
            serde_json::error::Category::Data => ParseError::Field { path, message },
            _ => ParseError::Syntax {
                message,
                line: inner.line(),
                column: inner.column(),
            },
        }
    })?;
    Ok(value)
}

/// The longest message a [`ParseError`] carries, in bytes (before a closing `…`). A message
/// quotes the value at fault (`repository name "…" is not of the form owner/name`), and a
/// delivery may be 25 MiB: the answer and the log line stay short whatever it holds.
pub const MESSAGE_LIMIT: usize = 256;

fn clip(mut message: String) -> String {
    if message.len() > MESSAGE_LIMIT {
        let mut end = MESSAGE_LIMIT;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// serde_json appends " at line L column C" to its messages; the error carries them separately.
fn strip_position(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    }
}

#[cfg(test)]
mod leading_action_tests {
    use super::leading_action;

    #[test]
    fn reads_a_leading_plain_action_and_declines_the_rest() {
        assert_eq!(
            leading_action(br#"{"action":"opened","number":1}"#),
            Some("opened")
        );
        assert_eq!(
            leading_action(b" {\n  \"action\" : \"synchronize\" }"),
            Some("synchronize")
        );
        for other in [
            &br#"{"number":1,"action":"opened"}"#[..],
            br#"{"action":null}"#,
            br#"{"action":"op\u0065ned"}"#,
            br#"{"action":"unterminated"#,
            br#"["action"]"#,
            b"",
        ] {
            assert_eq!(
                leading_action(other),
                None,
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/../../fixtures/github/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn value(name: &str) -> Value {
        serde_json::from_slice(&fixture(name)).unwrap()
    }

    fn pr(event: Result<Event, ParseError>) -> PullRequestEvent {
        match event {
            Ok(Event::PullRequest(pr)) => *pr,
            other => panic!("not a pull request event: {other:?}"),
        }
    }

    fn comment(event: Result<Event, ParseError>) -> CommentEvent {
        match event {
            Ok(Event::IssueComment(c)) => c,
            other => panic!("not a comment event: {other:?}"),
        }
    }

    fn parse_value(event: &str, v: &Value) -> Result<Event, ParseError> {
        parse(event, &serde_json::to_vec(v).unwrap())
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn real_pull_request_opened() {
        let e = pr(parse("pull_request", &fixture("pull_request.opened.json")));
        assert_eq!(e.action, PrAction::Opened);
        assert_eq!(e.repo.as_str(), "derekg1729/test-repo");
        assert_eq!(e.number.get(), 315);
        assert_eq!(e.installation_id, Some(87_385_964));
        assert_eq!(
            e.head.sha.as_str(),
            "eeb67d6e0f131d27102080b6bb50be2ddae28cc3"
        );
        assert_eq!(e.head.ref_, "cogni-e2e-1759155366275");
        assert_eq!(e.base.ref_, "main");
        assert_eq!(e.state, PrState::Open);
        assert!(!e.draft && !e.merged);
        assert_eq!(e.merged_by, None);
        assert!(e.labels.is_empty());
        assert_eq!(e.label, None);
        assert_eq!(e.author, "derekg1729");
        assert_eq!(e.sender, "derekg1729");
        assert_eq!(e.updated_at, ts("2025-10-15T07:09:59Z"));
        assert_eq!(
            e.html_url,
            "https://github.com/derekg1729/test-repo/pull/315"
        );
    }

    #[test]
    fn head_repo_fork_flag_does_not_make_a_fork_pr() {
        // In the real capture `head.repo.fork` is true, yet head and base are one repository.
        let raw = value("pull_request.opened.json");
        assert_eq!(raw["pull_request"]["head"]["repo"]["fork"], json!(true));
        let e = pr(parse("pull_request", &fixture("pull_request.opened.json")));
        assert_eq!(e.head.repo.as_ref(), Some(&e.base.repo));
        assert!(!e.is_fork());
    }

    #[test]
    fn real_pull_request_synchronize() {
        let raw = value("pull_request.synchronize.json");
        let e = pr(parse(
            "pull_request",
            &fixture("pull_request.synchronize.json"),
        ));
        assert_eq!(e.action, PrAction::Synchronize);
        assert_eq!(e.head.sha.as_str(), raw["after"].as_str().unwrap());
        assert!(!e.is_fork());
    }

    #[test]
    fn real_pull_request_closed_merged() {
        let e = pr(parse(
            "pull_request",
            &fixture("pull_request.closed.merged.json"),
        ));
        assert_eq!(e.action, PrAction::Closed);
        assert_eq!(e.state, PrState::Closed);
        assert!(e.merged);
        assert_eq!(e.merged_by.as_deref(), Some("derekg1729"));
        assert_eq!(e.updated_at, ts("2025-10-15T07:15:40Z"));
    }

    #[test]
    fn real_issue_comment_on_a_pull_request() {
        let c = comment(parse(
            "issue_comment",
            &fixture("issue_comment.created.json"),
        ));
        assert_eq!(c.action, CommentAction::Created);
        assert_eq!(c.repo.as_str(), "chhsia0/knative-route-demo");
        assert_eq!(c.number.get(), 3);
        assert!(c.on_pull_request);
        assert_eq!(c.body, "/build");
        assert_eq!(c.author, "chhsia0");
        assert!(!c.author_is_bot);
        assert_eq!(c.via_app, None);
        // A repository webhook: no installation.
        assert_eq!(c.installation_id, None);
        assert_eq!(
            c.comment_id,
            value("issue_comment.created.json")["comment"]["id"]
                .as_u64()
                .unwrap()
        );
    }

    #[test]
    fn real_ping() {
        let e = parse("ping", &fixture("ping.json")).unwrap();
        assert_eq!(
            e,
            Event::Ping {
                zen: "Anything added dilutes everything else.".to_owned(),
                hook_id: 109_948_940,
                app_id: Some(29310),
            }
        );
        assert_eq!(
            parse("ping", br#"{"zen":"z","hook_id":1}"#).unwrap(),
            Event::Ping {
                zen: "z".to_owned(),
                hook_id: 1,
                app_id: None
            }
        );
    }

    #[test]
    fn fork_pull_requests() {
        let mut v = value("pull_request.opened.json");
        v["pull_request"]["head"]["repo"]["full_name"] = json!("Someone/Test-Repo");
        let e = pr(parse_value("pull_request", &v));
        assert_eq!(e.head.repo.as_ref().unwrap().as_str(), "someone/test-repo");
        assert!(e.is_fork());

        // The fork was deleted after the pull request was opened.
        v["pull_request"]["head"]["repo"] = Value::Null;
        let e = pr(parse_value("pull_request", &v));
        assert_eq!(e.head.repo, None);
        assert!(e.is_fork());

        // Case differences alone are not a fork: names are normalised.
        let mut v = value("pull_request.opened.json");
        v["pull_request"]["head"]["repo"]["full_name"] = json!("DerekG1729/Test-Repo");
        assert!(!pr(parse_value("pull_request", &v)).is_fork());
    }

    #[test]
    fn draft_and_ready_for_review() {
        let mut v = value("pull_request.opened.json");
        v["pull_request"]["draft"] = json!(true);
        assert!(pr(parse_value("pull_request", &v)).draft);
        v["action"] = json!("ready_for_review");
        v["pull_request"]["draft"] = json!(false);
        let e = pr(parse_value("pull_request", &v));
        assert_eq!(e.action, PrAction::ReadyForReview);
        assert!(!e.draft);
    }

    #[test]
    fn closed_without_merge() {
        let mut v = value("pull_request.closed.merged.json");
        v["pull_request"]["merged"] = json!(false);
        v["pull_request"]["merged_by"] = Value::Null;
        let e = pr(parse_value("pull_request", &v));
        assert_eq!(
            (e.action, e.merged, e.merged_by),
            (PrAction::Closed, false, None)
        );
    }

    #[test]
    fn labeled_and_edited() {
        let mut v = value("pull_request.opened.json");
        v["action"] = json!("labeled");
        v["label"] = json!({"id": 1, "name": "preview"});
        v["pull_request"]["labels"] = json!([{"name": "bug"}, {"name": "preview"}]);
        let e = pr(parse_value("pull_request", &v));
        assert_eq!(e.action, PrAction::Labeled);
        assert_eq!(e.label.as_deref(), Some("preview"));
        assert_eq!(e.labels, ["bug", "preview"]);

        let mut v = value("pull_request.opened.json");
        v["action"] = json!("edited");
        v["changes"] = json!({"title": {"from": "old"}});
        let e = pr(parse_value("pull_request", &v));
        assert_eq!(
            e.action,
            PrAction::Edited {
                base_changed: false
            }
        );
        v["changes"] = json!({"base": {"ref": {"from": "develop"}, "sha": {"from": "abc"}}});
        let e = pr(parse_value("pull_request", &v));
        assert_eq!(e.action, PrAction::Edited { base_changed: true });
    }

    #[test]
    fn comment_on_an_issue_and_by_bots() {
        let mut v = value("issue_comment.created.json");
        v["issue"].as_object_mut().unwrap().remove("pull_request");
        assert!(!comment(parse_value("issue_comment", &v)).on_pull_request);

        let mut v = value("issue_comment.created.json");
        v["comment"]["user"]["type"] = json!("Bot");
        v["comment"]["user"]["login"] = json!("sandcastle[bot]");
        let c = comment(parse_value("issue_comment", &v));
        assert!(c.author_is_bot);
        assert_eq!(c.author, "sandcastle[bot]");

        let mut v = value("issue_comment.created.json");
        v["comment"]["performed_via_github_app"] = json!({"id": 1, "slug": "other"});
        let c = comment(parse_value("issue_comment", &v));
        assert!(c.author_is_bot);
        assert_eq!(c.via_app, Some(1));

        let mut v = value("issue_comment.created.json");
        v["action"] = json!("edited");
        v["changes"] = json!({"body": {"from": "/preview stop"}});
        v["installation"] = json!({"id": 7});
        let c = comment(parse_value("issue_comment", &v));
        assert_eq!(
            (c.action, c.installation_id),
            (CommentAction::Edited, Some(7))
        );
    }

    #[test]
    fn check_run() {
        let sha = "eeb67d6e0f131d27102080b6bb50be2ddae28cc3";
        let v = json!({
            "action": "completed",
            "check_run": {
                "id": 4, "head_sha": sha, "name": "ci / test", "status": "completed",
                "conclusion": "success", "pull_requests": [{"number": 315, "id": 9}],
            },
            "repository": {"full_name": "acme/shop"},
            "installation": {"id": 5},
        });
        let Ok(Event::CheckRun(e)) = parse_value("check_run", &v) else {
            panic!("not a check run");
        };
        assert_eq!(e.action, CheckRunAction::Completed);
        assert_eq!(e.head_sha.as_str(), sha);
        assert_eq!(e.name, "ci / test");
        assert_eq!(e.conclusion.as_deref(), Some("success"));
        assert_eq!(e.pull_requests, [PrNumber::new(315).unwrap()]);
        assert_eq!(e.installation_id, Some(5));
    }

    #[test]
    fn installations() {
        let v = json!({
            "action": "created",
            "installation": {"id": 11, "account": {"login": "acme"}},
            "repositories": [{"id": 1, "full_name": "acme/shop"}, {"id": 2, "full_name": "acme/web"}],
            "sender": {"login": "octocat"},
        });
        let Ok(Event::Installation {
            action,
            installation_id,
            repos,
        }) = parse_value("installation", &v)
        else {
            panic!("not an installation");
        };
        assert_eq!((action, installation_id), (InstallationAction::Created, 11));
        assert_eq!(repos.len(), 2);

        let v = json!({
            "action": "removed",
            "installation": {"id": 11},
            "repository_selection": "selected",
            "repositories_added": [],
            "repositories_removed": [{"full_name": "acme/web"}],
        });
        assert_eq!(
            parse_value("installation_repositories", &v).unwrap(),
            Event::InstallationRepositories {
                action: InstallationReposAction::Removed,
                installation_id: 11,
                added: vec![],
                removed: vec![RepoName::new("acme/web").unwrap()],
            }
        );
    }

    #[test]
    fn unused_events_and_actions_are_ignored() {
        assert_eq!(
            parse("star", br#"{"action":"created","starred_at":null}"#).unwrap(),
            Event::Ignored {
                event: "star".to_owned(),
                action: Some("created".to_owned())
            }
        );
        assert_eq!(
            parse("push", br#"{"ref":"refs/heads/main"}"#).unwrap(),
            Event::Ignored {
                event: "push".to_owned(),
                action: None
            }
        );
        // A known event with an action Sandcastle does not use is not held to any shape.
        assert_eq!(
            parse("pull_request", br#"{"action":"assigned"}"#).unwrap(),
            Event::Ignored {
                event: "pull_request".to_owned(),
                action: Some("assigned".to_owned())
            }
        );
        assert!(matches!(
            parse("installation", br#"{"action":"some_future_action"}"#),
            Ok(Event::Ignored { .. })
        ));
        assert!(matches!(
            parse("issues", br#"{"action":{"odd":true}}"#),
            Ok(Event::Ignored { action: None, .. })
        ));
        // Nor to being an object at all.
        for body in [
            "0",
            "-1.5",
            "\"opened\"",
            "null",
            "true",
            "[1, {\"action\": \"opened\"}]",
        ] {
            assert_eq!(
                parse("push", body.as_bytes()),
                Ok(Event::Ignored {
                    event: "push".to_owned(),
                    action: None
                }),
                "{body}"
            );
        }
    }

    #[test]
    fn refusals_quote_at_most_message_limit_bytes_of_the_value() {
        let long = format!("acme/{}", "\u{e9}".repeat(10_000));
        let v = json!({"action": "added", "installation": {"id": 1}, "repositories_added": [{"full_name": long}]});
        let err = parse_value("installation_repositories", &v).unwrap_err();
        let ParseError::Field { path, message } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(path, "repositories_added[0].full_name");
        assert!(
            message.starts_with("repository name \"acme/\u{e9}"),
            "{message}"
        );
        assert!(
            message.len() <= MESSAGE_LIMIT + '…'.len_utf8(),
            "{}",
            message.len()
        );
        // The value is cut where it is quoted (`domain::quote`), so the message is whole.
        assert!(message.contains('…'), "{message}");
    }

    #[test]
    fn malformed_json_names_line_and_column() {
        let err = parse("pull_request", b"{\n  \"action\": \"opened\",\n  oops\n}").unwrap_err();
        assert_eq!(err.code(), "invalid_json");
        assert!(
            matches!(
                err,
                ParseError::Syntax {
                    line: 3,
                    column: 3,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "body is not valid JSON: key must be a string at line 3 column 3"
        );

        let body = fixture("pull_request.opened.json");
        let err = parse("pull_request", &body[..body.len() / 2]).unwrap_err();
        assert_eq!(err.code(), "invalid_json");
        let err = parse("ping", b"").unwrap_err();
        assert_eq!(err.code(), "invalid_json");
    }

    #[test]
    fn a_pull_request_number_is_an_integer_in_both_places_and_agrees() {
        for (place, number) in [
            ("pull_request", json!("2")),
            ("pull_request", json!(2.0)),
            ("pull_request", json!(-2)),
            ("pull_request", Value::Null),
            ("top", json!("2")),
        ] {
            let mut v = value("pull_request.opened.json");
            let (field, path) = match place {
                "top" => (&mut v["number"], "number"),
                _ => (&mut v["pull_request"]["number"], "pull_request.number"),
            };
            *field = number.clone();
            let err = parse_value("pull_request", &v).unwrap_err();
            assert_eq!(err.code(), "invalid_payload", "{number}");
            assert!(
                err.to_string().starts_with(&format!("{path}: ")),
                "{number}: {err}"
            );
        }
        let mut v = value("pull_request.opened.json");
        v["pull_request"]["number"] = json!(316);
        let err = parse_value("pull_request", &v).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pull_request.number: 316 is not the delivery's number 315"
        );
        let mut v = value("pull_request.opened.json");
        v["pull_request"].as_object_mut().unwrap().remove("number");
        let err = parse_value("pull_request", &v).unwrap_err();
        assert_eq!(err.to_string(), "pull_request: missing field `number`");
    }

    #[test]
    fn branch_names_with_bidi_or_control_characters_are_refused() {
        for (side, name) in [
            ("head", "fix/\u{202e}gnp.exe"),
            ("head", "a\u{2066}b\u{2069}"),
            ("head", "a\u{200f}"),
            ("head", "a\u{7f}"),
            ("base", "main\u{202d}"),
            ("base", "ma in"),
        ] {
            let mut v = value("pull_request.opened.json");
            v["pull_request"][side]["ref"] = json!(name);
            let err = parse_value("pull_request", &v).unwrap_err();
            assert_eq!(err.code(), "invalid_payload", "{name:?}");
            assert!(
                err.to_string()
                    .starts_with(&format!("pull_request.{side}.ref: ")),
                "{name:?}: {err}"
            );
        }
    }

    #[test]
    fn wrong_types_name_the_field_path() {
        let mut v = value("pull_request.opened.json");
        v["pull_request"]["head"]["sha"] = Value::Null;
        let err = parse_value("pull_request", &v).unwrap_err();
        assert_eq!(err.code(), "invalid_payload");
        assert_eq!(
            err.to_string(),
            "pull_request.head.sha: invalid type: null, expected a string"
        );

        let mut v = value("pull_request.opened.json");
        v["pull_request"]["head"]["sha"] = json!("abc1234");
        let err = parse_value("pull_request", &v).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pull_request.head.sha: commit \"abc1234\" is not a 40-character hexadecimal SHA"
        );

        let mut v = value("pull_request.opened.json");
        v["pull_request"]
            .as_object_mut()
            .unwrap()
            .remove("updated_at");
        let err = parse_value("pull_request", &v).unwrap_err();
        assert_eq!(err.to_string(), "pull_request: missing field `updated_at`");

        // A value of the wrong type for an enum is the field's fault, not the JSON's.
        for (state, want) in [
            (
                json!([]),
                "pull_request.state: invalid type: sequence, expected a string",
            ),
            (
                json!(1),
                "pull_request.state: invalid type: integer `1`, expected a string",
            ),
            (
                json!("merged"),
                "pull_request.state: unknown variant `merged`, expected `open` or `closed`",
            ),
        ] {
            let mut v = value("pull_request.opened.json");
            v["pull_request"]["state"] = state;
            let err = parse_value("pull_request", &v).unwrap_err();
            assert_eq!(
                (err.code(), err.to_string().as_str()),
                ("invalid_payload", want)
            );
        }

        let mut v = value("pull_request.opened.json");
        v["pull_request"]["updated_at"] = json!("yesterday");
        let err = parse_value("pull_request", &v).unwrap_err();
        assert!(
            err.to_string().starts_with("pull_request.updated_at: "),
            "{err}"
        );

        let mut v = value("issue_comment.created.json");
        v["issue"]["number"] = json!(0);
        let err = parse_value("issue_comment", &v).unwrap_err();
        assert!(err.to_string().starts_with("issue.number: "), "{err}");

        let v = json!({"action": "completed", "check_run": {"head_sha": "x"}});
        let err = parse_value("check_run", &v).unwrap_err();
        assert!(err.to_string().starts_with("check_run.head_sha: "), "{err}");
    }
}
