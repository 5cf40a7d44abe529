//! Warm pools on the fast tier: a Blueprint's `pool` keeps its size of previews of the
//! repository's default branch; a pull request's first preview and a sandbox made through the
//! API take one over (its namespace, now theirs, rolled out at their commit with their hosts)
//! and the pool makes another; another repository's previews never take one; a `stopped` pool's
//! previews wait scaled to zero; a pool's previews count apart from `maxPreviews`; a pool
//! removed gives its previews up; a pool that cannot be filled says why in the Blueprint's
//! status.

use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use sandcastle::crd::{Blueprint, Phase, PreviewEnvironment, TeardownReason};
use serde_json::json;

use crate::support::api::{ALL, account, call};
use crate::support::eventually;
use crate::support::fixtures::WEB_APP;
use crate::support::world::{World, sha};

const T: Duration = Duration::from_secs(90);

/// A started world whose Blueprint keeps `pool`, its repository's `main` at a known commit.
async fn pooled(name: &str, pool: serde_json::Value) -> World {
    let mut world = World::unstarted(
        name,
        WEB_APP,
        json!({"pool": pool, "host": "{{preview}}.preview.example.com"}),
    )
    .await;
    world.gh.set_branch(&world.repo, "main", &sha());
    world.start().await;
    world
}

/// The live previews of the world's pool (made, not claimed), once there are `n` in `phase`.
async fn pool_of(world: &World, n: usize, phase: Phase) -> Vec<PreviewEnvironment> {
    let api = world.previews();
    let selector = format!("sandcastle.dev/pool={}", world.repo.name());
    eventually(&format!("{n} pool previews {phase:?}"), T, || async {
        let list = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| e.to_string())?;
        let live: Vec<PreviewEnvironment> = list
            .items
            .into_iter()
            .filter(|p| p.spec.teardown.is_none())
            .collect();
        let there = live
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase) == Some(phase))
            .count();
        if live.len() == n && there == n {
            Ok(live)
        } else {
            let phases: Vec<_> = live
                .iter()
                .map(|p| (p.name_any(), p.status.as_ref().and_then(|s| s.phase)))
                .collect();
            Err(format!("{phases:?}"))
        }
    })
    .await
}

fn namespace(pe: &PreviewEnvironment) -> String {
    pe.status
        .as_ref()
        .and_then(|s| s.namespace.clone())
        .unwrap()
}

#[tokio::test]
async fn a_pull_request_takes_a_pool_preview_over_and_the_pool_makes_another() {
    let world = pooled("pool", json!({"size": 2})).await;
    let members = pool_of(&world, 2, Phase::Ready).await;
    assert!(
        members.iter().all(|m| m.spec.git_ref == "main"),
        "at the default branch"
    );
    let oldest = members
        .iter()
        .min_by_key(|m| m.creation_timestamp().map(|t| t.0))
        .unwrap()
        .clone();

    let head = world.open(1).await;
    let pe = world.wait_phase("pool-pr-1", Phase::Ready, T).await;
    let adopted = pe.spec.adopts.clone().expect("it took a pool preview over");
    assert_eq!(adopted.preview, oldest.name_any());
    // Its namespace is the pool preview's (the one thing that is not its own name), rolled out at
    // its commit with its own host.
    assert_eq!(namespace(&pe), namespace(&oldest));
    assert_eq!(
        pe.status.as_ref().unwrap().deployed_sha.as_deref(),
        Some(head.as_str())
    );
    let ing = Api::<Ingress>::namespaced(world.client.clone(), &namespace(&pe))
        .get("web")
        .await
        .unwrap();
    let host = ing.spec.unwrap().rules.unwrap()[0].host.clone();
    assert_eq!(host.as_deref(), Some("pool-pr-1.preview.example.com"));
    // The pool preview was handed over (its namespace lives on), and the pool is full again.
    let gone = world.previews().get(&oldest.name_any()).await.unwrap();
    let t = gone.spec.teardown.clone().expect("handed over");
    assert_eq!(t.reason, TeardownReason::Adopted);
    assert_eq!(gone.annotations()["sandcastle.dev/claimed-by"], "pool-pr-1");
    let again = pool_of(&world, 2, Phase::Ready).await;
    assert!(again.iter().all(|m| m.name_any() != oldest.name_any()));
    // The pool's previews are counted apart from maxPreviews.
    let bp = Api::<Blueprint>::namespaced(world.client.clone(), &world.home.name);
    eventually("the Blueprint's counts", T, || async {
        let st = bp
            .get("pool")
            .await
            .map_err(|e| e.to_string())?
            .status
            .unwrap_or_default();
        let pool = st.pool.clone().unwrap_or_default();
        if st.active_previews == 1 && pool.size == 2 && pool.ready == 2 && pool.message.is_none() {
            Ok(())
        } else {
            Err(format!("{st:?}"))
        }
    })
    .await;
}

