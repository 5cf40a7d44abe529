//! Claiming a warm pool's preview for a new preview (a pull request's first, or a sandbox made
//! through the API): the member is handed over with the resourceVersion read (so two claimants
//! never take the same one: the loser takes the next), and the claimant adopts its namespace.
//! Which member, and what the claim writes, is `domain::pool`'s.

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};

use sandcastle_crd::labels::{POOL, REPO};
use sandcastle_crd::{Adoption, PreviewEnvironment};
use sandcastle_domain::RepoName;
use sandcastle_domain::naming::repo_label_value;
use sandcastle_domain::pool;

/// Attempts at claiming while other claimants take the members first.
const ATTEMPTS: usize = 5;

/// The live members of `blueprint`'s pool made for `repo`.
async fn members(
    api: &Api<PreviewEnvironment>,
    blueprint: &str,
    repo: &RepoName,
) -> Result<Vec<PreviewEnvironment>, kube::Error> {
    let selector = format!("{POOL}={blueprint},{REPO}={}", repo_label_value(repo));
    Ok(api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
}

/// Claim a member of `blueprint`'s pool for `claimant` among `candidates` (listed already; read
/// again after losing one to another claimant); the adoption the claimant records, or `None`
/// when the pool has none ready.
pub async fn claim(
    api: &Api<PreviewEnvironment>,
    candidates: Vec<PreviewEnvironment>,
    blueprint: &str,
    repo: &RepoName,
    claimant: &str,
    now: Timestamp,
) -> Result<Option<Adoption>, kube::Error> {
    let mut candidates = candidates;
    for _ in 0..ATTEMPTS {
        let Some(member) = pool::pick(&candidates, blueprint, repo) else {
            return Ok(None);
        };
        let name = member.name_any();
        let Some(namespace) = member.status.as_ref().and_then(|s| s.namespace.clone()) else {
            return Ok(None);
        };
        let next = pool::claimed(member, claimant, now);
        match api.replace(&name, &PostParams::default(), &next).await {
            Ok(_) => {
                tracing::info!(target: "audit", actor = %claimant, action = "claim", preview = %name, namespace = %namespace, result = "claimed", "warm pool preview claimed");
                return Ok(Some(Adoption {
                    preview: name,
                    namespace,
                }));
            }
            // Taken (or gone) meanwhile: look again.
            Err(kube::Error::Api(r)) if r.code == 409 || r.code == 404 => {
                candidates = members(api, blueprint, repo).await?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// [`claim`] from a fresh list of the pool's members.
pub async fn claim_fresh(
    api: &Api<PreviewEnvironment>,
    blueprint: &str,
    repo: &RepoName,
    claimant: &str,
    now: Timestamp,
) -> Result<Option<Adoption>, kube::Error> {
    let candidates = members(api, blueprint, repo).await?;
    claim(api, candidates, blueprint, repo, claimant, now).await
}
