//! Who is calling, and may they: bearer tokens are checked with Kubernetes' TokenReview and
//! each operation is authorized with a SubjectAccessReview on `previewenvironments` in
//! Sandcastle's namespace (the verb and subresource of [`Operation::access`], the preview's
//! name), so admins grant access with ordinary RBAC and `kubectl create token`; there is no
//! user database of Sandcastle's own. A token minted for a preview (its `preview-agent`
//! ServiceAccount) may read and operate that preview and nothing else; one minted in another
//! cluster (where its preview lives) is checked by that cluster's TokenReview. Answers are remembered
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
use sandcastle_domain::guardrails::PREVIEW_AGENT;

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

/// The header a client relaying for another interface names it with (`mcp`: the stdio MCP
/// server calling the API), so writes are attributed to that interface.
pub const VIA_HEADER: &str = "sandcastle-via";

/// How long a review's answer is reused.
pub const CACHE_FOR: Duration = Duration::from_secs(30);
/// How long a deleted preview's tokens are refused by its uid, before the watch cache has
/// certainly seen the deletion (from then on it refuses them itself).
const REVOKED_FOR: Duration = Duration::from_secs(600);
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
    /// The cluster whose TokenReview vouched for the token, when not Sandcastle's own (a token
    /// minted for a preview living there).
    pub cluster: Option<String>,
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
        if matches!(
            op,
            Operation::Create | Operation::Token | Operation::HeaderSecret | Operation::RefreshData
        ) {
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
    /// The interface as a preview's record names it.
    pub fn interface(self) -> sandcastle_crd::Interface {
        match self {
            Self::Api => sandcastle_crd::Interface::Api,
            Self::Mcp => sandcastle_crd::Interface::Mcp,
            Self::Dashboard => sandcastle_crd::Interface::Dashboard,
        }
    }

    /// Whether calls through it are an agent's (the API, which the CLI uses too, and MCP); the
    /// dashboard's are a person's.
    pub fn is_agent(self) -> bool {
        matches!(self, Self::Api | Self::Mcp)
    }

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
        preview_account(&self.user)
    }

    /// The cluster the caller's token is from (`in-cluster`: Sandcastle's own).
    pub fn cluster(&self) -> &str {
        self.cluster
            .as_deref()
            .unwrap_or(sandcastle_crd::IN_CLUSTER)
    }

    /// Whether this is the token of the preview living in `namespace` of `cluster`.
    pub fn owns(&self, namespace: &str, cluster: &str) -> bool {
        self.preview_namespace() == Some(namespace) && self.cluster() == cluster
    }
}

/// The namespace of a `preview-agent` ServiceAccount's user name.
fn preview_account(user: &str) -> Option<&str> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (namespace, account) = rest.split_once(':')?;
    (account == PREVIEW_AGENT).then_some(namespace)
}

/// The namespace a ServiceAccount token says it is for (its `sub` claim), read without
/// checking it: only to choose which cluster is asked to check it.
fn claimed_preview_namespace(token: &str) -> Option<String> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    preview_account(claims.get("sub")?.as_str()?).map(str::to_owned)
}

/// Which cluster vouches for a preview's token: the cluster the preview of that namespace
/// lives in.
#[derive(Clone, Debug)]
pub struct TokenClusters {
    pub clusters: sandcastle_kube::clusters::Clusters,
    pub previews: kube::runtime::reflector::Store<sandcastle_crd::PreviewEnvironment>,
    pub namespace_prefix: String,
}

impl TokenClusters {
    /// Whether a preview that is not torn down (nor deleted through the API, by `revoked` uid)
    /// lives in `namespace` of `cluster`: only then do its tokens work. (A sandbox taken over
    /// by a pull request is torn down, and its namespace lives on as the pull request's.)
    fn live_in(&self, namespace: &str, cluster: &str, revoked: &HashMap<String, Instant>) -> bool {
        self.previews.state().iter().any(|p| {
            p.spec.teardown.is_none()
                && super::view::namespace_of(p, &self.namespace_prefix) == namespace
                && super::view::cluster_of(p) == cluster
                && p.metadata
                    .uid
                    .as_ref()
                    .is_none_or(|uid| !revoked.contains_key(uid))
        })
    }