#[tokio::test]
async fn a_sandbox_made_through_the_api_takes_a_pool_preview_over() {
    let world = pooled("apipool", json!({"size": 1})).await;
    let member = pool_of(&world, 1, Phase::Ready).await.remove(0);
    let admin = account(&world, "admin", &[ALL]).await;
    let made = call(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(
            json!({"blueprint": "apipool", "repository": world.repo.as_str(),
            "branch": "main", "name": "agent-task-1"}),
        ),
    )
    .await;
    assert_eq!(made.status, 201, "{made:?}");
    assert_eq!(
        made.body["namespace"],
        namespace(&member).as_str(),
        "{made:?}"
    );
    let pe = world.wait_phase("agent-task-1", Phase::Ready, T).await;
    assert_eq!(pe.spec.adopts.unwrap().preview, member.name_any());
    let view = call(
        &world,
        "GET",
        "/api/v1/previews/agent-task-1",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(
        view.body["pool"],
        serde_json::Value::Null,
        "not the pool's any more"
    );
    pool_of(&world, 1, Phase::Ready).await;
}

#[tokio::test]
async fn only_the_pools_repository_takes_its_previews() {
    let mut world = World::unstarted(
        "repos",
        WEB_APP,
        json!({"host": "{{branch}}-{{repo}}.preview.example.com"}),
    )
    .await;
    let other = sandcastle::domain::RepoName::new("acme/other").unwrap();
    world
        .gh
        .add_repo(crate::support::world::INSTALLATION, &other);
    world.gh.set_branch(&other, "main", &sha());
    // The Blueprint allows both; its pool is made for acme/other.
    let spec = json!({"spec": {"repositories": [world.repo.as_str(), "acme/other"],
        "pool": {"size": 1, "repository": "acme/other"}}});
    Api::<Blueprint>::namespaced(world.client.clone(), &world.home.name)
        .patch("repos", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .unwrap();
    world.start().await;
    let member = pool_of(&world, 1, Phase::Ready).await.remove(0);
    assert_eq!(member.spec.repository, "acme/other");
    world.open(1).await;
    let pe = world.wait_phase("repos-pr-1", Phase::Ready, T).await;
    assert!(
        pe.spec.adopts.is_none(),
        "another repository's pool preview: {:?}",
        pe.spec.adopts
    );
    let still = world.previews().get(&member.name_any()).await.unwrap();
    assert!(still.spec.teardown.is_none());
}

#[tokio::test]
async fn a_stopped_pool_waits_scaled_to_zero_and_a_claim_starts_it() {
    let world = pooled("cold", json!({"size": 1, "state": "stopped"})).await;
    let member = pool_of(&world, 1, Phase::Stopped).await.remove(0);
    assert!(member.spec.stopped);
    world.open(1).await;
    let pe = world.wait_phase("cold-pr-1", Phase::Ready, T).await;
    assert_eq!(pe.spec.adopts.unwrap().preview, member.name_any());
    assert!(!pe.spec.stopped);
}

#[tokio::test]
async fn a_pool_says_why_it_cannot_be_filled_and_gives_its_previews_up_when_removed() {
    let world = pooled("gone", json!({"size": 1})).await;
    let member = pool_of(&world, 1, Phase::Ready).await.remove(0);
    let bp = Api::<Blueprint>::namespaced(world.client.clone(), &world.home.name);
    bp.patch(
        "gone",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"pool": null}})),
    )
    .await
    .unwrap();
    eventually("the pool's preview given up", T, || async {
        let pe = world
            .previews()
            .get(&member.name_any())
            .await
            .map_err(|e| e.to_string())?;
        match pe.spec.teardown {
            Some(t) if t.reason == TeardownReason::Destroyed => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // A pool of a Blueprint of several repositories must say which.
    let spec =
        json!({"spec": {"repositories": [world.repo.as_str(), "acme/else"], "pool": {"size": 1}}});
    bp.patch("gone", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .unwrap();
    eventually("the pool says why", T, || async {
        let st = bp
            .get("gone")
            .await
            .map_err(|e| e.to_string())?
            .status
            .unwrap_or_default();
        match st.pool.and_then(|p| p.message) {
            Some(m) if m.starts_with("spec.pool.repository:") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}
