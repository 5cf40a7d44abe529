//! A commit's tarball as GitHub serves it: `GET /repos/{owner}/{repo}/tarball/{ref}` answers
//! 302 to a download URL on another host (codeload's, here a path of the stand-in) carrying a
//! token of its own; the download needs no `Authorization` and gives a gzip-compressed tar of
//! the commit's files under `{owner}-{repo}-{short sha}/`, after a pax header naming the commit.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Extension, Path, Query, State};
use axum::response::Response;
use http::{HeaderValue, StatusCode};

use super::{error, not_found, random, with_repo};
use crate::auth::RequestAuth;
use crate::server::Shared;
use sandcastle_domain::{RepoName, Sha};

const TARBALL_DOC: &str =
    "https://docs.github.com/rest/repos/contents#download-a-repository-archive-tar";

/// `GET /repos/{owner}/{repo}/tarball/{ref}`: the redirect to the download.
pub(super) async fn tarball(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, ref_)): Path<(String, String, String)>,
) -> Response {
    let base = shared.url.clone();
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let Some(sha) = st.repo(repo).resolve(&ref_) else {
            return error(StatusCode::NOT_FOUND, "Not Found", TARBALL_DOC);
        };
        let token = random(32);
        st.archive_tokens
            .insert(token.clone(), (repo.clone(), sha.clone()));
        let location = format!(
            "{base}/_codeload/{}/{}/legacy.tar.gz/{sha}?token={token}",
            repo.owner(),
            repo.name()
        );
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::FOUND;
        if let Ok(v) = HeaderValue::from_str(&location) {
            r.headers_mut().insert(http::header::LOCATION, v);
        }
        r
    })
}

/// `GET /_codeload/{owner}/{repo}/legacy.tar.gz/{sha}?token=…`: the archive itself.
pub(super) async fn download(
    State(shared): State<Arc<Shared>>,
    Path((owner, name, sha)): Path<(String, String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let files = {
        let st = shared.lock();
        let granted = query
            .get("token")
            .and_then(|t| st.archive_tokens.get(t))
            .cloned();
        let asked = RepoName::new(&format!("{owner}/{name}"))
            .ok()
            .zip(Sha::new(&sha).ok());
        let (repo, sha) = match (granted, asked) {
            (Some(granted), Some(asked)) if granted == asked => asked,
            _ => return not_found(),
        };
        let rec = st.repo(&repo);
        let files: Vec<(String, String)> = rec
            .files
            .iter()
            .filter(|((r, _), _)| rec.resolve(r).as_ref() == Some(&sha))
            .map(|((_, path), text)| (path.clone(), text.clone()))
            .collect();
        (repo, sha, files)
    };
    match archive(&files.0, &files.1, &files.2) {
        Ok(bytes) => {
            let mut r = Response::new(Body::from(bytes));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/x-gzip"),
            );
            r
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &e.to_string(),
            TARBALL_DOC,
        ),
    }
}

/// The archive of `files` as GitHub lays it out.
fn archive(repo: &RepoName, sha: &Sha, files: &[(String, String)]) -> std::io::Result<Vec<u8>> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    tar.append_pax_extensions([("comment", sha.as_str().as_bytes())])?;
    let top = format!("{}-{}-{}", repo.owner(), repo.name(), sha.short());
    let mut dir = tar::Header::new_ustar();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_mode(0o775);
    dir.set_size(0);
    tar.append_data(&mut dir, format!("{top}/"), std::io::empty())?;
    for (path, text) in files {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o664);
        header.set_size(text.len() as u64);
        tar.append_data(&mut header, format!("{top}/{path}"), text.as_bytes())?;
    }
    tar.into_inner()?.finish()
}
