//! The open pull requests of each installation's covered repositories, made good: a missing
//! preview is created, one whose head moved follows it — through the webhook's own rules, by
//! reading each open pull request as the `synchronize` the webhook would have seen.

use std::collections::{BTreeMap, HashMap};

use super::{ResyncError, Round, Step, step};
use crate::context::Context;
use kube::ResourceExt;
use sandcastle_crd::labels::KEEP;
use sandcastle_crd::{BlueprintSpec, DEFAULT_TTL, PreviewEnvironment};
use sandcastle_domain::intent::{self, Change, Intent};
use sandcastle_domain::{RepoName, lifecycle, naming};
use sandcastle_github::client::{Installation, InstallationInfo, PullRequest, PullState};
use sandcastle_github::event::{BaseInfo, HeadInfo, PrAction, PrState, PullRequestEvent};
use sandcastle_github::repo_config::{self, RepoConfig};
use sandcastle_kube::previews::Outcome;

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
pub(super) fn as_event(pr: &PullRequest, installation: u64) -> PullRequestEvent {
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
        author_is_bot: pr.author_is_bot,
        before: None,
        changed_files: None,
        author_association: pr.author_association,
        sender: pr.author.clone(),
        updated_at: pr.updated_at,
        html_url: pr.html_url.clone(),
    }
}

/// Every installation's covered repositories and their open pull requests, made good.
pub(super) async fn follow(
    ctx: &Context,
    r: &mut Round,
    installations: &[InstallationInfo],
    specs: &[(&str, &BlueprintSpec)],
    existing: &BTreeMap<String, PreviewEnvironment>,
) -> Result<(), ResyncError> {
    for info in installations {
        let gh = ctx.github.installation(info.id);
        let repos = match step(gh.list_installation_repos().await) {
            Step::Ok(repos) => repos,
            Step::Skip(why) => {
                tracing::warn!(installation = info.id, %why, "resync: listing repositories failed");
                continue;
            }
            Step::Stop(why) => {
                r.report.stopped = Some(why);
                return Ok(());
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
                    return Ok(());
                }
            };
            r.report.repos += 1;
            r.report.open_pulls += pulls.len();
            follow_repo(r, &gh, info.id, &repo, &pulls, specs, existing).await?;
            r.listed.insert(repo, gh.clone());
        }
    }
    Ok(())
}

/// One repository's open pull requests. Its `.github/sandcastle.yml` is read once per base
/// branch per round; a file that cannot be read or used means the defaults, as on delivery.
async fn follow_repo(
    r: &mut Round,
    gh: &Installation,
    installation: u64,
    repo: &RepoName,
    pulls: &[PullRequest],
    specs: &[(&str, &BlueprintSpec)],
    existing: &BTreeMap<String, PreviewEnvironment>,
) -> Result<(), ResyncError> {
    let mut configs: HashMap<String, RepoConfig> = HashMap::new();
    for pr in pulls.iter().filter(|p| p.state == PullState::Open) {
        r.open.insert((repo.clone(), pr.number.get()));
        // As the webhook refuses such a delivery, a branch whose name Git would not take (or
        // that hides its text) gets no preview from the resync either.
        if !(naming::is_branch_name(&pr.head.ref_) && naming::is_branch_name(&pr.base.ref_)) {
            tracing::warn!(%repo, pr = %pr.number, "resync: a branch name Sandcastle refuses (control or bidirectional-text characters, …): no preview");
            continue;
        }
        if !configs.contains_key(&pr.base.ref_) {
            let admitting: Vec<(&str, &BlueprintSpec)> = specs
                .iter()
                .copied()
                .filter(|(_, s)| intent::admits(s, repo, &pr.base.ref_))
                .collect();
            let config = match gh.get_file(repo, repo_config::PATH, &pr.base.ref_).await {
                Ok(Some(file)) => repo_config::read(&file.text, &admitting).unwrap_or_default(),
                _ => RepoConfig::default(),
            };
            configs.insert(pr.base.ref_.clone(), config);
        }
        let event = as_event(pr, installation);
        let config = &configs[&pr.base.ref_];
        let (mut intents, mut skipped) =
            sandcastle_github::triggers::from_pull_request(&event, specs, config);
        // Only a preview it would make is worth asking GitHub for the files.
        let missing = |i: &Intent| !existing.contains_key(i.preview.as_str());
        let filtered = sandcastle_github::changed_files::filter(
            gh,
            &event,
            specs,
            &mut intents,
            &mut skipped,
            missing,
        )
        .await;
        if let Err(why) = filtered {
            // The next resync asks again; guessing could deploy what the paths leave out.
            tracing::warn!(repo = %pr.base.repo, pr = %pr.number, error = %why, "resync: skipping a pull request for now");
            continue;
        }
        for intent in intents {
            follow_one(r, &intent, existing.get(intent.preview.as_str()), pr, specs).await?;
        }
    }
    Ok(())
}

/// Make one intent of an open pull request true: create the preview it asks for (unless the
/// pull request was quiet for longer than the TTL), or move one whose commit differs.
async fn follow_one(
    r: &mut Round,
    intent: &Intent,
    found: Option<&PreviewEnvironment>,
    pr: &PullRequest,
    specs: &[(&str, &BlueprintSpec)],
) -> Result<(), ResyncError> {
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
            if lifecycle::is_expired(quiet_until, r.now) {
                r.report.stale += 1;
            } else if r.write(intent).await? == Outcome::Created {
                r.report.created += 1;
            }
        }
        Some(p) if !super::closed::live(p) || p.spec.sha != intent.sha.as_str() => {
            if r.write(intent).await? == Outcome::Updated {
                r.report.moved += 1;
            }
        }
        // A `preview-keep` label added or removed while its delivery was lost.
        Some(p)
            if intent
                .keep
                .is_some_and(|k| k != p.labels().contains_key(KEEP)) =>
        {
            let relabel = Intent {
                change: Change::Relabel,
                ..intent.clone()
            };
            r.write(&relabel).await?;
        }
        Some(_) => {}
    }
    Ok(())
}
