//! Keeping each Blueprint's warm pool full, while this replica leads: every few seconds (from
//! the controller's caches, so a round that has nothing to do costs no request), a pool short of
//! its `size` gets new previews — sandboxes of the repository's default branch, whose head is
//! asked of GitHub at most once a minute per repository — a `stopped` pool's Ready previews are
//! stopped, a pool grown smaller (or removed) gives up its newest previews, and the Blueprint's
//! status says how the pool stands. Claiming a preview is the claimant's (`kube::previews::pool`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::context::Context;
use sandcastle_crd::{
    Blueprint, Interface, Phase, PoolSpec, PoolState, PreviewEnvironment, Teardown, TeardownReason,
};
use sandcastle_domain::pool::{self, NewMember};
use sandcastle_domain::{RepoName, Sha};
use sandcastle_kube::status;

/// How often the pools are looked at.
pub const POOL_EVERY: Duration = Duration::from_secs(2);
/// How long the default branch's head is believed.
const HEAD_FOR: Duration = Duration::from_secs(60);
/// The field manager of the Blueprints' pool status.
const MANAGER: &str = "sandcastle-pool";

/// The repository's default branch and its head, when last asked.
#[derive(Clone)]
struct Head {
    at: Instant,
    branch: String,
    sha: Sha,
    installation: Option<u64>,
}

/// What the keeper remembers between rounds.
#[derive(Default)]
struct Keeper {
    heads: HashMap<RepoName, Head>,
    /// The pool status last written, by Blueprint.
    written: HashMap<String, serde_json::Value>,
    /// Previews made and not in the cache yet (counted as live until seen, or 30 s), by
    /// Blueprint: a round right after a create must not make another.
    made: HashMap<String, Vec<(String, Instant)>>,
}

/// How long a preview just made counts as the pool's before the cache shows it.
const UNSEEN_FOR: Duration = Duration::from_secs(30);

/// Keep the pools until `shutdown`.
pub(crate) async fn run(ctx: Context, shutdown: impl std::future::Future<Output = ()>) {
    let mut keeper = Keeper::default();
    let mut interval = tokio::time::interval(POOL_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = interval.tick() => keeper.round(&ctx).await,
        }
    }
}

impl Keeper {
    async fn round(&mut self, ctx: &Context) {
        let (Some(blueprints), Some(previews)) = (&ctx.blueprints, &ctx.previews) else {
            return;
        };
        let all = previews.state();
        for bp in blueprints.state() {
            let name = bp.name_any();
            let mut live: Vec<Arc<PreviewEnvironment>> = all
                .iter()
                .filter(|p| pool::is_live_member(p, &name))
                .cloned()
                .collect();
            live.sort_by_key(|p| (p.creation_timestamp().map(|t| t.0), p.name_any()));
            let made = self.made.entry(name.clone()).or_default();
            made.retain(|(n, at)| {
                at.elapsed() < UNSEEN_FOR && !all.iter().any(|p| p.name_any() == *n)
            });
            let unseen = made.len();
            let message = match &bp.spec.pool {
                Some(spec) => self.keep(ctx, &bp, spec, &live, unseen).await,
                None if live.is_empty() => continue,
                None => {
                    retire(ctx, &live, "its Blueprint keeps no pool any more").await;
                    None
                }
            };
            self.report(ctx, &bp, &live, message).await;
        }
    }

    /// Bring `bp`'s pool to its size; why it cannot, when it cannot.
    async fn keep(
        &mut self,
        ctx: &Context,
        bp: &Blueprint,
        spec: &PoolSpec,
        live: &[Arc<PreviewEnvironment>],
        unseen: usize,
    ) -> Option<String> {
        let size = spec.size as usize;
        if live.len() > size {
            retire(ctx, &live[size..], "its pool is smaller now").await;
        }
        if spec.state == PoolState::Stopped {
            for pe in live.iter().take(size) {
                let ready = pe.status.as_ref().and_then(|s| s.phase) == Some(Phase::Ready);
                if ready && !pe.spec.stopped {
                    stop(ctx, pe).await;
                }
            }
        }
        // Previews of the pool that fail (a host template that needs a pull request, a refused
        // blueprint) are never claimed: say why, rather than keeping a pool of failures quietly.
        let failing = live.iter().find_map(|p| {
            let st = p.status.as_ref()?;
            (st.phase == Some(Phase::Failed)).then(|| st.message.clone().unwrap_or_default())
        });
        let missing = pool::missing(live.len() + unseen, spec);
        if let Some(why) = failing {
            return Some(format!("pool previews fail: {why}"));
        }
        if missing == 0 {
            return None;
        }
        let repo = match pool::repository(&bp.spec, spec) {
            Ok(r) => r,
            Err(why) => return Some(why),
        };
        let head = match self.head(ctx, &repo).await {
            Ok(h) => h,
            Err(why) => return Some(why),
        };
        for _ in 0..missing {
            match make(ctx, bp, &repo, &head).await {
                Ok(name) => self
                    .made
                    .entry(bp.name_any())
                    .or_default()
                    .push((name, Instant::now())),
                Err(e) => return Some(format!("making a pool preview failed: {e}")),
            }
        }
        None
    }

