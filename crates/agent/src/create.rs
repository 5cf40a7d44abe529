//! Creating a sandbox: a preview without a pull request, from a Blueprint, for a repository and
//! a branch (its head now) or a commit, with an optional name and TTL (at most the Blueprint's
//! `maxTtl`). With an `Idempotency-Key`, a retried create returns the preview the first one made
//! (the same key with another body is a conflict). When a pull request later opens for that
//! branch, its preview takes the sandbox over (see `k8s::previews`).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::{Agent, AgentError, Caller, Operation, PreviewView};
use sandcastle_crd::labels::{
    BLUEPRINT, IDEMPOTENCY_BODY, IDEMPOTENCY_KEY, LAST_ACTIVITY, MANAGED_BY, MANAGER, PREVIEW,
    REPO, SANDBOX,
};
use sandcastle_crd::{
    Blueprint, PreviewEnvironment, PreviewEnvironmentSpec, Requester, RequesterKind,
};
use sandcastle_domain::naming::repo_label_value;
use sandcastle_domain::quote::short;
use sandcastle_domain::{NamespaceName, RepoName, Sha, duration, intent, naming};
use sandcastle_kube::events::note_request;

/// A sandbox to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreatePreview {
    /// The Blueprint to clone (in Sandcastle's namespace).
    #[schema(
        pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        min_length = 1,
        max_length = 253
    )]
    #[schemars(
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
        length(min = 1, max = 253)
    )]
    pub blueprint: String,
    /// `owner/name`; the Blueprint must allow it.
    #[schema(pattern = r"^[A-Za-z0-9_-]{1,39}/[A-Za-z0-9_.-]{1,100}$")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]{1,39}/[A-Za-z0-9_.-]{1,100}$"))]
    pub repository: String,
    /// The branch to preview (its head now, unless `commit` is given).
    #[schema(min_length = 1, max_length = 255)]
    #[schemars(length(min = 1, max = 255))]
    pub branch: Option<String>,
    /// The commit to deploy (40 hex characters).
    #[schema(pattern = r"^[0-9a-fA-F]{40}$")]
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{40}$"))]
    pub commit: Option<String>,
    /// The preview's name (a DNS label); made up from the Blueprint and branch if absent.
    #[schema(
        pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        min_length = 1,
        max_length = 63
    )]
    #[schemars(
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
        length(min = 1, max = 63)
    )]
    pub name: Option<String>,
    /// How long it lives (`90m`, `8h`, `2d`); at most the Blueprint's `maxTtl`.
    #[schema(
        pattern = r"^([0-9]+[wdhmsWDHMS])*[0-9]*[1-9][0-9]*[wdhmsWDHMS]([0-9]+[wdhmsWDHMS])*$",
        max_length = 12
    )]
    #[schemars(
        regex(
            pattern = r"^([0-9]+[wdhmsWDHMS])*[0-9]*[1-9][0-9]*[wdhmsWDHMS]([0-9]+[wdhmsWDHMS])*$"
        ),
        length(max = 12)
    )]
    pub ttl: Option<String>,
}

fn hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))[..40].to_owned()
}

