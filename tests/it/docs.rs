//! What docs/api.md promises, checked against a real run: the sandbox name it shows is the one
//! a create gives, and after a pull request takes a sandbox over, the sandbox's preview token
//! controls the pull request's preview.

use std::time::Duration;

use sandcastle::crd::Phase;
use sandcastle_fake_github::PrSpec;
use serde_json::{Value, json};

use crate::support::api::{ALL, account, call, call_with};
use crate::support::fixtures::TINY_APP;
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);

fn api_md() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md"))
        .expect("docs/api.md")
}

/// The create example of docs/api.md: its `Idempotency-Key`, its body and the name it shows.
fn documented_create() -> (String, Value, String) {
    let doc = api_md();
    let start = doc.find("### Sandboxes").expect("a Sandboxes section");
    let section = &doc[start..];
    let after = |prefix: &str, end: char| {
        let at = section
            .find(prefix)
            .unwrap_or_else(|| panic!("{prefix} in docs/api.md"));
        let rest = &section[at + prefix.len()..];
        rest[..rest.find(end).unwrap()].to_owned()
    };
    let key = after("-H 'Idempotency-Key: ", '\'');
    let body = serde_json::from_str(&after("-d '", '\'')).expect("the example body is JSON");
    let name = after("{\"name\": \"", '"');
    (key, body, name)
}

#[tokio::test]
async fn the_sandbox_name_the_docs_show_is_the_one_a_create_gives() {
    let (key, body, name) = documented_create();
    assert_eq!(body["blueprint"], "shop", "{body}");
    let world = World::new("shop", TINY_APP, json!({})).await;
    assert_eq!(body["repository"], world.repo.as_str(), "{body}");
    let branch = body["branch"].as_str().unwrap();
    world.gh.set_branch(&world.repo, branch, &sha());
    let admin = account(&world, "admin", &[ALL]).await;
    let created = call_with(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(body.clone()),
        &[("idempotency-key", key.as_str())],
    )
    .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["name"], name.as_str(), "{:?}", created.body);
}

#[tokio::test]
async fn after_adoption_the_sandboxs_token_controls_the_pull_requests_preview() {
    let doc = api_md()
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        doc.contains("the sandbox's preview tokens control the pull request's preview"),
        "docs/api.md says so"
    );
    let world = World::new("adopt", TINY_APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let head = sha();
    world.gh.set_branch(&world.repo, "b8", &head);
    let body = json!({"blueprint": "adopt", "repository": world.repo.as_str(), "branch": "b8",
        "name": "adopt-b8"});
    let created = call(&world, "POST", "/api/v1/previews", Some(&admin), Some(body)).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    world.wait_phase("adopt-b8", Phase::Ready, T).await;
    let minted = call(
        &world,
        "POST",
        "/api/v1/previews/adopt-b8/token",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(minted.status, 201, "{:?}", minted.body);
    let token = minted.body["token"].as_str().unwrap().to_owned();

    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(8), head, "b8"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    world.wait_phase("adopt-b8", Phase::Removed, T).await;
    world.wait_phase("adopt-pr-8", Phase::Ready, T).await;

    // The sandbox's token, minted before the pull request existed, now reads and stops it.
    let seen = call(&world, "GET", "/api/v1/previews", Some(&token), None).await;
    let names: Vec<&Value> = seen.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["name"])
        .collect();
    // (and the sandbox's own record, a tombstone of the same namespace).
    assert!(names.contains(&&json!("adopt-pr-8")), "{:?}", seen.body);
    let stopped = call(
        &world,
        "POST",
        "/api/v1/previews/adopt-pr-8/stop",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(stopped.status, 202, "{:?}", stopped.body);
    world.wait_phase("adopt-pr-8", Phase::Stopped, T).await;
}
