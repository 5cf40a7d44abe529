//! Intents: a change of desired state for one preview (deploy a commit, wait for a fork's
//! approval, tear down), as every entry point expresses it before it is written; and which
//! Blueprints cover a repository, which names a preview. Pure.

use std::time::Duration;

use jiff::Timestamp;

use super::naming::{self, PreviewIdentity};
use super::{NamespaceName, PrNumber, RepoName, Sha};
use sandcastle_crd::{BlueprintSpec, TeardownReason};

/// A change of desired state for one preview.
#[derive(Debug, Clone, PartialEq)]
pub struct Intent {
    pub preview: NamespaceName,
    pub blueprint: String,
    pub repo: RepoName,
    pub pr: PrNumber,
    pub sha: Sha,
    pub git_ref: String,
    pub installation_id: Option<u64>,
    /// GitHub's `updated_at` of the event: older events than the one last applied are dropped.
    pub event_time: Timestamp,
    /// The teardown this event reverses by its meaning (a reopen reverses a close, removing
    /// `no-preview` its adding, ready for review a conversion to draft): it wins over that
    /// teardown when both carry the same `updated_at`, which has whole seconds — the reversal
    /// cannot have happened first.
    pub undoes: Option<TeardownReason>,
    /// The pull request's `opened`, its first event: whatever was applied at the same second
    /// (`updated_at` has whole seconds) came after it, so it loses that tie.
    pub opens: bool,
    /// Whether the pull request carries the `preview-keep` label, as the event says (its
    /// labels); `None`: not known here, left as it is.
    pub keep: Option<bool>,
    pub change: Change,
}

/// The label that keeps a pull request from being deployed automatically.
pub const NO_PREVIEW_LABEL: &str = "no-preview";
/// The label that holds a pull request's previews to the longest life their Blueprint allows
/// (`maxTtl` from creation).
pub const KEEP_LABEL: &str = "preview-keep";

#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Run the preview at `sha`. `create`: make it if it does not exist (otherwise only move an
    /// existing one, e.g. a push to a PR whose preview was asked for by comment).
    Deploy {
        create: bool,
        requested_by: String,
        ttl: Duration,
        max_ttl: Duration,
        /// The pull request author's class under the Blueprint's `authors` rules.
        class: Option<sandcastle_crd::AuthorClass>,
    },
    /// A fork's head is `sha`: a preview nobody approved yet waits at it (`create`: make one if
    /// there is none); a preview a maintainer approved stays pinned where it is.
    AwaitApproval { create: bool, requested_by: String },
    /// Record the pull request's labels only (`preview-keep` removed): nothing deployed, no
    /// activity.
    Relabel,
    /// Take the preview down (PR merged or closed, `no-preview` added). `create`: leave a
    /// tombstone even if there is no preview, so that late deliveries cannot make one.
    Teardown {
        reason: TeardownReason,
        actor: Option<String>,
        create: bool,
    },
}

/// Why a Blueprint covering the repository produced no intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub blueprint: String,
    pub reason: String,
}

/// Whether `pattern` (`owner/name` or `owner/*`) covers `repo`.
fn covers(pattern: &str, repo: &RepoName) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    match pattern.split_once('/') {
        Some((owner, "*")) => owner == repo.owner(),
        _ => pattern == repo.as_str(),
    }
}

/// Whether a Blueprint admits pull requests from `repo` into `base`.
pub fn admits(spec: &BlueprintSpec, repo: &RepoName, base: &str) -> bool {
    covers_repo(spec, repo)
        && (spec.base_branches.is_empty() || spec.base_branches.iter().any(|b| b == base))
}

/// Whether a Blueprint lists `repo` (into whichever base branch).
pub fn covers_repo(spec: &BlueprintSpec, repo: &RepoName) -> bool {
    spec.repositories.iter().any(|p| covers(p, repo))
}

/// Whether another repository with the same name but another owner may use the Blueprint, so
/// that the owner must be part of the preview's name.
fn owner_ambiguous(spec: &BlueprintSpec, repo: &RepoName) -> bool {
    spec.repositories
        .iter()
        .any(|p| match p.to_ascii_lowercase().split_once('/') {
            Some((owner, name)) => owner != repo.owner() && (name == repo.name() || name == "*"),
            None => false,
        })
}

/// The preview name of `repo`'s PR `pr` under Blueprint `name`.
pub fn preview_name(
    blueprint: &str,
    spec: &BlueprintSpec,
    repo: &RepoName,
    pr: PrNumber,
) -> NamespaceName {
    naming::preview_name(PreviewIdentity {
        blueprint,
        repo,
        pr,
        owner_ambiguous: owner_ambiguous(spec, repo),
    })
}
