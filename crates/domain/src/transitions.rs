//! How a preview's desired state changes: a new preview from an intent, an existing one moved,
//! woken, brought back from a tombstone (as a new incarnation) or marked for teardown — in event
//! order, never revived by an event older than what it already holds. Pure: the write loop
//! (`k8s::previews`) reads, asks these functions what to write, and writes.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::intent::{Change, Intent};
use super::lifecycle;
use sandcastle_crd::labels::{
    KEEP, LAST_ACTIVITY, MANAGED_BY, MANAGER, PR, PREVIEW, REDEPLOY, REPO,
};
use sandcastle_crd::{
    Interface, PreviewEnvironment, PreviewEnvironmentSpec, Requester, RequesterKind, Teardown,
    TeardownReason,
};

/// What applying an intent did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Updated,
    /// Already in that state.
    Unchanged,
    /// This delivery was applied before.
    Duplicate,
    /// Older than the last event applied, or the preview was torn down after it: dropped.
    Stale,
    /// Nothing to move (the preview does not exist and the intent does not create one).
    Skipped,
    /// The resource is being deleted; the delivery should be retried later.
    Deleting,
    /// Concurrent writers kept winning; the delivery should be retried later.
    Contended,
    /// Destroyed with `/preview destroy`: only another `/preview` brings it back.
    Destroyed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Duplicate => "duplicate",
            Self::Stale => "stale",
            Self::Skipped => "skipped",
            Self::Deleting => "deleting",
            Self::Contended => "contended",
            Self::Destroyed => "destroyed",
        }
    }
}

pub fn expiry(now: Timestamp, ttl: Duration) -> Time {
    Time(
        now.checked_add(jiff::SignedDuration::try_from(ttl).unwrap_or(jiff::SignedDuration::ZERO))
            .unwrap_or(now),
    )
}

/// Record activity on `pe` at `now` (pushes, commands, API calls: whatever should keep it
/// running). The controller stops a preview after `stopAfterIdle` without any.
pub fn touch(pe: &mut PreviewEnvironment, now: Timestamp) {
    pe.annotations_mut()
        .insert(LAST_ACTIVITY.to_owned(), now.to_string());
}

/// Record whether the pull request carries `preview-keep` (`keep`, when known) as the
/// preview's `sandcastle.dev/keep` label.
pub fn set_keep(pe: &mut PreviewEnvironment, keep: Option<bool>) {
    match keep {
        Some(true) => {
            pe.labels_mut().insert(KEEP.to_owned(), "true".to_owned());
        }
        Some(false) => {
            pe.labels_mut().remove(KEEP);
        }
        None => {}
    }
}

/// The expiry after activity at `now`: `now + ttl`, never past creation + `max_ttl`, never
/// earlier than it already is.
pub fn extended_expiry(
    pe: &PreviewEnvironment,
    now: Timestamp,
    ttl: Duration,
    max_ttl: Duration,
) -> Time {
    let created = pe.creation_timestamp().map_or(now, |t| t.0);
    Time(lifecycle::expires_after_activity(
        created,
        pe.spec.expires_at.as_ref().map(|t| t.0),
        now,
        ttl,
        max_ttl,
    ))
}

