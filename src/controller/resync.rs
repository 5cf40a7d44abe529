//! The catch-up resync: webhooks are hints, and GitHub does not redeliver failed deliveries by
//! itself. Each round lists the installations, their repositories covered by a Blueprint and the
//! open pull requests of those (paged), and makes desired state match through the same intent
//! code as the webhook: a missing preview is created (auto-trigger Blueprints, not drafts or
//! forks), a preview whose head moved follows it, a preview whose pull request is closed or gone
//! is torn down. It then checks that what GitHub shows for a preview agrees with its phase and,
//! where it does not, clears the record of what was reported so the controller reports again.
//!
//! Cost: one call for the installations, one per 100 repositories of each, one per 100 open pull
//! requests of each covered repository, one per preview whose pull request closed, and one per
//! live preview whose GitHub status is checked (all of them at start-up, a sixth in each later
//! round, so each is checked about once an hour) — O(open pull requests), never O(all pull
//! requests ever). A rate limit ends the round; the next round starts over.
//!
//! A missing preview is only created for a pull request updated within the Blueprint's `ttl`:
//! one quiet for longer would have expired anyway (its tombstone may be gone by now), and
//! bringing it back every round would defeat the TTL.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

use jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::context::Context;
use crate::crd::{
    Blueprint, BlueprintSpec, DEFAULT_TTL, Phase, PreviewEnvironment, Reported, SlotState,
    TeardownReason,
};
use crate::domain::intent::{self, Change, Intent};
use crate::domain::{PrNumber, RepoName, Sha, lifecycle};
use crate::github::client::{DeploymentState, GitHubError, Installation, PullRequest, PullState};
use crate::github::event::{BaseInfo, HeadInfo, PrAction, PrState, PullRequestEvent};
use crate::github::repo_config::{self, RepoConfig};
use crate::k8s::events::Request;
use crate::k8s::previews::{self, Outcome};

/// How many rounds it takes to check every preview's GitHub status once (start-up checks all).
const STATUS_CHECK_SPREAD: u64 = 6;

/// What one round found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ResyncReport {
    pub installations: usize,
    /// Repositories covered by a Blueprint whose open pull requests were listed.
    pub repos: usize,
    pub open_pulls: usize,
    pub created: usize,
    /// Previews moved to a head commit whose delivery was lost (or brought back by a reopen).
    pub moved: usize,
    pub torn_down: usize,
    /// Open pull requests without a preview, quiet for longer than the TTL: left alone.
    pub stale: usize,
    pub statuses_checked: usize,
    pub statuses_fixed: usize,
    /// Why the round ended early (a rate limit), if it did.
    pub stopped: Option<String>,
}

/// Why a round could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum ResyncError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

/// The outcome of one GitHub call inside a round.
enum Step<T> {
    Ok(T),
    /// Skip this repository or preview; go on with the others.
    Skip(String),
    /// End the round (rate limited).
    Stop(String),
}

fn step<T>(r: Result<T, GitHubError>) -> Step<T> {
    match r {
        Ok(v) => Step::Ok(v),
        Err(e @ GitHubError::RateLimited { .. }) => Step::Stop(e.to_string()),
        Err(e) => Step::Skip(e.to_string()),
    }
}

/// Whether any of the Blueprint's repository patterns (and base branches) can admit `repo`.
fn covers(spec: &BlueprintSpec, repo: &RepoName) -> bool {
    if spec.base_branches.is_empty() {
        intent::admits(spec, repo, "")
    } else {
        spec.base_branches
            .iter()
            .any(|b| intent::admits(spec, repo, b))
    }
}

/// An open pull request as the `synchronize` event the webhook would have seen: it creates a
/// missing preview (auto trigger) and moves an existing one, with the webhook's own rules.
fn as_event(pr: &PullRequest, installation: u64) -> PullRequestEvent {
    PullRequestEvent {
        action: PrAction::Synchronize,
        repo: pr.base.repo.clone(),
        number: pr.number,
        installation_id: Some(installation),
        head: HeadInfo {
            sha: pr.head.sha.clone(),
            ref_: pr.head.ref_.clone(),
            repo: pr.head.repo.clone(),
        },
        base: BaseInfo {
            ref_: pr.base.ref_.clone(),
            repo: pr.base.repo.clone(),
        },
        draft: pr.draft,
        state: PrState::Open,
        merged: false,
        merged_by: None,
        labels: pr.labels.clone(),
        label: None,
        author: pr.author.clone(),
        sender: pr.author.clone(),
        updated_at: pr.updated_at,
        html_url: pr.html_url.clone(),
    }
}

