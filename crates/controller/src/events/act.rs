//! One pull request event carried out: the Blueprints that cover the repository, its
//! `.github/sandcastle.yml` from the base branch, the triggers, the changed files under each
//! Blueprint's paths, and the desired-state writes; on an opened pull request, a note for each
//! Blueprint that gives its author's class no preview. GitHub not giving the configuration or the
//! changed files now is [`Later::Retry`]; nothing is written until both are known.

use std::time::Duration;

use futures::FutureExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams};

use crate::context::Context;
use sandcastle_crd::labels::WAITING_FOR_GITHUB;
use sandcastle_crd::{
    Blueprint, BlueprintSpec, CommandWrite, EventOutcome, EventSkip, PreviewEnvironment,
};
use sandcastle_domain::{RepoName, intent};
use sandcastle_github::client::Installation;
use sandcastle_github::event::{PrAction, PullRequestEvent};
use sandcastle_github::repo_config::RepoConfig;
use sandcastle_github::text::replies::{Reply, reply_text};
use sandcastle_github::{changed_files, command_parser, config_file, triggers};
use sandcastle_kube::events::Request;
use sandcastle_kube::previews::{self, Outcome};

/// Limit on one GitHub call an event waits for.
const GITHUB_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an event could not be carried out now.
#[derive(Debug)]
pub(super) enum Later {
    /// GitHub (or a contended write) failed; try again after a pause.
    Retry(String),
    Kube(kube::Error),
}

impl From<kube::Error> for Later {
    fn from(e: kube::Error) -> Self {
        Self::Kube(e)
    }
}

/// Carry out `ev` (delivered as `delivery`, received at `asked`): what it wrote, and why
/// Blueprints were passed over.
pub(super) async fn carry_out(
    ctx: &Context,
    ev: &PullRequestEvent,
    delivery: &str,
    asked: jiff::Timestamp,
) -> Result<EventOutcome, Later> {
    let blueprints = blueprints(ctx, &ev.repo).await?;
    let specs: Vec<(&str, &BlueprintSpec)> = blueprints
        .iter()
        .filter_map(|b| b.metadata.name.as_deref().map(|n| (n, &b.spec)))
        .collect();
    let gh = ev.installation_id.map(|id| ctx.github.installation(id));
    let config = match &gh {
        Some(gh) if reads_config(ev) => config(ctx, gh, ev, &specs).await?,
        _ => RepoConfig::default(),
    };
    let (mut intents, mut skipped) = triggers::from_pull_request(ev, &specs, &config);
    if let Some(gh) = &gh {
        changed_files::filter(gh, ev, &specs, &mut intents, &mut skipped, |_| true)
            .await
            .map_err(Later::Retry)?;
        if ev.action == PrAction::Opened {
            tell_classes_off(ctx, gh, ev, &specs, &config).await;
        }
    }
    let api: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let now = ctx.clock.now();
    let mut written = Vec::new();
    for intent in &intents {
        let request = Request {
            sha: None,
            id: String::new(),
            at: asked,
            actor: format!("@{}", ev.sender),
            action: format!("pull-request-{}", ev.action.as_str()),
            note: format!(
                "pull request #{} {} at commit {}",
                ev.number,
                ev.action.as_str(),
                intent.sha.short()
            ),
        };
        let outcome = previews::apply(&api, intent, &request, delivery, now).await?;
        if matches!(outcome, Outcome::Deleting | Outcome::Contended) {
            return Err(Later::Retry(format!(
                "preview {} is {}",
                intent.preview,
                if outcome == Outcome::Deleting {
                    "being deleted"
                } else {
                    "being changed by another writer"
                }
            )));
        }
        tracing::info!(target: "audit", actor = %ev.sender, action = ev.action.as_str(), preview = %intent.preview, sha = %intent.sha, result = outcome.as_str(), delivery, "pull request event");
        written.push(CommandWrite {
            preview: intent.preview.to_string(),
            result: outcome.as_str().to_owned(),
        });
    }
    Ok(EventOutcome {
        previews: written,
        skipped: skipped
            .into_iter()
            .map(|s| EventSkip {
                blueprint: s.blueprint,
                reason: s.reason,
            })
            .collect(),
    })
}

/// The Blueprints, from the controller's watch cache once it is filled and knows one that covers
/// `repo` (the webhook recorded the event because one does: a cache that knows none lags behind
/// a Blueprint made a moment ago); from the API otherwise.
async fn blueprints(ctx: &Context, repo: &RepoName) -> Result<Vec<Blueprint>, kube::Error> {
    if let Some(cache) = &ctx.blueprints {
        let filled = cache
            .wait_until_ready()
            .now_or_never()
            .is_some_and(|r| r.is_ok());
        let state = cache.state();
        if filled && state.iter().any(|b| intent::covers_repo(&b.spec, repo)) {
            return Ok(state.iter().map(|b| Blueprint::clone(b)).collect());
        }
    }
    let api: Api<Blueprint> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    Ok(api.list(&ListParams::default()).await?.items)
}

