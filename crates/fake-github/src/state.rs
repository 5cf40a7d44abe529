//! The stand-in's model of GitHub: installations, repositories, pull requests, refs, files, check
//! runs, deployments, comments, reactions, tokens and rate-limit budgets. Records are public so
//! tests can inspect snapshots of them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use super::calls::CallLog;
use super::faults::FaultRule;
use sandcastle_domain::{RepoName, Sha};

/// A collaborator's role on a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Admin,
    Maintain,
    Write,
    Triage,
    Read,
    /// A custom repository role built on a base role (`read`, `write`…).
    Custom {
        name: String,
        base: String,
    },
}

impl Role {
    /// `(permission, role_name)` as the permission endpoint reports them (GITHUB.md §7: maintain
    /// shows as write, triage as read).
    pub fn api_fields(&self) -> (String, String) {
        let (p, r) = match self {
            Self::Admin => ("admin", "admin"),
            Self::Maintain => ("write", "maintain"),
            Self::Write => ("write", "write"),
            Self::Triage => ("read", "triage"),
            Self::Read => ("read", "read"),
            Self::Custom { name, base } => {
                let permission = match base.as_str() {
                    "admin" => "admin",
                    "maintain" | "write" => "write",
                    _ => "read",
                };
                return (permission.to_owned(), name.clone());
            }
        };
        (p.to_owned(), r.to_owned())
    }
}

/// Where a pull request's head lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadRepo {
    /// The base repository itself.
    Same,
    /// A fork.
    Fork(RepoName),
    /// A fork that was deleted (`head.repo` is null).
    Deleted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRecord {
    pub number: u64,
    pub id: u64,
    pub title: String,
    pub author: String,
    pub head_sha: Sha,
    pub head_ref: String,
    pub head_repo: HeadRepo,
    pub base_ref: String,
    pub base_sha: Sha,
    pub draft: bool,
    pub open: bool,
    pub merged: bool,
    pub merge_commit_sha: Option<Sha>,
    pub merged_by: Option<String>,
    pub labels: Vec<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub closed_at: Option<Timestamp>,
    pub merged_at: Option<Timestamp>,
    /// The pull request's commits in order, each with the files it changed.
    pub commits: Vec<(Sha, Vec<String>)>,
}

impl PullRecord {
    /// Every file the pull request changes, once each, in order.
    pub fn files(&self) -> Vec<String> {
        distinct(self.commits.iter().flat_map(|(_, f)| f))
    }

    /// The files changed after commit `base` up to `head` (all commits up to `head` when `base`
    /// is none of them, as after a force push); `None` when `head` is none of them.
    pub fn compare(&self, base: &str, head: &str) -> Option<Vec<String>> {
        let end = self.commits.iter().position(|(s, _)| s.as_str() == head)?;
        let start = self.commits[..end]
            .iter()
            .position(|(s, _)| s.as_str() == base)
            .map_or(0, |i| i + 1);
        Some(distinct(
            self.commits[start..=end].iter().flat_map(|(_, f)| f),
        ))
    }
}

