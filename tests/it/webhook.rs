//! The webhook edge: exact status codes and JSON reasons for bad input, real GitHub signatures,
//! and a 503 — with nothing half-written — when Kubernetes cannot be reached.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use kube::Client;
use kube::api::ListParams;
use sandcastle::domain::Secret;
use sandcastle::serve;
use sandcastle_fake_github::{PrSpec, sign};
use serde_json::{Value, json};

use crate::support::cluster;
use crate::support::eventually;
use crate::support::proxy::Proxy;
use crate::support::world::{SECRET, World, pr, sha};

const GUESTBOOK: &str = "fixtures/blueprints/k8s-guestbook/guestbook-all-in-one.yaml";

async fn world() -> World {
    World::new(
        "guestbook",
        &std::fs::read_to_string(GUESTBOOK).unwrap(),
        json!({}),
    )
    .await
}

fn headers(event: &str, body: &[u8], signature: Option<String>) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("content-type", "application/json".to_owned()),
        ("x-github-event", event.to_owned()),
        (
            "x-github-delivery",
            format!("test-{}", rand::random::<u64>()),
        ),
    ];
    if let Some(s) = signature.or_else(|| Some(sign(SECRET.as_bytes(), body))) {
        h.push(("x-hub-signature-256", s));
    }
    h
}

async fn no_previews(world: &World) {
    assert!(
        world
            .previews()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "a preview was created"
    );
}

#[tokio::test]
async fn bad_signatures_are_refused_before_anything_else() {
    let world = world().await;
    let d = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(1), sha(), "b"));
    let strip = |h: Vec<(&'static str, String)>| {
        h.into_iter()
            .filter(|(k, _)| *k != "x-hub-signature-256")
            .collect::<Vec<_>>()
    };

    let (status, body) = world
        .post(d.body.clone(), strip(d.signed_headers(SECRET)))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("signature_missing")),
        "{body}"
    );

    let mut wrong = strip(d.signed_headers(SECRET));
    wrong.push(("x-hub-signature-256", format!("sha256={}", "0".repeat(64))));
    let (status, body) = world.post(d.body.clone(), wrong).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("signature_mismatch")),
        "{body}"
    );

    let (status, body) = world
        .post(d.body.clone(), d.signed_headers("another secret"))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("signature_mismatch")),
        "{body}"
    );

    let mut malformed = strip(d.signed_headers(SECRET));
    malformed.push(("x-hub-signature-256", "sha1=abc".to_owned()));
    let (status, body) = world.post(d.body.clone(), malformed).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("signature_malformed")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    no_previews(&world).await;
}

#[tokio::test]
async fn oversized_malformed_and_unknown_deliveries_get_precise_answers() {
    let world = world().await;

    let huge = vec![b' '; 25 * 1024 * 1024 + 1];
    let (status, body) = world
        .post(huge.clone(), headers("pull_request", &huge, None))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("payload_too_large")),
        "{body}"
    );

    let broken = b"{\"action\": \"opened\", \"number\": ".to_vec();
    let (status, body) = world
        .post(broken.clone(), headers("pull_request", &broken, None))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_json")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line 1"),
        "{body}"
    );

    let mut wrong_type = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(2), sha(), "b"))
        .json();
    wrong_type["pull_request"]["head"]["sha"] = Value::from(12);
    let bytes = serde_json::to_vec(&wrong_type).unwrap();
    let (status, body) = world
        .post(bytes.clone(), headers("pull_request", &bytes, None))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_payload")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pull_request.head.sha"),
        "{body}"
    );

    let star = br#"{"action": "created", "starred_at": null}"#.to_vec();
    let (status, body) = world.post(star.clone(), headers("star", &star, None)).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (202, Some("ignored")),
        "{body}"
    );

    let (status, body) = world
        .deliver(&world.gh.label(&world.repo, pr(2), "bug"))
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (202, Some("ignored")),
        "{body}"
    );
    no_previews(&world).await;
}

#[tokio::test]
async fn real_github_deliveries_verify_with_a_rotated_secret() {
    // The fixtures were signed by GitHub with their project's secret; Sandcastle accepts it as a
    // second (rotation) secret beside the current one.
    let world = world().await;
    let mut parts = world.parts(world.client.clone());
    parts.webhook_secrets = vec![
        Secret::new(SECRET),
        Secret::new("402786017574bd28f9d8f7a18648939751c47fe09077d56e10f0444f14fbb73b"),
    ];
    let running = serve::start(parts).await.unwrap();
    for name in [
        "pull_request.opened",
        "pull_request.synchronize",
        "pull_request.closed.merged",
    ] {
        let capture: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("fixtures/github/{name}.delivery.json")).unwrap(),
        )
        .unwrap();
        let body = base64::engine::general_purpose::STANDARD
            .decode(capture["body_raw_base64"].as_str().unwrap())
            .unwrap();
        let headers: Vec<(&'static str, String)> = [
            "x-github-event",
            "x-github-delivery",
            "x-hub-signature-256",
            "content-type",
        ]
        .into_iter()
        .map(|k| (k, capture["headers"][k].as_str().unwrap().to_owned()))
        .collect();
        let (status, reply) = world.post_to(running.addr, body, headers).await;
        assert_eq!(status, 202, "{name}: {reply}");
        assert_eq!(
            reply["reason"], "no Blueprint covers derekg1729/test-repo (base main)",
            "{name}"
        );
    }
    running.shutdown().await;
}

