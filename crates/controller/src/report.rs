//! Keeping GitHub in line with a preview: one deployment per commit (and per comeback) on the
//! preview's own environment, and its statuses in order — `queued` → `in_progress` →
//! `success`/`failure`, `inactive` on teardown, `stopped` (an `inactive` saying how to wake it).
//! A reconcile says what GitHub should show ([`Report`]); [`next_state`] decides, without I/O,
//! which one status that means posting now (at most one per pass, the missing step first, so
//! GitHub always sees the whole sequence); [`sync`] makes the calls. A failed call never blocks
//! the Kubernetes side: the status keeps what was reported, so a later pass posts what is
//! missing — and never posts a state twice.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use serde_json::json;

use super::term::{Shown, Term};
use sandcastle_crd::{PreviewEnvironment, PreviewStatus, Reported};
use sandcastle_domain::RepoName;
use sandcastle_domain::clock::Clock;
use sandcastle_github::client::GitHubApp;
use sandcastle_github::client::{
    DeploymentState, GitHubError, Installation, NewDeployment, NewStatus,
};
use sandcastle_github::text::statuses::fit_description;
use sandcastle_github::text::teardown::inactive_description;

/// What reporting to GitHub needs of the controller: the App, the clock, what this term has
/// posted, and Sandcastle's public address (the preview pages deployments link to). A narrow
/// view of the context, so that reporting sits below the phases that report.
pub(crate) struct Reporting<'a> {
    pub github: &'a GitHubApp,
    pub clock: &'a Clock,
    pub term: &'a Term,
    pub public_url: &'a str,
}

/// What GitHub should show for the preview's current commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Report {
    /// Accepted, not started: a new commit before cloning begins, or waiting for a free slot
    /// under the Blueprint's `maxPreviews` (description).
    Queued(String),
    InProgress,
    Success,
    /// Failed: `why` (≤ 140 characters), and whether a rollout had started (then GitHub sees
    /// it in progress before it fails).
    Failure {
        why: String,
        rollout: bool,
    },
    /// Scaled to zero: `inactive` (the URL does not answer) with how to wake it. Recorded as
    /// `stopped`, so waking reports on the same deployment.
    Stopped(String),
    Inactive,
}

impl Report {
    fn state(&self) -> Reported {
        match self {
            Self::Queued(_) => Reported::Queued,
            Self::InProgress => Reported::InProgress,
            Self::Success => Reported::Success,
            Self::Failure { .. } => Reported::Failure,
            Self::Stopped(_) => Reported::Stopped,
            Self::Inactive => Reported::Inactive,
        }
    }
}

/// The one state to post now so that GitHub moves towards `report`, given what the current
/// deployment last showed (`None`: a deployment that shows nothing yet). A deployment shows
/// `queued` only while it waits (for a slot, for checks); it is in progress before it succeeds
/// or before a rollout fails (a blueprint refused before anything ran fails at once); waking a
/// stopped one goes through in progress again. `None`: GitHub already shows it. Each state is a
/// call, so no step is posted that says nothing (GitHub's `queued` is optional).
pub(super) fn next_state(reported: Option<Reported>, report: &Report) -> Option<Reported> {
    let desired = report.state();
    if reported == Some(desired) {
        return None;
    }
    let through_progress = matches!(
        report,
        Report::Success | Report::Failure { rollout: true, .. }
    );
    Some(match reported {
        None | Some(Reported::Queued | Reported::Stopped) if through_progress => {
            Reported::InProgress
        }
        _ => desired,
    })
}

/// A deployment status state as the preview's status records it.
pub(super) fn reported(state: DeploymentState) -> Reported {
    match state {
        DeploymentState::Queued => Reported::Queued,
        DeploymentState::Pending => Reported::Pending,
        DeploymentState::InProgress => Reported::InProgress,
        DeploymentState::Success => Reported::Success,
        DeploymentState::Failure => Reported::Failure,
        DeploymentState::Error => Reported::Error,
        DeploymentState::Inactive => Reported::Inactive,
    }
}

/// The preview's page on Sandcastle, GitHub's `log_url`.
pub(crate) fn log_url(ctx: &Reporting<'_>, preview: &str) -> String {
    format!(
        "{}/previews/{preview}",
        ctx.public_url.trim_end_matches('/')
    )
}

