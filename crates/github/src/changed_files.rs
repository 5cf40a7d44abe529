//! Which deploys of a pull request event its changed files concern, under each Blueprint's
//! `paths` and `ignorePaths` (`domain::paths`). GitHub is asked for the files once per event,
//! and only when a Blueprint filters: the pull request's files (paged; cut at 3,000, seen from
//! its `changed_files`), or for a push the comparison of its `before` and `after` (cut at 300).
//! A list cut short or a glob that cannot be read means "deploy"; GitHub failing to give the list
//! is an error, so that the caller asks again later rather than guess.

use crate::client::Installation;
use crate::event::{PrAction, PullRequestEvent};
use sandcastle_crd::BlueprintSpec;
use sandcastle_domain::intent::{Change, Intent, Skipped};
use sandcastle_domain::paths::PathFilter;

/// GitHub's comparison lists this many files at most.
const COMPARE_LIMIT: usize = 300;

/// What to say of a Blueprint whose previews the change does not concern.
pub const ONLY_IGNORED: &str =
    "only files outside the Blueprint's paths (or in its ignorePaths) changed";

/// Drop from `intents` the deploys (those `judged` selects) whose Blueprint's paths the change
/// of `ev` does not touch, saying why in `skipped`. GitHub not giving the changed files is an
/// error (`intents` is then left as it was).
pub async fn filter(
    gh: &Installation,
    ev: &PullRequestEvent,
    specs: &[(&str, &BlueprintSpec)],
    intents: &mut Vec<Intent>,
    skipped: &mut Vec<Skipped>,
    judged: impl Fn(&Intent) -> bool,
) -> Result<(), String> {
    // A label added (`preview-keep`) changes no files.
    if ev.action == PrAction::Labeled {
        return Ok(());
    }
    let filter_for = |intent: &Intent| {
        specs
            .iter()
            .find(|(n, _)| *n == intent.blueprint)
            .and_then(|(name, spec)| filter_of(name, spec))
            .filter(|_| deploys(intent) && judged(intent))
    };
    if !intents.iter().any(|i| filter_for(i).is_some()) {
        return Ok(());
    }
    // Asked once per event, and before anything is dropped.
    let files = changed(gh, ev).await?;
    let mut kept = Vec::with_capacity(intents.len());
    for intent in std::mem::take(intents) {
        match filter_for(&intent) {
            Some(filter) if !filter.concerns(files.as_deref()) => skipped.push(Skipped {
                blueprint: intent.blueprint.clone(),
                reason: ONLY_IGNORED.to_owned(),
            }),
            _ => kept.push(intent),
        }
    }
    *intents = kept;
    Ok(())
}

fn deploys(intent: &Intent) -> bool {
    matches!(intent.change, Change::Deploy { .. })
}

/// `spec`'s filter, unless it lets everything through; a glob that cannot be read lets
/// everything through too (and says so).
fn filter_of(name: &str, spec: &BlueprintSpec) -> Option<PathFilter> {
    match PathFilter::new(&spec.paths, &spec.ignore_paths) {
        Ok(f) if f.is_open() => None,
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!(blueprint = name, error = %e, "ignoring the Blueprint's path filter");
            None
        }
    }
}

/// The files `ev` changes, `None` when GitHub's list is cut short, or why GitHub did not give it.
async fn changed(gh: &Installation, ev: &PullRequestEvent) -> Result<Option<Vec<String>>, String> {
    let listed = match (&ev.action, &ev.before) {
        (PrAction::Synchronize, Some(before)) => gh
            .compare_files(&ev.repo, before, &ev.head.sha)
            .await
            .map(|f| (f.len() < COMPARE_LIMIT).then_some(f)),
        _ => gh.list_pull_files(&ev.repo, ev.number).await.map(|f| {
            let whole = ev
                .changed_files
                .is_none_or(|n| usize::try_from(n).is_ok_and(|n| n <= f.len()));
            whole.then_some(f)
        }),
    };
    listed.map_err(|e| {
        tracing::warn!(repo = %ev.repo, pr = %ev.number, error = %e, "could not list the changed files");
        format!("listing the changed files: {e}")
    })
}
