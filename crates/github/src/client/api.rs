//! The typed GitHub operations Sandcastle performs as an installation: deployments and their
//! statuses, environments, PR comments and reactions, permissions, pull requests, file contents, check runs
//! and the installation's repositories.

use http::{Method, StatusCode};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use super::transport::RawResponse;
use super::types::{ContentWire, PermissionWire, RepoWire};
use super::{
    CheckRun, Comment, Deployment, DeploymentStatus, FileContent, GitHubError, Installation,
    NewDeployment, NewStatus, Permission, PullRequest, Reaction, decode_base64_content,
    truncate_description,
};
use sandcastle_domain::{PrNumber, RepoName, Sha};

/// Characters left as they are in a path segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn seg(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// `/repos/{owner}/{name}`; both parts are validated by `RepoName` and need no escaping.
fn repo_path(repo: &RepoName) -> String {
    format!("/repos/{}/{}", repo.owner(), repo.name())
}

fn query(pairs: &[(&str, &str)]) -> String {
    serde_urlencoded::to_string(pairs).unwrap_or_default()
}

fn to_body(what: &'static str, value: &impl serde::Serialize) -> Result<Value, GitHubError> {
    serde_json::to_value(value).map_err(|e| GitHubError::decode(what, e))
}

impl Installation {
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<RawResponse, GitHubError> {
        self.transport.send(method, path, body).await
    }

    /// Creates a deployment. A 202 (GitHub auto-merged the default branch into the ref and made
    /// no deployment) is [`GitHubError::AutoMerged`]; 409 and 422 are [`GitHubError::Status`].
    pub async fn create_deployment(
        &self,
        repo: &RepoName,
        new: &NewDeployment,
    ) -> Result<Deployment, GitHubError> {
        let body = to_body("deployment request", new)?;
        let path = format!("{}/deployments", repo_path(repo));
        let resp = self.send(Method::POST, &path, Some(&body)).await?;
        if resp.status == StatusCode::ACCEPTED {
            return Err(GitHubError::AutoMerged);
        }
        resp.json("deployment")
    }

    /// Adds a status to a deployment; the description is cut to GitHub's 140 characters first.
    pub async fn create_deployment_status(
        &self,
        repo: &RepoName,
        deployment_id: u64,
        status: &NewStatus,
    ) -> Result<DeploymentStatus, GitHubError> {
        let mut status = status.clone();
        status.description = status
            .description
            .map(|d| truncate_description(&d).into_owned());
        let body = to_body("deployment status request", &status)?;
        let path = format!("{}/deployments/{deployment_id}/statuses", repo_path(repo));
        self.send(Method::POST, &path, Some(&body))
            .await?
            .json("deployment status")
    }

    /// Every deployment of `environment`, newest first.
    pub async fn list_deployments(
        &self,
        repo: &RepoName,
        environment: &str,
    ) -> Result<Vec<Deployment>, GitHubError> {
        let q = query(&[("environment", environment), ("per_page", "100")]);
        let path = format!("{}/deployments?{q}", repo_path(repo));
        self.transport
            .get_pages(&path, "deployment list", None)
            .await
    }

    /// The newest deployment of `sha` on `environment`, if there is one (so that a deployment
    /// is created once per commit even when the record of creating it was lost).
    pub async fn find_deployment(
        &self,
        repo: &RepoName,
        environment: &str,
        sha: &str,
    ) -> Result<Option<Deployment>, GitHubError> {
        let q = query(&[
            ("environment", environment),
            ("sha", sha),
            ("per_page", "1"),
        ]);
        let path = format!("{}/deployments?{q}", repo_path(repo));
        let list: Vec<Deployment> = self
            .send(Method::GET, &path, None)
            .await?
            .json("deployment list")?;
        // The answer is checked, not only the filter trusted: adopting another commit's
        // deployment would report this commit's state on it.
        Ok(list.into_iter().find(|d| d.sha.as_str() == sha))
    }

    /// Every status of a deployment, newest first.
    pub async fn list_deployment_statuses(
        &self,
        repo: &RepoName,
        deployment_id: u64,
    ) -> Result<Vec<DeploymentStatus>, GitHubError> {
        let path = format!(
            "{}/deployments/{deployment_id}/statuses?per_page=100",
            repo_path(repo)
        );
        self.transport
            .get_pages(&path, "deployment status list", None)
            .await
    }

