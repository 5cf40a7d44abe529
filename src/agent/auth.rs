//! Who is calling, and may they: bearer tokens are checked with Kubernetes' TokenReview and
//! each operation is authorized with a SubjectAccessReview on `previewenvironments` in
//! Sandcastle's namespace (the verb and subresource of [`Operation::access`], the preview's
//! name), so admins grant access with ordinary RBAC and `kubectl create token`; there is no
//! user database of Sandcastle's own. A token minted for a preview (its `preview-agent`
//! ServiceAccount) may read and operate that preview and nothing else. Answers are remembered
//! for [`CACHE_FOR`] (by a hash of the token, never the token), so a burst of calls costs one
//! review.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

use super::error::AgentError;
use super::operation::Operation;
use crate::domain::guardrails::PREVIEW_AGENT;

/// The token of an `Authorization: Bearer <token>` header, or why there is none to use.
pub fn bearer(header: Option<&str>) -> Result<&str, AgentError> {
    let header = header.ok_or_else(|| {
        AgentError::Unauthenticated(
            "send a Kubernetes bearer token: Authorization: Bearer <token>".to_owned(),
        )
    })?;
    header
        .strip_prefix("Bearer ")
        .or_else(|| header.strip_prefix("bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            AgentError::Unauthenticated(
                "the Authorization header must be `Bearer <token>`".to_owned(),
            )
        })
}

/// How long a review's answer is reused.
pub const CACHE_FOR: Duration = Duration::from_secs(30);
/// Entries kept at most in each cache before it is emptied.
const CACHE_LIMIT: usize = 10_000;

/// Who the caller is, as Kubernetes authenticated them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
    /// Which interface the call came through (audit lines and history say so).
    pub via: Via,
    /// A person signed in with GitHub (the dashboard): what they may do follows their access to
    /// each preview's repository, not RBAC.
    pub github: Option<Arc<GitHubAccess>>,
}

/// What a person signed in with GitHub may see and do: previews of the repositories they can
/// read; writes where they have write access (the rule of PR commands).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GitHubAccess {
    pub login: String,
    /// `owner/name`, lower case.
    pub read: std::collections::BTreeSet<String>,
    pub write: std::collections::BTreeSet<String>,
}

impl GitHubAccess {
    /// Whether this person may see previews of `repository`.
    pub fn reads(&self, repository: &str) -> bool {
        self.read.contains(&repository.to_ascii_lowercase())
    }

    /// Whether they may run `op` on preview `name` of `repository`. A preview of a repository
    /// they cannot read does not exist for them.
    pub fn allows(&self, op: Operation, name: &str, repository: &str) -> Result<(), AgentError> {
        if !self.reads(repository) {
            return Err(AgentError::NotFound(name.to_owned()));
        }
        if matches!(op, Operation::Create | Operation::Token) {
            return Err(AgentError::Forbidden(format!(
                "{} is not offered to people signed in with GitHub; use the API",
                op.name()
            )));
        }
        if op.writes() && !self.write.contains(&repository.to_ascii_lowercase()) {
            return Err(AgentError::Forbidden(format!(
                "@{} may not {} previews of {repository}: that needs write access to the repository",
                self.login,
                op.name()
            )));
        }
        Ok(())
    }
}

/// The interface a call came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Via {
    #[default]
    Api,
    Mcp,
    Dashboard,
}

impl Via {
    pub fn name(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Mcp => "mcp",
            Self::Dashboard => "dashboard",
        }
    }
}

impl Caller {
    /// The preview namespace when this is a preview's own `preview-agent` ServiceAccount.
    pub fn preview_namespace(&self) -> Option<&str> {
        let rest = self.user.strip_prefix("system:serviceaccount:")?;
        let (namespace, account) = rest.split_once(':')?;
        (account == PREVIEW_AGENT).then_some(namespace)
    }
}

/// Answers remembered with when they were given (the dashboard keeps GitHub's in one too).
pub(crate) type Answers<K, V> = Arc<Mutex<HashMap<K, (V, Instant)>>>;

/// The answer for `key` if it was given less than `within` ago.
pub(crate) fn recall<K: std::hash::Hash + Eq, V: Clone>(
    cache: &Answers<K, V>,
    key: &K,
    within: Duration,
) -> Option<V> {
    let map = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    map.get(key)
        .filter(|(_, at)| at.elapsed() < within)
        .map(|(v, _)| v.clone())
}

/// Remember `value` for `key` (the whole cache is dropped when it holds [`CACHE_LIMIT`]).
pub(crate) fn remember<K: std::hash::Hash + Eq, V>(cache: &Answers<K, V>, key: K, value: V) {
    let mut map = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if map.len() >= CACHE_LIMIT {
        map.clear();
    }
    map.insert(key, (value, Instant::now()));
}