pub fn new_preview(intent: &Intent, now: Timestamp) -> PreviewEnvironment {
    let class = match &intent.change {
        Change::Deploy { class, .. } => *class,
        _ => None,
    };
    let (requested_by, expires_at, teardown) = match &intent.change {
        Change::Deploy {
            requested_by, ttl, ..
        } => (requested_by.clone(), Some(expiry(now, *ttl)), None),
        // Nothing runs until someone approves, so nothing expires yet either.
        Change::AwaitApproval { requested_by, .. } => (requested_by.clone(), None, None),
        // Labels alone make no preview (`apply` does not create for them).
        Change::Relabel => ("github".into(), None, None),
        Change::Teardown { reason, actor, .. } => (
            actor.clone().unwrap_or_else(|| "github".into()),
            None,
            Some(Teardown {
                reason: *reason,
                actor: actor.clone(),
                via: Some(Interface::PullRequest),
                at: Time(intent.event_time),
            }),
        ),
    };
    let mut pe = PreviewEnvironment::new(
        intent.preview.as_str(),
        PreviewEnvironmentSpec {
            blueprint: intent.blueprint.clone(),
            repository: intent.repo.to_string(),
            pull_request: Some(intent.pr.get()),
            git_ref: intent.git_ref.clone(),
            sha: intent.sha.to_string(),
            installation_id: intent.installation_id,
            requested_by: Requester {
                kind: RequesterKind::GithubUser,
                name: requested_by,
            },
            expires_at,
            stopped: false,
            pinned: false,
            awaiting_approval: matches!(intent.change, Change::AwaitApproval { .. }),
            teardown,
            pr_updated_at: Some(Time(intent.event_time)),
            adopts: None,
            incarnation: 0,
            author_class: class,
            shares: Vec::new(),
        },
    );
    touch(&mut pe, now);
    set_keep(&mut pe, intent.keep);
    pe.labels_mut().extend([
        (MANAGED_BY.to_owned(), MANAGER.to_owned()),
        (PREVIEW.to_owned(), intent.preview.to_string()),
        (
            REPO.to_owned(),
            crate::naming::repo_label_value(&intent.repo),
        ),
        (PR.to_owned(), intent.pr.to_string()),
    ]);
    pe
}

/// Whether an event may bring back a torn-down preview: only one that would create a preview (a
/// reopen, removing `no-preview`, ready for review) and is newer than every event applied to the
/// preview (`last`: the teardown's own and any later one) — or of the same second as the
/// teardown it reverses by its meaning (`undoes`), since GitHub's times have whole seconds and a
/// reopen cannot come before its close — and for one someone destroyed only a new `/preview`
/// (which does not come this way).
pub fn may_revive(
    t: &Teardown,
    last: Option<Timestamp>,
    create: bool,
    event_time: Timestamp,
    undoes: Option<TeardownReason>,
) -> Result<(), Outcome> {
    if t.reason == TeardownReason::Destroyed {
        return Err(Outcome::Destroyed);
    }
    if !create {
        return Err(Outcome::Skipped);
    }
    let newest = last.map_or(t.at.0, |l| l.max(t.at.0));
    let reverses = undoes == Some(t.reason) && newest == t.at.0;
    if event_time < newest || (event_time == newest && !reverses) {
        return Err(Outcome::Stale);
    }
    Ok(())
}

/// Whether `intent` happened before the last event applied to its preview: an older time, or
/// the same second for the pull request's `opened`, which nothing can precede.
fn comes_before(intent: &Intent, last: Option<Timestamp>) -> bool {
    last.is_some_and(|l| intent.event_time < l || (intent.opens && intent.event_time == l))
}

/// Bring a torn-down preview back as a new incarnation: the controller takes down whatever the
/// old one left and rolls the new one out from scratch. Share links of the old one open
/// nothing of the new one.
pub fn revive(next: &mut PreviewEnvironment) {
    next.spec.teardown = None;
    next.spec.incarnation = next.spec.incarnation.saturating_add(1);
    next.spec.shares.clear();
}

