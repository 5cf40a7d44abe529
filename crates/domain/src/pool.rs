//! A Blueprint's warm pool as rules: which repository its previews are made for, what a new one
//! looks like (a sandbox of the repository's default branch, labelled as the pool's), which one
//! a claimant takes (the oldest ready one of its Blueprint and repository), and what a claim
//! writes (the pool's preview handed over — torn down as `Adopted`, so its namespace lives on as
//! the claimant's — and no longer the pool's). No I/O.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::ids::{NamespaceName, RepoName, Sha};
use super::naming;
use sandcastle_crd::labels::{
    BLUEPRINT, CLAIMED_BY, LAST_ACTIVITY, MANAGED_BY, MANAGER, POOL, PREVIEW, REPO, SANDBOX,
};
use sandcastle_crd::{
    BlueprintSpec, Interface, Phase, PoolSpec, PreviewEnvironment, PreviewEnvironmentSpec,
    Requester, RequesterKind, Teardown, TeardownReason,
};

/// Who a pool's previews are requested by, in their `requestedBy` and history.
pub const POOL_REQUESTER: &str = "sandcastle (warm pool)";

/// The repository a pool's previews are made for: its `repository`, else the Blueprint's only
/// repository; `Err` says what the Blueprint must say.
pub fn repository(spec: &BlueprintSpec, pool: &PoolSpec) -> Result<RepoName, String> {
    if let Some(r) = &pool.repository {
        let repo = RepoName::new(r).map_err(|e| format!("spec.pool.repository: {e}"))?;
        if !crate::intent::covers_repo(spec, &repo) {
            return Err(format!(
                "spec.pool.repository: {repo} is not among the Blueprint's repositories"
            ));
        }
        return Ok(repo);
    }
    match spec.repositories.as_slice() {
        [one] if !one.ends_with("/*") => {
            RepoName::new(one).map_err(|e| format!("spec.repositories[0]: {e}"))
        }
        _ => Err(
            "spec.pool.repository: the Blueprint allows several repositories; say which one its \
             pool's previews are made for"
                .to_owned(),
        ),
    }
}

/// Whether `pe` is (or was, until claimed) a pool's preview.
pub fn is_member(pe: &PreviewEnvironment) -> bool {
    pe.labels().contains_key(POOL)
}

/// What stands for a pool preview's pull request and branch in its hosts (`pool-1a2b3c4d`, the
/// end of its name), so that no two members, and no member and claimant, share a host; `None`
/// for any other preview.
pub fn host_label(pe: &PreviewEnvironment) -> Option<String> {
    if !is_member(pe) {
        return None;
    }
    let name = pe.name_any();
    let suffix = name.rsplit('-').next().unwrap_or(&name);
    Some(format!("pool-{suffix}"))
}

/// Whether `pe` is a live (not torn down, not being deleted) preview of `blueprint`'s pool.
pub fn is_live_member(pe: &PreviewEnvironment, blueprint: &str) -> bool {
    pe.labels().get(POOL).is_some_and(|b| b == blueprint)
        && pe.spec.teardown.is_none()
        && pe.metadata.deletion_timestamp.is_none()
        && !pe.annotations().contains_key(CLAIMED_BY)
}

/// Whether a claimant of `blueprint` and `repo` may take `pe`: a live member of that pool,
/// made for that repository, rolled out (Ready, or Stopped for the pool's state or for
/// idleness — a claim starts it again).
pub fn claimable(pe: &PreviewEnvironment, blueprint: &str, repo: &RepoName) -> bool {
    let phase = pe.status.as_ref().and_then(|s| s.phase);
    is_live_member(pe, blueprint)
        && pe.spec.blueprint == blueprint
        && pe.spec.repository.eq_ignore_ascii_case(repo.as_str())
        && matches!(phase, Some(Phase::Ready | Phase::Stopped))
}

/// The member a claimant takes among `candidates`: the oldest claimable one (a stopped pool's
/// or an idle one only when no running one is there).
pub fn pick<'a>(
    candidates: &'a [PreviewEnvironment],
    blueprint: &str,
    repo: &RepoName,
) -> Option<&'a PreviewEnvironment> {
    let phase = |p: &PreviewEnvironment| p.status.as_ref().and_then(|s| s.phase);
    candidates
        .iter()
        .filter(|p| claimable(p, blueprint, repo))
        .min_by_key(|p| {
            (
                phase(p) != Some(Phase::Ready),
                p.creation_timestamp().map(|t| t.0),
                p.name_any(),
            )
        })
}

