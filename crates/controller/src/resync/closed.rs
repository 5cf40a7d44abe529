//! Previews whose pull request is no longer open (closed, merged, or gone from GitHub), torn
//! down with the reason GitHub gives.

use std::collections::BTreeMap;

use kube::{Resource, ResourceExt};

use super::{ResyncError, Round, Step, step};
use sandcastle_crd::{PreviewEnvironment, TeardownReason};
use sandcastle_domain::intent::{Change, Intent};
use sandcastle_domain::{NamespaceName, PrNumber, RepoName, Sha};
use sandcastle_github::client::PullState;
use sandcastle_kube::previews::Outcome;

pub(super) fn live(p: &PreviewEnvironment) -> bool {
    p.spec.teardown.is_none() && p.meta().deletion_timestamp.is_none()
}

pub(super) async fn tear_down(
    r: &mut Round,
    existing: &BTreeMap<String, PreviewEnvironment>,
) -> Result<(), ResyncError> {
    for p in existing.values().filter(|p| live(p)) {
        if r.report.stopped.is_some() {
            break;
        }
        let (Some(number), Ok(repo)) = (p.spec.pull_request, RepoName::new(&p.spec.repository))
        else {
            continue;
        };
        let Some(gh) = r.listed.get(&repo) else {
            continue;
        };
        if r.open.contains(&(repo.clone(), number)) {
            continue;
        }
        let Ok(pr_number) = PrNumber::new(number) else {
            continue;
        };
        let (reason, event_time) = match gh.get_pull(&repo, pr_number).await {
            Ok(pr) if pr.state == PullState::Open => continue,
            Ok(pr) if pr.merged => (TeardownReason::Merged, pr.updated_at),
            Ok(pr) => (TeardownReason::Closed, pr.updated_at),
            Err(e) if e.is_not_found() => (TeardownReason::Closed, r.now),
            Err(e) => match step::<()>(Err(e)) {
                Step::Stop(why) => {
                    r.report.stopped = Some(why);
                    break;
                }
                _ => continue,
            },
        };
        let (Ok(preview), Ok(sha)) = (NamespaceName::new(&p.name_any()), Sha::new(&p.spec.sha))
        else {
            continue;
        };
        let intent = Intent {
            preview,
            blueprint: p.spec.blueprint.clone(),
            repo: repo.clone(),
            pr: pr_number,
            sha,
            git_ref: p.spec.git_ref.clone(),
            installation_id: p.spec.installation_id,
            event_time,
            undoes: None,
            opens: false,
            keep: None,
            change: Change::Teardown {
                reason,
                actor: None,
                create: false,
            },
        };
        if r.write(&intent).await? == Outcome::Updated {
            r.report.torn_down += 1;
        }
    }
    Ok(())
}
