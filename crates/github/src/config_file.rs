//! Reading a repository's `.github/sandcastle.yml` from GitHub: always from the pull request's
//! base branch (never its head), checked against the Blueprints that admit the repository
//! (`repo_config`), and — when it cannot be used — reported on the pull request once per version
//! of the file, while the Blueprint defaults apply. Each call is bounded by the caller's timeout.

use std::time::Duration;

use super::client::{Comment, Installation};
use super::command_parser::HelpLimits;
use super::repo_config::{self, PATH, RepoConfig};
use super::text::replies::{Reply, reply_text};
use sandcastle_crd::BlueprintSpec;
use sandcastle_domain::{PrNumber, RepoName};

/// GitHub could not say what the file holds; the desired state depends on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not read {PATH} from {repo} at {base} ({why})")]
pub struct Unavailable {
    pub repo: String,
    pub base: String,
    pub why: String,
}

/// The hidden line that marks the note about a broken file, with the file's blob SHA.
fn note_marker(blob: &str) -> String {
    format!("<!-- sandcastle-config {blob} -->")
}

/// Where a file is read and by whom: the installation's client, the App (to know its own
/// notes), the pull request, and how long each GitHub call may take.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    pub gh: &'a Installation,
    pub app_id: u64,
    pub repo: &'a RepoName,
    pub base: &'a str,
    pub pr: PrNumber,
    pub timeout: Duration,
}

/// The configuration for pull request `pr` of `repo` into `base`. No file: the defaults. A file
/// that cannot be used: the defaults, and a note on the pull request. GitHub not answering: an
/// error, since the desired state depends on the file.
pub async fn load(
    at: Reader<'_>,
    admitting: &[(&str, &BlueprintSpec)],
) -> Result<RepoConfig, Unavailable> {
    if admitting.is_empty() {
        return Ok(RepoConfig::default());
    }
    let Reader {
        gh,
        repo,
        base,
        timeout,
        ..
    } = at;
    let unavailable = |why: String| {
        tracing::warn!(%repo, base, error = %why, "reading {PATH} failed");
        Unavailable {
            repo: repo.to_string(),
            base: base.to_owned(),
            why,
        }
    };
    let file = tokio::time::timeout(timeout, gh.get_file(repo, PATH, base))
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
                &HelpLimits::of(admitting.first().map(|(_, s)| *s)),
            );
            if let Err(e) = tell_once(at, &note_marker(&file.sha), &text).await {
                tracing::warn!(%repo, pr = %at.pr, error = %e, "could not report the broken {PATH}");
            }
            Ok(RepoConfig::default())
        }
    }
}

/// Post the note `text` unless this pull request already has Sandcastle's note carrying
/// `marker` (an HTML comment, kept at the end of the note).
pub async fn tell_once(at: Reader<'_>, marker: &str, text: &str) -> Result<(), String> {
    let Reader {
        gh,
        app_id,
        repo,
        pr,
        timeout,
        ..
    } = at;
    let comments: Vec<Comment> = tokio::time::timeout(timeout, gh.list_issue_comments(repo, pr))
        .await
        .map_err(|_| "timed out listing comments".to_owned())?
        .map_err(|e| e.to_string())?;
    let told = comments.iter().any(|c| {
        c.body.contains(marker) && c.performed_via_github_app.as_ref().map(|a| a.id) == Some(app_id)
    });
    if told {
        return Ok(());
    }
    let body = format!("{text}\n\n{marker}\n");
    tokio::time::timeout(timeout, gh.create_issue_comment(repo, pr, &body))
        .await
        .map_err(|_| "timed out posting the note".to_owned())?
        .map_err(|e| e.to_string())?;
    Ok(())
}