#[tokio::test]
async fn kubernetes_unreachable_means_503_and_nothing_written() {
    let world = world().await;
    let config = cluster::config().await;
    let target = format!(
        "{}:{}",
        config.cluster_url.host().unwrap(),
        config.cluster_url.port_u16().unwrap()
    )
    .parse()
    .unwrap();
    let proxy = Proxy::start(target).await;
    let mut proxied = config.clone();
    proxied.cluster_url = format!("https://{}", proxy.addr).parse().unwrap();
    proxied.read_timeout = Some(Duration::from_secs(2));
    proxied.connect_timeout = Some(Duration::from_secs(2));
    let running = serve::start(world.parts(Client::try_from(proxied).unwrap()))
        .await
        .unwrap();
    eventually("Sandcastle ready", Duration::from_secs(30), || async {
        let (status, body) = world.get_from(running.addr, "/readyz").await;
        if status == 200 {
            Ok(())
        } else {
            Err(body.to_string())
        }
    })
    .await;

    proxy.cut();
    let (status, body) = world.get_from(running.addr, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(4), sha(), "b"));
    let (status, body) = world
        .post_to(
            running.addr,
            opened.body.clone(),
            opened.signed_headers(SECRET),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("kubernetes_unavailable")),
        "{body}"
    );
    no_previews(&world).await;

    // GitHub's redelivery of the same delivery, once Kubernetes is back, does the work.
    proxy.restore();
    let (status, body) = world
        .post_to(
            running.addr,
            opened.body.clone(),
            opened.signed_headers(SECRET),
        )
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (202, Some("recorded")),
        "{body}"
    );
    let record = body["record"].as_str().unwrap();
    let done = world.event_outcome(record).await.status.unwrap();
    assert_eq!(done.outcome.unwrap().previews[0].result, "created");
    running.abort();
}

#[tokio::test]
async fn health_endpoints() {
    let world = world().await;
    let (status, body) = world.get_from(world.addr(), "/healthz").await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ok")));
    // Ready once the Kubernetes API answers, the CRDs are there and the Blueprint cache filled.
    eventually("/readyz answers ready", Duration::from_secs(30), || async {
        match world.get_from(world.addr(), "/readyz").await {
            (200, body) if body["status"] == "ready" => Ok(()),
            (status, body) => Err(format!("{status} {body}")),
        }
    })
    .await;
}

/// A kube client that counts the Blueprint lists it sends (watches aside).
async fn counting_client(lists: Arc<AtomicUsize>) -> Client {
    let config = cluster::config().await;
    let count = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
        let uri = req.uri();
        let watch = uri.query().is_some_and(|q| q.contains("watch="));
        if req.method() == http::Method::GET && uri.path().ends_with("/blueprints") && !watch {
            lists.fetch_add(1, Ordering::SeqCst);
        }
        req
    });
    kube::client::ClientBuilder::try_from(config)
        .expect("a client from the test kubeconfig")
        .with_layer(&count)
        .build()
}

#[tokio::test]
async fn deliveries_no_blueprint_covers_are_answered_from_the_watch_cache() {
    let world = world().await;
    let lists = Arc::new(AtomicUsize::new(0));
    let running = serve::start(world.parts(counting_client(lists.clone()).await))
        .await
        .unwrap();
    eventually("readyz answers 200", Duration::from_secs(30), || async {
        let (status, body) = world.get_from(running.addr, "/readyz").await;
        (status == 200).then_some(()).ok_or(body.to_string())
    })
    .await;
    let uncovered = sandcastle::domain::RepoName::new("elsewhere/unrelated").unwrap();
    world.gh.add_installation(2, "elsewhere");
    world.gh.add_repo(2, &uncovered);
    let before = lists.load(Ordering::SeqCst);
    for n in 1..=20 {
        let d = world
            .gh
            .open_pull_request(&uncovered, PrSpec::new(pr(n), sha(), "feature"));
        let (status, reply) = world
            .post_to(running.addr, d.body.clone(), d.signed_headers(SECRET))
            .await;
        assert_eq!(status, 202, "{reply}");
        assert_eq!(
            reply["reason"],
            "no Blueprint covers elsewhere/unrelated (base main)"
        );
    }
    assert_eq!(
        lists.load(Ordering::SeqCst),
        before,
        "20 uncovered deliveries listed Blueprints from the API server"
    );

    // A Blueprint made now covers the repository as soon as the watch brings it.
    let blueprints: kube::Api<sandcastle::crd::Blueprint> =
        kube::Api::namespaced(world.client.clone(), &world.home.name);
    let mut spec = blueprints.get("guestbook").await.unwrap().spec;
    spec.repositories = vec![uncovered.to_string()];
    let made = sandcastle::crd::Blueprint::new("unrelated", spec);
    blueprints
        .create(&kube::api::PostParams::default(), &made)
        .await
        .unwrap();
    let mut n = 100;
    eventually(
        "the new Blueprint covers the repository",
        Duration::from_secs(10),
        || {
            n += 1;
            let d = world
                .gh
                .open_pull_request(&uncovered, PrSpec::new(pr(n), sha(), "feature"));
            let (world, addr) = (&world, running.addr);
            async move {
                let (status, reply) = world
                    .post_to(addr, d.body.clone(), d.signed_headers(SECRET))
                    .await;
                (status == 202 && reply["status"] == "recorded")
                    .then_some(())
                    .ok_or(format!("{status} {reply}"))
            }
        },
    )
    .await;
    running.shutdown().await;
}