fn set_condition(st: &mut PreviewStatus, ok: bool, message: String, now: Timestamp) {
    let cond = Condition {
        type_: "GitHubReported".into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: if ok { "Reported" } else { "GitHubUnavailable" }.into(),
        message,
        last_transition_time: Time(now),
        observed_generation: None,
    };
    match st.conditions.iter_mut().find(|c| c.type_ == cond.type_) {
        Some(c) if c.status == cond.status => c.message = cond.message,
        Some(c) => *c = cond,
        None => st.conditions.push(cond),
    }
}

/// Bring GitHub in line with `report`, recording what was posted in `st`. Returns
/// false when GitHub could not be told (look again sooner).
pub(super) async fn sync(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    ctx: &Reporting<'_>,
    report: &Report,
) -> bool {
    let Some(installation_id) = pe.spec.installation_id else {
        return true;
    };
    let Ok(repo) = RepoName::new(&pe.spec.repository) else {
        return true;
    };
    let gh = ctx.github.installation(installation_id);
    let now = ctx.clock.now();
    let result = match report {
        Report::Inactive => inactivate(pe, st, &ctx.term.shown, &gh, &repo).await,
        _ => post(pe, st, ctx, &gh, &repo, report).await,
    };
    match result {
        Ok(()) => {
            if st.conditions.iter().any(|c| c.type_ == "GitHubReported") {
                set_condition(st, true, String::new(), now);
            }
            true
        }
        // Retrying soon will not change GitHub's mind (a commit it does not know, a permission
        // the App lacks): the condition says why, and the next pass at the usual pace tries again.
        Err(e) if !e.is_retryable() => {
            tracing::warn!(preview = %pe.name_any(), error = %e, "GitHub refused the report; trying again at the next pass");
            set_condition(st, false, format!("GitHub: {e}"), now);
            true
        }
        Err(e) => {
            tracing::warn!(preview = %pe.name_any(), error = %e, "reporting to GitHub failed; will retry");
            set_condition(st, false, format!("GitHub: {e}"), now);
            false
        }
    }
}

/// Teardown: the previous commit's deployment and the current one become `inactive`.
async fn inactivate(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    shown: &Shown,
    gh: &Installation,
    repo: &RepoName,
) -> Result<(), GitHubError> {
    if let Some(old) = st.github_previous_deployment_id {
        shown
            .post(gh, repo, old, &NewStatus::new(DeploymentState::Inactive))
            .await?;
        st.github_previous_deployment_id = None;
    }
    if let Some(id) = st.github_deployment_id
        && st.github_reported != Some(Reported::Inactive)
    {
        let mut inactive = NewStatus::new(DeploymentState::Inactive);
        inactive.description = Some(pe.spec.teardown.as_ref().map_or_else(
            || "Replaced: the preview came back and is deployed again".to_owned(),
            |t| inactive_description(t.into()),
        ));
        if st.github_reported == Some(Reported::Stopped) {
            // A stopped preview shows `inactive` already, saying how to wake it: the removal
            // is a new status on the same state, so that GitHub says why it went.
            gh.create_deployment_status(repo, id, &inactive).await?;
            shown.set(id, Some(DeploymentState::Inactive));
        } else {
            shown.post(gh, repo, id, &inactive).await?;
        }
        st.github_reported = Some(Reported::Inactive);
    }
    Ok(())
}

/// A newer commit's deployment replaces `old`. One that succeeded still serves until the new
/// one succeeds (then it becomes `inactive`); one still queued or in progress never will, and
/// becomes `inactive` now, saying which commit superseded it. A failed one keeps its failure.
async fn supersede(
    shown: &Shown,
    gh: &Installation,
    repo: &RepoName,
    st: &mut PreviewStatus,
    old: u64,
    newer: &str,
) -> Result<(), GitHubError> {
    match st.github_reported {
        Some(Reported::Success) => st.github_previous_deployment_id = Some(old),
        None | Some(Reported::Queued | Reported::Pending | Reported::InProgress) => {
            let mut inactive = NewStatus::new(DeploymentState::Inactive);
            let short = newer.get(..7).unwrap_or(newer);
            inactive.description = Some(format!("Superseded by {short} before it was ready"));
            shown.post(gh, repo, old, &inactive).await?;
        }
        Some(Reported::Failure | Reported::Error | Reported::Inactive | Reported::Stopped) => {}
    }
    Ok(())
}