fn distinct<'a>(files: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in files {
        if !out.contains(f) {
            out.push(f.clone());
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
pub struct StatusRecord {
    pub id: u64,
    pub state: String,
    pub description: String,
    pub environment: String,
    pub environment_url: String,
    pub log_url: String,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentRecord {
    pub id: u64,
    pub sha: Sha,
    pub ref_: String,
    pub task: String,
    pub environment: String,
    pub description: Option<String>,
    pub payload: Value,
    pub transient_environment: bool,
    pub production_environment: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Oldest first.
    pub statuses: Vec<StatusRecord>,
}

impl DeploymentRecord {
    pub fn latest_state(&self) -> Option<&str> {
        self.statuses.last().map(|s| s.state.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReactionRecord {
    pub id: u64,
    pub user: String,
    pub content: String,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentRecord {
    pub id: u64,
    pub issue: u64,
    pub body: String,
    pub user: String,
    /// Made with an installation token (shows as the App's bot).
    pub by_app: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub reactions: Vec<ReactionRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRunRecord {
    pub id: u64,
    pub sha: Sha,
    pub name: String,
    /// `queued`, `in_progress` or `completed`.
    pub status: String,
    pub conclusion: Option<String>,
    pub started_at: Timestamp,
    pub completed_at: Option<Timestamp>,
    /// Made through the API by the App (not by a test's seeding).
    pub by_app: bool,
    pub external_id: Option<String>,
    pub details_url: Option<String>,
    /// What it shows, as last written.
    pub output: Option<CheckOutputRecord>,
    /// Each write's status (and conclusion), oldest first: `queued`, `in_progress`,
    /// `completed/success`.
    pub steps: Vec<String>,
}

impl CheckRunRecord {
    /// A check run seeded by a test (not written through the API), `queued`.
    pub fn seeded(id: u64, sha: &Sha, name: &str, now: Timestamp) -> Self {
        Self {
            id,
            sha: sha.clone(),
            name: name.to_owned(),
            status: "queued".to_owned(),
            conclusion: None,
            started_at: now,
            completed_at: None,
            by_app: false,
            external_id: None,
            details_url: None,
            output: None,
            steps: vec!["queued".to_owned()],
        }
    }
}

/// A check run's `output`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOutputRecord {
    pub title: String,
    pub summary: String,
    pub text: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct RepoRecord {
    pub id: u64,
    pub installation: u64,
    pub default_branch: String,
    /// Branch name → head commit.
    pub refs: BTreeMap<String, Sha>,
    /// Every commit the repository has seen.
    pub shas: HashSet<Sha>,
    /// Refs a test made unknown (deployments on them get 422).
    pub forgotten: BTreeSet<String>,
    /// Refs behind the default branch (auto-merge answers 202).
    pub behind: BTreeSet<String>,
    pub pulls: BTreeMap<u64, PullRecord>,
    /// Lower-cased login → role.
    pub collaborators: BTreeMap<String, Role>,
    /// (ref, path) → text.
    pub files: BTreeMap<(String, String), String>,
    pub check_runs: Vec<CheckRunRecord>,
    pub deployments: Vec<DeploymentRecord>,
    pub comments: Vec<CommentRecord>,
    /// Environment name → id: made by the first deployment to it, gone when deleted.
    pub environments: BTreeMap<String, u64>,
}

impl RepoRecord {
    /// The commit a branch name or SHA designates, unless a test made the ref unknown.
    pub fn resolve(&self, r: &str) -> Option<Sha> {
        if self.forgotten.contains(r) {
            return None;
        }
        if let Some(sha) = self.refs.get(r) {
            return Some(sha.clone());
        }
        Sha::new(r).ok().filter(|s| self.shas.contains(s))
    }

    pub fn set_ref(&mut self, name: &str, sha: &Sha) {
        self.refs.insert(name.to_owned(), sha.clone());
        self.shas.insert(sha.clone());
        self.forgotten.remove(name);
        self.forgotten.remove(sha.as_str());
    }

    pub fn pull(&self, number: u64) -> &PullRecord {
        self.pulls
            .get(&number)
            .unwrap_or_else(|| panic!("no pull request #{number} in the stand-in"))
    }
}

#[derive(Debug, Clone)]
pub(crate) struct InstallationRecord {
    pub account: String,
    pub budget: Budget,
    /// The installation granted the App `administration: write` (deleting environments).
    pub administration: bool,
    /// The installation granted the App `checks: write` (the manifest asks for it; an
    /// installation made before it did may not have approved it).
    pub checks: bool,
}

/// A primary rate-limit window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub limit: u32,
    pub used: u32,
    pub reset: i64,
}

impl Budget {
    pub fn new(limit: u32, now: i64) -> Self {
        Self {
            limit,
            used: 0,
            reset: now + 3600,
        }
    }

    /// Gives back one request: a `304 Not Modified` does not count against the limit.
    pub fn refund(&mut self) {
        self.used = self.used.saturating_sub(1);
    }

    /// Counts one request; `false` when the window is exhausted.
    pub fn charge(&mut self, now: i64) -> bool {
        if now >= self.reset {
            self.used = 0;
            self.reset = now + 3600;
        }
        if self.used >= self.limit {
            return false;
        }
        self.used += 1;
        true
    }

    pub fn remaining(&self) -> u32 {
        self.limit.saturating_sub(self.used)
    }
}

/// The stand-in App's OAuth client id.
pub const TEST_OAUTH_CLIENT_ID: &str = "Iv23liSandcastleTest";
/// Its client secret (a test value, never a real one).
pub const TEST_OAUTH_CLIENT_SECRET: &str = "test-oauth-client-secret-0123456789";

/// A code the authorize page handed out.
#[derive(Debug, Clone)]
pub(crate) struct OAuthCode {
    pub login: String,
    pub redirect_uri: String,
}

impl Role {
    /// Whether the role may push (write, maintain, admin, or a custom role built on them).
    pub fn pushes(&self) -> bool {
        self.api_fields().0 != "read"
    }
}

#[derive(Debug, Clone)]
pub(crate) struct TokenRecord {
    pub installation: u64,
    pub serial: u32,
    pub expires_at: Timestamp,
}

#[derive(Debug)]
pub(crate) struct State {
    pub installations: BTreeMap<u64, InstallationRecord>,
    pub repos: BTreeMap<RepoName, RepoRecord>,
    pub tokens: HashMap<String, TokenRecord>,
    pub tokens_issued: u32,
    pub token_lifetime: Duration,
    pub rate_limit: u32,
    pub app_budget: Budget,
    pub log: CallLog,
    pub faults: Vec<FaultRule>,
    /// User-to-server tokens (OAuth sign-in) → login.
    pub user_tokens: HashMap<String, String>,
    /// Codes handed out by the authorize page, not exchanged yet.
    pub oauth_codes: HashMap<String, OAuthCode>,
    /// Who is signed in to github.com in "the browser" (the authorize page's user).
    pub browser_user: Option<String>,
    /// The App's OAuth client id and secret.
    pub oauth_client: (String, String),
    /// Manifests posted to the new-App page, by the code the browser was sent back with.
    pub manifest_codes: HashMap<String, serde_json::Value>,
    /// The webhook secret of the App the manifest flow made.
    pub created_webhook_secret: Option<String>,
    /// Tokens in archive download URLs (as codeload's), each for one repository's commit.
    pub archive_tokens: HashMap<String, (RepoName, Sha)>,
    next_id: u64,
    last_tick: i64,
    /// Stamp every change with the same second as the last one (`FakeGitHub::same_second`).
    pub frozen_clock: bool,
    /// The App's private key was deleted on GitHub: its JWTs are refused (tokens already minted
    /// keep working until they expire, as on GitHub).
    pub app_key_revoked: bool,
}

impl State {
    pub fn new(token_lifetime: Duration, rate_limit: u32) -> Self {
        Self {
            installations: BTreeMap::new(),
            repos: BTreeMap::new(),
            tokens: HashMap::new(),
            tokens_issued: 0,
            token_lifetime,
            rate_limit,
            app_budget: Budget::new(rate_limit, Timestamp::now().as_second()),
            log: CallLog::default(),
            faults: Vec::new(),
            user_tokens: HashMap::new(),
            oauth_codes: HashMap::new(),
            browser_user: None,
            oauth_client: (
                TEST_OAUTH_CLIENT_ID.to_owned(),
                TEST_OAUTH_CLIENT_SECRET.to_owned(),
            ),
            manifest_codes: HashMap::new(),
            created_webhook_secret: None,
            archive_tokens: HashMap::new(),
            next_id: 1_000_000,
            last_tick: 0,
            frozen_clock: false,
            app_key_revoked: false,
        }
    }

    /// A fresh object id (one sequence for every kind of object, so ids also order creation).
    pub fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The time stamped on a change: wall-clock seconds, as GitHub's `updated_at` has them —
    /// never going back, and the same for two changes within one second (or for every change
    /// while the clock is frozen).
    pub fn tick(&mut self) -> Timestamp {
        let wall = Timestamp::now().as_second();
        let now = if self.frozen_clock && self.last_tick > 0 {
            self.last_tick
        } else {
            wall.max(self.last_tick)
        };
        self.last_tick = now;
        Timestamp::from_second(now).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    pub fn repo(&self, repo: &RepoName) -> &RepoRecord {
        self.repos
            .get(repo)
            .unwrap_or_else(|| panic!("repository {repo} is not seeded in the stand-in"))
    }

    pub fn repo_mut(&mut self, repo: &RepoName) -> &mut RepoRecord {
        self.repos
            .get_mut(repo)
            .unwrap_or_else(|| panic!("repository {repo} is not seeded in the stand-in"))
    }
}

/// A stable number for a login (GitHub user ids are stable too).
pub(crate) fn user_id(login: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in login.to_ascii_lowercase().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    10_000 + h % 90_000_000
}

/// A made-up commit SHA derived from `seed` (for merge commits and base branches).
pub(crate) fn derived_sha(seed: &str) -> Sha {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(seed.as_bytes());
    Sha::new(&hex::encode(&digest[..20])).unwrap_or_else(|_| unreachable!("40 hex digits"))
}

/// GitHub's timestamp format: RFC 3339 in UTC, whole seconds.
pub(crate) fn ts(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}