/// Whether the repository's configuration file decides anything for `ev`: the events that may
/// deploy (those that take previews down do so whatever the file says).
fn reads_config(ev: &PullRequestEvent) -> bool {
    match &ev.action {
        PrAction::Opened
        | PrAction::Reopened
        | PrAction::Synchronize
        | PrAction::ReadyForReview => true,
        PrAction::Unlabeled => ev.label.as_deref() == Some(intent::NO_PREVIEW_LABEL),
        PrAction::Labeled => ev.label.as_deref() == Some(intent::KEEP_LABEL),
        _ => false,
    }
}

/// `.github/sandcastle.yml` from `ev`'s base branch, as far as the Blueprints that admit it go.
async fn config(
    ctx: &Context,
    gh: &Installation,
    ev: &PullRequestEvent,
    specs: &[(&str, &BlueprintSpec)],
) -> Result<RepoConfig, Later> {
    let admitting: Vec<(&str, &BlueprintSpec)> = specs
        .iter()
        .copied()
        .filter(|(_, s)| intent::admits(s, &ev.repo, &ev.base.ref_))
        .collect();
    config_file::load(reader(ctx, gh, ev), &admitting)
        .await
        .map_err(|e| {
            Later::Retry(format!(
                "reading {}: {}",
                sandcastle_github::repo_config::PATH,
                e.why
            ))
        })
}

/// How the controller reads and writes on `ev`'s pull request through `gh`.
fn reader<'a>(
    ctx: &Context,
    gh: &'a Installation,
    ev: &'a PullRequestEvent,
) -> config_file::Reader<'a> {
    config_file::Reader {
        gh,
        app_id: ctx.github.app_id(),
        repo: &ev.repo,
        base: &ev.base.ref_,
        pr: ev.number,
        timeout: GITHUB_TIMEOUT,
    }
}

/// Say on a pull request just opened which Blueprints give its author's class no preview (a
/// rule `trigger: off`), once each. Failures are logged: the event is not held for them.
async fn tell_classes_off(
    ctx: &Context,
    gh: &Installation,
    ev: &PullRequestEvent,
    specs: &[(&str, &BlueprintSpec)],
    config: &RepoConfig,
) {
    for (name, spec) in specs
        .iter()
        .filter(|(n, s)| intent::admits(s, &ev.repo, &ev.base.ref_) && config.selects(n))
    {
        let class = triggers::class_of(ev, spec);
        if triggers::off_reason(spec, Some(class)).is_none() {
            continue;
        }
        let text = reply_text(
            &Reply::AuthorClassOff {
                blueprint: (*name).to_owned(),
                class,
            },
            &command_parser::HelpLimits::of(Some(spec)),
        );
        let marker = format!("<!-- sandcastle-note class-off {name} -->");
        if let Err(e) = config_file::tell_once(reader(ctx, gh, ev), &marker, &text).await {
            tracing::warn!(repo = %ev.repo, pr = %ev.number, blueprint = %name, error = %e, "could not say why the pull request gets no preview");
        }
    }
}

/// Say on each preview of `ev`'s pull request what its event waits for from GitHub (`None`: no
/// longer), so that the API, MCP and the dashboard show it; `untouched`: previews known to say
/// nothing of it. Best effort: the record says it too.
pub(super) async fn waiting_said(
    ctx: &Context,
    ev: &PullRequestEvent,
    why: Option<&str>,
    untouched: &[&str],
) {
    let Ok(blueprints) = blueprints(ctx, &ev.repo).await else {
        return;
    };
    let api: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let value = why.map(|w| format!("waiting for GitHub: {w}"));
    let patch = serde_json::json!({"metadata": {"annotations": {WAITING_FOR_GITHUB: value}}});
    for bp in blueprints
        .iter()
        .filter(|b| intent::covers_repo(&b.spec, &ev.repo))
    {
        let name = intent::preview_name(
            &bp.metadata.name.clone().unwrap_or_default(),
            &bp.spec,
            &ev.repo,
            ev.number,
        );
        if untouched.contains(&name.as_str()) {
            continue;
        }
        let Ok(Some(pe)) = api.get_opt(name.as_str()).await else {
            continue;
        };
        let now = pe
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(WAITING_FOR_GITHUB));
        if now == value.as_ref() {
            continue;
        }
        if let Err(e) = api
            .patch(
                name.as_str(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            tracing::debug!(preview = %name, error = %e, "could not say what the preview waits for");
        }
    }
}