    /// Every comment on a PR conversation, oldest first.
    pub async fn list_issue_comments(
        &self,
        repo: &RepoName,
        number: PrNumber,
    ) -> Result<Vec<Comment>, GitHubError> {
        let path = format!("{}/issues/{number}/comments?per_page=100", repo_path(repo));
        self.transport.get_pages(&path, "comment list", None).await
    }

    pub async fn create_issue_comment(
        &self,
        repo: &RepoName,
        number: PrNumber,
        body: &str,
    ) -> Result<Comment, GitHubError> {
        let path = format!("{}/issues/{number}/comments", repo_path(repo));
        self.send(Method::POST, &path, Some(&json!({ "body": body })))
            .await?
            .json("comment")
    }

    pub async fn update_issue_comment(
        &self,
        repo: &RepoName,
        comment_id: u64,
        body: &str,
    ) -> Result<Comment, GitHubError> {
        let path = format!("{}/issues/comments/{comment_id}", repo_path(repo));
        self.send(Method::PATCH, &path, Some(&json!({ "body": body })))
            .await?
            .json("comment")
    }

    /// Deletes a comment; one that is already gone (404) counts as deleted.
    pub async fn delete_issue_comment(
        &self,
        repo: &RepoName,
        comment_id: u64,
    ) -> Result<(), GitHubError> {
        let path = format!("{}/issues/comments/{comment_id}", repo_path(repo));
        match self.send(Method::DELETE, &path, None).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Deletes a deployment environment (it needs the App's `administration: write`); one that
    /// is already gone (404) counts as deleted.
    pub async fn delete_environment(
        &self,
        repo: &RepoName,
        environment: &str,
    ) -> Result<(), GitHubError> {
        let path = format!("{}/environments/{}", repo_path(repo), seg(environment));
        match self.send(Method::DELETE, &path, None).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Reacts to a comment; "already reacted" (200) is success like "created" (201).
    pub async fn add_comment_reaction(
        &self,
        repo: &RepoName,
        comment_id: u64,
        reaction: Reaction,
    ) -> Result<(), GitHubError> {
        let path = format!("{}/issues/comments/{comment_id}/reactions", repo_path(repo));
        self.send(Method::POST, &path, Some(&json!({ "content": reaction })))
            .await
            .map(drop)
    }

    /// The user's role on the repository; not a collaborator (404) is [`Permission::None`].
    pub async fn collaborator_permission(
        &self,
        repo: &RepoName,
        user: &str,
    ) -> Result<Permission, GitHubError> {
        let path = format!("{}/collaborators/{}/permission", repo_path(repo), seg(user));
        match self
            .transport
            .get_json::<PermissionWire>(&path, "permission")
            .await
        {
            Ok(p) => Ok(Permission::from_api(&p.permission, p.role_name.as_deref())),
            Err(e) if e.is_not_found() => Ok(Permission::None),
            Err(e) => Err(e),
        }
    }

    pub async fn get_pull(
        &self,
        repo: &RepoName,
        number: PrNumber,
    ) -> Result<PullRequest, GitHubError> {
        let path = format!("{}/pulls/{number}", repo_path(repo));
        self.transport.get_json(&path, "pull request").await
    }

    /// The paths pull request `number` changes, a renamed file's old path too. GitHub lists
    /// 3,000 files at most: a list shorter than the pull request's `changed_files` was cut.
    pub async fn list_pull_files(
        &self,
        repo: &RepoName,
        number: PrNumber,
    ) -> Result<Vec<String>, GitHubError> {
        let path = format!("{}/pulls/{number}/files?per_page=100", repo_path(repo));
        let files: Vec<FileWire> = self
            .transport
            .get_pages(&path, "pull request files", None)
            .await?;
        Ok(paths_of(files))
    }

    /// The paths changed from `base` to `head` (a push's `before` and `after`). GitHub lists 300
    /// files at most: a list that long may have been cut.
    pub async fn compare_files(
        &self,
        repo: &RepoName,
        base: &Sha,
        head: &Sha,
    ) -> Result<Vec<String>, GitHubError> {
        #[derive(serde::Deserialize)]
        struct CompareWire {
            #[serde(default)]
            files: Vec<FileWire>,
        }
        let path = format!("{}/compare/{base}...{head}", repo_path(repo));
        let compare: CompareWire = self.transport.get_json(&path, "comparison").await?;
        Ok(paths_of(compare.files))
    }

    /// Every open pull request of the repository.
    pub async fn list_open_pulls(&self, repo: &RepoName) -> Result<Vec<PullRequest>, GitHubError> {
        let path = format!("{}/pulls?state=open&per_page=100", repo_path(repo));
        self.transport
            .get_pages(&path, "pull request list", None)
            .await
    }

    /// The commit a branch, tag or SHA of `repo` points at, or `None` when there is none.
    /// The repository's default branch (`main`, as its settings say).
    pub async fn default_branch(&self, repo: &RepoName) -> Result<String, GitHubError> {
        #[derive(serde::Deserialize)]
        struct RepoWire {
            default_branch: String,
        }
        let resp = self.send(Method::GET, &repo_path(repo), None).await?;
        Ok(resp.json::<RepoWire>("repository")?.default_branch)
    }

    pub async fn resolve_ref(
        &self,
        repo: &RepoName,
        ref_: &str,
    ) -> Result<Option<Sha>, GitHubError> {
        #[derive(serde::Deserialize)]
        struct CommitWire {
            sha: Sha,
        }
        let url = format!("{}/commits/{}", repo_path(repo), seg(ref_));
        match self.send(Method::GET, &url, None).await {
            Ok(resp) => Ok(Some(resp.json::<CommitWire>("commit")?.sha)),
            Err(e) if e.is_not_found() || e.status() == Some(StatusCode::UNPROCESSABLE_ENTITY) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// A text file at `ref_`, or `None` when there is no such file.
    pub async fn get_file(
        &self,
        repo: &RepoName,
        path: &str,
        ref_: &str,
    ) -> Result<Option<FileContent>, GitHubError> {
        let encoded: Vec<String> = path.trim_matches('/').split('/').map(seg).collect();
        let url = format!(
            "{}/contents/{}?{}",
            repo_path(repo),
            encoded.join("/"),
            query(&[("ref", ref_)])
        );
        let resp = match self.send(Method::GET, &url, None).await {
            Ok(resp) => resp,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let wire: ContentWire = resp.json("file contents")?;
        if wire.kind != "file" || wire.encoding.as_deref() != Some("base64") {
            return Err(GitHubError::decode(
                "file contents",
                format!(
                    "{path} is a {} with encoding {:?}",
                    wire.kind, wire.encoding
                ),
            ));
        }
        let bytes = decode_base64_content(wire.content.as_deref().unwrap_or(""))
            .map_err(|e| GitHubError::decode("file contents", e))?;
        let text = String::from_utf8(bytes).map_err(|e| GitHubError::decode("file contents", e))?;
        Ok(Some(FileContent {
            text,
            sha: wire.sha,
        }))
    }

    /// Every check run on a commit.
    pub async fn list_check_runs(
        &self,
        repo: &RepoName,
        sha: &Sha,
    ) -> Result<Vec<CheckRun>, GitHubError> {
        let path = format!("{}/commits/{sha}/check-runs?per_page=100", repo_path(repo));
        self.transport
            .get_pages(&path, "check run list", Some("check_runs"))
            .await
    }

    /// Every repository this installation can see.
    pub async fn list_installation_repos(&self) -> Result<Vec<RepoName>, GitHubError> {
        let repos: Vec<RepoWire> = self
            .transport
            .get_pages(
                "/installation/repositories?per_page=100",
                "repository list",
                Some("repositories"),
            )
            .await?;
        repos
            .into_iter()
            .map(|r| {
                RepoName::new(&r.full_name).map_err(|e| GitHubError::decode("repository list", e))
            })
            .collect()
    }
}
/// A changed file as GitHub lists it (pull request files, comparisons).
#[derive(serde::Deserialize)]
struct FileWire {
    filename: String,
    #[serde(default)]
    previous_filename: Option<String>,
}

fn paths_of(files: Vec<FileWire>) -> Vec<String> {
    files
        .into_iter()
        .flat_map(|f| std::iter::once(f.filename).chain(f.previous_filename))
        .collect()
}
