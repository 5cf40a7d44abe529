//! What GitHub shows for each preview, checked against its phase; where they disagree, the
//! record of what was reported is cleared so the controller reports again. Spread over rounds:
//! every preview at start-up, a sixth in each later round.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use kube::ResourceExt;

use super::{ResyncError, Round, Step, step};
use crate::term::Shown;
use sandcastle_crd::{Phase, PreviewEnvironment, Reported, SlotState};
use sandcastle_domain::RepoName;
use sandcastle_github::client::DeploymentState;

/// How many rounds it takes to check every preview's GitHub status once (start-up checks all).
const STATUS_CHECK_SPREAD: u64 = 6;

/// What GitHub should show for a preview's phase: (state recorded in the status, state GitHub
/// shows). `None` when nothing settled is expected.
fn expected(p: &PreviewEnvironment) -> Option<(Reported, DeploymentState)> {
    let st = p.status.as_ref()?;
    Some(match st.phase? {
        Phase::Ready => (Reported::Success, DeploymentState::Success),
        Phase::Failed => (Reported::Failure, DeploymentState::Failure),
        Phase::Stopped => (Reported::Stopped, DeploymentState::Inactive),
        Phase::Removed => (Reported::Inactive, DeploymentState::Inactive),
        Phase::Pending
            if st
                .slot
                .as_ref()
                .is_some_and(|s| s.state == SlotState::Queued) =>
        {
            (Reported::Queued, DeploymentState::Queued)
        }
        _ => return None,
    })
}

fn checked_this_round(name: &str, round: u64) -> bool {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    round == 0 || h.finish() % STATUS_CHECK_SPREAD == round % STATUS_CHECK_SPREAD
}

pub(super) async fn check(
    r: &mut Round,
    existing: &BTreeMap<String, PreviewEnvironment>,
    round: u64,
    known: &Shown,
) -> Result<(), ResyncError> {
    for p in existing.values() {
        if r.report.stopped.is_some() {
            break;
        }
        let name = p.name_any();
        let Some(st) = &p.status else { continue };
        let (Some(id), Some((local, remote))) = (st.github_deployment_id, expected(p)) else {
            continue;
        };
        let Ok(repo) = RepoName::new(&p.spec.repository) else {
            continue;
        };
        // Only what the status says was reported; a report still pending is the controller's.
        if st.github_reported != Some(local) || !checked_this_round(&name, round) {
            continue;
        }
        let Some(gh) = r.listed.get(&repo) else {
            continue;
        };
        r.report.statuses_checked += 1;
        match gh.list_deployment_statuses(&repo, id).await {
            Ok(list) => {
                let shown = list.first().map(|s| s.state);
                known.set(id, shown);
                if shown != Some(remote) {
                    tracing::info!(preview = %name, ?shown, expected = remote.as_str(), "GitHub disagrees; reporting again");
                    r.forget_report(&name, false).await?;
                    r.report.statuses_fixed += 1;
                }
            }
            Err(e) if e.is_not_found() => {
                r.forget_report(&name, true).await?;
                r.report.statuses_fixed += 1;
            }
            Err(e) => {
                if let Step::Stop(why) = step::<()>(Err(e)) {
                    r.report.stopped = Some(why);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_checks_are_spread_over_rounds() {
        let names: Vec<String> = (0..600).map(|i| format!("shop-pr-{i}")).collect();
        assert!(names.iter().all(|n| checked_this_round(n, 0)));
        let mut per_round = [0; STATUS_CHECK_SPREAD as usize];
        for n in &names {
            let hits: Vec<u64> = (1..=STATUS_CHECK_SPREAD)
                .filter(|r| checked_this_round(n, *r))
                .collect();
            assert_eq!(hits.len(), 1, "{n} is checked once per cycle");
            per_round[usize::try_from(hits[0] - 1).unwrap()] += 1;
        }
        assert!(per_round.iter().all(|c| *c > 60), "{per_round:?}");
    }
}
