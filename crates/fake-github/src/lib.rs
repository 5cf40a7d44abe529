//! A local stand-in for GitHub's REST API and webhooks, for the integration tests and
//! `sandcastle demo`. It is a stateful fake behind real HTTP (127.0.0.1, any free port), in the
//! manner of rust-lang/bors' GitHub mock: it keeps installations, repositories, pull requests,
//! files, check runs, deployments, comments and reactions; checks App JWTs and installation tokens
//! the way GitHub does; answers with GitHub's status codes, bodies and `x-ratelimit-*` headers
//! (GITHUB.md); records every call so a test can fail on calls it never looked at; injects
//! faults; and turns state changes into the signed webhook deliveries GitHub would send, built
//! from the real payloads in `fixtures/github/`.
//!
//! It is not GitHub: only what Sandcastle uses is modelled, and it never talks to the network
//! beyond its own loopback socket.

mod auth;
mod calls;
mod faults;
mod json;
mod routes;
mod server;
mod state;
mod webhooks;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use jsonwebtoken::DecodingKey;
use tokio::net::TcpListener;
use tokio_util::sync::{CancellationToken, DropGuard};

pub use calls::{Call, CallAuth, Matcher, UncheckedCalls};
pub use faults::Fault;
pub use state::{
    CheckOutputRecord, CheckRunRecord, CommentRecord, DeploymentRecord, HeadRepo, PullRecord,
    ReactionRecord, Role, StatusRecord, TEST_OAUTH_CLIENT_ID, TEST_OAUTH_CLIENT_SECRET,
};
pub use webhooks::{Delivery, PrSpec, sign};

use json::AppIdentity;
use sandcastle_domain::{PrNumber, RepoName, Sha};
use server::Shared;
use state::{Budget, InstallationRecord, RepoRecord, State};

/// The App id of the checked-in test App.
pub const TEST_APP_ID: u64 = 2_010_729;
/// The checked-in test App's private key (PKCS#1 PEM). For tests and the demo only.
pub const TEST_APP_PRIVATE_KEY_PEM: &str = include_str!("../../../fixtures/keys/test-app.pem");
/// Its public key, which the stand-in verifies App JWTs with.
pub const TEST_APP_PUBLIC_KEY_PEM: &str = include_str!("../../../fixtures/keys/test-app.pub.pem");

/// How the stand-in is set up.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    pub app_id: u64,
    /// The App's slug; its bot is `<slug>[bot]`.
    pub app_slug: String,
    /// PEM public key App JWTs must verify against.
    pub app_public_key_pem: String,
    /// Lifetime of the installation tokens it issues (GitHub: one hour).
    pub token_lifetime: Duration,
    /// Requests per hour per installation (and for the App's own JWT calls).
    pub rate_limit: u32,
    /// `X-GitHub-Hook-ID` of the deliveries.
    pub hook_id: u64,
    /// The address it listens on (a free port of it): loopback, or an address pods reach (the
    /// real tier's host link) when Sandcastle runs in the cluster.
    pub listen: std::net::IpAddr,
}

impl FakeConfig {
    pub fn new(app_id: u64, app_public_key_pem: impl Into<String>) -> Self {
        Self {
            app_id,
            app_slug: "sandcastle".to_owned(),
            app_public_key_pem: app_public_key_pem.into(),
            token_lifetime: Duration::from_secs(3600),
            rate_limit: 5000,
            hook_id: 571_592_807,
            listen: std::net::Ipv4Addr::LOCALHOST.into(),
        }
    }

    /// The checked-in test App ([`TEST_APP_ID`], [`TEST_APP_PUBLIC_KEY_PEM`]).
    pub fn test_app() -> Self {
        Self::new(TEST_APP_ID, TEST_APP_PUBLIC_KEY_PEM)
    }
}

/// Why the stand-in could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the App public key is not an RSA PEM public key")]
    Key,
    #[error("could not listen on 127.0.0.1: {0}")]
    Bind(#[from] std::io::Error),
}

/// A handle on a running stand-in. Cheap to clone; the server stops when the last handle is
/// dropped or on [`shutdown`](Self::shutdown).
#[derive(Clone)]
pub struct FakeGitHub {
    shared: Arc<Shared>,
    cancel: CancellationToken,
    _guard: Arc<DropGuard>,
}

