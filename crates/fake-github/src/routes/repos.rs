//! Repository reads: pull requests (single and listed, their files, comparisons of commits),
//! collaborator permissions, file contents and check runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use base64::Engine as _;
use http::{StatusCode, Uri};
use serde_json::{Value, json};

use super::{error, not_found, paginate, paginate_array, reply, with_repo};
use crate::auth::RequestAuth;
use crate::json;
use crate::server::Shared;
use crate::state::derived_sha;

const CONTENTS_DOC: &str = "https://docs.github.com/rest/repos/contents#get-repository-content";

type Q = Query<BTreeMap<String, String>>;

pub(super) async fn permission(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, user)): Path<(String, String, String)>,
) -> Response {
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let Some(role) = st.repo(repo).collaborators.get(&user.to_ascii_lowercase()) else {
            return not_found();
        };
        let (permission, role_name) = role.api_fields();
        reply(
            StatusCode::OK,
            &json!({
                "permission": permission,
                "role_name": role_name,
                "user": json::actor(&user),
            }),
        )
    })
}

pub(super) async fn list_pulls(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name)): Path<(String, String)>,
    Query(query): Q,
    uri: Uri,
) -> Response {
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let state = query.get("state").map_or("open", String::as_str);
        let rec = st.repo(repo);
        let items: Vec<Value> = rec
            .pulls
            .values()
            .rev()
            .filter(|p| match state {
                "all" => true,
                "closed" => !p.open,
                _ => p.open,
            })
            .map(|p| json::pull_simple(repo, rec, p))
            .collect();
        paginate_array(&shared, uri.path(), &query, items)
    })
}

/// `GET /repos/{owner}/{repo}`: the repository (its default branch among the rest).
pub(super) async fn get_repo(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name)): Path<(String, String)>,
) -> Response {
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        reply(StatusCode::OK, &json::repo_of(repo, st.repo(repo)))
    })
}

pub(super) async fn get_pull(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, number)): Path<(String, String, u64)>,
) -> Response {
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let rec = st.repo(repo);
        match rec.pulls.get(&number) {
            Some(p) => reply(
                StatusCode::OK,
                &json::pull(repo, rec, p, &json::PR_OPENED["pull_request"]),
            ),
            None => not_found(),
        }
    })
}

/// `GET /repos/{owner}/{repo}/commits/{ref}`: the commit a branch, tag or SHA points at (the
/// fields a client needs of GitHub's commit object).
pub(super) async fn get_commit(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, reference)): Path<(String, String, String)>,
) -> Response {
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        match st.repo(repo).resolve(&reference) {
            Some(sha) => reply(
                StatusCode::OK,
                &json!({
                    "sha": sha,
                    "node_id": format!("C_{}", &sha.as_str()[..12]),
                    "url": format!("https://api.github.com/repos/{repo}/commits/{sha}"),
                    "html_url": format!("https://github.com/{repo}/commit/{sha}"),
                    "commit": {"message": "", "tree": {"sha": sha}},
                    "parents": [],
                }),
            ),
            None => super::error(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("No commit found for SHA: {reference}"),
                "https://docs.github.com/rest/commits/commits#get-a-commit",
            ),
        }
    })
}

/// Base64 wrapped with `\n` every 60 characters plus a trailing `\n`, as GitHub sends it.
pub(crate) fn wrapped_base64(bytes: &[u8]) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut out = String::with_capacity(encoded.len() + encoded.len() / 60 + 1);
    for chunk in encoded.as_bytes().chunks(60) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or(""));
        out.push('\n');
    }
    out
}