/// Make sure the commit has its deployment (a new one for a new commit or a comeback; one made
/// before a crash is adopted with what it shows), then post the next state towards `report`.
async fn post(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    ctx: &Reporting<'_>,
    gh: &Installation,
    repo: &RepoName,
    report: &Report,
) -> Result<(), GitHubError> {
    let name = pe.name_any();
    let resurrected = st.github_reported == Some(Reported::Inactive);
    if st.github_deployment_sha.as_deref() != Some(pe.spec.sha.as_str()) || resurrected {
        let (id, adopted) = match known_deployment(pe, ctx, gh, repo, resurrected).await? {
            // Made before a crash or a change of leader (or by this term, before a status write
            // failed): what it already shows was reported, and is not posted again.
            Some(id) => (id, adopted_state(ctx, gh, repo, id).await?),
            None => (create_deployment(pe, st, ctx, gh, repo).await?, None),
        };
        if let Some(old) = st.github_deployment_id.filter(|old| *old != id) {
            supersede(&ctx.term.shown, gh, repo, st, old, &pe.spec.sha).await?;
        }
        st.github_deployment_id = Some(id);
        st.github_deployment_sha = Some(pe.spec.sha.clone());
        st.github_reported = adopted;
    }
    let Some(id) = st.github_deployment_id else {
        return Ok(());
    };
    // Through `in_progress` when the deployment has shown nothing yet (at most two posts).
    while let Some(state) = next_state(st.github_reported, report) {
        let mut status = new_status(state, report, st);
        status.log_url = Some(log_url(ctx, &name));
        ctx.term.shown.post(gh, repo, id, &status).await?;
        st.github_reported = Some(state);

        if state == Reported::Success
            && let Some(old) = st.github_previous_deployment_id
        {
            ctx.term
                .shown
                .post(gh, repo, old, &NewStatus::new(DeploymentState::Inactive))
                .await?;
            st.github_previous_deployment_id = None;
        }
    }
    Ok(())
}

/// A deployment of this commit that exists already, whose id never reached the status: one
/// this term made, or (unless the preview is fresh, so no other leader can have made one) the
/// newest GitHub has. A comeback always gets a new one.
async fn known_deployment(
    pe: &PreviewEnvironment,
    ctx: &Reporting<'_>,
    gh: &Installation,
    repo: &RepoName,
    resurrected: bool,
) -> Result<Option<u64>, GitHubError> {
    if resurrected {
        return Ok(None);
    }
    if let Some(id) = ctx.term.deployment(pe, &pe.spec.sha) {
        return Ok(Some(id));
    }
    if ctx.term.fresh(pe) {
        return Ok(None);
    }
    let environment = sandcastle_domain::naming::github_environment(&pe.name_any());
    Ok(gh
        .find_deployment(repo, &environment, &pe.spec.sha)
        .await?
        .map(|d| d.id))
}

/// What an existing deployment already shows, as reported (nothing once it is inactive).
async fn adopted_state(
    ctx: &Reporting<'_>,
    gh: &Installation,
    repo: &RepoName,
    id: u64,
) -> Result<Option<Reported>, GitHubError> {
    let shown = match ctx.term.shown.get(id) {
        Some(shown) => shown,
        None => {
            let latest = gh.list_deployment_statuses(repo, id).await?;
            let shown = latest.first().map(|s| s.state);
            ctx.term.shown.set(id, shown);
            shown
        }
    };
    Ok(shown.map(reported).filter(|s| *s != Reported::Inactive))
}

async fn create_deployment(
    pe: &PreviewEnvironment,
    st: &PreviewStatus,
    ctx: &Reporting<'_>,
    gh: &Installation,
    repo: &RepoName,
) -> Result<u64, GitHubError> {
    let name = pe.name_any();
    let deployment = gh
        .create_deployment(
            repo,
            &NewDeployment {
                ref_: pe.spec.sha.clone(),
                environment: sandcastle_domain::naming::github_environment(&name),
                description: Some(format!("Sandcastle preview {name}")),
                payload: json!({"preview": name, "namespace": st.namespace, "blueprint": pe.spec.blueprint}),
                transient_environment: true,
                production_environment: false,
                auto_merge: false,
                required_contexts: Vec::new(),
            },
        )
        .await?;
    ctx.term.created_deployment(pe, &pe.spec.sha, deployment.id);
    Ok(deployment.id)
}

