//! GitHub's JSON objects (users, repositories, pull requests, issues, comments, deployments…) as
//! the stand-in serves and sends them, built by editing the real payloads in `fixtures/github/` so
//! that their structure stays GitHub's own.

use std::sync::LazyLock;

use base64::Engine as _;
use serde_json::{Value, json};

use super::state::{
    CheckRunRecord, CommentRecord, DeploymentRecord, HeadRepo, PullRecord, ReactionRecord,
    RepoRecord, StatusRecord, ts, user_id,
};
use sandcastle_domain::RepoName;

macro_rules! fixture {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Value> = LazyLock::new(|| {
            serde_json::from_str(include_str!(concat!("../../../fixtures/github/", $file)))
                .expect(concat!($file, " is JSON"))
        });
    };
}

fixture!(PR_OPENED, "pull_request.opened.json");
fixture!(PR_SYNCHRONIZE, "pull_request.synchronize.json");
fixture!(PR_CLOSED, "pull_request.closed.merged.json");
fixture!(ISSUE_COMMENT, "issue_comment.created.json");
fixture!(CHECK_RUN, "octokit/check_run.completed.json");

/// The repository, owner and PR number the PR fixtures were captured on.
pub(crate) const PR_FIXTURE_REPO: &str = "derekg1729/test-repo";
const PR_FIXTURE_NUMBER: &str = "315";
const USER_FIXTURE_LOGIN: &str = "derekg1729";
const USER_FIXTURE_ID: &str = "58641509";
pub(crate) const ISSUE_FIXTURE_REPO: &str = "chhsia0/knative-route-demo";
const ISSUE_FIXTURE_NUMBER: &str = "3";
pub(crate) const CHECK_FIXTURE_REPO: &str = "Codertocat/Hello-World";

/// Who the stand-in's App is.
#[derive(Debug, Clone)]
pub(crate) struct AppIdentity {
    pub id: u64,
    pub slug: String,
}

impl AppIdentity {
    pub fn bot_login(&self) -> String {
        format!("{}[bot]", self.slug)
    }
}

/// Replaces `from` with `to` inside every string of `v`.
pub(crate) fn replace_strings(v: &mut Value, from: &str, to: &str) {
    match v {
        Value::String(s) if s.contains(from) => *s = s.replace(from, to),
        Value::Array(items) => items.iter_mut().for_each(|i| replace_strings(i, from, to)),
        Value::Object(map) => map.values_mut().for_each(|i| replace_strings(i, from, to)),
        _ => {}
    }
}

fn node_id(prefix: &str, id: u64) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{prefix}{id}"))
}

fn set(v: &mut Value, key: &str, value: Value) {
    if let Value::Object(map) = v {
        map.insert(key.to_owned(), value);
    }
}

/// A user (`User`, `Bot` or `Organization`) object.
pub(crate) fn user(login: &str, kind: &str) -> Value {
    let mut v = PR_OPENED["sender"].clone();
    let id = user_id(login);
    replace_strings(&mut v, USER_FIXTURE_LOGIN, login);
    replace_strings(&mut v, USER_FIXTURE_ID, &id.to_string());
    set(&mut v, "login", json!(login));
    set(&mut v, "id", json!(id));
    set(&mut v, "node_id", json!(node_id("04:User", id)));
    set(&mut v, "type", json!(kind));
    v
}

/// A user object for a login, as a bot when it looks like one.
pub(crate) fn actor(login: &str) -> Value {
    user(
        login,
        if login.ends_with("[bot]") {
            "Bot"
        } else {
            "User"
        },
    )
}

/// A full repository object.
pub(crate) fn repository(name: &RepoName, id: u64, default_branch: &str, fork: bool) -> Value {
    let mut v = PR_OPENED["repository"].clone();
    replace_strings(&mut v, PR_FIXTURE_REPO, name.as_str());
    set(&mut v, "id", json!(id));
    set(&mut v, "node_id", json!(node_id("010:Repository", id)));
    set(&mut v, "name", json!(name.name()));
    set(&mut v, "full_name", json!(name.as_str()));
    set(&mut v, "owner", user(name.owner(), "User"));
    set(&mut v, "fork", json!(fork));
    set(&mut v, "default_branch", json!(default_branch));
    v
}

pub(crate) fn repo_of(name: &RepoName, rec: &RepoRecord) -> Value {
    repository(name, rec.id, &rec.default_branch, false)
}

