//! A Blueprint rendered from the repository's own Helm chart, served for real: the chart at the
//! pull request's commit, the Blueprint's values in it (the image tag, the seed), its
//! `pre-install` hook Job seeding Redis before the app starts, the page answering with the
//! commit through Traefik; a push renders the new commit's chart and serves it.

use std::path::Path;

use serde_json::json;

use crate::support::world::{pr, sha};
use crate::tier::{self, T, host_of, open_at, world_rendered};

const CHART: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/sources/testapp-chart"
);

#[tokio::test]
async fn a_chart_rendered_at_the_pull_requests_commit_serves_it_with_its_hook_seeded() {
    let tier = tier::tier();
    let source = json!({"helm": {
        "path": "deploy/chart",
        "values": {"image": {"tag": "{{sha}}"}, "seed": {"visits": 990}},
    }});
    let world = world_rendered(&tier, "chart", source, json!({})).await;
    let first = sha();
    tier.image_for(&first);
    world.gh.put_tree(
        &world.repo,
        first.as_str(),
        "deploy/chart",
        Path::new(CHART),
    );
    open_at(&world, 1, &first).await;

    world.wait_github_state(&first, "success", T).await;
    let host = host_of(&world, "chart-pr-1").await;
    let page = tier.get(&host, "/api/info").await;
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(page.commit.as_deref(), Some(first.as_str()), "{page:?}");
    // Seeded by the chart's pre-install hook with the Blueprint's value, before the app started.
    let counter = page.json()["counter"].as_i64().unwrap();
    assert!(counter > 990, "{}", page.json());

    let second = sha();
    tier.image_for(&second);
    world.gh.put_tree(
        &world.repo,
        second.as_str(),
        "deploy/chart",
        Path::new(CHART),
    );
    let (status, body) = world
        .deliver(&world.gh.push(&world.repo, pr(1), &second))
        .await;
    assert_eq!(status, 200, "{body}");
    world.wait_github_state(&second, "success", T).await;
    let page = tier.get(&host, "/api/info").await;
    assert_eq!(page.commit.as_deref(), Some(second.as_str()), "{page:?}");
}