pub(super) async fn contents(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, path)): Path<(String, String, String)>,
    Query(query): Q,
) -> Response {
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let rec = st.repo(repo);
        let ref_ = query
            .get("ref")
            .cloned()
            .unwrap_or_else(|| rec.default_branch.clone());
        let path = path.trim_matches('/').to_owned();
        let Some(text) = rec.files.get(&(ref_.clone(), path.clone())) else {
            return error(StatusCode::NOT_FOUND, "Not Found", CONTENTS_DOC);
        };
        let sha = derived_sha(&format!("blob {}\0{text}", text.len()));
        let api = format!("https://api.github.com/repos/{repo}/contents/{path}?ref={ref_}");
        let html = format!("https://github.com/{repo}/blob/{ref_}/{path}");
        let git = format!("https://api.github.com/repos/{repo}/git/blobs/{sha}");
        reply(
            StatusCode::OK,
            &json!({
                "type": "file",
                "encoding": "base64",
                "size": text.len(),
                "name": path.rsplit('/').next().unwrap_or(&path),
                "path": path,
                "content": wrapped_base64(text.as_bytes()),
                "sha": sha,
                "url": api,
                "git_url": git,
                "html_url": html,
                "download_url": format!("https://raw.githubusercontent.com/{repo}/{ref_}/{path}"),
                "_links": {"self": api, "git": git, "html": html},
            }),
        )
    })
}

pub(super) async fn check_runs(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, ref_)): Path<(String, String, String)>,
    Query(query): Q,
    uri: Uri,
) -> Response {
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let rec = st.repo(repo);
        let Some(sha) = rec.resolve(&ref_) else {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("No commit found for SHA: {ref_}"),
                "https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference",
            );
        };
        let items: Vec<Value> = rec
            .check_runs
            .iter()
            .rev()
            .filter(|r| r.sha == sha)
            .filter(|r| query.get("check_name").is_none_or(|n| *n == r.name))
            .map(|r| match r.by_app {
                true => json::app_check_run(repo, rec, r, &shared.identity),
                false => json::check_run(repo, rec, r),
            })
            .collect();
        paginate(
            &shared,
            uri.path(),
            &query,
            items,
            |page, total| json!({"total_count": total, "check_runs": page}),
        )
    })
}

/// A changed file as GitHub lists it.
fn file_json(name: &str) -> Value {
    json!({"filename": name, "status": "modified", "additions": 1, "deletions": 0, "changes": 1})
}

/// `GET /repos/{owner}/{repo}/pulls/{number}/files`: the files the pull request changes, paged,
/// 3,000 at most as on GitHub.
pub(super) async fn pull_files(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, number)): Path<(String, String, u64)>,
    Query(query): Q,
    uri: Uri,
) -> Response {
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let Some(pr) = st.repo(repo).pulls.get(&number) else {
            return not_found();
        };
        let items = pr.files().iter().take(3000).map(|f| file_json(f)).collect();
        paginate_array(&shared, uri.path(), &query, items)
    })
}

/// `GET /repos/{owner}/{repo}/compare/{base}...{head}`: the files changed from `base` to `head`
/// (300 at most, as on GitHub), found among the pull requests' commits.
pub(super) async fn compare(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, basehead)): Path<(String, String, String)>,
) -> Response {
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let Some((base, head)) = basehead.split_once("...") else {
            return not_found();
        };
        let found = st
            .repo(repo)
            .pulls
            .values()
            .find_map(|pr| pr.compare(base, head));
        match found {
            Some(files) => reply(
                StatusCode::OK,
                &json!({
                    "status": "ahead",
                    "files": files.iter().take(300).map(|f| file_json(f)).collect::<Vec<_>>(),
                }),
            ),
            None => not_found(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    fn decode_base64_content(content: &str) -> Result<Vec<u8>, base64::DecodeError> {
        use base64::Engine as _;
        let compact: String = content.chars().filter(|c| !c.is_whitespace()).collect();
        base64::engine::general_purpose::STANDARD.decode(compact)
    }

    #[test]
    fn contents_are_wrapped_like_githubs() {
        let text = "x".repeat(100);
        let wrapped = wrapped_base64(text.as_bytes());
        assert!(wrapped.ends_with('\n'));
        let lines: Vec<&str> = wrapped.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().all(|l| l.len() <= 60));
        assert_eq!(lines[0].len(), 60);
        assert_eq!(decode_base64_content(&wrapped).unwrap(), text.as_bytes());
    }
}