/// The App object (`performed_via_github_app`, `check_run.app`).
pub(crate) fn app(identity: &AppIdentity) -> Value {
    let mut v = CHECK_RUN["check_run"]["app"].clone();
    replace_strings(&mut v, "octocoders-linter", &identity.slug);
    set(&mut v, "id", json!(identity.id));
    set(&mut v, "node_id", json!(node_id("03:App", identity.id)));
    set(&mut v, "name", json!(identity.slug));
    set(&mut v, "owner", user(&identity.slug, "Organization"));
    v
}

/// `{id, node_id}` as deliveries carry it.
pub(crate) fn installation_ref(id: u64) -> Value {
    json!({ "id": id, "node_id": node_id("023:IntegrationInstallation", id) })
}

fn label(repo: &RepoName, name: &str) -> Value {
    let id = user_id(&format!("{repo}#{name}"));
    json!({
        "id": id,
        "node_id": node_id("05:Label", id),
        "url": format!("https://api.github.com/repos/{repo}/labels/{name}"),
        "name": name,
        "color": "ededed",
        "default": false,
        "description": null,
    })
}

pub(crate) fn labels(repo: &RepoName, names: &[String]) -> Value {
    Value::Array(names.iter().map(|n| label(repo, n)).collect())
}

fn author_association(repo: &RepoName, rec: &RepoRecord, login: &str) -> &'static str {
    if login.eq_ignore_ascii_case(repo.owner()) {
        "OWNER"
    } else if rec.collaborators.contains_key(&login.to_ascii_lowercase()) {
        "COLLABORATOR"
    } else {
        "CONTRIBUTOR"
    }
}

/// A full pull request object (the single-PR endpoint and deliveries). `template` is the
/// `pull_request` object of the fixture the delivery is based on.
pub(crate) fn pull(repo: &RepoName, rec: &RepoRecord, pr: &PullRecord, template: &Value) -> Value {
    let mut v = template.clone();
    let n = pr.number.to_string();
    for kind in ["/pulls/", "/issues/", "/pull/"] {
        replace_strings(
            &mut v,
            &format!("{kind}{PR_FIXTURE_NUMBER}"),
            &format!("{kind}{n}"),
        );
    }
    if let Some(old) = template["head"]["sha"].as_str() {
        replace_strings(&mut v, old, pr.head_sha.as_str());
    }
    replace_strings(&mut v, PR_FIXTURE_REPO, repo.as_str());
    let (head_owner, head_repo) = match &pr.head_repo {
        HeadRepo::Same => (repo.owner().to_owned(), repo_of(repo, rec)),
        HeadRepo::Fork(f) => (
            f.owner().to_owned(),
            repository(f, user_id(f.as_str()), "main", true),
        ),
        HeadRepo::Deleted => (pr.author.clone(), Value::Null),
    };
    set(&mut v, "id", json!(pr.id));
    set(&mut v, "node_id", json!(node_id("011:PullRequest", pr.id)));
    set(&mut v, "number", json!(pr.number));
    set(
        &mut v,
        "state",
        json!(if pr.open { "open" } else { "closed" }),
    );
    set(&mut v, "title", json!(pr.title));
    set(&mut v, "user", actor(&pr.author));
    set(&mut v, "created_at", json!(ts(pr.created_at)));
    set(&mut v, "updated_at", json!(ts(pr.updated_at)));
    set(&mut v, "closed_at", json!(pr.closed_at.map(ts)));
    set(&mut v, "merged_at", json!(pr.merged_at.map(ts)));
    set(
        &mut v,
        "merge_commit_sha",
        json!(pr.merge_commit_sha.as_ref().map(|s| s.as_str())),
    );
    set(&mut v, "labels", labels(repo, &pr.labels));
    set(&mut v, "draft", json!(pr.draft));
    set(&mut v, "merged", json!(pr.merged));
    set(
        &mut v,
        "merged_by",
        pr.merged_by.as_deref().map_or(Value::Null, actor),
    );
    set(
        &mut v,
        "author_association",
        json!(author_association(repo, rec, &pr.author)),
    );
    set(&mut v, "changed_files", json!(pr.files().len()));
    set(
        &mut v,
        "head",
        json!({
            "label": format!("{head_owner}:{}", pr.head_ref),
            "ref": pr.head_ref,
            "sha": pr.head_sha,
            "user": user(&head_owner, "User"),
            "repo": head_repo,
        }),
    );
    set(
        &mut v,
        "base",
        json!({
            "label": format!("{}:{}", repo.owner(), pr.base_ref),
            "ref": pr.base_ref,
            "sha": pr.base_sha,
            "user": user(repo.owner(), "User"),
            "repo": repo_of(repo, rec),
        }),
    );
    v
}

