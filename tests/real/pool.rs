//! A warm pool on real pods: the pool's preview of the default branch runs (its page serves that
//! commit through Traefik); a pull request takes it over and its URL serves the pull request's
//! commit; only what differs rolled out — the app's pod is new (its image changed), Redis's is
//! the same pod, its data kept; the pool makes another.

use kube::ResourceExt;
use kube::api::ListParams;
use sandcastle::crd::Phase;
use serde_json::json;

use crate::support::eventually;
use crate::support::world::{World, sha};
use crate::tier::{self, T, host_of, open_at, pods};

#[tokio::test]
async fn a_pull_request_takes_a_running_pool_preview_over_and_only_its_app_rolls() {
    let tier = tier::tier();
    let mut world = World::unstarted(
        "rpool",
        tier::REAL_APP,
        tier::blueprint(
            json!({"pool": {"size": 1}, "host": "{{branch}}-{{repo}}.preview.localhost"}),
        ),
    )
    .await;
    world.probe_via = Some(tier.probe_via());
    let main = sha();
    tier.image_for(&main);
    world.gh.set_branch(&world.repo, "main", &main);
    world.start().await;

    // The pool's preview of main, Ready: its page served that commit.
    let selector = "sandcastle.dev/pool=rpool";
    let member = eventually("the pool's preview Ready", T, || async {
        let list = world
            .previews()
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| e.to_string())?;
        list.items
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase) == Some(Phase::Ready))
            .ok_or_else(|| "none Ready yet".to_owned())
    })
    .await;
    let ns = member.status.as_ref().unwrap().namespace.clone().unwrap();
    let redis_before = pods(&world, &ns, "redis").await;
    let app_before = pods(&world, &ns, "web").await;
    assert_eq!((redis_before.len(), app_before.len()), (1, 1));

    // A pull request takes it over: its commit is served at its own host.
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_github_state(&head, "success", T).await;
    let pe = world.previews().get("rpool-pr-1").await.unwrap();
    assert_eq!(pe.spec.adopts.as_ref().unwrap().preview, member.name_any());
    let lives_in = pe.status.as_ref().and_then(|s| s.namespace.clone());
    assert_eq!(
        lives_in.as_deref(),
        Some(ns.as_str()),
        "it lives in the pool's namespace"
    );
    let host = host_of(&world, "rpool-pr-1").await;
    assert_eq!(host, "b1-rpool.preview.localhost");
    let page = tier.get(&host, "/api/info").await;
    assert_eq!(page.commit.as_deref(), Some(head.as_str()), "{page:?}");
    // Only what differs rolled: a new app pod, the same Redis pod.
    assert_eq!(
        pods(&world, &ns, "redis").await,
        redis_before,
        "Redis was not touched"
    );
    eventually("the old app pod gone", T, || async {
        let now = pods(&world, &ns, "web").await;
        if now.len() == 1 && now[0].1 != app_before[0].1 {
            Ok(())
        } else {
            Err(format!("{now:?}"))
        }
    })
    .await;
    // And the pool is full again.
    eventually("a new pool preview", T, || async {
        let list = world
            .previews()
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| e.to_string())?;
        let fresh = list
            .items
            .iter()
            .any(|p| p.name_any() != member.name_any() && p.spec.teardown.is_none());
        if fresh {
            Ok(())
        } else {
            Err("not yet".to_owned())
        }
    })
    .await;
}
