//! A preview's data on real pods: the seed Job fills the real data store (Redis, reached by its
//! Service's name) before the app starts, visits count in it, and `reset` through the API empties
//! it and runs the seed Job again — read back through the app, through Traefik.

use serde_json::json;

use crate::support::api::{ALL, account, call};
use crate::support::world::sha;
use crate::tier::{self, host_of, open_at};

/// The visit counter the app answers `/api/info` with (each call is a visit).
async fn visit(tier: &tier::RealTier, host: &str) -> i64 {
    let page = tier.get(host, "/api/info").await;
    assert_eq!(page.status, 200, "{page:?}");
    page.json()["counter"]
        .as_i64()
        .unwrap_or_else(|| panic!("no counter: {page:?}"))
}

#[tokio::test]
async fn reset_empties_the_data_store_and_the_seed_job_fills_it_again() {
    let tier = tier::tier();
    let world = tier::world(&tier, "data", json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_github_state(&head, "success", tier::T).await;
    let host = host_of(&world, "data-pr-1").await;

    // Seeded at 41 before the app started: the first visit is the 42nd.
    assert_eq!(visit(&tier, &host).await, 42);
    assert_eq!(visit(&tier, &host).await, 43);
    assert_eq!(visit(&tier, &host).await, 44);

    let reset = call(
        &world,
        "POST",
        "/api/v1/previews/data-pr-1/reset",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(reset.status, 202, "{:?}", reset.body);
    let waited = call(
        &world,
        "GET",
        "/api/v1/previews/data-pr-1/wait?for=ready&timeout=2m",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(waited.status, 200, "{:?}", waited.body);
    assert_eq!(waited.body["outcome"], "ready", "{:?}", waited.body);

    // The store was emptied and seeded again: the visits count from 41 once more.
    assert_eq!(visit(&tier, &host).await, 42);
}
