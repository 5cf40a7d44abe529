//! From a pull request event to desired state: which previews (one per Blueprint that covers the
//! repository) should exist at which commit, or be torn down. Pure: the caller supplies the
//! Blueprints; writing the result is `k8s::previews`.

use std::time::Duration;

use jiff::Timestamp;

use super::event::{PrAction, PullRequestEvent};
use crate::domain::duration;
use crate::domain::naming::{self, PreviewIdentity};
use crate::domain::{NamespaceName, PrNumber, RepoName, Sha};
use crate::k8s::crd::{BlueprintSpec, TeardownReason, Trigger};

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
    pub change: Change,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Run the preview at `sha`. `create`: make it if it does not exist (otherwise only move an
    /// existing one, e.g. a push to a PR whose preview was asked for by comment).
    Deploy {
        create: bool,
        requested_by: String,
        ttl: Duration,
        max_ttl: Duration,
    },
    /// Take the preview down (PR merged or closed).
    Teardown {
        reason: TeardownReason,
        actor: Option<String>,
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
    spec.repositories.iter().any(|p| covers(p, repo))
        && (spec.base_branches.is_empty() || spec.base_branches.iter().any(|b| b == base))
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

/// The intents of a pull request event, and why Blueprints that cover the repository were
/// passed over.
pub fn from_pull_request(
    ev: &PullRequestEvent,
    blueprints: &[(&str, &BlueprintSpec)],
) -> (Vec<Intent>, Vec<Skipped>) {
    let mut intents = Vec::new();
    let mut skipped = Vec::new();
    for (name, spec) in blueprints
        .iter()
        .filter(|(_, s)| admits(s, &ev.repo, &ev.base.ref_))
    {
        let skip = |reason: &str| Skipped {
            blueprint: (*name).to_owned(),
            reason: reason.to_owned(),
        };
        let change = match &ev.action {
            PrAction::Closed => Some(Change::Teardown {
                reason: if ev.merged {
                    TeardownReason::Merged
                } else {
                    TeardownReason::Closed
                },
                actor: if ev.merged {
                    ev.merged_by.clone().or_else(|| Some(ev.sender.clone()))
                } else {
                    Some(ev.sender.clone())
                },
            }),
            PrAction::Opened
            | PrAction::Reopened
            | PrAction::Synchronize
            | PrAction::ReadyForReview => {
                if ev.is_fork() {
                    // Fork code is never deployed without a maintainer asking; a push does not
                    // move a preview a maintainer pinned to an earlier commit.
                    skipped.push(skip(
                        "pull request from a fork: a maintainer can comment /preview",
                    ));
                    None
                } else {
                    let auto = spec.trigger == Trigger::Auto && !ev.draft;
                    if !auto && ev.action != PrAction::Synchronize {
                        skipped.push(skip(if ev.draft {
                            "draft pull request"
                        } else {
                            "Blueprint deploys on /preview only"
                        }));
                        None
                    } else {
                        Some(Change::Deploy {
                            create: auto,
                            requested_by: ev.sender.clone(),
                            ttl: duration::parse_field(&spec.ttl)
                                .unwrap_or(Duration::from_secs(24 * 3600)),
                            max_ttl: duration::parse_field(&spec.max_ttl)
                                .unwrap_or(Duration::from_secs(168 * 3600)),
                        })
                    }
                }
            }
            _ => None,
        };
        if let Some(change) = change {
            intents.push(Intent {
                preview: preview_name(name, spec, &ev.repo, ev.number),
                blueprint: (*name).to_owned(),
                repo: ev.repo.clone(),
                pr: ev.number,
                sha: ev.head.sha.clone(),
                git_ref: ev.head.ref_.clone(),
                installation_id: ev.installation_id,
                event_time: ev.updated_at,
                change,
            });
        }
    }
    (intents, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::github::event::{BaseInfo, HeadInfo, PrState};

    fn spec(repos: &[&str], trigger: Trigger) -> BlueprintSpec {
        serde_json::from_value(serde_json::json!({
            "source": {"namespace": "shop-staging"},
            "repositories": repos,
            "trigger": if trigger == Trigger::Auto { "auto" } else { "comment" },
        }))
        .unwrap()
    }

    fn event(action: PrAction) -> PullRequestEvent {
        let repo = RepoName::new("acme/shop").unwrap();
        PullRequestEvent {
            action,
            repo: repo.clone(),
            number: PrNumber::new(42).unwrap(),
            installation_id: Some(7),
            head: HeadInfo {
                sha: Sha::new(&"a".repeat(40)).unwrap(),
                ref_: "feature".into(),
                repo: Some(repo.clone()),
            },
            base: BaseInfo {
                ref_: "main".into(),
                repo,
            },
            draft: false,
            state: PrState::Open,
            merged: false,
            merged_by: None,
            labels: vec![],
            label: None,
            author: "octocat".into(),
            sender: "octocat".into(),
            updated_at: "2026-11-29T12:00:00Z".parse().unwrap(),
            html_url: String::new(),
        }
    }

    #[test]
    fn opened_deploys_for_every_covering_auto_blueprint() {
        let shop = spec(&["acme/shop"], Trigger::Auto);
        let all = spec(&["acme/*"], Trigger::Auto);
        let other = spec(&["acme/web"], Trigger::Auto);
        let (intents, skipped) = from_pull_request(
            &event(PrAction::Opened),
            &[("shop", &shop), ("all", &all), ("web", &other)],
        );
        let names: Vec<_> = intents.iter().map(|i| i.preview.as_str()).collect();
        assert_eq!(names, ["shop-pr-42", "all-shop-pr-42"]);
        assert!(skipped.is_empty());
        assert!(matches!(
            intents[0].change,
            Change::Deploy { create: true, .. }
        ));
    }

    #[test]
    fn drafts_forks_and_comment_blueprints_are_not_created() {
        let auto = spec(&["acme/shop"], Trigger::Auto);
        let mut draft = event(PrAction::Opened);
        draft.draft = true;
        let (intents, skipped) = from_pull_request(&draft, &[("shop", &auto)]);
        assert!(intents.is_empty());
        assert_eq!(skipped[0].reason, "draft pull request");

        let mut fork = event(PrAction::Opened);
        fork.head.repo = Some(RepoName::new("mallory/shop").unwrap());
        assert!(from_pull_request(&fork, &[("shop", &auto)]).0.is_empty());
        fork.head.repo = None;
        assert!(
            from_pull_request(&fork, &[("shop", &auto)]).0.is_empty(),
            "deleted forks too"
        );
        fork.action = PrAction::Synchronize;
        assert!(
            from_pull_request(&fork, &[("shop", &auto)]).0.is_empty(),
            "a fork push never moves a preview"
        );

        let comment = spec(&["acme/shop"], Trigger::Comment);
        assert!(
            from_pull_request(&event(PrAction::Opened), &[("shop", &comment)])
                .0
                .is_empty()
        );
        // A push still moves a preview someone asked for.
        let (intents, _) = from_pull_request(&event(PrAction::Synchronize), &[("shop", &comment)]);
        assert!(matches!(
            intents[0].change,
            Change::Deploy { create: false, .. }
        ));
    }

    #[test]
    fn closed_tears_down_with_who_and_why() {
        let auto = spec(&["acme/shop"], Trigger::Auto);
        let mut merged = event(PrAction::Closed);
        merged.merged = true;
        merged.merged_by = Some("hubot".into());
        let (intents, _) = from_pull_request(&merged, &[("shop", &auto)]);
        assert_eq!(
            intents[0].change,
            Change::Teardown {
                reason: TeardownReason::Merged,
                actor: Some("hubot".into())
            }
        );
        let (intents, _) = from_pull_request(&event(PrAction::Closed), &[("shop", &auto)]);
        assert_eq!(
            intents[0].change,
            Change::Teardown {
                reason: TeardownReason::Closed,
                actor: Some("octocat".into())
            }
        );
    }

    #[test]
    fn base_branch_filter_and_owner_ambiguity() {
        let mut s = spec(&["acme/shop", "other/shop"], Trigger::Auto);
        s.base_branches = vec!["release".into()];
        assert!(
            from_pull_request(&event(PrAction::Opened), &[("bp", &s)])
                .0
                .is_empty()
        );
        s.base_branches.clear();
        let (intents, _) = from_pull_request(&event(PrAction::Opened), &[("bp", &s)]);
        assert_eq!(intents[0].preview.as_str(), "bp-acme-shop-pr-42");
    }

    #[test]
    fn other_actions_change_nothing() {
        let auto = spec(&["acme/shop"], Trigger::Auto);
        for a in [
            PrAction::Labeled,
            PrAction::Unlabeled,
            PrAction::ConvertedToDraft,
            PrAction::Edited {
                base_changed: false,
            },
        ] {
            assert!(
                from_pull_request(&event(a), &[("shop", &auto)])
                    .0
                    .is_empty()
            );
        }
    }
}
