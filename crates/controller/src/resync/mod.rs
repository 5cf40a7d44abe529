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

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::context::Context;
use sandcastle_crd::{Blueprint, BlueprintSpec, PreviewEnvironment};
use sandcastle_domain::RepoName;
use sandcastle_domain::intent::Intent;
use sandcastle_github::client::{GitHubError, Installation};
use sandcastle_kube::events::Request;
use sandcastle_kube::previews::{self, Outcome};

mod closed;
mod open;
mod statuses;

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
pub(super) enum Step<T> {
    Ok(T),
    /// Skip this repository or preview; go on with the others.
    Skip(String),
    /// End the round (rate limited).
    Stop(String),
}

pub(super) fn step<T>(r: Result<T, GitHubError>) -> Step<T> {
    match r {
        Ok(v) => Step::Ok(v),
        Err(e @ GitHubError::RateLimited { .. }) => Step::Stop(e.to_string()),
        Err(e) => Step::Skip(e.to_string()),
    }
}

/// One round's state: where it writes, the delivery id its writes carry, what it found.
struct Round {
    api: Api<PreviewEnvironment>,
    delivery: String,
    now: Timestamp,
    report: ResyncReport,
    /// Repository → the installation that can see it, for every repository listed in full.
    listed: HashMap<RepoName, Installation>,
    /// The open pull requests seen.
    open: BTreeSet<(RepoName, u64)>,
}

impl Round {
    async fn write(&mut self, intent: &Intent) -> Result<Outcome, kube::Error> {
        let request = Request {
            sha: None,
            id: String::new(),
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
        listed: HashMap::new(),
        open: BTreeSet::new(),
    };
    let installations = match step(ctx.github.list_installations().await) {
        Step::Ok(list) => list,
        Step::Skip(why) | Step::Stop(why) => {
            r.report.stopped = Some(format!("listing installations: {why}"));
            return Ok(r.report);
        }
    };
    r.report.installations = installations.len();
    open::follow(ctx, &mut r, &installations, &specs, &existing).await?;
    closed::tear_down(&mut r, &existing).await?;
    statuses::check(&mut r, &existing, round, &ctx.term.shown).await?;
    Ok(r.report)
}
