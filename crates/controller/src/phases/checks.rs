//! Waiting for check runs (a Blueprint's `waitForChecks`, typically the jobs that build the
//! pull request's images): the controller asks GitHub itself, so a lost `check_run` delivery
//! delays a deploy by one poll at most; a completed check run's delivery nudges it sooner.
//! Between polls and nudges the last answer stands (`check_answers`), so the reconciles
//! Sandcastle's own writes cause (going Pending, the sticky comment) cost no GitHub calls.

use std::time::Duration;

use kube::ResourceExt;

pub(crate) use super::check_answers::Gate;
use super::check_answers::judge;
use crate::context::Context;
use sandcastle_crd::PreviewEnvironment;
use sandcastle_crd::labels::CHECKS_CHANGED;
use sandcastle_domain::{RepoName, Sha};
use sandcastle_github::client::GitHubError;

/// Pause after GitHub did not answer (unless it said how long to wait).
const RETRY: Duration = Duration::from_secs(30);

/// Whether `pe`'s commit may be deployed: GitHub's answer, or its last one while no poll is due
/// and no `check_run` delivery nudged the preview since.
pub(super) async fn gate(pe: &PreviewEnvironment, required: &[String], ctx: &Context) -> Gate {
    let preview = pe.name_any();
    let nudge = pe
        .annotations()
        .get(CHECKS_CHANGED)
        .map_or("", String::as_str);
    let key = format!("{}|{}|{nudge}", pe.spec.sha, required.join(","));
    let now = ctx.clock.now();
    let poll = ctx.settings.checks_poll_interval;
    if let Some(gate) = ctx.checks_asked.recall(&preview, &key, now, poll) {
        return gate;
    }
    match ask(pe, required, ctx).await {
        Ok(gate) => {
            ctx.checks_asked.remember(&preview, key, now, &gate);
            gate
        }
        // GitHub did not answer: the pause it asked for, then ask again.
        Err(waiting) => waiting,
    }
}

/// Ask GitHub about the checks on `pe`'s commit: its answer, or (`Err`) a wait after it did not
/// answer.
async fn ask(pe: &PreviewEnvironment, required: &[String], ctx: &Context) -> Result<Gate, Gate> {
    let (Some(installation), Ok(repo), Ok(sha)) = (
        pe.spec.installation_id,
        RepoName::new(&pe.spec.repository),
        Sha::new(&pe.spec.sha),
    ) else {
        // Nothing to ask (a preview made without GitHub): nothing to wait for.
        return Ok(Gate::Passed);
    };
    let gh = ctx.github.installation(installation);
    match gh.list_check_runs(&repo, &sha).await {
        Ok(runs) => Ok(judge(
            required,
            &runs,
            &sha,
            ctx.settings.checks_poll_interval,
        )),
        Err(e) => {
            tracing::warn!(preview = %pe.spec.repository, sha = %sha, error = %e, "listing check runs failed");
            let again = match e {
                GitHubError::RateLimited { retry_at } => {
                    Duration::try_from(retry_at.duration_since(ctx.clock.now()))
                        .unwrap_or(RETRY)
                        .max(Duration::from_secs(1))
                }
                _ => RETRY,
            };
            let names = required.join(", ");
            Err(Gate::Waiting {
                pending: required.to_vec(),
                message: format!(
                    "waiting for checks on {}: {names} (GitHub did not answer: {e})",
                    sha.short()
                ),
                again,
            })
        }
    }
}
