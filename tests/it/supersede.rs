//! Newest commit wins: pushes that arrive while a commit is still deploying supersede it, and
//! GitHub never hears `success` for a commit older than the newest one.

use std::time::Duration;

use sandcastle::crd::Phase;
use sandcastle::fake_github::PrSpec;
use serde_json::json;

use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);

#[tokio::test]
async fn three_quick_pushes_give_one_success_for_the_last() {
    // The frontend's pods take a few seconds to be ready, and each commit replaces them.
    let guestbook = sandcastle::cli::demo::stage::guestbook_yaml().unwrap();
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
    for next in [&second, &third] {
        let d = world.gh.push(&world.repo, pr(7), next);
        assert_eq!(world.deliver(&d).await.0, 200);
    }
    world.wait_github_state(&third, "success", T).await;
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
    }
    let last = states(&third);
    assert_eq!(
        last.iter().filter(|s| *s == "success").count(),
        1,
        "the last commit: {last:?}"
    );
}
