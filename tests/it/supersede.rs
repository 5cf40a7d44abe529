//! Newest commit wins: pushes that arrive while a commit is still deploying supersede it, and
//! GitHub never hears `success` for a commit older than the newest one; closing the pull request
//! preempts a deploy in flight or in the queue; `opened` and `synchronize` arriving together make
//! one preview and one comment.

use std::time::Duration;

use sandcastle::crd::Phase;
use sandcastle_fake_github::PrSpec;
use serde_json::json;

use crate::support::fixtures::TINY_APP;
use crate::support::world::{World, pr, sha};
use kube::api::ListParams;
use sandcastle::domain::Sha;

/// Every status GitHub got for the deployments of `commit`, oldest first.
fn states_of(world: &World, commit: &Sha) -> Vec<String> {
    world
        .gh
        .deployments(&world.repo)
        .iter()
        .filter(|d| d.sha == *commit)
        .flat_map(|d| d.statuses.iter().map(|st| st.state.clone()))
        .collect()
}

const T: Duration = Duration::from_secs(90);

#[tokio::test]
async fn three_quick_pushes_give_one_success_for_the_last() {
    // The frontend's pods take a few seconds to be ready, and each commit replaces them.
    let guestbook = sandcastle_demo::stage::guestbook_yaml().unwrap();
    let slow = guestbook.replacen(
        "      labels:\n        app: guestbook\n        tier: frontend",
        "      annotations:\n        test.sandcastle.dev/fate: slow\n        test.sandcastle.dev/ready-after: 3s\n      labels:\n        app: guestbook\n        tier: frontend",
        1,
    );
    assert_ne!(
        slow, guestbook,
        "the fixture changed: the slow annotation was not placed"
    );
    let images = json!({"images": [{"repository": "gcr.io/google-samples/gb-frontend", "tag": "{{sha}}"}],
        "primaryService": "frontend"});
    let world = World::new("guestbook", &slow, images).await;
    let first = sha();
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(7), first.clone(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    world
        .wait_phase("guestbook-pr-7", Phase::Deploying, T)
        .await;
    let (second, third) = (sha(), sha());
    let pushed = std::time::Instant::now();
    for next in [&second, &third] {
        let d = world.gh.push(&world.repo, pr(7), next);
        assert_eq!(world.deliver(&d).await.0, 200);
    }
    world.wait_github_state(&third, "success", T).await;
    // A measurement for docs, not a check: the frontend's pods take 3 s to be ready.
    println!(
        "pushes while deploying → success of the last: {:?}",
        pushed.elapsed()
    );
    let pe = world.wait_phase("guestbook-pr-7", Phase::Ready, T).await;
    assert_eq!(
        pe.status.unwrap().deployed_sha.as_deref(),
        Some(third.as_str())
    );

    let deployments = world.gh.deployments(&world.repo);
    let states = |s: &sandcastle::domain::Sha| -> Vec<String> {
        deployments
            .iter()
            .filter(|d| d.sha == *s)
            .flat_map(|d| d.statuses.iter().map(|st| st.state.clone()))
            .collect()
    };
    for (n, s) in [&first, &second, &third].into_iter().enumerate() {
        println!("commit {}: {:?}", n + 1, states(s));
    }
    for older in [&first, &second] {
        let seen = states(older);
        assert!(
            !seen.iter().any(|s| s == "success" || s == "failure"),
            "an older commit got {seen:?}"
        );
        // Superseded before GitHub heard of it, or made and then marked inactive.
        assert!(
            seen.is_empty() || seen.last().map(String::as_str) == Some("inactive"),
            "a superseded deployment ends inactive: {seen:?}"
        );
    }
    let last = states(&third);
    assert_eq!(
        last.iter().filter(|s| *s == "success").count(),
        1,
        "the last commit: {last:?}"
    );

    // The same rollout with nothing in flight, for comparison.
    let fourth = sha();
    let idle = std::time::Instant::now();
    let d = world.gh.push(&world.repo, pr(7), &fourth);
    assert_eq!(world.deliver(&d).await.0, 200);
    world.wait_github_state(&fourth, "success", T).await;
    println!("one push while idle → success: {:?}", idle.elapsed());
    world.wait_github_state(&third, "inactive", T).await;
}

#[tokio::test]
async fn closing_preempts_a_deploy_in_flight() {
    let world = World::new(
        "inflight",
        crate::support::fixtures::NEVER_READY_APP,
        json!({"readinessTimeout": "10m"}),
    )
    .await;
    let head = world.open(3).await;
    world.wait_github_state(&head, "in_progress", T).await;
    let closed = world.gh.close(&world.repo, pr(3), false);
    assert_eq!(world.deliver(&closed).await.0, 200);
    // Its pod would never be ready: only preemption ends the deploy.
    world.wait_phase("inflight-pr-3", Phase::Removed, T).await;
    world.wait_github_state(&head, "inactive", T).await;
    let seen = states_of(&world, &head);
    assert!(
        !seen.iter().any(|s| s == "success" || s == "failure"),
        "{seen:?}"
    );
    assert!(
        !world
            .namespace_exists(&world.namespace_of("inflight-pr-3"))
            .await
    );
}

#[tokio::test]
async fn closing_preempts_a_queued_deploy() {
    let world = World::new("queue", TINY_APP, json!({"maxPreviews": 1})).await;
    world.open(1).await;
    world.wait_phase("queue-pr-1", Phase::Ready, T).await;
    let second = world.open(2).await;
    world.wait_github_state(&second, "queued", T).await;

    let closed = world.gh.close(&world.repo, pr(2), false);
    assert_eq!(world.deliver(&closed).await.0, 200);
    world.wait_phase("queue-pr-2", Phase::Removed, T).await;
    world.wait_github_state(&second, "inactive", T).await;
    assert_eq!(states_of(&world, &second), ["queued", "inactive"]);
    assert!(
        !world
            .namespace_exists(&world.namespace_of("queue-pr-2"))
            .await,
        "a queued preview never got a namespace"
    );
    let pe = world.previews().get("queue-pr-1").await.unwrap();
    assert_eq!(pe.status.unwrap().phase, Some(Phase::Ready));
}

#[tokio::test]
async fn opened_and_synchronize_together_make_one_preview_and_one_comment() {
    let world = World::new("together", TINY_APP, json!({})).await;
    let (first, second) = (sha(), sha());
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(4), first.clone(), "b"));
    let pushed = world.gh.push(&world.repo, pr(4), &second);
    let (a, b) = tokio::join!(world.deliver(&opened), world.deliver(&pushed));
    assert_eq!((a.0, b.0), (200, 200), "{a:?} {b:?}");
    world.wait_github_state(&second, "success", T).await;
    let pe = world.wait_phase("together-pr-4", Phase::Ready, T).await;
    assert_eq!(
        pe.status.unwrap().deployed_sha.as_deref(),
        Some(second.as_str())
    );
    let previews = world.previews().list(&ListParams::default()).await.unwrap();
    assert_eq!(previews.items.len(), 1);
    let comments = world.gh.comments(&world.repo, pr(4));
    assert_eq!(comments.len(), 1, "{comments:#?}");
    let seen = states_of(&world, &first);
    assert!(!seen.iter().any(|s| s == "success"), "{seen:?}");
}
