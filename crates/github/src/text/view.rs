//! What the sticky comment shows for a `PreviewEnvironment`: its [`StickyView`], and the short
//! key of what matters in it, so that the comment is edited when the state changes and not on
//! every reconcile (progress steps and relative times are left out of the key on purpose).

use std::time::Duration;

use kube::ResourceExt;

use super::checks::TestLine;
use super::state::{LogTail, StickyState, StickyView};
use sandcastle_crd::{BlueprintSpec, Phase, PreviewEnvironment, PreviewStatus, SlotState};
use sandcastle_domain::{Sha, authors};

/// The view of `pe`, or `None` while there is nothing to say yet (the controller has not looked
/// at it, or it is on its way down). `blueprint` fills in what it is cloned from and the idle
/// limit; `page` is Sandcastle's page for the preview.
pub fn sticky_view(
    pe: &PreviewEnvironment,
    blueprint: Option<&BlueprintSpec>,
    page: Option<String>,
) -> Option<StickyView> {
    let st = pe.status.clone().unwrap_or_default();
    let spec = &pe.spec;
    let message = st.message.clone().unwrap_or_default();
    let state = if let Some(t) = &spec.teardown {
        if st.phase != Some(Phase::Removed) {
            return None;
        }
        StickyState::Removed {
            reason: t.reason,
            actor: t.actor.clone(),
            via: t.via,
        }
    } else if spec.awaiting_approval {
        StickyState::WaitingForApproval {
            sha: Sha::new(&spec.sha).ok()?,
        }
    } else {
        match st.phase? {
            Phase::Pending if !st.waiting_for_checks.is_empty() => StickyState::WaitingForChecks {
                checks: st.waiting_for_checks.clone(),
            },
            Phase::Pending if queued(&st) => StickyState::Queued { reason: message },
            Phase::Pending | Phase::Deploying => StickyState::Deploying {
                step: message,
                stuck_on: st.stuck_on.clone(),
            },
            Phase::Ready => StickyState::Ready,
            Phase::Stopped => StickyState::Stopped,
            Phase::Failed => StickyState::Failed { reason: message },
            Phase::Terminating | Phase::Removed => return None,
        }
    };
    let running = matches!(state, StickyState::Ready | StickyState::Stopped);
    let sha = if running {
        st.deployed_sha.as_deref().unwrap_or(&spec.sha)
    } else {
        &spec.sha
    };
    let deployed_at = running
        .then(|| {
            st.history
                .iter()
                .rev()
                .find(|h| h.action == Phase::Ready.as_str() && h.sha.as_deref() == Some(sha))
                .map(|h| h.time.0)
        })
        .flatten();
    let waiting = matches!(
        state,
        StickyState::WaitingForApproval { .. }
            | StickyState::WaitingForChecks { .. }
            | StickyState::Queued { .. }
    );
    let source = blueprint
        .map(|b| {
            let s = &b.source;
            match (&s.namespace, &s.manifests, &s.helm, &s.kustomize) {
                (Some(ns), ..) => format!("namespace {ns}"),
                (_, Some(m), ..) => format!("ConfigMap {}", m.config_map),
                (_, _, Some(h), _) => format!("Helm chart {}", h.path),
                (_, _, _, Some(k)) => format!("Kustomize overlay {}", k.path),
                _ => String::new(),
            }
        })
        .unwrap_or_default();
    let stop_after_idle = blueprint
        .map(|b| authors::stop_after_idle(b, spec.author_class))
        .filter(|d| *d > Duration::ZERO);
    let rule = blueprint.and_then(|b| authors::rule_line(b, spec.author_class));
    Some(StickyView {
        preview: pe.name_any(),
        url: st.url.clone().filter(|_| !waiting),
        sha: Sha::new(sha)
            .ok()
            .filter(|_| !matches!(state, StickyState::WaitingForApproval { .. })),
        deployed_at,
        blueprint: spec.blueprint.clone(),
        source,
        services: if waiting {
            Vec::new()
        } else {
            st.services.clone()
        },
        jobs: Vec::new(),
        expires_at: spec.expires_at.as_ref().map(|t| t.0).filter(|_| !waiting),
        stop_after_idle,
        api_url: page,
        namespace: st.namespace.clone().filter(|_| !waiting),
        pinned_fork_note: spec.pinned && !matches!(state, StickyState::Removed { .. }),
        log_tail: st.diagnosis.as_ref().and_then(log_tail),
        running: st.running.clone(),
        rule,
        cluster: st
            .cluster
            .clone()
            .filter(|c| c != sandcastle_crd::IN_CLUSTER),
        cluster_down: st
            .conditions
            .iter()
            .find(|c| c.type_ == "ClusterReachable" && c.status == "False")
            .map(|c| c.message.clone()),
        tests: if waiting { Vec::new() } else { test_lines(&st) },
        data: st.data.clone().filter(|_| !waiting),
        state,
    })
}