/// A DNS-label-safe rendering of `text` (lower case, other characters as `-`), at most `max`.
fn slug(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= max {
            break;
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// The name a sandbox gets when none is asked for: Blueprint, branch (or commit), and a suffix
/// (from the idempotency key, so a retry names the same preview).
pub(super) fn made_up_name(blueprint: &str, what: &str, suffix: &str) -> String {
    let head = slug(&format!("{blueprint}-{what}"), 50);
    format!("{head}-{}", &suffix[..suffix.len().min(8)])
}

/// Who asked, as the preview's `requestedBy` records it.
fn requester(caller: &Caller) -> Requester {
    let kind = if caller.user.starts_with("system:serviceaccount:") {
        RequesterKind::ServiceAccount
    } else {
        RequesterKind::KubernetesUser
    };
    Requester {
        kind,
        name: caller.user.chars().take(253).collect(),
    }
}

impl Agent {
    /// Which commit `branch` of `repo` points at now, and the App installation that sees it.
    pub(super) async fn branch_head(
        &self,
        repo: &str,
        branch: &str,
    ) -> Result<(Sha, Option<u64>), AgentError> {
        let repo = RepoName::new(repo)
            .map_err(|e| AgentError::invalid("invalid_repository", "repository", e.to_string()))?;
        let what = format!(
            "GitHub did not say where {} of {repo} points",
            short(branch)
        );
        let unavailable = |e: sandcastle_github::client::GitHubError| AgentError::github(&e, &what);
        let installation = self
            .github
            .repo_installation(&repo)
            .await
            .map_err(unavailable)?;
        let Some(id) = installation else {
            return Err(AgentError::invalid(
                "app_not_installed",
                "repository",
                format!("the GitHub App is not installed on {repo}; give a commit instead"),
            ));
        };
        match self
            .github
            .installation(id)
            .resolve_ref(&repo, branch)
            .await
        {
            Ok(Some(sha)) => Ok((sha, Some(id))),
            Ok(None) => Err(AgentError::invalid(
                "unknown_branch",
                "branch",
                format!("{repo} has no branch {}", short(branch)),
            )),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Create a sandbox; `(preview, created)` (`false`: an idempotent retry).
    pub async fn create(
        &self,
        caller: &Caller,
        req: &CreatePreview,
        idempotency_key: Option<&str>,
    ) -> Result<(PreviewView, bool), AgentError> {
        if let Some(person) = &caller.github {
            return Err(person
                .allows(Operation::Create, "", &req.repository)
                .err()
                .unwrap_or_else(|| AgentError::Forbidden("create is API only".into())));
        }
        self.authority
            .authorize(caller, Operation::Create, None)
            .await?;
        let body = hash(&serde_json::to_string(req).unwrap_or_default());
        let key = idempotency_key.map(hash);
        if let Some(key) = &key
            && let Some(found) = self.by_key(key).await?
        {
            return self.same_body(found, &body).map(|v| (v, false));
        }
        let mut pe = self.sandbox(caller, req, key.as_deref(), &body).await?;
        let name = pe.name_any();
        pe.spec.adopts = self.claim_pool_member(&pe).await?;
        match self.api().create(&PostParams::default(), &pe).await {
            Ok(created) => {
                self.audit(caller, Operation::Create, &name, &pe.spec.sha, "created");
                Ok((self.view(&created), true))
            }
            Err(kube::Error::Api(r)) if r.code == 409 => {
                // A concurrent retry with the same key made it, or the name is taken.
                let existing = self.fetch(&name).await?;
                if key.is_some() && existing.labels().get(IDEMPOTENCY_KEY) == key.as_ref() {
                    return self.same_body(existing, &body).map(|v| (v, false));
                }
                Err(AgentError::Conflict {
                    code: "name_taken",
                    message: format!("a preview named {name} exists; choose another name"),
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A ready preview of the Blueprint's warm pool, claimed for `pe` (its namespace becomes
    /// `pe`'s), when the Blueprint keeps one.
    async fn claim_pool_member(
        &self,
        pe: &PreviewEnvironment,
    ) -> Result<Option<sandcastle_crd::Adoption>, AgentError> {
        let blueprints: Api<Blueprint> = Api::namespaced(self.client.clone(), &self.home);
        let pooled = blueprints
            .get_opt(&pe.spec.blueprint)
            .await?
            .is_some_and(|b| b.spec.pool.is_some());
        let Ok(repo) = RepoName::new(&pe.spec.repository) else {
            return Ok(None);
        };
        if !pooled {
            return Ok(None);
        }
        let now = self.clock.now();
        let name = pe.name_any();
        Ok(sandcastle_kube::previews::pool::claim_fresh(
            &self.api(),
            &pe.spec.blueprint,
            &repo,
            &name,
            now,
        )
        .await?)
    }

    async fn by_key(&self, key: &str) -> Result<Option<PreviewEnvironment>, AgentError> {
        let selector = format!("{IDEMPOTENCY_KEY}={key}");
        let list = self
            .api()
            .list(&ListParams::default().labels(&selector))
            .await?;
        Ok(list.items.into_iter().next())
    }

    /// The preview a retry with the same key answers: the one the key made, with the same body,
    /// while it lives.
    fn same_body(&self, pe: PreviewEnvironment, body: &str) -> Result<PreviewView, AgentError> {
        if pe.annotations().get(IDEMPOTENCY_BODY).map(String::as_str) != Some(body) {
            return Err(AgentError::Conflict {
                code: "idempotency_key_reused",
                message: format!(
                    "the Idempotency-Key was used for preview {} with another request body",
                    pe.name_any()
                ),
            });
        }
        if pe.spec.teardown.is_some() {
            return Err(AgentError::Conflict {
                code: "idempotency_key_spent",
                message: format!(
                    "the preview this Idempotency-Key made, {}, was torn down; send a new Idempotency-Key to create another",
                    pe.name_any()
                ),
            });
        }
        Ok(self.view(&pe))
    }

    /// The PreviewEnvironment a valid request asks for.
    async fn sandbox(
        &self,
        caller: &Caller,
        req: &CreatePreview,
        key: Option<&str>,
        body: &str,
    ) -> Result<PreviewEnvironment, AgentError> {
        let repo = RepoName::new(&req.repository)
            .map_err(|e| AgentError::invalid("invalid_repository", "repository", e.to_string()))?;
        let blueprints: Api<Blueprint> = Api::namespaced(self.client.clone(), &self.home);
        let found = if naming::is_object_name(&req.blueprint) {
            blueprints.get_opt(&req.blueprint).await?
        } else {
            None
        };
        let Some(blueprint) = found else {
            return Err(AgentError::invalid(
                "unknown_blueprint",
                "blueprint",
                format!(
                    "there is no Blueprint {} in {}",
                    short(&req.blueprint),
                    self.home
                ),
            ));
        };
        if !intent::covers_repo(&blueprint.spec, &repo) {
            return Err(AgentError::invalid(
                "repository_not_allowed",
                "repository",
                format!("Blueprint {} does not allow {repo}", req.blueprint),
            ));
        }
        let ttl = self.ttl_of(req, &blueprint)?;
        if let Some(branch) = &req.branch
            && !naming::is_branch_name(branch)
        {
            return Err(AgentError::invalid(
                "invalid_branch",
                "branch",
                format!("{:?} is not a branch name Git accepts", short(branch)),
            ));
        }
        let (sha, installation) = match (&req.commit, &req.branch) {
            (Some(c), _) => {
                let sha = Sha::new(c)
                    .map_err(|e| AgentError::invalid("invalid_commit", "commit", e.to_string()))?;
                let installation = self.github.repo_installation(&repo).await.ok().flatten();
                (sha, installation)
            }
            (None, Some(branch)) => self.branch_head(repo.as_str(), branch).await?,
            (None, None) => {
                return Err(AgentError::invalid(
                    "missing_ref",
                    "branch",
                    "give a branch or a commit to deploy",
                ));
            }
        };
        let git_ref = req.branch.clone().unwrap_or_else(|| sha.to_string());
        let suffix = key.map_or_else(|| format!("{:08x}", rand::random::<u32>()), str::to_owned);
        let what = req.branch.as_deref().unwrap_or(sha.short());
        let name = match &req.name {
            Some(n) => n.clone(),
            None => made_up_name(&req.blueprint, what, &suffix),
        };
        let name = NamespaceName::new(&name)
            .map_err(|e| AgentError::invalid("invalid_name", "name", e.to_string()))?;
        let now = self.clock.now();
        let expires = now
            .checked_add(jiff::SignedDuration::try_from(ttl).unwrap_or_default())
            .unwrap_or(now);
        let mut pe = PreviewEnvironment::new(
            name.as_str(),
            PreviewEnvironmentSpec {
                blueprint: req.blueprint.clone(),
                repository: repo.to_string(),
                pull_request: None,
                git_ref,
                sha: sha.to_string(),
                installation_id: installation,
                requested_by: requester(caller),
                expires_at: Some(Time(expires)),
                stopped: false,
                pinned: false,
                awaiting_approval: false,
                teardown: None,
                pr_updated_at: None,
                adopts: None,
                incarnation: 0,
                author_class: None,
                shares: Vec::new(),
            },
        );
        let mut labels = BTreeMap::from([
            (MANAGED_BY.to_owned(), MANAGER.to_owned()),
            (PREVIEW.to_owned(), name.to_string()),
            (REPO.to_owned(), repo_label_value(&repo)),
            (BLUEPRINT.to_owned(), req.blueprint.clone()),
            (SANDBOX.to_owned(), "true".to_owned()),
        ]);
        if let Some(key) = key {
            labels.insert(IDEMPOTENCY_KEY.to_owned(), key.to_owned());
        }
        pe.metadata.labels = Some(labels);
        pe.annotations_mut()
            .insert(IDEMPOTENCY_BODY.to_owned(), body.to_owned());
        pe.annotations_mut()
            .insert(LAST_ACTIVITY.to_owned(), now.to_string());
        let note = format!(
            "sandbox of {repo} at {} ({}) {}",
            req.branch.as_deref().unwrap_or("a commit"),
            sha.short(),
            super::write::through(caller)
        );
        note_request(&mut pe, &self.request(caller, Operation::Create, note));
        Ok(pe)
    }

    fn ttl_of(&self, req: &CreatePreview, blueprint: &Blueprint) -> Result<Duration, AgentError> {
        let max = blueprint.spec.max_ttl.get();
        let Some(text) = &req.ttl else {
            return Ok(blueprint.spec.ttl.get());
        };
        let ttl = super::error::api_duration("ttl", text, true)?;
        if ttl.is_zero() {
            return Err(AgentError::invalid(
                "invalid_duration",
                "ttl",
                "must be longer than zero",
            ));
        }
        if ttl > max {
            return Err(AgentError::invalid(
                "ttl_too_long",
                "ttl",
                format!(
                    "{} is longer than Blueprint {} allows (maxTtl {})",
                    duration::human(ttl),
                    req.blueprint,
                    duration::human(max)
                ),
            ));
        }
        Ok(ttl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Via;

    #[test]
    fn made_up_names_are_dns_labels_and_stable_for_a_key() {
        let a = made_up_name("shop", "feature/Login_page", "0123456789abcdef");
        assert_eq!(a, "shop-feature-login-page-01234567");
        assert!(NamespaceName::new(&a).is_ok());
        let long = made_up_name("shop", &"x".repeat(200), "deadbeef");
        assert!(long.len() <= 63, "{long}");
        assert!(NamespaceName::new(&long).is_ok());
    }

    #[test]
    fn requesters_say_what_kind_of_caller() {
        let c = |user: &str| Caller {
            user: user.to_owned(),
            uid: None,
            groups: Vec::new(),
            extra: BTreeMap::new(),
            via: Via::Api,
            github: None,
            cluster: None,
        };
        assert_eq!(
            requester(&c("system:serviceaccount:ci:agent")).kind,
            RequesterKind::ServiceAccount
        );
        assert_eq!(requester(&c("alice")).kind, RequesterKind::KubernetesUser);
    }
}
