//! Keeping GitHub in line with a preview: one deployment per commit on the preview's own
//! environment, and one status per transition (`queued` → `in_progress` → `success`/`failure`,
//! `inactive` on teardown). A failed call never blocks the Kubernetes side: the status keeps what was
//! reported, so the next reconcile posts what is missing — and never posts a transition twice.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use serde_json::json;

use super::context::Context;
use crate::crd::{PreviewEnvironment, PreviewStatus, Reported};
use crate::domain::RepoName;
use crate::github::client::{DeploymentState, GitHubError, Installation, NewDeployment, NewStatus};
use crate::github::text::statuses::fit_description;

/// What GitHub should show for the preview's current commit.
#[derive(Debug, Clone, Copy)]
pub(super) enum Report<'a> {
    InProgress,
    Success,
    Failure(&'a str),
    Inactive,
    /// Accepted, not started: a new commit before cloning begins, or waiting for a free slot
    /// under the Blueprint's `maxPreviews` (description).
    Queued(&'a str),
    /// Scaled to zero: `inactive` (the URL does not answer) with how to wake it. Recorded as
    /// `stopped`, so waking reports on the same deployment.
    Stopped(&'a str),
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
pub(crate) fn log_url(ctx: &Context, preview: &str) -> String {
    format!(
        "{}/previews/{preview}",
        ctx.settings.public_url.trim_end_matches('/')
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

/// Bring GitHub in line with `report`. Returns false when GitHub could not be told (retry later).
pub(super) async fn sync(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    ctx: &Context,
    report: Report<'_>,
) -> bool {
    let Some(installation_id) = pe.spec.installation_id else {
        return true;
    };
    let Ok(repo) = RepoName::new(&pe.spec.repository) else {
        return true;
    };
    let gh = ctx.github.installation(installation_id);
    let now = ctx.clock.now();
    match post(pe, st, ctx, &gh, &repo, report).await {
        Ok(()) => {
            if st.conditions.iter().any(|c| c.type_ == "GitHubReported") {
                set_condition(st, true, String::new(), now);
            }
            true
        }
        Err(e) => {
            tracing::warn!(preview = %pe.name_any(), error = %e, "reporting to GitHub failed; will retry");
            set_condition(st, false, format!("GitHub: {e}"), now);
            false
        }
    }
}

async fn post(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    ctx: &Context,
    gh: &Installation,
    repo: &RepoName,
    report: Report<'_>,
) -> Result<(), GitHubError> {
    let name = pe.name_any();
    if matches!(report, Report::Inactive) {
        if let Some(old) = st.github_previous_deployment_id {
            gh.create_deployment_status(repo, old, &NewStatus::new(DeploymentState::Inactive))
                .await?;
            st.github_previous_deployment_id = None;
        }
        if let Some(id) = st.github_deployment_id
            && st.github_reported != Some(Reported::Inactive)
        {
            let mut inactive = NewStatus::new(DeploymentState::Inactive);
            inactive.description = Some(pe.spec.teardown.as_ref().map_or_else(
                || "Replaced: the preview came back and is deployed again".to_owned(),
                |t| crate::github::text::statuses::inactive_description(t.reason),
            ));
            gh.create_deployment_status(repo, id, &inactive).await?;
            st.github_reported = Some(Reported::Inactive);
        }
        return Ok(());
    }

    let resurrected = st.github_reported == Some(Reported::Inactive);
    if st.github_deployment_sha.as_deref() != Some(pe.spec.sha.as_str()) || resurrected {
        let environment = crate::domain::naming::github_environment(&name);
        // A deployment made before a crash, whose id never reached the status, is reused.
        let existing = if resurrected {
            None
        } else {
            gh.find_deployment(repo, &environment, &pe.spec.sha).await?
        };
        let mut adopted = None;
        let deployment = match existing {
            Some(d) => {
                // Adopted after a crash or a change of leader: what it already shows was
                // reported, and is not posted again.
                let latest = gh.list_deployment_statuses(repo, d.id).await?;
                adopted = latest
                    .first()
                    .map(|s| reported(s.state))
                    .filter(|s| *s != Reported::Inactive);
                d
            }
            None => {
                gh.create_deployment(
                    repo,
                    &NewDeployment {
                        ref_: pe.spec.sha.clone(),
                        environment,
                        description: Some(format!("Sandcastle preview {name}")),
                        payload: json!({"preview": name, "namespace": st.namespace, "blueprint": pe.spec.blueprint}),
                        transient_environment: true,
                        production_environment: false,
                        auto_merge: false,
                        required_contexts: Vec::new(),
                    },
                )
                .await?
            }
        };
        if let Some(old) = st.github_deployment_id.filter(|old| *old != deployment.id)
            && st.github_reported != Some(Reported::Inactive)
        {
            st.github_previous_deployment_id = Some(old);
        }
        st.github_deployment_id = Some(deployment.id);
        st.github_deployment_sha = Some(pe.spec.sha.clone());
        st.github_reported = adopted;
    }
    let Some(id) = st.github_deployment_id else {
        return Ok(());
    };

    let mut status = match report {
        Report::InProgress => {
            let mut s = NewStatus::new(DeploymentState::InProgress);
            s.description = Some(fit_description(
                st.message.as_deref().unwrap_or("Deploying"),
            ));
            s
        }
        Report::Success => {
            let mut s = NewStatus::new(DeploymentState::Success);
            s.environment_url = st.url.clone();
            s.description = st.message.as_deref().map(fit_description);
            s
        }
        Report::Failure(why) => {
            let mut s = NewStatus::new(DeploymentState::Failure);
            s.description = Some(why.to_owned());
            s
        }
        Report::Queued(why) => {
            let mut s = NewStatus::new(DeploymentState::Queued);
            s.description = Some(why.to_owned());
            s
        }
        Report::Stopped(why) => {
            let mut s = NewStatus::new(DeploymentState::Inactive);
            s.description = Some(why.to_owned());
            s
        }
        Report::Inactive => unreachable!("handled above"),
    };
    let state = match report {
        Report::Stopped(_) => Reported::Stopped,
        _ => reported(status.state),
    };
    if st.github_reported == Some(state) {
        return Ok(());
    }
    status.log_url = Some(log_url(ctx, &name));
    gh.create_deployment_status(repo, id, &status).await?;
    st.github_reported = Some(state);

    if matches!(report, Report::Success)
        && let Some(old) = st.github_previous_deployment_id
    {
        gh.create_deployment_status(repo, old, &NewStatus::new(DeploymentState::Inactive))
            .await?;
        st.github_previous_deployment_id = None;
    }
    Ok(())
}
