//! Carrying out `/preview` commands, recorded by the webhook as `PreviewCommand`s: each pull
//! request's commands one at a time, in the order they were written (comment ids). For each:
//! 👀, who may run it (GitHub's collaborator-permission API, people, bots and agents alike), the
//! desired-state writes, the replies, then 🚀 — or 😕 with a reply saying why. Each step is
//! recorded in the command's status before the next, so a restart neither loses one nor does it
//! twice (only a reply posted just before a crash may be posted again). GitHub failing is
//! retried with a growing pause; after [`GIVE_UP`] the command fails with the reason. Reactions
//! are best effort. A finished record is deleted after [`KEEP`]; until then a redelivery of its
//! delivery is recognised by its name.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::controller::Action;

use super::context::Context;
use super::error::Error;
use sandcastle_crd::labels::{FIELD_MANAGER, PR, REPO};
use sandcastle_crd::{
    Blueprint, CommandOutcome, CommandState, PreviewCommand, PreviewCommandStatus,
};
use sandcastle_domain::naming::repo_label_value;
use sandcastle_domain::{PrNumber, RepoName};
use sandcastle_github::client::{Installation, Reaction};
use sandcastle_kube::status;

mod act;

/// How long a finished command's record is kept.
pub const KEEP: Duration = Duration::from_secs(3600);
/// How long GitHub may stay unreachable before a command is given up.
pub const GIVE_UP: Duration = Duration::from_secs(3600);
pub use super::context::COMMAND_SETTLE as SETTLE;
/// Limit on one GitHub call.
const GITHUB_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a command could not be carried out now.
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

/// The pull request conversation a command came from.
pub(super) struct Conversation {
    pub gh: Installation,
    pub repo: RepoName,
    pub pr: PrNumber,
    pub comment_id: u64,
}

impl Conversation {
    async fn react(&self, reaction: Reaction) {
        let call = self
            .gh
            .add_comment_reaction(&self.repo, self.comment_id, reaction);
        match tokio::time::timeout(GITHUB_TIMEOUT, call).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(repo = %self.repo, pr = %self.pr, ?reaction, error = %e, "reacting failed");
            }
            Err(_) => {
                tracing::warn!(repo = %self.repo, pr = %self.pr, ?reaction, "reacting timed out");
            }
        }
    }

    async fn say(&self, text: &str) -> Result<(), String> {
        let call = self.gh.create_issue_comment(&self.repo, self.pr, text);
        match tokio::time::timeout(GITHUB_TIMEOUT, call).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("timed out".to_owned()),
        }
    }
}

