//! From a pull request event to desired state: which previews (one per Blueprint that covers the
//! repository, or the one the repository's `.github/sandcastle.yml` chose) should exist at which
//! commit, wait for a maintainer's approval (forks), or be torn down (as `domain::intent`s).
//! Pure: the caller supplies the Blueprints and the repository's configuration; writing the
//! result is `k8s::previews`.
//!
//! Triggers: with `trigger: auto`, opened, reopened, synchronize and ready_for_review deploy
//! non-draft pull requests from the repository itself, unless they carry the `no-preview`
//! label; `trigger: comment` waits for `/preview`. A push always moves a preview that exists
//! (someone asked for it), except a fork's, which stays on the commit a maintainer approved.
//! The `no-preview` label is state, not only an event: adding it takes the pull request's
//! previews down, any head-moving event still carrying it does too (a `labeled` delivery that
//! was lost is made good by the next push or resync), `/preview` is refused while it is there,
//! and removing it deploys again as if the pull request had just opened. The `preview-keep`
//! label holds previews to their longest life: while it is there a deploy's expiry is `maxTtl`
//! from creation, and adding it moves the previews there are (never creates one). Drafts follow the same rule: a draft is not deployed on
//! its own, converting a pull request to draft takes its previews down, and marking it ready for
//! review deploys again; a `/preview` on a draft deploys it on request (and pushes then move it).

use super::event::{PrAction, PullRequestEvent};
use super::repo_config::RepoConfig;
use sandcastle_crd::{AuthorClass, BlueprintSpec, ClassTrigger, TeardownReason};
use sandcastle_domain::authors::{self, Author};
use sandcastle_domain::intent::{
    Change, Intent, KEEP_LABEL, NO_PREVIEW_LABEL, Skipped, admits, preview_name,
};

/// The intents of a pull request event, and why Blueprints that cover the repository were
/// passed over. `config` is the repository's `.github/sandcastle.yml` from the base branch.
pub fn from_pull_request(
    ev: &PullRequestEvent,
    blueprints: &[(&str, &BlueprintSpec)],
    config: &RepoConfig,
) -> (Vec<Intent>, Vec<Skipped>) {
    let mut intents = Vec::new();
    let mut skipped = Vec::new();
    let no_preview_label = ev.labels.iter().any(|l| l == NO_PREVIEW_LABEL);
    let about_no_preview = ev.label.as_deref() == Some(NO_PREVIEW_LABEL);
    let keep = ev.labels.iter().any(|l| l == KEEP_LABEL);
    // Adding `preview-keep` moves the previews there are to their longest life, as a push would.
    let kept_now = ev.action == PrAction::Labeled && ev.label.as_deref() == Some(KEEP_LABEL);
    let moves_only = ev.action == PrAction::Synchronize || kept_now;
    // Removing it is recorded on the previews there are, and changes nothing else.
    let unkept_now = ev.action == PrAction::Unlabeled && ev.label.as_deref() == Some(KEEP_LABEL);
    for (name, spec) in blueprints
        .iter()
        .filter(|(_, s)| admits(s, &ev.repo, &ev.base.ref_))
    {
        let skip = |reason: &str| Skipped {
            blueprint: (*name).to_owned(),
            reason: reason.to_owned(),
        };
        let head_moved = match &ev.action {
            PrAction::Opened
            | PrAction::Reopened
            | PrAction::Synchronize
            | PrAction::ReadyForReview => true,
            PrAction::Unlabeled => about_no_preview,
            PrAction::Labeled => kept_now,
            _ => false,
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
                create: true,
            }),
            // Whatever the repository configuration chose then, its previews go.
            PrAction::Labeled if about_no_preview => Some(Change::Teardown {
                reason: TeardownReason::NoPreview,
                actor: Some(ev.sender.clone()),
                create: false,
            }),
            // Drafts get no automatic preview: converting to draft takes it down, marking the
            // pull request ready for review brings it back.
            PrAction::ConvertedToDraft => Some(Change::Teardown {
                reason: TeardownReason::Draft,
                actor: Some(ev.sender.clone()),
                create: false,
            }),
            PrAction::Unlabeled if unkept_now => Some(Change::Relabel),
            _ if !head_moved => None,
            // The label is state, not only an event: a push (or the resync's reading) that still
            // carries it takes down a preview whose `labeled` delivery never arrived.
            _ if no_preview_label && moves_only => Some(Change::Teardown {
                reason: TeardownReason::NoPreview,
                actor: None,
                create: false,
            }),
            _ if !config.selects(name) => {
                skipped.push(skip("not the blueprint chosen in .github/sandcastle.yml"));
                None
            }
            _ => {
                let class = Some(class_of(ev, spec));
                let off = off_reason(spec, class);
                let trigger = authors::trigger(spec, class, config.trigger(spec));
                let why_not = if ev.draft {
                    Some("draft pull request")
                } else if no_preview_label {
                    Some("labelled no-preview")
                } else if let Some(off) = &off {
                    Some(off.as_str())
                } else if trigger != ClassTrigger::Auto {
                    Some("deploys on /preview only")
                } else {
                    None
                };
                if ev.is_fork() && kept_now {
                    // A fork's preview stays as a maintainer approved it.
                    None
                } else if ev.is_fork() {
                    // Fork code is never deployed without a maintainer asking; a push does not
                    // move a preview a maintainer pinned to an earlier commit.
                    skipped.push(skip(
                        "pull request from a fork: a maintainer can comment /preview",
                    ));
                    Some(Change::AwaitApproval {
                        create: why_not.is_none(),
                        requested_by: ev.sender.clone(),
                    })
                } else if let (Some(why), false) = (why_not, moves_only) {
                    skipped.push(skip(why));
                    None
                } else {
                    Some(Change::Deploy {
                        create: why_not.is_none() && !kept_now,
                        requested_by: ev.sender.clone(),
                        ttl: if keep {
                            spec.max_ttl.get()
                        } else {
                            authors::ttl(spec, class, config.ttl(spec))
                        },
                        max_ttl: spec.max_ttl.get(),
                        class,
                    })
                }
            }
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
                undoes: undone_by(&ev.action, about_no_preview),
                opens: ev.action == PrAction::Opened,
                keep: Some(keep),
                change,
            });
        }
    }
    (intents, skipped)
}