impl std::fmt::Debug for FakeGitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeGitHub")
            .field("url", &self.shared.url)
            .finish_non_exhaustive()
    }
}

impl FakeGitHub {
    /// Starts serving on 127.0.0.1 (a free port). Must be called inside a Tokio runtime.
    pub async fn start(config: FakeConfig) -> Result<Self, StartError> {
        let key = DecodingKey::from_rsa_pem(config.app_public_key_pem.as_bytes())
            .map_err(|_| StartError::Key)?;
        let listener = TcpListener::bind((config.listen, 0)).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let identity = AppIdentity {
            id: config.app_id,
            slug: config.app_slug.clone(),
        };
        let state = State::new(config.token_lifetime, config.rate_limit);
        let shared = Arc::new(Shared::new(state, key, identity, config.hook_id, url));
        let cancel = CancellationToken::new();
        server::serve(
            listener,
            shared.clone(),
            routes::router(shared.clone()),
            cancel.clone(),
        );
        Ok(Self {
            shared,
            _guard: Arc::new(cancel.clone().drop_guard()),
            cancel,
        })
    }

    /// Base URL for the client, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> &str {
        &self.shared.url
    }

    pub fn app_id(&self) -> u64 {
        self.shared.identity.id
    }

    /// The login of the App's bot user.
    pub fn bot_login(&self) -> String {
        self.shared.identity.bot_login()
    }

    /// Stops serving now (open connections are closed).
    pub fn shutdown(&self) {
        self.cancel.cancel();
    }

    /// While `on`, every change is stamped with the same `updated_at` second as the last one:
    /// changes GitHub makes within one second, made deterministic.
    pub fn same_second(&self, on: bool) {
        self.with(|st| st.frozen_clock = on);
    }

    /// The App's private key deleted on GitHub (`true`) or back: while revoked, every App JWT is
    /// answered 401 as GitHub does.
    pub fn revoke_app_key(&self, revoked: bool) {
        self.with(|st| st.app_key_revoked = revoked);
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.shared.lock())
    }

    // --- seeding -------------------------------------------------------------------------------

    /// Adds an installation on `account` (no-op if it exists).
    pub fn add_installation(&self, id: u64, account: &str) {
        self.with(|st| {
            let budget = Budget::new(st.rate_limit, Timestamp::now().as_second());
            st.installations
                .entry(id)
                .or_insert_with(|| InstallationRecord {
                    account: account.to_owned(),
                    budget,
                    administration: false,
                    checks: true,
                });
        });
    }

    /// The installation has not approved the App's `checks: write` (`false`), or has
    /// (`true`, the default): without it, check-run writes are answered 403.
    pub fn grant_checks(&self, installation: u64, granted: bool) {
        self.with(|st| {
            if let Some(i) = st.installations.get_mut(&installation) {
                i.checks = granted;
            }
        });
    }

    /// The check runs on `sha`, oldest first (those the App wrote and those a test seeded).
    pub fn check_runs(&self, repo: &RepoName, sha: &Sha) -> Vec<CheckRunRecord> {
        self.with(|st| {
            st.repo(repo)
                .check_runs
                .iter()
                .filter(|r| &r.sha == sha)
                .cloned()
                .collect()
        })
    }

    /// The installation accepts the App's request for `administration: write`.
    pub fn grant_administration(&self, installation: u64) {
        self.with(|st| {
            if let Some(i) = st.installations.get_mut(&installation) {
                i.administration = true;
            }
        });
    }

    /// `login` is signed in to GitHub in the browser: the OAuth authorize page signs them in.
    pub fn sign_in_to_github(&self, login: &str) {
        self.with(|st| st.browser_user = Some(login.to_owned()));
    }

    /// The webhook secret of the App the manifest flow made, once it made one.
    pub fn created_webhook_secret(&self) -> Option<String> {
        self.with(|st| st.created_webhook_secret.clone())
    }

    /// The App's OAuth client id and secret.
    pub fn oauth_client(&self) -> (String, String) {
        self.with(|st| st.oauth_client.clone())
    }

    /// The repository's environments, by name.
    pub fn environments(&self, repo: &RepoName) -> Vec<String> {
        self.with(|st| st.repo(repo).environments.keys().cloned().collect())
    }

    /// Adds a repository (default branch `main`) to an installation, creating the installation
    /// on the repository owner's account if needed.
    pub fn add_repo(&self, installation: u64, repo: &RepoName) {
        self.add_installation(installation, repo.owner());
        self.with(|st| {
            let id = st.id();
            let main = state::derived_sha(&format!("{repo}@main"));
            let mut rec = RepoRecord {
                id,
                installation,
                default_branch: "main".to_owned(),
                refs: Default::default(),
                shas: Default::default(),
                forgotten: Default::default(),
                behind: Default::default(),
                pulls: Default::default(),
                collaborators: Default::default(),
                files: Default::default(),
                check_runs: Vec::new(),
                deployments: Vec::new(),
                comments: Vec::new(),
                environments: std::collections::BTreeMap::new(),
            };
            rec.set_ref("main", &main);
            st.repos.insert(repo.clone(), rec);
        });
    }

    /// Points a branch at a commit.
    pub fn set_branch(&self, repo: &RepoName, branch: &str, sha: &Sha) {
        self.with(|st| st.repo_mut(repo).set_ref(branch, sha));
    }

    /// Gives `user` a role on the repository.
    pub fn set_role(&self, repo: &RepoName, user: &str, role: Role) {
        self.with(|st| {
            st.repo_mut(repo)
                .collaborators
                .insert(user.to_ascii_lowercase(), role);
        });
    }

    /// Stores a text file at `(ref_, path)`.
    pub fn put_file(&self, repo: &RepoName, ref_: &str, path: &str, text: &str) {
        self.with(|st| {
            st.repo_mut(repo).files.insert(
                (ref_.to_owned(), path.trim_matches('/').to_owned()),
                text.to_owned(),
            );
        });
    }

    /// Stores every file under the local directory `dir` at `(ref_, prefix/…)`, as a commit of
    /// the repository would hold them (text files only: what charts and overlays are made of).
    pub fn put_tree(&self, repo: &RepoName, ref_: &str, prefix: &str, dir: &std::path::Path) {
        let mut stack = vec![dir.to_owned()];
        while let Some(at) = stack.pop() {
            let entries =
                std::fs::read_dir(&at).unwrap_or_else(|e| panic!("reading {}: {e}", at.display()));
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let rel = path.strip_prefix(dir).unwrap_or(&path).to_string_lossy();
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{} is not text: {e}", path.display()));
                let at = format!("{}/{rel}", prefix.trim_matches('/'));
                self.put_file(repo, ref_, at.trim_start_matches('/'), &text);
            }
        }
    }

    /// Adds a check run that has not finished yet (`queued`).
    pub fn add_check_run(&self, repo: &RepoName, sha: &Sha, name: &str) {
        self.with(|st| {
            let id = st.id();
            let now = st.tick();
            let rec = st.repo_mut(repo);
            rec.shas.insert(sha.clone());
            rec.check_runs
                .push(CheckRunRecord::seeded(id, sha, name, now));
        });
    }

    /// Deletes the fork a PR comes from: its `head.repo` becomes null (no delivery is sent).
    pub fn delete_fork(&self, repo: &RepoName, number: PrNumber) {
        self.with(|st| {
            let pr = st
                .repo_mut(repo)
                .pulls
                .get_mut(&number.get())
                .unwrap_or_else(|| panic!("no pull request #{number} in {repo}"));
            assert!(
                matches!(pr.head_repo, HeadRepo::Fork(_)),
                "pull request #{number} does not come from a fork"
            );
            pr.head_repo = HeadRepo::Deleted;
        });
    }

    /// Marks a ref as behind the default branch: a deployment with `auto_merge` on gets 202.
    pub fn mark_behind(&self, repo: &RepoName, ref_: &str) {
        self.with(|st| st.repo_mut(repo).behind.insert(ref_.to_owned()));
    }

    /// Makes a branch or SHA unknown: deployments on it get 422.
    pub fn forget_ref(&self, repo: &RepoName, ref_: &str) {
        self.with(|st| st.repo_mut(repo).forgotten.insert(ref_.to_owned()));
    }

    /// Lifetime of tokens issued from now on.
    pub fn set_token_lifetime(&self, lifetime: Duration) {
        self.with(|st| st.token_lifetime = lifetime);
    }

    /// Starts a fresh rate-limit window of `limit` requests for an installation (0 exhausts it).
    pub fn set_rate_limit(&self, installation: u64, limit: u32) {
        self.with(|st| {
            if let Some(i) = st.installations.get_mut(&installation) {
                i.budget = Budget::new(limit, Timestamp::now().as_second());
            }
        });
    }

    /// Injects `fault` into the next `times` requests matching `matcher`.
    pub fn fail_next(&self, matcher: impl Into<Matcher>, times: u32, fault: Fault) {
        self.with(|st| {
            st.faults.push(faults::FaultRule {
                matcher: matcher.into(),
                remaining: times,
                fault,
            });
        });
    }

    /// Drops every fault not used up yet: GitHub answers normally again.
    pub fn clear_faults(&self) {
        self.with(|st| st.faults.clear());
    }

    // --- inspection ----------------------------------------------------------------------------

    pub fn pull(&self, repo: &RepoName, number: PrNumber) -> PullRecord {
        self.with(|st| st.repo(repo).pull(number.get()).clone())
    }

    /// Deployments of the repository, oldest first, each with its statuses.
    pub fn deployments(&self, repo: &RepoName) -> Vec<DeploymentRecord> {
        self.with(|st| st.repo(repo).deployments.clone())
    }

    /// Comments on a PR conversation, oldest first.
    pub fn comments(&self, repo: &RepoName, number: PrNumber) -> Vec<CommentRecord> {
        self.with(|st| {
            st.repo(repo)
                .comments
                .iter()
                .filter(|c| c.issue == number.get())
                .cloned()
                .collect()
        })
    }

    /// Installation tokens issued so far.
    pub fn tokens_issued(&self) -> u32 {
        self.with(|st| st.tokens_issued)
    }

    /// Every installation token issued so far (the secrets themselves, for tests that check
    /// none of them leaks).
    pub fn issued_tokens(&self) -> Vec<String> {
        self.with(|st| st.tokens.keys().cloned().collect())
    }

    // --- call log ------------------------------------------------------------------------------

    /// Every recorded call, in order of arrival.
    pub fn calls(&self) -> Vec<Call> {
        self.with(|st| st.log.all())
    }

    /// Removes and returns every recorded call (taken calls count as checked).
    pub fn take_calls(&self) -> Vec<Call> {
        self.with(|st| st.log.take())
    }

    /// Returns the calls matching `matcher` and marks them as checked.
    pub fn check(&self, matcher: impl Into<Matcher>) -> Vec<Call> {
        let m = matcher.into();
        self.with(|st| st.log.check(&m))
    }

    /// Calls matching `matcher`, past and future, never count as unexpected (e.g. token minting).
    pub fn allow(&self, matcher: impl Into<Matcher>) {
        let m = matcher.into();
        self.with(|st| st.log.allow(m));
    }

    /// Calls nobody checked yet.
    pub fn unchecked(&self) -> Vec<Call> {
        self.with(|st| st.log.unchecked())
    }

    /// `Err` listing the calls nobody checked.
    pub fn verify_all_checked(&self) -> Result<(), UncheckedCalls> {
        let left = self.unchecked();
        if left.is_empty() {
            Ok(())
        } else {
            Err(UncheckedCalls(left))
        }
    }

    /// Panics listing the calls nobody checked; a test harness calls this at the end of every
    /// test.
    #[track_caller]
    pub fn assert_all_checked(&self) {
        if let Err(e) = self.verify_all_checked() {
            panic!("{e}");
        }
    }

    /// Checks every matcher, then asserts that nothing else was called.
    #[track_caller]
    pub fn expect_only(&self, matchers: &[&str]) {
        for m in matchers {
            self.check(*m);
        }
        self.assert_all_checked();
    }
}