fn live(p: &PreviewEnvironment) -> bool {
    p.spec.teardown.is_none() && p.meta().deletion_timestamp.is_none()
}

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

struct Round {
    api: Api<PreviewEnvironment>,
    delivery: String,
    now: Timestamp,
    report: ResyncReport,
}

impl Round {
    async fn write(&mut self, intent: &Intent) -> Result<Outcome, kube::Error> {
        let request = Request {
            at: self.now,
            actor: "sandcastle".into(),
            action: "resync".into(),
            note: format!(
                "pull request #{} as GitHub shows it now (catch-up resync)",
                intent.pr
            ),
        };
        let outcome =
            previews::apply(&self.api, intent, &request, &self.delivery, self.now).await?;
        tracing::info!(target: "audit", actor = "sandcastle", action = "resync", preview = %intent.preview, sha = %intent.sha, result = outcome.as_str(), "catch-up resync");
        Ok(outcome)
    }

    /// Clear what the status says was reported, so the controller reports it again.
    async fn forget_report(&self, name: &str, deployment_gone: bool) -> Result<(), kube::Error> {
        let mut status = json!({"githubReported": Value::Null});
        if deployment_gone {
            status["githubDeploymentId"] = Value::Null;
            status["githubDeploymentSha"] = Value::Null;
        }
        match self
            .api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": status })),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// One round of the catch-up resync. `round` 0 is the start-up round.
pub async fn run(ctx: &Context, round: u64) -> Result<ResyncReport, ResyncError> {
    let home = &ctx.settings.home;
    let blueprints: Vec<Blueprint> = Api::<Blueprint>::namespaced(ctx.client.clone(), home)
        .list(&ListParams::default())
        .await?
        .items;
    let api: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), home);
    if blueprints.is_empty() {
        return Ok(ResyncReport::default());
    }
    let existing: BTreeMap<String, PreviewEnvironment> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|p| (p.name_any(), p))
        .collect();
    let specs: Vec<(&str, &BlueprintSpec)> = blueprints
        .iter()
        .filter_map(|b| b.metadata.name.as_deref().map(|n| (n, &b.spec)))
        .collect();
    let now = ctx.clock.now();
    let mut r = Round {
        api,
        // Unique per round: two rounds within one second must not look like redeliveries.
        delivery: format!(
            "resync-{}-{round}-{:08x}",
            now.as_second(),
            rand::random::<u32>()
        ),
        now,
        report: ResyncReport::default(),
    };

    let installations = match step(ctx.github.list_installations().await) {
        Step::Ok(list) => list,
        Step::Skip(why) | Step::Stop(why) => {
            r.report.stopped = Some(format!("listing installations: {why}"));
            return Ok(r.report);
        }
    };
    r.report.installations = installations.len();
    // Repository → the installation that can see it, for every repository listed in full.
    let mut listed: HashMap<RepoName, Installation> = HashMap::new();
    let mut open: BTreeSet<(RepoName, u64)> = BTreeSet::new();
    'installations: for info in &installations {
        let gh = ctx.github.installation(info.id);
        let repos = match step(gh.list_installation_repos().await) {
            Step::Ok(repos) => repos,
            Step::Skip(why) => {
                tracing::warn!(installation = info.id, %why, "resync: listing repositories failed");
                continue;
            }
            Step::Stop(why) => {
                r.report.stopped = Some(why);
                break;
            }
        };
        for repo in repos
            .into_iter()
            .filter(|repo| specs.iter().any(|(_, s)| covers(s, repo)))
        {
            let pulls = match step(gh.list_open_pulls(&repo).await) {
                Step::Ok(p) => p,
                Step::Skip(why) => {
                    tracing::warn!(%repo, %why, "resync: listing pull requests failed");
                    continue;
                }
                Step::Stop(why) => {
                    r.report.stopped = Some(why);
                    break 'installations;
                }
            };
            r.report.repos += 1;
            r.report.open_pulls += pulls.len();
            // The repository's own choices, from each base branch (read once per branch per
            // round; a file that cannot be read or used means the defaults, as on delivery).
            let mut configs: HashMap<String, RepoConfig> = HashMap::new();
            for pr in pulls.iter().filter(|p| p.state == PullState::Open) {
                open.insert((repo.clone(), pr.number.get()));
                if !configs.contains_key(&pr.base.ref_) {
                    let admitting: Vec<(&str, &BlueprintSpec)> = specs
                        .iter()
                        .copied()
                        .filter(|(_, s)| intent::admits(s, &repo, &pr.base.ref_))
                        .collect();
                    let config = match gh.get_file(&repo, repo_config::PATH, &pr.base.ref_).await {
                        Ok(Some(file)) => {
                            repo_config::read(&file.text, &admitting).unwrap_or_default()
                        }
                        _ => RepoConfig::default(),
                    };
                    configs.insert(pr.base.ref_.clone(), config);
                }
                let config = &configs[&pr.base.ref_];
                let (intents, _) = crate::github::triggers::from_pull_request(
                    &as_event(pr, info.id),
                    &specs,
                    config,
                );
                for intent in intents {
                    let found = existing.get(intent.preview.as_str());
                    match found {
                        // Comment-trigger Blueprints only follow previews someone asked for.
                        None if matches!(intent.change, Change::Deploy { create: false, .. }) => {}
                        None => {
                            let ttl = specs
                                .iter()
                                .find(|(n, _)| *n == intent.blueprint)
                                .map_or(DEFAULT_TTL, |(_, s)| s.ttl)
                                .get();
                            let quiet_until = lifecycle::hard_limit(pr.updated_at, ttl);
                            if lifecycle::is_expired(quiet_until, now) {
                                r.report.stale += 1;
                                continue;
                            }
                            if r.write(&intent).await? == Outcome::Created {
                                r.report.created += 1;
                            }
                        }
                        Some(p) if !live(p) || p.spec.sha != intent.sha.as_str() => {
                            if r.write(&intent).await? == Outcome::Updated {
                                r.report.moved += 1;
                            }
                        }
                        Some(_) => {}
                    }
                }
            }
            listed.insert(repo, gh.clone());
        }
    }

    // Previews whose pull request is no longer open: closed, merged or gone.
    for p in existing.values().filter(|p| live(p)) {
        if r.report.stopped.is_some() {
            break;
        }
        let (Some(number), Ok(repo)) = (p.spec.pull_request, RepoName::new(&p.spec.repository))
        else {
            continue;
        };
        let Some(gh) = listed.get(&repo) else {
            continue;
        };
        if open.contains(&(repo.clone(), number)) {
            continue;
        }
        let Ok(pr_number) = PrNumber::new(number) else {
            continue;
        };
        let (reason, event_time) = match gh.get_pull(&repo, pr_number).await {
            Ok(pr) if pr.state == PullState::Open => continue,
            Ok(pr) if pr.merged => (TeardownReason::Merged, pr.updated_at),
            Ok(pr) => (TeardownReason::Closed, pr.updated_at),
            Err(e) if e.is_not_found() => (TeardownReason::Closed, now),
            Err(e) => match step::<()>(Err(e)) {
                Step::Stop(why) => {
                    r.report.stopped = Some(why);
                    break;
                }
                _ => continue,
            },
        };
        let (Ok(preview), Ok(sha)) = (
            crate::domain::NamespaceName::new(&p.name_any()),
            Sha::new(&p.spec.sha),
        ) else {
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

    // GitHub statuses that disagree with what the preview is.
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
        let Some(gh) = listed.get(&repo) else {
            continue;
        };
        r.report.statuses_checked += 1;
        match gh.list_deployment_statuses(&repo, id).await {
            Ok(list) => {
                let shown = list.first().map(|s| s.state);
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
    Ok(r.report)
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