    /// The cluster other than Sandcastle's own that the preview living in `namespace` is in.
    fn of(&self, namespace: &str) -> Option<Arc<sandcastle_kube::clusters::Cluster>> {
        let pe = self
            .previews
            .state()
            .into_iter()
            .find(|p| super::view::namespace_of(p, &self.namespace_prefix) == namespace)?;
        let name = pe
            .status
            .as_ref()
            .and_then(sandcastle_domain::placement::placed_in)?;
        self.clusters.get(name).ok().filter(|c| !c.is_local())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Answers remembered with when they were given (the dashboard keeps GitHub's in one too).
pub type Answers<K, V> = Arc<Mutex<HashMap<K, (V, Instant)>>>;

/// The answer for `key` if it was given less than `within` ago.
pub fn recall<K: std::hash::Hash + Eq, V: Clone>(
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
pub fn remember<K: std::hash::Hash + Eq, V>(cache: &Answers<K, V>, key: K, value: V) {
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
    resource: &'static str,
    subresource: Option<&'static str>,
    name: Option<String>,
}

/// Checks callers against the cluster. Cheap to clone.
#[derive(Clone)]
pub struct Authority {
    client: Client,
    home: String,
    /// Preview tokens minted in other clusters are checked there.
    elsewhere: Option<TokenClusters>,
    tokens: Answers<[u8; 32], Result<Caller, String>>,
    decisions: Answers<Question, Result<(), String>>,
    /// Previews deleted through the API, by uid, whose tokens are refused at once.
    revoked: Arc<Mutex<HashMap<String, Instant>>>,
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
            elsewhere: None,
            tokens: Arc::default(),
            decisions: Arc::default(),
            revoked: Arc::default(),
        }
    }

    /// The preview of uid `uid`, living in `namespace` of `cluster`, was deleted: its tokens
    /// stop working now, and the reviews remembered for them are forgotten.
    pub fn revoke(&self, uid: Option<&str>, namespace: &str, cluster: &str) {
        if let Some(uid) = uid {
            let mut revoked = lock(&self.revoked);
            revoked.retain(|_, at| at.elapsed() < REVOKED_FOR);
            revoked.insert(uid.to_owned(), Instant::now());
        }
        lock(&self.tokens)
            .retain(|_, (answer, _)| !answer.as_ref().is_ok_and(|c| c.owns(namespace, cluster)));
    }

    /// Whether `caller`, when it is a preview's token, still belongs to a preview that lives.
    fn preview_lives(&self, caller: &Caller) -> bool {
        let (Some(namespace), Some(e)) = (caller.preview_namespace(), &self.elsewhere) else {
            return true;
        };
        e.live_in(namespace, caller.cluster(), &lock(&self.revoked))
    }

    /// Check the tokens of previews in other clusters in the cluster each lives in.
    pub fn with_clusters(mut self, elsewhere: TokenClusters) -> Self {
        self.elsewhere = Some(elsewhere);
        self
    }

    /// The caller a bearer token belongs to (TokenReview).
    pub async fn authenticate(&self, token: &str) -> Result<Caller, AgentError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let answer = match recall(&self.tokens, &key, CACHE_FOR) {
            Some(answer) => answer,
            None => self.review_token(token, key).await?,
        };
        match answer {
            Ok(caller) if !self.preview_lives(&caller) => {
                let why = format!(
                    "the token is of preview namespace {}, whose preview was torn down: its tokens no longer work",
                    caller.preview_namespace().unwrap_or_default()
                );
                // Refused from now on without asking Kubernetes again.
                remember(&self.tokens, key, Err(why.clone()));
                Err(AgentError::Unauthenticated(why))
            }
            answer => answer.map_err(AgentError::Unauthenticated),
        }
    }

    /// What the TokenReview of `token` (hashed as `key`) says, remembered.
    async fn review_token(
        &self,
        token: &str,
        key: [u8; 32],
    ) -> Result<Result<Caller, String>, AgentError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        // A preview's token from another cluster is checked there (and only there): the claim
        // read here only chooses where.
        let remote = self.elsewhere.as_ref().and_then(|e| {
            let ns = claimed_preview_namespace(token)?;
            e.of(&ns)
        });
        let client = remote.as_ref().map_or(&self.client, |c| c.client());
        let api: Api<TokenReview> = Api::all(client.clone());
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
                cluster: remote.as_ref().map(|c| c.name.to_string()),
            }),
            _ => Err(status.error.map_or_else(
                || "the bearer token is not valid (invalid, expired or revoked)".to_owned(),
                |e| format!("the bearer token is not valid: {e}"),
            )),
        };
        remember(&self.tokens, key, answer.clone());
        Ok(answer)
    }

    /// Whether `caller` may run `op` (on the preview `name`, living in `namespace`, for
    /// operations on one preview). A preview's own token: only its preview, only the operations
    /// [`Operation::for_preview_token`] allows. Anyone else: what RBAC says.
    pub async fn authorize(
        &self,
        caller: &Caller,
        op: Operation,
        preview: Option<(&str, &str, &str)>,
    ) -> Result<(), AgentError> {
        if let Some(own) = caller.preview_namespace() {
            return match preview {
                Some((_, namespace, cluster))
                    if caller.owns(namespace, cluster) && op.for_preview_token() =>
                {
                    Ok(())
                }
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
            resource: access.resource,
            subresource: access.subresource,
            name: preview.map(|(n, _, _)| n.to_owned()),
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
                    resource: Some(q.resource.to_owned()),
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
            .map(|n| format!(" {}", sandcastle_domain::quote::short(n)))
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
            cluster: None,
        }
    }

    #[test]
    fn the_claimed_namespace_of_a_token_only_names_preview_accounts() {
        use base64::Engine as _;
        let token = |sub: &str| {
            let b = |v: serde_json::Value| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
            };
            format!(
                "{}.{}.sig",
                b(serde_json::json!({"alg": "RS256"})),
                b(serde_json::json!({"sub": sub}))
            )
        };
        assert_eq!(
            claimed_preview_namespace(&token("system:serviceaccount:t-shop-pr-1:preview-agent")),
            Some("t-shop-pr-1".to_owned())
        );
        assert_eq!(
            claimed_preview_namespace(&token("system:serviceaccount:ns:default")),
            None
        );
        assert_eq!(claimed_preview_namespace("not-a-jwt"), None);
        assert_eq!(claimed_preview_namespace("a.%%%.c"), None);
    }

    #[test]
    fn a_preview_token_owns_its_namespace_in_its_cluster_only() {
        let mut c = caller("system:serviceaccount:shop-pr-1:preview-agent");
        assert!(c.owns("shop-pr-1", "in-cluster"));
        assert!(
            !c.owns("shop-pr-1", "b"),
            "a namespace of that name elsewhere is not its own"
        );
        c.cluster = Some("b".into());
        assert!(c.owns("shop-pr-1", "b"));
        assert!(!c.owns("shop-pr-1", "in-cluster"));
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