/// Change `pe` as `intent` asks. Returns `None` when nothing should be written.
pub fn change(
    pe: &PreviewEnvironment,
    intent: &Intent,
    now: Timestamp,
) -> Result<PreviewEnvironment, Outcome> {
    let last = pe.spec.pr_updated_at.as_ref().map(|t| t.0);
    let mut next = pe.clone();
    match &intent.change {
        Change::Deploy {
            max_ttl,
            ttl,
            create,
            class,
            ..
        } => {
            next.spec.author_class = class.or(pe.spec.author_class);
            if let Some(t) = &pe.spec.teardown {
                may_revive(t, last, *create, intent.event_time, intent.undoes)?;
                revive(&mut next);
            } else if comes_before(intent, last) {
                return Err(Outcome::Stale);
            }
            next.spec.sha = intent.sha.to_string();
            next.spec.git_ref = intent.git_ref.clone();
            next.spec.installation_id = intent.installation_id.or(pe.spec.installation_id);
            // Activity keeps a preview alive.
            next.spec.expires_at = Some(extended_expiry(pe, now, *ttl, *max_ttl));
            // A push is activity, and wakes a stopped preview.
            next.spec.stopped = false;
            touch(&mut next, now);
        }
        Change::AwaitApproval { create, .. } => {
            if let Some(t) = &pe.spec.teardown {
                may_revive(t, last, *create, intent.event_time, intent.undoes)?;
                // Reopened: back to waiting for someone to approve the head.
                revive(&mut next);
                next.spec.pinned = false;
                next.spec.awaiting_approval = true;
                next.spec.expires_at = None;
            } else if comes_before(intent, last) {
                return Err(Outcome::Stale);
            }
            // A pinned preview stays on the approved commit; one still waiting follows the head.
            if next.spec.awaiting_approval {
                next.spec.sha = intent.sha.to_string();
                next.spec.git_ref = intent.git_ref.clone();
            }
            next.spec.installation_id = intent.installation_id.or(pe.spec.installation_id);
        }
        Change::Relabel => {
            if pe.spec.teardown.is_some() {
                return Err(Outcome::Unchanged);
            } else if comes_before(intent, last) {
                return Err(Outcome::Stale);
            }
        }
        Change::Teardown { reason, actor, .. } => {
            if pe.spec.teardown.is_some() {
                return Err(Outcome::Unchanged);
            }
            if last.is_some_and(|l| intent.event_time < l) {
                return Err(Outcome::Stale);
            }
            next.spec.teardown = Some(Teardown {
                reason: *reason,
                actor: actor.clone(),
                via: Some(Interface::PullRequest),
                at: Time(intent.event_time),
            });
        }
    }
    if last.is_none_or(|l| intent.event_time > l) {
        next.spec.pr_updated_at = Some(Time(intent.event_time));
    }
    if !matches!(intent.change, Change::Teardown { .. }) {
        set_keep(&mut next, intent.keep);
    }
    if next.spec == pe.spec && next.labels() == pe.labels() {
        return Err(Outcome::Unchanged);
    }
    Ok(next)
}

