//! A pull request's preview serves its commit through Traefik: GitHub hears `success` only once
//! the page, fetched with the preview's host, answers with that commit; a push rolls the new
//! commit out and the old pods and containers go; an image that does not serve the commit never
//! gets `success`.

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use sandcastle::crd::{DiagnosisReason, Phase};
use serde_json::json;

use crate::support::eventually;
use crate::support::world::sha;
use crate::tier::{self, T, host_of, open_at, pods};

#[tokio::test]
async fn the_preview_url_serves_the_pull_requests_commit_and_then_its_push() {
    let tier = tier::tier();
    let world = tier::world(&tier, "serve", json!({})).await;
    let first = sha();
    tier.image_for(&first);
    open_at(&world, 1, &first).await;

    // GitHub hears success, and the page then answers with the commit, through Traefik.
    world.wait_github_state(&first, "success", T).await;
    let host = host_of(&world, "serve-pr-1").await;
    assert_eq!(host, "1-serve.preview.localhost");
    let page = tier.get(&host, "/api/info").await;
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(page.commit.as_deref(), Some(first.as_str()), "{page:?}");
    let info = page.json();
    assert_eq!(info["commit"], first.as_str(), "{info}");
    // Redis, reached by its Service's name, seeded at 41 before the app started.
    assert!(info["counter"].as_i64().unwrap() > 41, "{info}");
    let html = tier.get(&host, "/").await;
    assert!(
        html.body
            .contains(&format!(r#"<code id="commit">{first}</code>"#)),
        "{html:?}"
    );

    // A push: the new commit is served once GitHub hears success, and the old pods are gone.
    let ns = world.namespace_of("serve-pr-1");
    let old = pods(&world, &ns, "web").await;
    assert_eq!(old.len(), 1, "{old:?}");
    let second = sha();
    tier.image_for(&second);
    let push = world
        .gh
        .push(&world.repo, crate::support::world::pr(1), &second);
    let (status, body) = world.deliver(&push).await;
    assert_eq!(status, 200, "{body}");
    world.wait_github_state(&second, "success", T).await;
    let page = tier.get(&host, "/api/info").await;
    assert_eq!(page.commit.as_deref(), Some(second.as_str()), "{page:?}");
    let pod_api: Api<Pod> = Api::namespaced(world.client.clone(), &ns);
    eventually("the old pod and its containers are gone", T, || async {
        let (name, _) = &old[0];
        let pod = pod_api.get_opt(name).await.map_err(|e| e.to_string())?;
        let containers = tier.containers_of_pod(&ns, name);
        if pod.is_none() && containers.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "pod {name}: {:?}; containers {containers:?}",
                pod.map(|_| "still there")
            ))
        }
    })
    .await;
    let running: Vec<_> = pods(&world, &ns, "web").await;
    assert!(running.iter().all(|(n, _)| *n != old[0].0), "{running:?}");
}

#[tokio::test]
async fn an_image_that_does_not_serve_the_commit_never_gets_success() {
    let tier = tier::tier();
    let world = tier::world(
        &tier,
        "stale",
        json!({"readiness": {"http": {"path": "/healthz", "interval": "1s", "deadline": "15s",
            "commit": {"header": "X-Commit"}}}}),
    )
    .await;
    // The pull request's image reference exists, but it is the build of commit c1.
    let head = sha();
    tier.tag(
        "sandcastle.test/app:c1",
        &format!("sandcastle.test/app:{head}"),
    );
    open_at(&world, 1, &head).await;
    let pe = world.wait_phase("stale-pr-1", Phase::Failed, T).await;
    let st = pe.status.unwrap();
    let d = st.diagnosis.expect("a diagnosis");
    assert_eq!(d.reason, DiagnosisReason::HttpProbe, "{d:?}");
    assert!(d.summary.contains("c1"), "{}", d.summary);
    // The page really answers, with the other commit.
    let page = tier
        .get(&host_of(&world, "stale-pr-1").await, "/healthz")
        .await;
    assert_eq!(
        (page.status, page.commit.as_deref()),
        (200, Some("c1")),
        "{page:?}"
    );
    let states: Vec<String> = world
        .gh
        .deployments(&world.repo)
        .iter()
        .filter(|d| d.sha == head)
        .flat_map(|d| d.statuses.iter().map(|s| s.state.clone()))
        .collect();
    assert!(!states.iter().any(|s| s == "success"), "{states:?}");
    assert!(states.iter().any(|s| s == "failure"), "{states:?}");
}
