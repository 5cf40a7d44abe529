//! PR conversation comments and their reactions (GITHUB.md §5, §6). Comments made with an
//! installation token belong to the App's bot and carry `performed_via_github_app`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{StatusCode, Uri};
use serde_json::Value;

use super::{field, invalid, no_content, not_found, object_body, paginate_array, reply, with_repo};
use crate::auth::RequestAuth;
use crate::json;
use crate::server::Shared;
use crate::state::{CommentRecord, ReactionRecord};

const COMMENT_DOC: &str = "https://docs.github.com/rest/issues/comments";
const REACTION_DOC: &str =
    "https://docs.github.com/rest/reactions/reactions#create-reaction-for-an-issue-comment";
const REACTIONS: [&str; 8] = [
    "+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes",
];

type ItemPath = Path<(String, String, u64)>;

/// The required `body` string of a comment request.
fn comment_body(bytes: &[u8]) -> Result<String, Response> {
    let body = object_body(bytes)?;
    field(&body, "body", "a string", Value::as_str, COMMENT_DOC)?
        .map(str::to_owned)
        .ok_or_else(|| invalid("\"body\" wasn't supplied.", COMMENT_DOC))
}

pub(super) async fn list_comments(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, number)): ItemPath,
    Query(query): Query<BTreeMap<String, String>>,
    uri: Uri,
) -> Response {
    let identity = shared.identity.clone();
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let rec = st.repo(repo);
        if !rec.pulls.contains_key(&number) {
            return not_found();
        }
        let items: Vec<Value> = rec
            .comments
            .iter()
            .filter(|c| c.issue == number)
            .map(|c| json::comment(repo, rec, c, &identity))
            .collect();
        paginate_array(&shared, uri.path(), &query, items)
    })
}

pub(super) async fn create_comment(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, number)): ItemPath,
    body: Bytes,
) -> Response {
    let identity = shared.identity.clone();
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        if !st.repo(repo).pulls.contains_key(&number) {
            return not_found();
        }
        let text = match comment_body(&body) {
            Ok(t) => t,
            Err(r) => return r,
        };
        let id = st.id();
        let now = st.tick();
        let comment = CommentRecord {
            id,
            issue: number,
            body: text,
            user: identity.bot_login(),
            by_app: true,
            created_at: now,
            updated_at: now,
            reactions: Vec::new(),
        };
        let rec = st.repo_mut(repo);
        rec.comments.push(comment);
        let out = json::comment(
            repo,
            rec,
            rec.comments.last().expect("just pushed"),
            &identity,
        );
        reply(StatusCode::CREATED, &out)
    })
}

pub(super) async fn update_comment(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, id)): ItemPath,
    body: Bytes,
) -> Response {
    let identity = shared.identity.clone();
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let Some(index) = st.repo(repo).comments.iter().position(|c| c.id == id) else {
            return not_found();
        };
        let text = match comment_body(&body) {
            Ok(t) => t,
            Err(r) => return r,
        };
        let now = st.tick();
        let rec = st.repo_mut(repo);
        rec.comments[index].body = text;
        rec.comments[index].updated_at = now;
        reply(
            StatusCode::OK,
            &json::comment(repo, rec, &rec.comments[index], &identity),
        )
    })
}

pub(super) async fn delete_comment(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, id)): ItemPath,
) -> Response {
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let rec = st.repo_mut(repo);
        let before = rec.comments.len();
        rec.comments.retain(|c| c.id != id);
        if rec.comments.len() == before {
            not_found()
        } else {
            no_content()
        }
    })
}

pub(super) async fn create_reaction(
    State(shared): State<Arc<Shared>>,
    Extension(auth): Extension<RequestAuth>,
    Path((owner, name, id)): ItemPath,
    body: Bytes,
) -> Response {
    let user = shared.identity.bot_login();
    with_repo(&shared, &auth, &owner, &name, |st, repo| {
        let Some(index) = st.repo(repo).comments.iter().position(|c| c.id == id) else {
            return not_found();
        };
        let content = match object_body(&body).and_then(|b| {
            field(&b, "content", "a string", Value::as_str, REACTION_DOC)
                .map(|c| c.map(str::to_owned))
        }) {
            Ok(Some(c)) if REACTIONS.contains(&c.as_str()) => c,
            Ok(_) => {
                return invalid(
                    "\"content\" wasn't supplied or is not a reaction type.",
                    REACTION_DOC,
                );
            }
            Err(r) => return r,
        };
        let existing = st.repo(repo).comments[index]
            .reactions
            .iter()
            .find(|r| r.user == user && r.content == content)
            .cloned();
        if let Some(r) = existing {
            return reply(StatusCode::OK, &json::reaction(&r));
        }
        let reaction = ReactionRecord {
            id: st.id(),
            user: user.clone(),
            content,
            created_at: st.tick(),
        };
        st.repo_mut(repo).comments[index]
            .reactions
            .push(reaction.clone());
        reply(StatusCode::CREATED, &json::reaction(&reaction))
    })
}
