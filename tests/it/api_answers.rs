//! Answers an agent can act on, against the real control plane: lists without tombstones (unless
//! asked) and without history; an extension cut at `maxTtl` says so; paging parameters that
//! cannot be honoured are refused naming the field; and a create retried after its preview was
//! deleted says that, not "here it is".

use std::time::Duration;

use sandcastle::crd::Phase;
use serde_json::{Value, json};

use crate::support::api::{ALL, account, call, call_with};
use crate::support::world::{World, sha};

const T: Duration = Duration::from_secs(90);

const APP: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: ghcr.io/acme/web:1.0}]
";

fn sandbox(world: &World, name: &str) -> Value {
    json!({"blueprint": world.repo.name(), "repository": world.repo.as_str(),
        "commit": sha().as_str(), "branch": name, "name": name})
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {list}"))
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn lists_leave_tombstones_and_history_out_unless_asked() {
    let world = World::new("listed", APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    for name in ["listed-live", "listed-gone"] {
        let made = call(
            &world,
            "POST",
            "/api/v1/previews",
            Some(&admin),
            Some(sandbox(&world, name)),
        )
        .await;
        assert_eq!(made.status, 201, "{:?}", made.body);
    }
    let deleted = call(
        &world,
        "DELETE",
        "/api/v1/previews/listed-gone",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(deleted.status, 202, "{:?}", deleted.body);
    world.wait_phase("listed-gone", Phase::Removed, T).await;
    world.wait_phase("listed-live", Phase::Ready, T).await;

    let list = |query: &str| {
        let (w, t, path) = (&world, admin.clone(), format!("/api/v1/previews{query}"));
        async move {
            let answer = call(w, "GET", &path, Some(&t), None).await;
            assert_eq!(answer.status, 200, "{path}: {:?}", answer.body);
            answer.body
        }
    };
    let plain = list("").await;
    assert_eq!(names(&plain), ["listed-live"], "{plain}");
    for item in plain["items"].as_array().unwrap() {
        assert!(item.get("history").is_none(), "no history in lists: {item}");
    }
    assert_eq!(
        names(&list("?removed=true").await),
        ["listed-gone", "listed-live"]
    );
    assert_eq!(names(&list("?phase=Removed").await), ["listed-gone"]);
    let one = call(
        &world,
        "GET",
        "/api/v1/previews/listed-live",
        Some(&admin),
        None,
    )
    .await;
    assert!(
        one.body["history"]
            .as_array()
            .is_some_and(|h| !h.is_empty()),
        "one preview keeps its history: {:?}",
        one.body
    );
}

#[tokio::test]
async fn an_extension_cut_at_max_ttl_says_so() {
    let world = World::new("capped", APP, json!({"ttl": "2h", "maxTtl": "48h"})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let made = call(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(sandbox(&world, "capped-a")),
    )
    .await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let extend = |by: &str| {
        let (w, t, body) = (&world, admin.clone(), json!({"duration": by}));
        async move {
            call(
                w,
                "POST",
                "/api/v1/previews/capped-a/extend",
                Some(&t),
                Some(body),
            )
            .await
        }
    };
    let short = extend("1h").await;
    assert_eq!(short.status, 200, "{:?}", short.body);
    assert_eq!(short.body["capped"], false, "{:?}", short.body);
    assert_eq!(short.body["name"], "capped-a", "the preview is the answer");

    let long = extend("1000h").await;
    assert_eq!(long.status, 200, "{:?}", long.body);
    assert_eq!(long.body["capped"], true, "{:?}", long.body);
    let message = long.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("maxTtl") && message.contains("48h"),
        "{message}"
    );
    let created: jiff::Timestamp = long.body["createdAt"].as_str().unwrap().parse().unwrap();
    let expires: jiff::Timestamp = long.body["expiresAt"].as_str().unwrap().parse().unwrap();
    assert_eq!(expires.duration_since(created).as_secs(), 48 * 3600);
    // Already as long as it may live: the request is fine, the preview's state refuses it.
    let more = extend("1h").await;
    assert_eq!(
        (more.status, more.body["error"]["code"].as_str()),
        (409, Some("at_max_ttl")),
        "{:?}",
        more.body
    );
}

#[tokio::test]
async fn paging_that_cannot_be_honoured_is_refused_naming_the_field() {
    let world = World::new("paged", APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    for (query, field) in [
        ("limit=100000", "limit"),
        ("limit=0", "limit"),
        ("limit=-1", "limit"),
        ("continue=no%20such%20page!", "continue"),
    ] {
        let answer = call(
            &world,
            "GET",
            &format!("/api/v1/previews?{query}"),
            Some(&admin),
            None,
        )
        .await;
        assert_eq!(
            (answer.status, answer.body["error"]["field"].as_str()),
            (422, Some(field)),
            "{query}: {:?}",
            answer.body
        );
    }
    for query in ["limit=1", "limit=500", "continue=paged-a"] {
        let answer = call(
            &world,
            "GET",
            &format!("/api/v1/previews?{query}"),
            Some(&admin),
            None,
        )
        .await;
        assert_eq!(answer.status, 200, "{query}: {:?}", answer.body);
    }
}

#[tokio::test]
async fn a_create_retried_after_its_preview_was_deleted_says_so() {
    let world = World::new("retried", APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let body = json!({"blueprint": world.repo.name(), "repository": world.repo.as_str(),
        "commit": sha().as_str(), "branch": "task"});
    let create = |key: &'static str| {
        let (w, t, body) = (&world, admin.clone(), body.clone());
        async move {
            call_with(
                w,
                "POST",
                "/api/v1/previews",
                Some(&t),
                Some(body),
                &[("idempotency-key", key)],
            )
            .await
        }
    };
    let first = create("task-1").await;
    assert_eq!(first.status, 201, "{:?}", first.body);
    let name = first.body["name"].as_str().unwrap().to_owned();
    let deleted = call(
        &world,
        "DELETE",
        &format!("/api/v1/previews/{name}"),
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(deleted.status, 202, "{:?}", deleted.body);

    let again = create("task-1").await;
    assert_eq!(
        (again.status, again.body["error"]["code"].as_str()),
        (409, Some("idempotency_key_spent")),
        "{:?}",
        again.body
    );
    let message = again.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&name) && message.contains("new Idempotency-Key"),
        "{message}"
    );
    let fresh = create("task-2").await;
    assert_eq!(fresh.status, 201, "{:?}", fresh.body);
    assert_ne!(fresh.body["name"].as_str(), Some(name.as_str()));
}