/// The last run of each test, by name.
fn test_lines(st: &PreviewStatus) -> Vec<TestLine> {
    let names: std::collections::BTreeSet<&str> =
        st.tests.iter().map(|r| r.name.as_str()).collect();
    names
        .into_iter()
        .filter_map(|n| sandcastle_domain::test_runs::latest(&st.tests, n))
        .map(|r| TestLine {
            test: r.name.clone(),
            state: r.state,
            conclusion: r.conclusion,
            sha: r.sha.clone(),
            took: r
                .finished_at
                .as_ref()
                .map(|end| sandcastle_domain::test_runs::took(r, end.0))
                .unwrap_or_default(),
            exit_code: r.exit_code,
        })
        .collect()
}

/// Whether a pending preview waits its turn: for a slot under the Blueprint's cap, or for a
/// target cluster with room.
fn queued(st: &PreviewStatus) -> bool {
    let for_slot = st
        .slot
        .as_ref()
        .is_some_and(|s| s.state == SlotState::Queued);
    let for_cluster = st.cluster.is_none() && st.waiting_for_cluster.is_some();
    // In the rollout line (`--max-concurrent-rollouts`): nothing is applied for it yet.
    let for_rollout = st.in_line.is_some();
    for_slot || for_cluster || for_rollout
}

fn log_tail(d: &sandcastle_crd::Diagnosis) -> Option<LogTail> {
    if d.log_tail.is_empty() {
        return None;
    }
    Some(LogTail {
        pod: d.pod.clone()?,
        container: d.container.clone()?,
        previous: d.previous,
        lines: d.log_tail.clone(),
    })
}

