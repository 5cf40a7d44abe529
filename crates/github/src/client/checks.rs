//! Check runs Sandcastle writes (GITHUB.md §9; the App needs `checks: write`): created on a
//! commit, then updated as what they check moves — `queued`, `in_progress`, `completed` with a
//! conclusion — each with an output (title, Markdown summary and text) cut to GitHub's limits.

use http::Method;
use jiff::Timestamp;
use serde::Serialize;

use super::{CheckConclusion, CheckRun, CheckStatus, GitHubError, Installation};
use sandcastle_domain::{RepoName, Sha};

/// GitHub's limit on a check run output's `summary` and `text`, in characters.
pub const OUTPUT_MAX_CHARS: usize = 65_535;

/// What a check run shows: a title, a Markdown summary and, optionally, more text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckOutput {
    pub title: String,
    pub summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// `POST /repos/{owner}/{repo}/check-runs` and `PATCH …/check-runs/{id}`: a check run's name
/// and commit (on creation), its status, and what it shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckRunWrite {
    /// Required on creation; not sent on updates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head_sha: Option<Sha>,
    pub status: CheckStatus,
    /// Required with `completed`, never sent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<CheckConclusion>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    /// Where the check's details are (Sandcastle's page of the preview).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details_url: Option<String>,
    /// The integrator's id of the run: it finds a run again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<CheckOutput>,
}

impl CheckRunWrite {
    /// A write that sets `status` (and nothing else yet).
    pub fn new(status: CheckStatus) -> Self {
        Self {
            name: None,
            head_sha: None,
            status,
            conclusion: None,
            started_at: None,
            completed_at: None,
            details_url: None,
            external_id: None,
            output: None,
        }
    }
}

/// `/repos/{owner}/{name}` (both parts validated by `RepoName`).
fn repo_path(repo: &RepoName) -> String {
    format!("/repos/{}/{}", repo.owner(), repo.name())
}

/// `s` cut to at most `max` characters, ending with "…" when cut, never splitting a character.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some(_) => {
            let end = s.char_indices().nth(max - 1).map_or(s.len(), |(i, _)| i);
            format!("{}…", &s[..end])
        }
    }
}

/// The write with its output cut to GitHub's limits.
fn fitted(write: &CheckRunWrite) -> CheckRunWrite {
    let mut w = write.clone();
    if let Some(o) = w.output.as_mut() {
        o.summary = cut(&o.summary, OUTPUT_MAX_CHARS);
        o.text = o.text.as_deref().map(|t| cut(t, OUTPUT_MAX_CHARS));
    }
    w
}

impl Installation {
    /// Creates a check run (`write` names it and its commit).
    pub async fn create_check_run(
        &self,
        repo: &RepoName,
        write: &CheckRunWrite,
    ) -> Result<CheckRun, GitHubError> {
        let body = serde_json::to_value(fitted(write))
            .map_err(|e| GitHubError::decode("check run request", e))?;
        let path = format!("{}/check-runs", repo_path(repo));
        self.transport
            .send(Method::POST, &path, Some(&body))
            .await?
            .json("check run")
    }

    /// Updates check run `id`.
    pub async fn update_check_run(
        &self,
        repo: &RepoName,
        id: u64,
        write: &CheckRunWrite,
    ) -> Result<CheckRun, GitHubError> {
        let mut write = fitted(write);
        write.name = None;
        write.head_sha = None;
        let body =
            serde_json::to_value(write).map_err(|e| GitHubError::decode("check run request", e))?;
        let path = format!("{}/check-runs/{id}", repo_path(repo));
        self.transport
            .send(Method::PATCH, &path, Some(&body))
            .await?
            .json("check run")
    }

    /// The check run named `name` on `sha` whose `external_id` is `external_id`, if GitHub has
    /// one (made by an earlier leader whose record of it was lost).
    pub async fn find_check_run(
        &self,
        repo: &RepoName,
        sha: &Sha,
        name: &str,
        external_id: &str,
    ) -> Result<Option<CheckRun>, GitHubError> {
        let q = serde_urlencoded::to_string([("check_name", name), ("per_page", "100")])
            .unwrap_or_default();
        let path = format!("{}/commits/{sha}/check-runs?{q}", repo_path(repo));
        let runs: Vec<CheckRun> = self
            .transport
            .get_pages(&path, "check run list", Some("check_runs"))
            .await?;
        Ok(runs
            .into_iter()
            .find(|r| r.name == name && r.external_id.as_deref() == Some(external_id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_say_only_what_they_set_and_outputs_fit() {
        let mut w = CheckRunWrite::new(CheckStatus::Completed);
        w.conclusion = Some(CheckConclusion::TimedOut);
        w.output = Some(CheckOutput {
            title: "t".into(),
            summary: "é".repeat(70_000),
            text: None,
        });
        let v = serde_json::to_value(fitted(&w)).unwrap();
        assert_eq!(v["status"], "completed");
        assert_eq!(v["conclusion"], "timed_out");
        assert!(v.get("name").is_none() && v.get("head_sha").is_none());
        let summary = v["output"]["summary"].as_str().unwrap();
        assert_eq!(summary.chars().count(), OUTPUT_MAX_CHARS);
        assert!(summary.ends_with('…'));
        assert!(v["output"].get("text").is_none());
    }
}