/// How many previews the pool should add, holding `live` of `size`.
pub fn missing(live: usize, pool: &PoolSpec) -> usize {
    (pool.size as usize).saturating_sub(live)
}

/// The name of a pool's preview: `<blueprint>-pool-<suffix>` (the Blueprint's part shortened to
/// fit a DNS label).
pub fn member_name(blueprint: &str, suffix: &str) -> NamespaceName {
    let head = naming::fit_label(&format!("{blueprint}-pool"), 54);
    NamespaceName::new(&format!("{head}-{suffix}"))
        .unwrap_or_else(|_| NamespaceName::new(&format!("pool-{suffix}")).expect("a DNS label"))
}

/// What a new pool preview needs besides its Blueprint.
#[derive(Debug, Clone)]
pub struct NewMember<'a> {
    pub name: NamespaceName,
    pub blueprint: &'a str,
    pub repo: &'a RepoName,
    /// The repository's default branch, and its head.
    pub branch: &'a str,
    pub sha: &'a Sha,
    pub installation: Option<u64>,
    /// When it expires (the Blueprint's `ttl` from now): it is replaced then.
    pub expires: Timestamp,
}

/// A new preview of the pool: a sandbox of the default branch, labelled as the pool's.
pub fn new_member(m: &NewMember<'_>, now: Timestamp) -> PreviewEnvironment {
    let mut pe = PreviewEnvironment::new(
        m.name.as_str(),
        PreviewEnvironmentSpec {
            blueprint: m.blueprint.to_owned(),
            repository: m.repo.to_string(),
            pull_request: None,
            git_ref: m.branch.to_owned(),
            sha: m.sha.to_string(),
            installation_id: m.installation,
            requested_by: Requester {
                kind: RequesterKind::KubernetesUser,
                name: POOL_REQUESTER.to_owned(),
            },
            expires_at: Some(Time(m.expires)),
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
    pe.metadata.labels = Some(BTreeMap::from([
        (MANAGED_BY.to_owned(), MANAGER.to_owned()),
        (PREVIEW.to_owned(), m.name.to_string()),
        (REPO.to_owned(), naming::repo_label_value(m.repo)),
        (BLUEPRINT.to_owned(), m.blueprint.to_owned()),
        (SANDBOX.to_owned(), "true".to_owned()),
        (POOL.to_owned(), m.blueprint.to_owned()),
    ]));
    pe.annotations_mut()
        .insert(LAST_ACTIVITY.to_owned(), now.to_string());
    pe
}

/// `member` claimed by `claimant` (a preview's name): handed over — torn down as `Adopted`, which
/// leaves its namespace to the claimant — and no longer counted among the pool's live previews
/// (it keeps the pool's label: its running time was the pool's).
pub fn claimed(member: &PreviewEnvironment, claimant: &str, now: Timestamp) -> PreviewEnvironment {
    let mut next = member.clone();
    next.annotations_mut()
        .insert(CLAIMED_BY.to_owned(), claimant.to_owned());
    next.spec.teardown = Some(Teardown {
        reason: TeardownReason::Adopted,
        actor: Some(claimant.to_owned()),
        via: Some(Interface::Sandcastle),
        at: Time(now),
    });
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(repos: &[&str], pool: serde_json::Value) -> (BlueprintSpec, PoolSpec) {
        let spec: BlueprintSpec = serde_json::from_value(json!({
            "source": {"namespace": "shop-staging"}, "repositories": repos, "pool": pool}))
        .unwrap();
        let pool = spec.pool.clone().unwrap();
        (spec, pool)
    }

    fn repo(r: &str) -> RepoName {
        RepoName::new(r).unwrap()
    }

    fn member(name: &str, created: &str, phase: &str, repository: &str) -> PreviewEnvironment {
        let now: Timestamp = "2026-12-06T00:00:00Z".parse().unwrap();
        let sha = Sha::new(&"a".repeat(40)).unwrap();
        let repo = repo(repository);
        let mut pe = new_member(
            &NewMember {
                name: NamespaceName::new(name).unwrap(),
                blueprint: "shop",
                repo: &repo,
                branch: "main",
                sha: &sha,
                installation: None,
                expires: now,
            },
            now,
        );
        pe.metadata.creation_timestamp = Some(Time(created.parse().unwrap()));
        pe.status = Some(serde_json::from_value(json!({"phase": phase})).unwrap());
        pe
    }

    #[test]
    fn a_pool_is_made_for_one_repository() {
        let (s, p) = spec(&["acme/shop"], json!({"size": 2}));
        assert_eq!(repository(&s, &p).unwrap().as_str(), "acme/shop");
        let (s, p) = spec(&["acme/*"], json!({"size": 2}));
        assert!(
            repository(&s, &p)
                .unwrap_err()
                .starts_with("spec.pool.repository:")
        );
        let (s, p) = spec(&["acme/*"], json!({"size": 2, "repository": "acme/web"}));
        assert_eq!(repository(&s, &p).unwrap().as_str(), "acme/web");
        let (s, p) = spec(
            &["acme/shop"],
            json!({"size": 2, "repository": "other/web"}),
        );
        assert!(repository(&s, &p).unwrap_err().contains("not among"));
        assert_eq!(missing(1, &p), 1);
        assert_eq!(missing(5, &p), 0);
    }

    #[test]
    fn claimants_take_the_oldest_ready_member_of_their_blueprint_and_repository() {
        let shop = repo("acme/shop");
        let all = vec![
            member("shop-pool-3", "2026-12-06T00:03:00Z", "Ready", "acme/shop"),
            member(
                "shop-pool-1",
                "2026-12-06T00:01:00Z",
                "Deploying",
                "acme/shop",
            ),
            member(
                "shop-pool-2",
                "2026-12-06T00:02:00Z",
                "Stopped",
                "acme/shop",
            ),
            member("shop-pool-0", "2026-12-06T00:00:00Z", "Ready", "acme/web"),
        ];
        assert_eq!(pick(&all, "shop", &shop).unwrap().name_any(), "shop-pool-3");
        // Only a stopped one left: it is taken (the claim starts it).
        assert_eq!(
            pick(&all[1..], "shop", &shop).unwrap().name_any(),
            "shop-pool-2"
        );
        // Never another Blueprint's or repository's.
        assert!(pick(&all, "web", &shop).is_none());
        assert!(pick(&all[3..], "shop", &shop).is_none());
    }

    #[test]
    fn a_claimed_member_is_handed_over_and_leaves_the_pool() {
        let m = member("shop-pool-1", "2026-12-06T00:01:00Z", "Ready", "acme/shop");
        assert!(is_member(&m) && is_live_member(&m, "shop"));
        let now: Timestamp = "2026-12-06T01:00:00Z".parse().unwrap();
        let c = claimed(&m, "shop-pr-42", now);
        assert!(is_member(&c), "its time was the pool's");
        assert!(!is_live_member(&c, "shop"));
        assert_eq!(c.annotations()[CLAIMED_BY], "shop-pr-42");
        let t = c.spec.teardown.unwrap();
        assert_eq!(t.reason, TeardownReason::Adopted);
        assert_eq!(t.actor.as_deref(), Some("shop-pr-42"));
    }

    #[test]
    fn a_member_has_hosts_of_its_own_and_a_claimant_its_pull_requests() {
        let member = member(
            "shop-pool-0123abcd",
            "2026-12-06T00:01:00Z",
            "Ready",
            "acme/shop",
        );
        assert_eq!(host_label(&member).as_deref(), Some("pool-0123abcd"));
        let mut claimant = member;
        claimant.metadata.labels = None;
        assert_eq!(host_label(&claimant), None);
    }

    #[test]
    fn member_names_are_dns_labels() {
        assert_eq!(
            member_name("shop", "0123abcd").as_str(),
            "shop-pool-0123abcd"
        );
        let long = member_name(&"x".repeat(80), "0123abcd");
        assert!(long.as_str().len() <= 63, "{long}");
        assert!(long.as_str().ends_with("-0123abcd"));
    }
}