/// What the comment must be edited for: the state and its reason, the commit, URL, expiry and
/// whether it is pinned. Not the progress step, service counts or relative times.
pub fn shown_key(view: &StickyView) -> String {
    let detail = match &view.state {
        StickyState::Failed { reason } | StickyState::Rejected { reason } => reason.clone(),
        StickyState::WaitingForChecks { checks } => checks.join(","),
        StickyState::WaitingForApproval { sha } => sha.to_string(),
        StickyState::Removed { reason, actor, via } => {
            let mut detail = format!("{reason:?}:{}", actor.as_deref().unwrap_or_default());
            // Only when recorded, so that comments removed before keep their key.
            if let Some(via) = via {
                detail.push_str(&format!(":{via:?}"));
            }
            detail
        }
        StickyState::Queued { reason } => reason.clone(),
        // Progress alone is not worth an edit; what the rollout is stuck on is.
        StickyState::Deploying { stuck_on, .. } => stuck_on.clone().unwrap_or_default(),
        StickyState::Ready | StickyState::Stopped => String::new(),
    };
    let mut key = format!(
        "{}|{detail}|{}|{}|{}|{}",
        view.state.code(),
        view.sha.as_ref().map(Sha::as_str).unwrap_or_default(),
        view.url.as_deref().unwrap_or_default(),
        view.expires_at.map(|t| t.as_second()).unwrap_or_default(),
        if view.pinned_fork_note { "pinned" } else { "" },
    );
    // Only while its cluster is away, so that every other comment's key stays as it was.
    if view.cluster_down.is_some() {
        key.push_str("|cluster-down");
    }
    // Only with tests, likewise.
    if !view.tests.is_empty() {
        let tests: Vec<String> = view.tests.iter().map(TestLine::key).collect();
        key.push_str(&format!("|tests:{}", tests.join(",")));
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use sandcastle_crd::{HistoryEntry, PreviewStatus, Teardown, TeardownReason};

    const SHA: &str = "abc1234def5678abc1234def5678abc1234def56";

    fn pe(status: PreviewStatus) -> PreviewEnvironment {
        let mut pe: PreviewEnvironment = serde_json::from_value(serde_json::json!({
            "apiVersion": "sandcastle.dev/v1alpha1",
            "kind": "PreviewEnvironment",
            "metadata": {"name": "shop-pr-42"},
            "spec": {
                "blueprint": "shop", "repository": "acme/shop", "pullRequest": 42,
                "ref": "feature", "sha": SHA,
                "requestedBy": {"kind": "github-user", "name": "octocat"},
                "expiresAt": "2026-11-30T12:00:00Z",
            },
        }))
        .unwrap();
        pe.status = Some(status);
        pe
    }

    fn status(phase: Phase, message: &str) -> PreviewStatus {
        PreviewStatus {
            phase: Some(phase),
            message: Some(message.to_owned()),
            url: Some("http://42-shop.example.com".to_owned()),
            deployed_sha: Some(SHA.to_owned()),
            ..PreviewStatus::default()
        }
    }

    #[test]
    fn the_comment_is_edited_for_what_holds_a_rollout_up_not_for_progress() {
        let key = |message: &str, stuck_on: Option<&str>| {
            let mut st = status(Phase::Deploying, message);
            st.stuck_on = stuck_on.map(str::to_owned);
            shown_key(&sticky_view(&pe(st), None, None).unwrap())
        };
        let starting = key("starting apps: web 0/2 ready", None);
        assert_eq!(starting, key("starting apps: web 1/2 ready", None));
        let stuck = key(
            "starting apps: web 0/2 ready: 0/1 nodes are available",
            Some("0/1 nodes are available"),
        );
        assert_ne!(starting, stuck);
    }

    #[test]
    fn a_preview_waiting_its_turn_shows_as_queued_and_its_comment_follows_the_line() {
        let in_line = |position: u32| {
            let mut st = status(
                Phase::Pending,
                &format!("{position} in line; 2/2 previews of shop in use"),
            );
            st.slot = Some(sandcastle_crd::SlotStatus {
                state: SlotState::Queued,
                position: Some(position),
                in_use: 2,
                cap: 2,
                generation: None,
                since: Time("2026-11-29T12:00:00Z".parse().unwrap()),
            });
            sticky_view(&pe(st), None, None).unwrap()
        };
        let second = in_line(2);
        assert_eq!(
            second.state,
            StickyState::Queued {
                reason: "2 in line; 2/2 previews of shop in use".into()
            }
        );
        assert_eq!(second.url, None, "nothing is deployed for it yet");
        assert_ne!(shown_key(&second), shown_key(&in_line(1)));

        let for_cluster = |why: &str| {
            let mut st = status(Phase::Pending, &format!("waiting for a cluster: {why}"));
            st.waiting_for_cluster = Some(why.to_owned());
            sticky_view(&pe(st), None, None).unwrap()
        };
        let full = for_cluster("b is full (2/2 previews)");
        assert_eq!(
            full.state,
            StickyState::Queued {
                reason: "waiting for a cluster: b is full (2/2 previews)".into()
            }
        );
        let away = for_cluster("b is unreachable (connection refused)");
        assert_ne!(shown_key(&full), shown_key(&away), "a new reason is news");

        let why = "in line to roll out (joined 3rd, 24 rollouts under way)";
        let mut waiting = status(Phase::Pending, why);
        waiting.in_line = Some(sandcastle_crd::InLine { asked_ns: 1 });
        let view = sticky_view(&pe(waiting), None, None).unwrap();
        assert_eq!(view.state, StickyState::Queued { reason: why.into() });

        let mut placed = status(Phase::Pending, "deploying");
        placed.cluster = Some("b".into());
        placed.waiting_for_cluster = Some("b is full (2/2 previews)".into());
        let view = sticky_view(&pe(placed), None, None).unwrap();
        assert!(matches!(view.state, StickyState::Deploying { .. }));
    }

    #[test]
    fn a_preview_whose_cluster_is_away_says_so_and_its_comment_is_edited_then_only() {
        let mut st = status(Phase::Ready, "3/3 services ready");
        st.cluster = Some("b".into());
        let ready = sticky_view(&pe(st.clone()), None, None).unwrap();
        let now: jiff::Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let body = crate::text::sticky::sticky_comment(&ready, now);
        assert!(body.contains("| **Cluster** | `b` |"), "{body}");
        assert!(!body.contains("⚠️"), "{body}");
        st.conditions
            .push(k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "ClusterReachable".into(),
                status: "False".into(),
                reason: "Unreachable".into(),
                message: "cluster b is unreachable since 11:58:02 UTC (connection refused)".into(),
                last_transition_time: Time(now),
                observed_generation: None,
            });
        let away = sticky_view(&pe(st), None, None).unwrap();
        assert_eq!(away.state, StickyState::Ready, "the phase stays");
        let body = crate::text::sticky::sticky_comment(&away, now);
        assert!(
            body.contains(
                "⚠️ cluster b is unreachable since 11:58:02 UTC (connection refused): the preview \
                 may not answer."
            ),
            "{body}"
        );
        assert_ne!(shown_key(&ready), shown_key(&away));
        let mut home = status(Phase::Ready, "3/3 services ready");
        home.cluster = Some("in-cluster".into());
        let home = sticky_view(&pe(home), None, None).unwrap();
        assert_eq!(home.cluster, None, "Sandcastle's own cluster goes unsaid");
        assert_eq!(
            shown_key(&home),
            shown_key(
                &sticky_view(&pe(status(Phase::Ready, "3/3 services ready")), None, None).unwrap()
            ),
            "keys of comments on previews at home stay as they were"
        );
    }

    #[test]
    fn states_follow_the_resource() {
        let view = |p: &PreviewEnvironment| sticky_view(p, None, None).map(|v| v.state);
        assert_eq!(
            view(&pe(PreviewStatus::default())),
            None,
            "not looked at yet"
        );
        assert_eq!(
            view(&pe(status(Phase::Ready, "1/1"))),
            Some(StickyState::Ready)
        );
        assert_eq!(
            view(&pe(status(Phase::Failed, "seed job failed"))),
            Some(StickyState::Failed {
                reason: "seed job failed".into()
            })
        );
        let mut waiting = status(Phase::Pending, "waiting for checks: build");
        waiting.waiting_for_checks = vec!["build".into()];
        assert_eq!(
            view(&pe(waiting)),
            Some(StickyState::WaitingForChecks {
                checks: vec!["build".into()]
            })
        );
        let mut fork = pe(status(Phase::Pending, "waiting for approval"));
        fork.spec.awaiting_approval = true;
        let v = sticky_view(&fork, None, None).unwrap();
        assert!(matches!(v.state, StickyState::WaitingForApproval { .. }));
        assert_eq!((v.url, v.sha, v.expires_at), (None, None, None));

        let mut gone = pe(status(Phase::Terminating, "deleting the namespace"));
        gone.spec.teardown = Some(Teardown {
            reason: TeardownReason::Merged,
            actor: Some("hubot".into()),
            via: Some(sandcastle_crd::Interface::PullRequest),
            at: Time("2026-11-29T12:00:00Z".parse().unwrap()),
        });
        assert_eq!(view(&gone), None, "said once it is gone");
        gone.status.as_mut().unwrap().phase = Some(Phase::Removed);
        assert_eq!(
            view(&gone),
            Some(StickyState::Removed {
                reason: TeardownReason::Merged,
                actor: Some("hubot".into()),
                via: Some(sandcastle_crd::Interface::PullRequest),
            })
        );
    }

    #[test]
    fn the_key_ignores_progress_and_follows_what_matters() {
        let key = |st: PreviewStatus| shown_key(&sticky_view(&pe(st), None, None).unwrap());
        assert_eq!(
            key(status(Phase::Deploying, "applying: config")),
            key(status(Phase::Deploying, "starting apps: api 1/2 ready"))
        );
        assert_ne!(
            key(status(Phase::Deploying, "x")),
            key(status(Phase::Ready, "x"))
        );
        assert_ne!(
            key(status(Phase::Failed, "a")),
            key(status(Phase::Failed, "b"))
        );
        let mut later = pe(status(Phase::Ready, ""));
        later.spec.expires_at = Some(Time("2026-12-01T12:00:00Z".parse().unwrap()));
        assert_ne!(
            shown_key(&sticky_view(&later, None, None).unwrap()),
            key(status(Phase::Ready, "")),
            "an extension shows"
        );
    }

    #[test]
    fn deployed_at_comes_from_the_history() {
        let mut st = status(Phase::Ready, "1/1 services ready");
        st.history.push(HistoryEntry {
            time: Time("2026-11-29T12:00:00Z".parse().unwrap()),
            actor: "sandcastle".into(),
            action: "Ready".into(),
            sha: Some(SHA.into()),
            result: None,
        });
        let v = sticky_view(
            &pe(st),
            None,
            Some("http://sandcastle/previews/shop-pr-42".into()),
        )
        .unwrap();
        assert_eq!(v.deployed_at.unwrap().to_string(), "2026-11-29T12:00:00Z");
        assert_eq!(
            v.api_url.as_deref(),
            Some("http://sandcastle/previews/shop-pr-42")
        );
    }
}