/// Whether an event of `ev`'s kind can change any preview (so that it is worth recording): a
/// moved head, a close, a draft, the `no-preview` or `preview-keep` label. Decided from the event
/// alone, before any Blueprint or GitHub is asked.
pub fn may_act(ev: &PullRequestEvent) -> bool {
    let label = ev.label.as_deref();
    match ev.action {
        PrAction::Opened
        | PrAction::Reopened
        | PrAction::Synchronize
        | PrAction::ReadyForReview
        | PrAction::ConvertedToDraft
        | PrAction::Closed => true,
        PrAction::Labeled => label == Some(NO_PREVIEW_LABEL) || label == Some(KEEP_LABEL),
        PrAction::Unlabeled => label == Some(NO_PREVIEW_LABEL) || label == Some(KEEP_LABEL),
        PrAction::Edited { .. } => false,
    }
}

/// The teardown a pull request `action` reverses by its meaning (see `Intent::undoes`).
fn undone_by(action: &PrAction, about_no_preview: bool) -> Option<TeardownReason> {
    match action {
        PrAction::Reopened => Some(TeardownReason::Closed),
        PrAction::ReadyForReview => Some(TeardownReason::Draft),
        PrAction::Unlabeled if about_no_preview => Some(TeardownReason::NoPreview),
        _ => None,
    }
}

/// The class of `ev`'s author under `spec`'s `authors` rules.
pub fn class_of(ev: &PullRequestEvent, spec: &BlueprintSpec) -> AuthorClass {
    let author = Author {
        login: &ev.author,
        is_bot: ev.author_is_bot,
        association: ev.author_association,
        same_repository: !ev.is_fork(),
    };
    authors::classify(&spec.authors, &author, &ev.labels)
}