/// A pull request as the list endpoint shows it ("pull-request-simple": no merge details).
pub(crate) fn pull_simple(repo: &RepoName, rec: &RepoRecord, pr: &PullRecord) -> Value {
    let mut v = pull(repo, rec, pr, &PR_OPENED["pull_request"]);
    if let Value::Object(map) = &mut v {
        for key in [
            "merged",
            "mergeable",
            "rebaseable",
            "mergeable_state",
            "merged_by",
            "comments",
            "review_comments",
            "maintainer_can_modify",
            "commits",
            "additions",
            "deletions",
            "changed_files",
        ] {
            map.remove(key);
        }
    }
    v
}

/// The issue object of a PR conversation, as an `issue_comment` delivery carries it.
pub(crate) fn issue(repo: &RepoName, rec: &RepoRecord, pr: &PullRecord) -> Value {
    let mut v = ISSUE_COMMENT["issue"].clone();
    let n = pr.number.to_string();
    for kind in ["/issues/", "/pulls/", "/pull/"] {
        replace_strings(
            &mut v,
            &format!("{kind}{ISSUE_FIXTURE_NUMBER}"),
            &format!("{kind}{n}"),
        );
    }
    replace_strings(&mut v, ISSUE_FIXTURE_REPO, repo.as_str());
    let comments = rec.comments.iter().filter(|c| c.issue == pr.number).count();
    set(&mut v, "id", json!(pr.id));
    set(&mut v, "node_id", json!(node_id("011:PullRequest", pr.id)));
    set(&mut v, "number", json!(pr.number));
    set(&mut v, "title", json!(pr.title));
    set(&mut v, "user", actor(&pr.author));
    set(&mut v, "labels", labels(repo, &pr.labels));
    set(
        &mut v,
        "state",
        json!(if pr.open { "open" } else { "closed" }),
    );
    set(&mut v, "comments", json!(comments));
    set(&mut v, "created_at", json!(ts(pr.created_at)));
    set(&mut v, "updated_at", json!(ts(pr.updated_at)));
    set(&mut v, "closed_at", json!(pr.closed_at.map(ts)));
    set(
        &mut v,
        "author_association",
        json!(author_association(repo, rec, &pr.author)),
    );
    if let Some(Value::Object(pr_link)) = v.get_mut("pull_request") {
        pr_link.insert("merged_at".to_owned(), json!(pr.merged_at.map(ts)));
    }
    v
}

/// An issue comment object.
pub(crate) fn comment(
    repo: &RepoName,
    rec: &RepoRecord,
    c: &CommentRecord,
    app_id: &AppIdentity,
) -> Value {
    let mut v = ISSUE_COMMENT["comment"].clone();
    set(
        &mut v,
        "url",
        json!(format!(
            "https://api.github.com/repos/{repo}/issues/comments/{}",
            c.id
        )),
    );
    set(
        &mut v,
        "html_url",
        json!(format!(
            "https://github.com/{repo}/pull/{}#issuecomment-{}",
            c.issue, c.id
        )),
    );
    set(
        &mut v,
        "issue_url",
        json!(format!(
            "https://api.github.com/repos/{repo}/issues/{}",
            c.issue
        )),
    );
    set(&mut v, "id", json!(c.id));
    set(&mut v, "node_id", json!(node_id("012:IssueComment", c.id)));
    set(&mut v, "user", actor(&c.user));
    set(&mut v, "created_at", json!(ts(c.created_at)));
    set(&mut v, "updated_at", json!(ts(c.updated_at)));
    let association = if c.by_app {
        "NONE"
    } else {
        author_association(repo, rec, &c.user)
    };
    set(&mut v, "author_association", json!(association));
    set(&mut v, "body", json!(c.body));
    set(
        &mut v,
        "performed_via_github_app",
        if c.by_app { app(app_id) } else { Value::Null },
    );
    v
}

pub(crate) fn reaction(r: &ReactionRecord) -> Value {
    json!({
        "id": r.id,
        "node_id": node_id("08:Reaction", r.id),
        "user": actor(&r.user),
        "content": r.content,
        "created_at": ts(r.created_at),
    })
}

pub(crate) fn deployment(repo: &RepoName, d: &DeploymentRecord, identity: &AppIdentity) -> Value {
    let url = format!("https://api.github.com/repos/{repo}/deployments/{}", d.id);
    json!({
        "url": url,
        "id": d.id,
        "node_id": node_id("010:Deployment", d.id),
        "sha": d.sha,
        "ref": d.ref_,
        "task": d.task,
        "payload": d.payload,
        "original_environment": d.environment,
        "environment": d.environment,
        "description": d.description,
        "creator": actor(&identity.bot_login()),
        "created_at": ts(d.created_at),
        "updated_at": ts(d.updated_at),
        "statuses_url": format!("{url}/statuses"),
        "repository_url": format!("https://api.github.com/repos/{repo}"),
        "transient_environment": d.transient_environment,
        "production_environment": d.production_environment,
        "performed_via_github_app": app(identity),
    })
}

