//! A repository's `.github/sandcastle.yml`, read while handling a delivery: always from the pull
//! request's base branch (never its head), checked against the Blueprints that admit the
//! repository, and — when it cannot be used — reported on the pull request once per version of
//! the file, while the Blueprint defaults apply.

use std::time::Duration;

use super::AppState;
use super::error::ApiError;
use crate::crd::BlueprintSpec;
use crate::domain::{PrNumber, RepoName};
use crate::github::client::{Comment, Installation};
use crate::github::command_parser::HelpLimits;
use crate::github::repo_config::{self, PATH, RepoConfig};
use crate::github::text::replies::{Reply, reply_text};

/// Limit on one GitHub call made while a delivery waits for its answer (GitHub gives up on a
/// delivery after 10 s).
pub(super) const GITHUB_TIMEOUT: Duration = Duration::from_secs(4);

/// The hidden line that marks the note about a broken file, with the file's blob SHA.
fn note_marker(blob: &str) -> String {
    format!("<!-- sandcastle-config {blob} -->")
}

/// The configuration for pull request `pr` of `repo` into `base`. No installation or no file:
/// the defaults. A file that cannot be used: the defaults, and a note on the pull request. GitHub
/// not answering: an error, since the desired state depends on the file.
pub(super) async fn load(
    state: &AppState,
    installation: Option<u64>,
    repo: &RepoName,
    base: &str,
    pr: PrNumber,
    admitting: &[(&str, &BlueprintSpec)],
) -> Result<RepoConfig, ApiError> {
    let Some(id) = installation else {
        return Ok(RepoConfig::default());
    };
    if admitting.is_empty() {
        return Ok(RepoConfig::default());
    }
    let gh = state.github.installation(id);
    let unavailable = |why: String| {
        tracing::warn!(%repo, base, error = %why, "reading {PATH} failed");
        ApiError::github_unavailable(format!(
            "could not read {PATH} from {repo} at {base}; redeliver later"
        ))
    };
    let file = tokio::time::timeout(GITHUB_TIMEOUT, gh.get_file(repo, PATH, base))
        .await
        .map_err(|_| unavailable("timed out".to_owned()))?
        .map_err(|e| unavailable(e.to_string()))?;
    let Some(file) = file else {
        return Ok(RepoConfig::default());
    };
    match repo_config::read(&file.text, admitting) {
        Ok(config) => Ok(config),
        Err(e) => {
            tracing::info!(%repo, base, error = %e, "{PATH} cannot be used; defaults apply");
            let text = reply_text(
                &Reply::ConfigInvalid {
                    path: PATH.to_owned(),
                    branch: base.to_owned(),
                    error: e.to_string(),
                },
                &limits_of(admitting.first().map(|(_, s)| *s)),
            );
            let app_id = state.github.app_id();
            if let Err(e) = tell_once(&gh, app_id, repo, pr, &file.sha, &text).await {
                tracing::warn!(%repo, %pr, error = %e, "could not report the broken {PATH}");
            }
            Ok(RepoConfig::default())
        }
    }
}

/// Post the note unless this pull request already has Sandcastle's note for this blob.
async fn tell_once(
    gh: &Installation,
    app_id: u64,
    repo: &RepoName,
    pr: PrNumber,
    blob: &str,
    text: &str,
) -> Result<(), String> {
    let marker = note_marker(blob);
    let comments: Vec<Comment> =
        tokio::time::timeout(GITHUB_TIMEOUT, gh.list_issue_comments(repo, pr))
            .await
            .map_err(|_| "timed out listing comments".to_owned())?
            .map_err(|e| e.to_string())?;
    let told = comments.iter().any(|c| {
        c.body.contains(&marker)
            && c.performed_via_github_app.as_ref().map(|a| a.id) == Some(app_id)
    });
    if told {
        return Ok(());
    }
    let body = format!("{text}\n\n{marker}\n");
    tokio::time::timeout(GITHUB_TIMEOUT, gh.create_issue_comment(repo, pr, &body))
        .await
        .map_err(|_| "timed out posting the note".to_owned())?
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The limits the help text quotes, from a Blueprint (or the defaults).
pub(super) fn limits_of(spec: Option<&BlueprintSpec>) -> HelpLimits {
    use crate::crd::{DEFAULT_MAX_PREVIEWS, DEFAULT_MAX_TTL, DEFAULT_STOP_AFTER_IDLE, DEFAULT_TTL};
    HelpLimits {
        ttl: spec.map_or(DEFAULT_TTL, |s| s.ttl).get(),
        max_ttl: spec.map_or(DEFAULT_MAX_TTL, |s| s.max_ttl).get(),
        stop_after_idle: Some(
            spec.map_or(DEFAULT_STOP_AFTER_IDLE, |s| s.stop_after_idle)
                .get(),
        )
        .filter(|d| !d.is_zero()),
        max_previews: Some(spec.map_or(DEFAULT_MAX_PREVIEWS, |s| s.max_previews)),
    }
}