/// Why `class`'s pull requests get no preview from `spec`, when its rule says `off`.
pub fn off_reason(spec: &BlueprintSpec, class: Option<AuthorClass>) -> Option<String> {
    let class = class?;
    (spec.authors.rule(class).trigger == Some(ClassTrigger::Off)).then(|| {
        format!(
            "pull requests by {} get no preview (authors.{}.trigger: off)",
            class.words(),
            class.field()
        )
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::event::{BaseInfo, HeadInfo, PrState};
    use sandcastle_crd::Trigger;
    use sandcastle_domain::{PrNumber, RepoName, Sha};

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
            author_is_bot: false,
            before: None,
            changed_files: None,
            author_association: sandcastle_domain::authors::Association::Owner,
            sender: "octocat".into(),
            updated_at: "2026-11-29T12:00:00Z".parse().unwrap(),
            html_url: String::new(),
        }
    }

    fn none() -> RepoConfig {
        RepoConfig::default()
    }

    fn changes(ev: &PullRequestEvent, bps: &[(&str, &BlueprintSpec)]) -> Vec<Change> {
        from_pull_request(ev, bps, &none())
            .0
            .into_iter()
            .map(|i| i.change)
            .collect()
    }

    #[test]
    fn opened_deploys_for_every_covering_auto_blueprint() {
        let shop = spec(&["acme/shop"], Trigger::Auto);
        let all = spec(&["acme/*"], Trigger::Auto);
        let other = spec(&["acme/web"], Trigger::Auto);
        let (intents, skipped) = from_pull_request(
            &event(PrAction::Opened),
            &[("shop", &shop), ("all", &all), ("web", &other)],
            &none(),
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
    fn drafts_and_comment_blueprints_are_not_created() {
        let auto = spec(&["acme/shop"], Trigger::Auto);
        let mut draft = event(PrAction::Opened);
        draft.draft = true;
        let (intents, skipped) = from_pull_request(&draft, &[("shop", &auto)], &none());
        assert!(intents.is_empty());
        assert_eq!(skipped[0].reason, "draft pull request");
        draft.action = PrAction::ReadyForReview;
        draft.draft = false;
        assert!(matches!(
            changes(&draft, &[("shop", &auto)])[..],
            [Change::Deploy { create: true, .. }]
        ));

        let comment = spec(&["acme/shop"], Trigger::Comment);
        assert!(changes(&event(PrAction::Opened), &[("shop", &comment)]).is_empty());
        // A push still moves a preview someone asked for.
        assert!(matches!(
            changes(&event(PrAction::Synchronize), &[("shop", &comment)])[..],
            [Change::Deploy { create: false, .. }]
        ));
    }

    #[test]
    fn forks_wait_for_approval_and_never_deploy_on_their_own() {
        let auto = spec(&["acme/shop"], Trigger::Auto);
        let mut fork = event(PrAction::Opened);
        fork.head.repo = Some(RepoName::new("mallory/shop").unwrap());
        let waiting = |create| Change::AwaitApproval {
            create,
            requested_by: "octocat".into(),
        };
        assert_eq!(changes(&fork, &[("shop", &auto)]), [waiting(true)]);
        fork.head.repo = None;
        assert_eq!(
            changes(&fork, &[("shop", &auto)]),
            [waiting(true)],
            "deleted forks too"
        );
        fork.action = PrAction::Synchronize;
        assert_eq!(
            changes(&fork, &[("shop", &auto)]),
            [waiting(true)],
            "a fork push never deploys; it only moves what waits for approval"
        );
        fork.draft = true;
        assert_eq!(changes(&fork, &[("shop", &auto)]), [waiting(false)]);
        let comment = spec(&["acme/shop"], Trigger::Comment);
        fork.draft = false;
        assert_eq!(changes(&fork, &[("shop", &comment)]), [waiting(false)]);
    }

    #[test]
    fn the_no_preview_label() {
        let auto = spec(&["acme/shop"], Trigger::Auto);
        let mut ev = event(PrAction::Opened);
        ev.labels = vec!["bug".into(), NO_PREVIEW_LABEL.into()];
        let (intents, skipped) = from_pull_request(&ev, &[("shop", &auto)], &none());
        assert!(intents.is_empty());
        assert_eq!(skipped[0].reason, "labelled no-preview");
        // A push still carrying it takes a preview down (its `labeled` delivery may have been
        // lost); where there is none it leaves no tombstone.
        ev.action = PrAction::Synchronize;
        assert_eq!(
            changes(&ev, &[("shop", &auto)]),
            [Change::Teardown {
                reason: TeardownReason::NoPreview,
                actor: None,
                create: false
            }]
        );
        // Adding it takes existing previews down (and makes no tombstone where there is none).
        ev.action = PrAction::Labeled;
        ev.label = Some(NO_PREVIEW_LABEL.into());
        assert_eq!(
            changes(&ev, &[("shop", &auto)]),
            [Change::Teardown {
                reason: TeardownReason::NoPreview,
                actor: Some("octocat".into()),
                create: false
            }]
        );
        // Removing it deploys as if the pull request had just opened.
        ev.action = PrAction::Unlabeled;
        ev.labels = vec!["bug".into()];
        assert!(matches!(
            changes(&ev, &[("shop", &auto)])[..],
            [Change::Deploy { create: true, .. }]
        ));
        // Other labels change nothing.
        ev.label = Some("bug".into());
        assert!(changes(&ev, &[("shop", &auto)]).is_empty());
        ev.action = PrAction::Labeled;
        assert!(changes(&ev, &[("shop", &auto)]).is_empty());
    }

    #[test]
    fn each_author_class_follows_its_own_trigger() {
        let mut shop = spec(&["acme/shop"], Trigger::Auto);
        shop.authors = serde_json::from_value(serde_json::json!({
            "dependencyBots": {"trigger": "off"},
            "outsideContributors": {"trigger": "comment"},
            "agents": {"trigger": "auto", "ttl": "2h"},
            "agentLogins": ["devin-ai-integration"],
        }))
        .unwrap();
        let from = |login: &str, association, fork: bool| {
            let mut ev = event(PrAction::Opened);
            ev.author = login.into();
            ev.author_is_bot = login.ends_with("[bot]");
            ev.author_association = association;
            if fork {
                ev.head.repo = Some(RepoName::new("eve/shop").unwrap());
            }
            from_pull_request(&ev, &[("shop", &shop)], &none())
        };
        let by = |login: &str, association| from(login, association, false);
        use sandcastle_domain::authors::Association::{Member, Other};
        let (intents, skipped) = by("dependabot[bot]", Other);
        assert!(intents.is_empty());
        assert_eq!(
            skipped[0].reason,
            "pull requests by dependency bots get no preview (authors.dependencyBots.trigger: off)"
        );
        // An outside contributor's pull request comes from a fork: it waits for a maintainer,
        // and with `comment` not even the waiting comment is made on its own.
        let (intents, _) = from("eve", Other, true);
        assert!(matches!(
            intents[0].change,
            Change::AwaitApproval { create: false, .. }
        ));
        let (intents, _) = from("sam", Member, true);
        assert!(matches!(
            intents[0].change,
            Change::AwaitApproval { create: true, .. }
        ));
        // Whoever pushed a branch to the repository itself has write access: a member, even
        // when GitHub's association says CONTRIBUTOR.
        let (intents, _) = by("carol", Other);
        assert!(matches!(
            intents[0].change,
            Change::Deploy {
                create: true,
                class: Some(AuthorClass::Member),
                ..
            }
        ));
        let (intents, _) = by("maria", Member);
        assert!(matches!(
            intents[0].change,
            Change::Deploy {
                create: true,
                class: Some(AuthorClass::Member),
                ..
            }
        ));
        let (intents, _) = by("devin-ai-integration[bot]", Other);
        assert!(matches!(
            intents[0].change,
            Change::Deploy { create: true, class: Some(AuthorClass::Agent), ttl, .. }
                if ttl == Duration::from_secs(7200)
        ));
    }

    #[test]
    fn the_keep_label_holds_previews_to_their_longest_life() {
        let auto = spec(&["acme/shop"], Trigger::Auto);
        let comment = spec(&["acme/shop"], Trigger::Comment);
        let longest = auto.max_ttl.get();
        let deploy = |create, ttl| Change::Deploy {
            create,
            requested_by: "octocat".into(),
            ttl,
            max_ttl: longest,
            class: Some(AuthorClass::Member),
        };
        // Adding it moves the previews there are (never makes one), whatever the trigger.
        let mut ev = event(PrAction::Labeled);
        ev.label = Some(KEEP_LABEL.into());
        ev.labels = vec![KEEP_LABEL.into()];
        assert_eq!(changes(&ev, &[("shop", &auto)]), [deploy(false, longest)]);
        assert_eq!(
            changes(&ev, &[("shop", &comment)]),
            [deploy(false, longest)]
        );
        // While it is there, opening and pushing deploy for the longest life too.
        ev.action = PrAction::Opened;
        assert_eq!(changes(&ev, &[("shop", &auto)]), [deploy(true, longest)]);
        ev.action = PrAction::Synchronize;
        assert_eq!(changes(&ev, &[("shop", &auto)]), [deploy(true, longest)]);
        assert_eq!(
            changes(&ev, &[("shop", &comment)]),
            [deploy(false, longest)]
        );
        // Removed: the next push uses the TTL again (an expiry never moves earlier).
        ev.labels.clear();
        assert_eq!(
            changes(&ev, &[("shop", &auto)]),
            [deploy(true, auto.ttl.get())]
        );
        // A fork's preview stays as a maintainer approved it.
        ev.action = PrAction::Labeled;
        ev.labels = vec![KEEP_LABEL.into()];
        ev.head.repo = Some(RepoName::new("mallory/shop").unwrap());
        assert!(changes(&ev, &[("shop", &auto)]).is_empty());
    }

    #[test]
    fn converting_to_draft_takes_previews_down_until_ready_for_review() {
        let auto = spec(&["acme/shop"], Trigger::Auto);
        let mut ev = event(PrAction::ConvertedToDraft);
        ev.draft = true;
        assert_eq!(
            changes(&ev, &[("shop", &auto)]),
            [Change::Teardown {
                reason: TeardownReason::Draft,
                actor: Some("octocat".into()),
                create: false
            }]
        );
        // A push to the draft only moves a preview that exists (one asked for with /preview).
        ev.action = PrAction::Synchronize;
        assert!(matches!(
            changes(&ev, &[("shop", &auto)])[..],
            [Change::Deploy { create: false, .. }]
        ));
        ev.action = PrAction::ReadyForReview;
        ev.draft = false;
        assert!(matches!(
            changes(&ev, &[("shop", &auto)])[..],
            [Change::Deploy { create: true, .. }]
        ));
    }

    #[test]
    fn the_repository_configuration_chooses() {
        let shop = spec(&["acme/shop"], Trigger::Auto);
        let all = spec(&["acme/*"], Trigger::Auto);
        let config = RepoConfig {
            blueprint: Some("all".into()),
            trigger: None,
            ttl: Some(Duration::from_secs(3600)),
        };
        let (intents, skipped) = from_pull_request(
            &event(PrAction::Opened),
            &[("shop", &shop), ("all", &all)],
            &config,
        );
        assert_eq!(intents.len(), 1);
        assert_eq!(intents[0].blueprint, "all");
        assert!(matches!(
            intents[0].change,
            Change::Deploy { ttl, .. } if ttl == Duration::from_secs(3600)
        ));
        assert_eq!(skipped[0].blueprint, "shop");

        let comment_only = RepoConfig {
            trigger: Some(Trigger::Comment),
            ..RepoConfig::default()
        };
        let (intents, skipped) =
            from_pull_request(&event(PrAction::Opened), &[("shop", &shop)], &comment_only);
        assert!(intents.is_empty());
        assert_eq!(skipped[0].reason, "deploys on /preview only");
        // Closing takes down whatever exists, whatever the configuration says now.
        let (intents, _) = from_pull_request(
            &event(PrAction::Closed),
            &[("shop", &shop), ("all", &all)],
            &config,
        );
        assert_eq!(intents.len(), 2);
    }

    #[test]
    fn closed_tears_down_with_who_and_why() {
        let auto = spec(&["acme/shop"], Trigger::Auto);
        let mut merged = event(PrAction::Closed);
        merged.merged = true;
        merged.merged_by = Some("hubot".into());
        assert_eq!(
            changes(&merged, &[("shop", &auto)]),
            [Change::Teardown {
                reason: TeardownReason::Merged,
                actor: Some("hubot".into()),
                create: true
            }]
        );
        assert_eq!(
            changes(&event(PrAction::Closed), &[("shop", &auto)]),
            [Change::Teardown {
                reason: TeardownReason::Closed,
                actor: Some("octocat".into()),
                create: true
            }]
        );
    }

    #[test]
    fn base_branch_filter_and_owner_ambiguity() {
        let mut s = spec(&["acme/shop", "other/shop"], Trigger::Auto);
        s.base_branches = vec!["release".into()];
        assert!(changes(&event(PrAction::Opened), &[("bp", &s)]).is_empty());
        s.base_branches.clear();
        let (intents, _) = from_pull_request(&event(PrAction::Opened), &[("bp", &s)], &none());
        assert_eq!(intents[0].preview.as_str(), "bp-acme-shop-pr-42");
    }

    #[test]
    fn other_actions_change_nothing() {
        let auto = spec(&["acme/shop"], Trigger::Auto);
        for a in [
            PrAction::Labeled,
            PrAction::Unlabeled,
            PrAction::Edited {
                base_changed: false,
            },
        ] {
            assert!(changes(&event(a), &[("shop", &auto)]).is_empty());
        }
    }
}