/// A question to RBAC: may `user` do `verb` on `previewenvironments[/sub]` named `name`?
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Question {
    user: String,
    groups: Vec<String>,
    verb: &'static str,
    subresource: Option<&'static str>,
    name: Option<String>,
}

/// Checks callers against the cluster. Cheap to clone.
#[derive(Clone)]
pub struct Authority {
    client: Client,
    home: String,
    tokens: Answers<[u8; 32], Result<Caller, String>>,
    decisions: Answers<Question, Result<(), String>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl Authority {
    pub fn new(client: Client, home: &str) -> Self {
        Self {
            client,
            home: home.to_owned(),
            tokens: Arc::default(),
            decisions: Arc::default(),
        }
    }

    /// The caller a bearer token belongs to (TokenReview).
    pub async fn authenticate(&self, token: &str) -> Result<Caller, AgentError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(answer) = recall(&self.tokens, &key, CACHE_FOR) {
            return answer.map_err(AgentError::Unauthenticated);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let reviewed = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AgentError::kubernetes(&e))?;
        let status = reviewed.status.unwrap_or_default();
        let answer = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => Ok(Caller {
                user: user.username.unwrap_or_default(),
                uid: user.uid,
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
                via: Via::Api,
                github: None,
            }),
            _ => Err(status.error.map_or_else(
                || "the bearer token is not valid (invalid, expired or revoked)".to_owned(),
                |e| format!("the bearer token is not valid: {e}"),
            )),
        };
        remember(&self.tokens, key, answer.clone());
        answer.map_err(AgentError::Unauthenticated)
    }

    /// Whether `caller` may run `op` (on the preview `name`, living in `namespace`, for
    /// operations on one preview). A preview's own token: only its preview, only the operations
    /// [`Operation::for_preview_token`] allows. Anyone else: what RBAC says.
    pub async fn authorize(
        &self,
        caller: &Caller,
        op: Operation,
        preview: Option<(&str, &str)>,
    ) -> Result<(), AgentError> {
        if let Some(own) = caller.preview_namespace() {
            return match preview {
                Some((_, namespace)) if namespace == own && op.for_preview_token() => Ok(()),
                // Listing with a preview's token shows that preview alone (filtered by caller).
                None if op == Operation::List => Ok(()),
                _ => Err(AgentError::Forbidden(format!(
                    "a token of preview namespace {own} may only {} its own preview",
                    if op.for_preview_token() {
                        op.name()
                    } else {
                        "read and operate"
                    }
                ))),
            };
        }
        let access = op.access();
        let question = Question {
            user: caller.user.clone(),
            groups: caller.groups.clone(),
            verb: access.verb,
            subresource: access.subresource,
            name: preview.map(|(n, _)| n.to_owned()),
        };
        let answer = match recall(&self.decisions, &question, CACHE_FOR) {
            Some(answer) => answer,
            None => {
                let answer = self.review(caller, &question).await?;
                remember(&self.decisions, question.clone(), answer.clone());
                answer
            }
        };
        answer.map_err(AgentError::Forbidden)
    }

    async fn review(
        &self,
        caller: &Caller,
        q: &Question,
    ) -> Result<Result<(), String>, AgentError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(caller.user.clone()),
                uid: caller.uid.clone(),
                groups: Some(caller.groups.clone()),
                extra: Some(caller.extra.clone()),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(self.home.clone()),
                    verb: Some(q.verb.to_owned()),
                    group: Some("sandcastle.dev".to_owned()),
                    resource: Some("previewenvironments".to_owned()),
                    subresource: q.subresource.map(str::to_owned),
                    name: q.name.clone(),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let reviewed = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AgentError::kubernetes(&e))?;
        let status = reviewed.status.unwrap_or_default();
        if status.allowed {
            return Ok(Ok(()));
        }
        let what = match q.subresource {
            Some(sub) => format!("previewenvironments/{sub}"),
            None => "previewenvironments".to_owned(),
        };
        let target = q
            .name
            .as_deref()
            .map(|n| format!(" {n}"))
            .unwrap_or_default();
        Ok(Err(format!(
            "{} may not {} {what}{target} in namespace {} (Kubernetes RBAC)",
            caller.user, q.verb, self.home
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(user: &str) -> Caller {
        Caller {
            user: user.to_owned(),
            uid: None,
            groups: Vec::new(),
            extra: BTreeMap::new(),
            via: Via::Api,
            github: None,
        }
    }

    #[test]
    fn a_preview_token_is_known_by_its_account() {
        assert_eq!(
            caller("system:serviceaccount:shop-pr-1:preview-agent").preview_namespace(),
            Some("shop-pr-1")
        );
        assert_eq!(
            caller("system:serviceaccount:shop-pr-1:default").preview_namespace(),
            None
        );
        assert_eq!(caller("alice").preview_namespace(), None);
    }
}