pub(crate) fn deployment_status(
    repo: &RepoName,
    deployment_id: u64,
    s: &StatusRecord,
    identity: &AppIdentity,
) -> Value {
    let deployment_url = format!("https://api.github.com/repos/{repo}/deployments/{deployment_id}");
    json!({
        "url": format!("{deployment_url}/statuses/{}", s.id),
        "id": s.id,
        "node_id": node_id("016:DeploymentStatus", s.id),
        "state": s.state,
        "creator": actor(&identity.bot_login()),
        "description": s.description,
        "environment": s.environment,
        "target_url": s.log_url,
        "log_url": s.log_url,
        "environment_url": s.environment_url,
        "created_at": ts(s.created_at),
        "updated_at": ts(s.created_at),
        "deployment_url": deployment_url,
        "repository_url": format!("https://api.github.com/repos/{repo}"),
        "performed_via_github_app": app(identity),
    })
}

/// The short PR references a check run lists (none for forks, GITHUB.md §9).
fn check_run_pulls(repo: &RepoName, rec: &RepoRecord, run: &CheckRunRecord) -> Value {
    let repo_ref = json!({
        "id": rec.id,
        "url": format!("https://api.github.com/repos/{repo}"),
        "name": repo.name(),
    });
    let pulls = rec
        .pulls
        .values()
        .filter(|p| p.open && p.head_sha == run.sha && p.head_repo == HeadRepo::Same)
        .map(|p| {
            json!({
                "url": format!("https://api.github.com/repos/{repo}/pulls/{}", p.number),
                "id": p.id,
                "number": p.number,
                "head": {"ref": p.head_ref, "sha": p.head_sha, "repo": repo_ref},
                "base": {"ref": p.base_ref, "sha": p.base_sha, "repo": repo_ref},
            })
        })
        .collect();
    Value::Array(pulls)
}

/// A check run the App wrote: [`check_run`] with what it set, and the App as its author.
pub(crate) fn app_check_run(
    repo: &RepoName,
    rec: &RepoRecord,
    run: &CheckRunRecord,
    identity: &AppIdentity,
) -> Value {
    let mut v = check_run(repo, rec, run);
    set(&mut v, "app", app(identity));
    v
}

pub(crate) fn check_run(repo: &RepoName, rec: &RepoRecord, run: &CheckRunRecord) -> Value {
    let mut v = CHECK_RUN["check_run"].clone();
    replace_strings(&mut v, "128620228", &run.id.to_string());
    replace_strings(&mut v, CHECK_FIXTURE_REPO, repo.as_str());
    let pulls = check_run_pulls(repo, rec, run);
    let branch = rec
        .refs
        .iter()
        .find(|(_, sha)| **sha == run.sha)
        .map(|(name, _)| name.clone());
    set(&mut v, "id", json!(run.id));
    set(&mut v, "node_id", json!(node_id("08:CheckRun", run.id)));
    set(&mut v, "head_sha", json!(run.sha));
    set(&mut v, "name", json!(run.name));
    set(&mut v, "status", json!(run.status));
    set(&mut v, "conclusion", json!(run.conclusion));
    set(&mut v, "started_at", json!(ts(run.started_at)));
    set(&mut v, "completed_at", json!(run.completed_at.map(ts)));
    set(&mut v, "pull_requests", pulls.clone());
    set(&mut v, "external_id", json!(run.external_id));
    if let Some(url) = &run.details_url {
        set(&mut v, "details_url", json!(url));
    }
    if let Some(o) = &run.output {
        let annotations = v["output"]["annotations_url"].clone();
        set(
            &mut v,
            "output",
            json!({"title": o.title, "summary": o.summary, "text": o.text,
                "annotations_count": 0, "annotations_url": annotations}),
        );
    }
    if let Some(suite) = v.get_mut("check_suite") {
        set(suite, "head_sha", json!(run.sha));
        set(suite, "after", json!(run.sha));
        set(suite, "head_branch", json!(branch));
        set(suite, "status", json!(run.status));
        set(suite, "conclusion", json!(run.conclusion));
        set(suite, "pull_requests", pulls);
    }
    v
}