/// The deployment status posted for `state` on the way to `report`.
fn new_status(state: Reported, report: &Report, st: &PreviewStatus) -> NewStatus {
    let (github, description) = match (state, report) {
        (Reported::Queued, Report::Queued(why)) => (DeploymentState::Queued, why.clone()),
        (Reported::Queued, _) => (
            DeploymentState::Queued,
            format!(
                "Queued: {}",
                st.message.as_deref().unwrap_or("about to be deployed")
            ),
        ),
        (Reported::Success, _) => (
            DeploymentState::Success,
            st.message.clone().unwrap_or_default(),
        ),
        (Reported::Failure, Report::Failure { why, .. }) => (DeploymentState::Failure, why.clone()),
        (Reported::Stopped, Report::Stopped(why)) => (DeploymentState::Inactive, why.clone()),
        // On the way to a failure the status message already is the failure: not for this one.
        (Reported::InProgress, Report::Failure { .. }) => {
            (DeploymentState::InProgress, "Deploying".to_owned())
        }
        (Reported::InProgress, _) => (
            DeploymentState::InProgress,
            st.message.clone().unwrap_or_else(|| "Deploying".to_owned()),
        ),
        (state, _) => (DeploymentState::Error, format!("unexpected {state:?}")),
    };
    let mut status = NewStatus::new(github);
    status.description = Some(fit_description(&description)).filter(|d| !d.is_empty());
    if github == DeploymentState::Success {
        status.environment_url = st.url.clone();
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_sees_every_step_of_a_deployment_once() {
        use Reported::*;
        let queued = Report::Queued("Waiting for a free slot".into());
        let refused = Report::Failure {
            why: "blueprint refused".into(),
            rollout: false,
        };
        let failed = Report::Failure {
            why: "not Ready after 10m".into(),
            rollout: true,
        };
        let stopped = Report::Stopped("Stopped on request".into());
        let table = [
            (None, &queued, Some(Queued)),
            (None, &Report::InProgress, Some(InProgress)),
            (None, &Report::Success, Some(InProgress)),
            (Some(Queued), &Report::Success, Some(InProgress)),
            (Some(InProgress), &Report::Success, Some(Success)),
            (Some(Success), &Report::Success, None),
            // A refusal need not have started; a rollout that fails had.
            (None, &refused, Some(Failure)),
            (None, &failed, Some(InProgress)),
            (Some(Queued), &refused, Some(Failure)),
            (Some(Queued), &failed, Some(InProgress)),
            (Some(InProgress), &failed, Some(Failure)),
            (Some(Failure), &failed, None),
            // Waking goes through in progress again.
            (Some(Stopped), &Report::Success, Some(InProgress)),
            (Some(Success), &stopped, Some(Stopped)),
            (Some(Success), &Report::InProgress, Some(InProgress)),
            (Some(Success), &Report::Inactive, Some(Inactive)),
        ];
        for (reported, report, want) in table {
            assert_eq!(
                next_state(reported, report),
                want,
                "{reported:?} towards {report:?}"
            );
        }
    }

    #[test]
    fn what_each_status_says() {
        let st = PreviewStatus {
            message: Some("3/3 services ready".into()),
            url: Some("http://7-shop.preview.example.com".into()),
            ..PreviewStatus::default()
        };
        let success = new_status(Reported::Success, &Report::Success, &st);
        assert_eq!(success.state, DeploymentState::Success);
        assert_eq!(success.description.as_deref(), Some("3/3 services ready"));
        assert_eq!(
            success.environment_url.as_deref(),
            Some("http://7-shop.preview.example.com")
        );
        // On the way to success, the queued step has a description of its own.
        let queued = new_status(Reported::Queued, &Report::Success, &st);
        assert_eq!(queued.state, DeploymentState::Queued);
        assert!(queued.environment_url.is_none());
        let long = Report::Failure {
            why: "x".repeat(300),
            rollout: true,
        };
        let failure = new_status(Reported::Failure, &long, &st);
        assert!(failure.description.unwrap().chars().count() <= 140);
        // The in_progress on the way to a failure does not carry the failure's text.
        let on_the_way = new_status(Reported::InProgress, &long, &st);
        assert_eq!(on_the_way.description.as_deref(), Some("Deploying"));
        let stopped = new_status(
            Reported::Stopped,
            &Report::Stopped("Stopped on request".into()),
            &st,
        );
        assert_eq!(stopped.state, DeploymentState::Inactive);
    }
}