    /// The default branch of `repo` and its head, from GitHub at most once a minute.
    async fn head(&mut self, ctx: &Context, repo: &RepoName) -> Result<Head, String> {
        if let Some(h) = self.heads.get(repo).filter(|h| h.at.elapsed() < HEAD_FOR) {
            return Ok(h.clone());
        }
        let unavailable = |e: sandcastle_github::client::GitHubError| {
            format!("GitHub did not say what the default branch of {repo} is: {e}")
        };
        let installation = ctx
            .github
            .repo_installation(repo)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| format!("the GitHub App is not installed on {repo}"))?;
        let client = ctx.github.installation(installation);
        let branch = client.default_branch(repo).await.map_err(unavailable)?;
        let sha = client
            .resolve_ref(repo, &branch)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| format!("{repo} has no branch {branch}"))?;
        let head = Head {
            at: Instant::now(),
            branch,
            sha,
            installation: Some(installation),
        };
        self.heads.insert(repo.clone(), head.clone());
        Ok(head)
    }

    /// Write `bp`'s pool status when it changed.
    async fn report(
        &mut self,
        ctx: &Context,
        bp: &Blueprint,
        live: &[Arc<PreviewEnvironment>],
        message: Option<String>,
    ) {
        let phase = |p: &&Arc<PreviewEnvironment>| p.status.as_ref().and_then(|s| s.phase);
        let count = |wanted: Phase| live.iter().filter(|p| phase(p) == Some(wanted)).count();
        let pool = json!({
            "size": bp.spec.pool.as_ref().map_or(0, |p| p.size),
            "previews": live.len(),
            "ready": count(Phase::Ready),
            "stopped": count(Phase::Stopped),
            "message": message,
        });
        let name = bp.name_any();
        if self.written.get(&name) == Some(&pool) {
            return;
        }
        let api: Api<Blueprint> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
        match status::apply(&api, &name, MANAGER, &json!({"pool": pool})).await {
            Ok(_) => {
                self.written.insert(name, pool);
            }
            Err(e) => {
                tracing::warn!(blueprint = %name, error = %e, "writing the pool status failed");
            }
        }
    }
}

/// A new preview of `bp`'s pool, at the default branch's head.
async fn make(
    ctx: &Context,
    bp: &Blueprint,
    repo: &RepoName,
    head: &Head,
) -> Result<String, kube::Error> {
    let now = ctx.clock.now();
    let ttl = jiff::SignedDuration::try_from(bp.spec.ttl.get()).unwrap_or_default();
    let suffix = format!("{:08x}", rand::random::<u32>());
    let blueprint = bp.name_any();
    let pe = pool::new_member(
        &NewMember {
            name: pool::member_name(&blueprint, &suffix),
            blueprint: &blueprint,
            repo,
            branch: &head.branch,
            sha: &head.sha,
            installation: head.installation,
            expires: now.checked_add(ttl).unwrap_or(now),
        },
        now,
    );
    let api: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    api.create(&PostParams::default(), &pe).await?;
    tracing::info!(target: "audit", actor = pool::POOL_REQUESTER, action = "create", preview = %pe.name_any(), sha = %head.sha, result = "created", via = "pool", "warm pool preview made");
    Ok(pe.name_any())
}

/// Stop a pool preview (a `stopped` pool keeps its previews scaled to zero).
async fn stop(ctx: &Context, pe: &PreviewEnvironment) {
    let api: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let patch =
        json!({"metadata": {"resourceVersion": pe.resource_version()}, "spec": {"stopped": true}});
    if let Err(e) = api
        .patch(
            &pe.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        tracing::debug!(preview = %pe.name_any(), error = %e, "stopping a pool preview: next round");
    }
}

/// Tear the pool's previews `gone` down, saying `why`.
async fn retire(ctx: &Context, gone: &[Arc<PreviewEnvironment>], why: &str) {
    let api: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    for pe in gone {
        let teardown = Teardown {
            reason: TeardownReason::Destroyed,
            actor: Some(format!("{} ({why})", pool::POOL_REQUESTER)),
            via: Some(Interface::Sandcastle),
            at: Time(ctx.clock.now()),
        };
        let patch = json!({"metadata": {"resourceVersion": pe.resource_version()}, "spec": {"teardown": teardown}});
        if let Err(e) = api
            .patch(
                &pe.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            tracing::debug!(preview = %pe.name_any(), error = %e, "retiring a pool preview: next round");
        }
    }
}