/// `/preview` (and the API's redeploy): run `intent` now, creating the preview, bringing it
/// back from a tombstone (a new incarnation), waking it, and starting a new rollout even at an
/// unchanged commit (`token`, kept in the `redeploy` annotation, is part of the plan's hash).
/// `pinned`: a fork's commit, which later pushes do not move. `None` when `intent` is no deploy.
pub fn deploy_now(
    current: Option<&PreviewEnvironment>,
    intent: &Intent,
    pinned: bool,
    token: &str,
    now: Timestamp,
) -> Option<PreviewEnvironment> {
    let Change::Deploy {
        requested_by,
        ttl,
        max_ttl,
        class,
        ..
    } = &intent.change
    else {
        return None;
    };
    let Some(pe) = current else {
        let mut pe = new_preview(intent, now);
        pe.spec.pinned = pinned;
        pe.annotations_mut()
            .insert(REDEPLOY.to_owned(), token.to_owned());
        return Some(pe);
    };
    let mut next = pe.clone();
    if pe.spec.teardown.is_some() {
        revive(&mut next);
    }
    let spec = &mut next.spec;
    spec.sha = intent.sha.to_string();
    spec.git_ref = intent.git_ref.clone();
    spec.installation_id = intent.installation_id.or(pe.spec.installation_id);
    spec.pinned = pinned;
    spec.author_class = class.or(pe.spec.author_class);
    spec.awaiting_approval = false;
    spec.stopped = false;
    spec.requested_by = Requester {
        kind: RequesterKind::GithubUser,
        name: requested_by.clone(),
    };
    spec.expires_at = Some(if pe.spec.teardown.is_some() {
        expiry(now, *ttl)
    } else {
        extended_expiry(pe, now, *ttl, *max_ttl)
    });
    if pe
        .spec
        .pr_updated_at
        .as_ref()
        .is_none_or(|l| intent.event_time > l.0)
    {
        spec.pr_updated_at = Some(Time(intent.event_time));
    }
    next.annotations_mut()
        .insert(REDEPLOY.to_owned(), token.to_owned());
    touch(&mut next, now);
    Some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NamespaceName, PrNumber, RepoName, Sha};

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn intent(change: Change, event_time: &str) -> Intent {
        Intent {
            preview: NamespaceName::new("shop-pr-7").unwrap(),
            blueprint: "shop".into(),
            repo: RepoName::new("acme/shop").unwrap(),
            pr: PrNumber::new(7).unwrap(),
            sha: Sha::new(&"b".repeat(40)).unwrap(),
            git_ref: "feature".into(),
            installation_id: Some(1),
            event_time: at(event_time),
            undoes: None,
            opens: false,
            keep: None,
            change,
        }
    }

    fn deploy(create: bool) -> Change {
        Change::Deploy {
            create,
            requested_by: "octocat".into(),
            ttl: Duration::from_secs(3600),
            max_ttl: Duration::from_secs(7 * 86_400),
            class: None,
        }
    }

    fn closed(at_time: &str) -> Teardown {
        Teardown {
            reason: TeardownReason::Closed,
            actor: Some("octocat".into()),
            via: Some(Interface::PullRequest),
            at: Time(at(at_time)),
        }
    }

    #[test]
    fn only_a_newer_creating_event_revives_a_tombstone() {
        let t = closed("2026-11-29T12:00:00Z");
        let later = at("2026-11-29T12:00:05Z");
        assert_eq!(may_revive(&t, None, true, later, None), Ok(()));
        assert_eq!(
            may_revive(&t, None, false, later, None),
            Err(Outcome::Skipped)
        );
        assert_eq!(
            may_revive(&t, None, true, t.at.0, None),
            Err(Outcome::Stale)
        );
        // Older than an event applied after the teardown: stale too.
        let newest = Some(at("2026-11-29T12:00:10Z"));
        assert_eq!(
            may_revive(&t, newest, true, later, None),
            Err(Outcome::Stale)
        );
        let destroyed = Teardown {
            reason: TeardownReason::Destroyed,
            ..t
        };
        assert_eq!(
            may_revive(&destroyed, None, true, later, None),
            Err(Outcome::Destroyed)
        );
    }

    #[test]
    fn a_reversal_in_the_same_second_as_its_teardown_wins() {
        let t = closed("2026-11-29T12:00:00Z");
        let same = t.at.0;
        let reopen = Some(TeardownReason::Closed);
        assert_eq!(may_revive(&t, Some(same), true, same, reopen), Ok(()));
        // Only the teardown it reverses: ready for review does not undo a close.
        assert_eq!(
            may_revive(&t, Some(same), true, same, Some(TeardownReason::Draft)),
            Err(Outcome::Stale)
        );
        // Never an older one, and never past a later event.
        let before = at("2026-11-29T11:59:59Z");
        assert_eq!(
            may_revive(&t, Some(same), true, before, reopen),
            Err(Outcome::Stale)
        );
        let newer = Some(at("2026-11-29T12:00:01Z"));
        assert_eq!(
            may_revive(&t, newer, true, same, reopen),
            Err(Outcome::Stale)
        );

        let now = at("2026-11-29T12:00:30Z");
        let mut pe = new_preview(&intent(deploy(true), "2026-11-29T11:00:00Z"), now);
        pe.spec.teardown = Some(t.clone());
        pe.spec.pr_updated_at = Some(t.at);
        let mut reopened = intent(deploy(true), "2026-11-29T12:00:00Z");
        reopened.undoes = reopen;
        let next = change(&pe, &reopened, now).unwrap();
        assert!(next.spec.teardown.is_none());
        assert_eq!(next.spec.incarnation, 1);
    }

    #[test]
    fn an_opened_of_the_same_second_as_a_push_already_applied_is_stale() {
        let now = at("2026-11-29T12:00:30Z");
        let same = "2026-11-29T12:00:00Z";
        let pushed = intent(deploy(true), same);
        let pe = new_preview(&pushed, now);
        let mut opened = intent(deploy(true), same);
        opened.opens = true;
        opened.sha = Sha::new(&"a".repeat(40)).unwrap();
        assert_eq!(change(&pe, &opened, now).err(), Some(Outcome::Stale));
        // A push of the same second as one applied still moves the preview.
        let mut again = intent(deploy(true), same);
        again.sha = Sha::new(&"c".repeat(40)).unwrap();
        assert_eq!(change(&pe, &again, now).unwrap().spec.sha, "c".repeat(40));
    }

    #[test]
    fn a_revived_preview_is_a_new_incarnation() {
        let now = at("2026-11-29T12:00:30Z");
        let opened = intent(deploy(true), "2026-11-29T12:00:00Z");
        let mut pe = new_preview(&opened, now);
        assert_eq!(pe.spec.incarnation, 0);
        pe.spec.teardown = Some(closed("2026-11-29T12:00:10Z"));
        pe.spec.pr_updated_at = Some(Time(at("2026-11-29T12:00:10Z")));

        let reopened = intent(deploy(true), "2026-11-29T12:00:20Z");
        pe.spec.shares.push(sandcastle_crd::ShareLink {
            id: "0123456789abcdef".to_owned(),
            label: None,
            created_by: "github:alice".to_owned(),
            created_at: Time(at("2026-11-29T12:00:05Z")),
            expires_at: Time(at("2026-11-30T12:00:05Z")),
        });
        let next = change(&pe, &reopened, now).unwrap();
        assert_eq!(next.spec.incarnation, 1);
        assert!(next.spec.teardown.is_none());
        assert!(next.spec.shares.is_empty(), "the old incarnation's links");
        assert_eq!(
            next.spec.pr_updated_at,
            Some(Time(at("2026-11-29T12:00:20Z")))
        );

        // A push to a live preview is the same incarnation.
        let pushed = intent(deploy(false), "2026-11-29T12:00:25Z");
        assert_eq!(change(&next, &pushed, now).unwrap().spec.incarnation, 1);
        // An older reopen replayed after the close changes nothing.
        let replayed = intent(deploy(true), "2026-11-29T12:00:05Z");
        assert_eq!(change(&pe, &replayed, now).unwrap_err(), Outcome::Stale);
    }

    #[test]
    fn a_push_moves_wakes_and_keeps_a_preview_alive() {
        let now = at("2026-11-29T12:00:30Z");
        let mut pe = new_preview(&intent(deploy(true), "2026-11-29T12:00:00Z"), now);
        pe.spec.stopped = true;
        let old_expiry = pe.spec.expires_at.clone();
        let later = at("2026-11-29T13:00:00Z");
        let mut push = intent(deploy(false), "2026-11-29T12:59:00Z");
        push.sha = Sha::new(&"c".repeat(40)).unwrap();
        let next = change(&pe, &push, later).unwrap();
        assert_eq!(next.spec.sha, "c".repeat(40));
        assert!(!next.spec.stopped, "a push wakes a stopped preview");
        assert!(
            next.spec.expires_at > old_expiry,
            "activity moves the expiry"
        );
        assert_eq!(
            next.annotations().get(LAST_ACTIVITY).map(String::as_str),
            Some(later.to_string().as_str())
        );
        // The same event again changes nothing.
        assert_eq!(change(&next, &push, later).unwrap_err(), Outcome::Unchanged);
        // An older event than the last applied is stale.
        let older = intent(deploy(false), "2026-11-29T12:30:00Z");
        assert_eq!(change(&next, &older, later).unwrap_err(), Outcome::Stale);
    }

    #[test]
    fn a_teardown_is_written_once_and_in_order() {
        let now = at("2026-11-29T12:00:30Z");
        let pe = new_preview(&intent(deploy(true), "2026-11-29T12:00:00Z"), now);
        let close = |t: &str| {
            intent(
                Change::Teardown {
                    reason: TeardownReason::Closed,
                    actor: Some("octocat".into()),
                    create: true,
                },
                t,
            )
        };
        let closed = change(&pe, &close("2026-11-29T12:05:00Z"), now).unwrap();
        let t = closed.spec.teardown.clone().unwrap();
        assert_eq!(
            (t.reason, t.actor.as_deref()),
            (TeardownReason::Closed, Some("octocat"))
        );
        assert_eq!(
            change(&closed, &close("2026-11-29T12:06:00Z"), now).unwrap_err(),
            Outcome::Unchanged
        );
        // A close older than the last event applied does not take the preview down.
        assert_eq!(
            change(&pe, &close("2026-11-29T11:00:00Z"), now).unwrap_err(),
            Outcome::Stale
        );
    }

    #[test]
    fn a_forks_preview_follows_the_head_until_a_maintainer_pins_it() {
        let now = at("2026-11-29T12:00:30Z");
        let waiting = |t: &str| {
            intent(
                Change::AwaitApproval {
                    create: true,
                    requested_by: "mallory".into(),
                },
                t,
            )
        };
        let pe = new_preview(&waiting("2026-11-29T12:00:00Z"), now);
        assert!(pe.spec.awaiting_approval);
        assert!(
            pe.spec.expires_at.is_none(),
            "nothing runs, nothing expires"
        );
        let mut push = waiting("2026-11-29T12:01:00Z");
        push.sha = Sha::new(&"d".repeat(40)).unwrap();
        let followed = change(&pe, &push, now).unwrap();
        assert_eq!(followed.spec.sha, "d".repeat(40));
        // Approved (pinned at d…): a later push from the fork does not move it.
        let mut pinned = followed;
        pinned.spec.awaiting_approval = false;
        pinned.spec.pinned = true;
        let mut again = waiting("2026-11-29T12:02:00Z");
        again.sha = Sha::new(&"e".repeat(40)).unwrap();
        let kept = change(&pinned, &again, now).unwrap();
        assert_eq!(kept.spec.sha, "d".repeat(40));
    }

    #[test]
    fn deploying_now_brings_a_tombstone_back_fresh() {
        let now = at("2026-11-29T12:00:30Z");
        let opened = intent(deploy(true), "2026-11-29T12:00:00Z");
        let mut pe = new_preview(&opened, now);
        pe.spec.teardown = Some(Teardown {
            reason: TeardownReason::Destroyed,
            actor: Some("octocat".into()),
            via: Some(Interface::Command),
            at: Time(now),
        });
        pe.spec.stopped = true;
        let later = at("2026-11-30T12:00:00Z");
        let next = deploy_now(Some(&pe), &opened, true, "delivery-9", later).unwrap();
        assert!(next.spec.teardown.is_none());
        assert_eq!(next.spec.incarnation, 1);
        assert!(next.spec.pinned && !next.spec.stopped && !next.spec.awaiting_approval);
        assert_eq!(
            next.spec.expires_at,
            Some(expiry(later, Duration::from_secs(3600))),
            "a fresh TTL from now"
        );
        assert_eq!(
            next.annotations().get(REDEPLOY).map(String::as_str),
            Some("delivery-9")
        );
        let created = deploy_now(None, &opened, false, "delivery-1", now).unwrap();
        assert_eq!(created.spec.incarnation, 0);
        let teardown = intent(
            Change::Teardown {
                reason: TeardownReason::Closed,
                actor: None,
                create: true,
            },
            "2026-11-29T12:00:00Z",
        );
        assert!(deploy_now(None, &teardown, false, "d", now).is_none());
    }
}