pub(super) async fn reconcile(
    cached: Arc<PreviewCommand>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let api: Api<PreviewCommand> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let Some(cmd) = api.get_opt(&cached.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let mut st = cmd.status.clone().unwrap_or_default();
    if let Some(at) = &st.finished_at {
        return forget_when_kept(&api, &cmd, at, &ctx).await;
    }
    if earlier_unfinished(&api, &cmd).await? {
        // The pull request's earlier commands come first.
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let (Ok(repo), Ok(pr)) = (
        RepoName::new(&cmd.spec.repository),
        PrNumber::new(cmd.spec.pull_request),
    ) else {
        st.message = Some("the record names no valid repository or pull request".into());
        return finish(&api, &cmd, st, CommandState::Failed, &ctx).await;
    };
    let talk = Conversation {
        gh: ctx.github.installation(cmd.spec.installation_id),
        repo,
        pr,
        comment_id: cmd.spec.comment_id,
    };
    if st.state.is_none() {
        st.state = Some(CommandState::Pending);
    }
    if !st.acknowledged {
        talk.react(Reaction::Eyes).await;
        st.acknowledged = true;
        save(&api, &cmd, &st).await?;
    }
    if let Some(left) = settling(&cmd, jiff::Timestamp::now(), ctx.settings.command_settle) {
        // A comment written just before this one may be delivered just after it; once it is
        // recorded, `earlier_unfinished` holds this one back at the next pass.
        return Ok(Action::requeue(left));
    }
    if st.outcome.is_none() {
        match act::carry_out(&ctx, &cmd, &talk).await {
            Ok(outcome) => {
                st.outcome = Some(outcome);
                st.message = None;
                save(&api, &cmd, &st).await?;
            }
            Err(Later::Kube(e)) => return Err(e.into()),
            Err(Later::Retry(why)) => return retry(&api, &cmd, st, why, &ctx).await,
        }
    }
    let outcome = st.outcome.clone().unwrap_or_default();
    while let Some(text) = outcome.replies.get(st.replies_posted as usize) {
        if let Err(why) = talk.say(text).await {
            return retry(&api, &cmd, st, format!("replying failed: {why}"), &ctx).await;
        }
        st.replies_posted += 1;
        save(&api, &cmd, &st).await?;
    }
    talk.react(if outcome.refused {
        Reaction::Confused
    } else {
        Reaction::Rocket
    })
    .await;
    let state = if outcome.refused {
        CommandState::Refused
    } else {
        CommandState::Done
    };
    finish(&api, &cmd, st, state, &ctx).await
}

pub(super) fn error_policy(cmd: Arc<PreviewCommand>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(command = %cmd.name_any(), error = %err, "carrying out a command failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// How much longer `cmd` waits before it is carried out: `settle` from when it was recorded
/// (the API server's clock), so that a command written earlier on the same pull request but
/// delivered a moment later is recorded first and goes first. Never more than `settle` at a
/// time, whatever the clocks' skew.
fn settling(cmd: &PreviewCommand, now: jiff::Timestamp, settle: Duration) -> Option<Duration> {
    let recorded = cmd.metadata.creation_timestamp.as_ref()?.0;
    let waited = Duration::try_from(now.duration_since(recorded)).unwrap_or_default();
    (waited < settle).then(|| (settle - waited).min(settle))
}

/// Whether a command written earlier on the same pull request is still to be carried out.
async fn earlier_unfinished(
    api: &Api<PreviewCommand>,
    cmd: &PreviewCommand,
) -> Result<bool, kube::Error> {
    let Ok(repo) = RepoName::new(&cmd.spec.repository) else {
        return Ok(false);
    };
    let selector = format!(
        "{REPO}={},{PR}={}",
        repo_label_value(&repo),
        cmd.spec.pull_request
    );
    let list = api.list(&ListParams::default().labels(&selector)).await?;
    Ok(list.items.iter().any(|other| {
        other.spec.comment_id < cmd.spec.comment_id
            && other
                .status
                .as_ref()
                .is_none_or(|s| s.finished_at.is_none())
    }))
}

/// GitHub failed: try again after a pause that grows with the attempts, or give up once the
/// command is older than [`GIVE_UP`].
async fn retry(
    api: &Api<PreviewCommand>,
    cmd: &PreviewCommand,
    mut st: PreviewCommandStatus,
    why: String,
    ctx: &Context,
) -> Result<Action, Error> {
    tracing::warn!(command = %cmd.name_any(), attempt = st.attempts + 1, error = %why, "a command waits for GitHub");
    st.attempts += 1;
    st.message = Some(why);
    let age: Duration = ctx
        .clock
        .now()
        .duration_since(cmd.spec.received_at.0)
        .try_into()
        .unwrap_or_default();
    if age >= GIVE_UP {
        return finish(api, cmd, st, CommandState::Failed, ctx).await;
    }
    save(api, cmd, &st).await?;
    let pause = Duration::from_secs(2u64.saturating_pow(st.attempts.min(6)));
    Ok(Action::requeue(pause))
}

async fn finish(
    api: &Api<PreviewCommand>,
    cmd: &PreviewCommand,
    mut st: PreviewCommandStatus,
    state: CommandState,
    ctx: &Context,
) -> Result<Action, Error> {
    st.state = Some(state);
    st.finished_at = Some(Time(ctx.clock.now()));
    let outcome = st.outcome.clone().unwrap_or_default();
    let writes = serde_json::to_string(&outcome.previews).unwrap_or_default();
    tracing::info!(target: "audit", actor = %cmd.spec.author, action = %outcome.command, repo = %cmd.spec.repository, pr = cmd.spec.pull_request, result = ?state, previews = %writes, delivery = %cmd.spec.delivery, "pull request command");
    save(api, cmd, &st).await?;
    Ok(Action::requeue(KEEP))
}

/// A finished record goes [`KEEP`] after it finished.
async fn forget_when_kept(
    api: &Api<PreviewCommand>,
    cmd: &PreviewCommand,
    finished: &Time,
    ctx: &Context,
) -> Result<Action, Error> {
    let age: Duration = ctx
        .clock
        .now()
        .duration_since(finished.0)
        .try_into()
        .unwrap_or_default();
    if age < KEEP {
        return Ok(Action::requeue(KEEP - age));
    }
    match api.delete(&cmd.name_any(), &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(r)) if r.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::await_change())
}

async fn save(
    api: &Api<PreviewCommand>,
    cmd: &PreviewCommand,
    st: &PreviewCommandStatus,
) -> Result<(), kube::Error> {
    if cmd.status.as_ref() == Some(st) {
        return Ok(());
    }
    status::apply(api, &cmd.name_any(), FIELD_MANAGER, st).await?;
    Ok(())
}

/// The Blueprints in Sandcastle's namespace.
async fn blueprints(ctx: &Context) -> Result<Vec<Blueprint>, kube::Error> {
    let api: Api<Blueprint> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    Ok(api.list(&ListParams::default()).await?.items)
}

/// The outcome of a refusal with one reply.
fn refused(command: &str, reply: String) -> CommandOutcome {
    CommandOutcome {
        command: command.to_owned(),
        refused: true,
        replies: vec![reply],
        previews: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn recorded_at(t: jiff::Timestamp) -> PreviewCommand {
        let spec = serde_json::json!({"repository": "acme/shop", "pullRequest": 1, "installationId": 1,
            "commentId": 1, "author": "maria", "command": "/preview", "delivery": "d",
            "receivedAt": "2026-01-01T00:00:00Z"});
        let mut cmd = PreviewCommand::new("c", serde_json::from_value(spec).unwrap());
        cmd.metadata.creation_timestamp = Some(Time(t));
        cmd
    }

    #[test]
    fn a_command_settles_for_a_moment_after_it_is_recorded() {
        let t = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let at = |ms: i64| t + jiff::SignedDuration::from_millis(ms);
        assert_eq!(
            settling(&recorded_at(t), at(300), SETTLE),
            Some(Duration::from_millis(700))
        );
        assert_eq!(settling(&recorded_at(t), at(1000), SETTLE), None);
        assert_eq!(settling(&recorded_at(t), at(5000), SETTLE), None);
        // Recorded "in the future" by a skewed clock: never more than one settle at a time.
        assert_eq!(settling(&recorded_at(t), at(-60_000), SETTLE), Some(SETTLE));
    }
}
