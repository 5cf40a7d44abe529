//! Wake on visit through Traefik with real pods: a preview stopped for idleness has no app
//! container left and its host shows Sandcastle's waking page (Traefik follows the parked Ingress to the
//! wake listener, an ExternalName Service); the visit starts the app's containers again and the
//! visitor's reload of the same path lands in the app, serving the same commit; without a wake
//! listener the host answers 503 at once while stopped and the app after; and a visitor reloading
//! while a preview stops gets every answer at once. The time from
//! the visit to the app answering is printed (`visit to serving`) for `scripts/bench-real`.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use sandcastle::crd::Phase;
use sandcastle::domain::clock::Clock;
use serde_json::json;

use crate::support::eventually;
use crate::support::world::{World, sha};
use crate::tier::{self, T, host_of, open_at};

const MINUTE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_visit_to_a_stopped_preview_starts_its_containers_and_the_reload_lands_in_the_app() {
    let tier = tier::tier();
    let mut world = World::unstarted(
        "wake",
        tier::REAL_APP,
        // The clock is manual here, so no HTTP probe (its interval would never pass): the page
        // is checked by the test instead.
        tier::blueprint(json!({"stopAfterIdle": "1h", "ttl": "24h", "readiness": {}})),
    )
    .await;
    world.clock = Clock::manual(Timestamp::from_second(Timestamp::now().as_second()).unwrap());
    world.probe_via = Some(tier.probe_via());
    world.wake_on_visit();
    world.start().await;

    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_phase("wake-pr-1", Phase::Ready, T).await;
    let host = host_of(&world, "wake-pr-1").await;
    let ns = world.namespace_of("wake-pr-1");
    eventually("the app serves the commit", T, || async {
        let page = tier.get(&host, "/api/info").await;
        if page.commit.as_deref() == Some(head.as_str()) {
            Ok(())
        } else {
            Err(format!("{page:?}"))
        }
    })
    .await;

    // An hour idle: stopped, the app's containers gone, the host answered by the waking page.
    let app_pods = tier::pods(&world, &ns, "web").await;
    assert_eq!(app_pods.len(), 1, "{app_pods:?}");
    world.clock.advance(61 * MINUTE);
    world.wait_phase("wake-pr-1", Phase::Stopped, T).await;
    eventually("the stopped app's containers are gone", T, || async {
        match tier.containers_of_pod(&ns, &app_pods[0].0) {
            c if c.is_empty() => Ok(()),
            c => Err(format!("{c:?}")),
        }
    })
    .await;
    let waking = eventually("Traefik serves the waking page", T, || async {
        let page = tier.get(&host, "/api/info").await;
        if page.status == 503 && page.body.contains("Waking up this preview") {
            Ok(page)
        } else {
            Err(format!("{page:?}"))
        }
    })
    .await;
    let visited = Instant::now();
    assert!(
        waking.body.contains(r#"http-equiv="refresh""#),
        "{waking:?}"
    );

    // The visitor's reload of the same path lands in the app, at the same commit.
    let page = eventually("the reload lands in the app", T, || async {
        let page = tier.get(&host, "/api/info").await;
        if page.status == 200 {
            Ok(page)
        } else {
            Err(format!(
                "{} {}",
                page.status,
                page.body.chars().take(200).collect::<String>()
            ))
        }
    })
    .await;
    println!(
        "visit to serving (real pods): {:.1} s",
        visited.elapsed().as_secs_f64()
    );
    assert_eq!(page.commit.as_deref(), Some(head.as_str()), "{page:?}");
    assert_eq!(tier::pods(&world, &ns, "web").await.len(), 1);
    world.wait_phase("wake-pr-1", Phase::Ready, T).await;
}

/// Without a wake listener a stopped preview's Ingress is parked all the same, on a Service with
/// no endpoints: its host answers 503 at once while stopped, and once the preview is started
/// again every request answers at once until one lands in the app. What a stopped host answers
/// then does not depend on how the ingress controller treats a Service left without endpoints.
#[tokio::test]
async fn a_preview_stopped_without_a_wake_listener_answers_at_once_and_its_first_request_after_lands_in_the_app()
 {
    let tier = tier::tier();
    let world = tier::world(&tier, "closed", json!({})).await;
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_github_state(&head, "success", T).await;
    let host = host_of(&world, "closed-pr-1").await;
    let ns = world.namespace_of("closed-pr-1");
    let page = tier.get(&host, "/api/info").await;
    assert_eq!(page.commit.as_deref(), Some(head.as_str()), "{page:?}");

    let app_pods = tier::pods(&world, &ns, "web").await;
    assert_eq!(app_pods.len(), 1, "{app_pods:?}");
    stop_until_gone(&world, &tier, "closed-pr-1", &app_pods[0].0).await;
    assert_eq!(backends(&world, &ns).await, ["sandcastle-wake"]);
    // Each request gives up after 10 s (`tier.get`): one sent to the gone pod fails the test.
    let page = tier.get(&host, "/api/info").await;
    assert!(
        page.status == 503 && page.commit.is_none(),
        "a stopped preview's host answers that nothing serves it: {page:?}"
    );

    // Started again, as a reviewer does before opening the URL: every answer comes at once,
    // the parked route's 503 until the app's own.
    set_stopped(&world, "closed-pr-1", false).await;
    let page = eventually("the app serves again", T, || async {
        let page = tier.get(&host, "/api/info").await;
        match page.status {
            200 => Ok(page),
            _ => Err(format!("{page:?}")),
        }
    })
    .await;
    assert_eq!(page.commit.as_deref(), Some(head.as_str()), "{page:?}");
    world.wait_phase("closed-pr-1", Phase::Ready, T).await;
    assert_eq!(backends(&world, &ns).await, ["app"]);
}

/// A visitor who keeps reloading a preview while it is stopped gets every answer at once: the
/// app's own until the ingress controller has taken the parked route in, the parked route's 503
/// after — never a request sent to the address of a pod that is gone, which would wait for
/// Traefik's 30 s dial timeout and answer 504. Sandcastle parks the routes first and stops the
/// pods once Traefik (which rebuilds its routes at most every 2 s) has had time to follow.
#[tokio::test]
async fn a_visitor_reloading_while_a_preview_stops_gets_every_answer_at_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let tier = tier::tier();
    let world = tier::world(&tier, "drain", json!({})).await;
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_github_state(&head, "success", T).await;
    let host = host_of(&world, "drain-pr-1").await;
    let ns = world.namespace_of("drain-pr-1");
    let app_pods = tier::pods(&world, &ns, "web").await;
    assert_eq!(app_pods.len(), 1, "{app_pods:?}");

    let done = Arc::new(AtomicBool::new(false));
    let visitor = tokio::spawn({
        let (done, ingress) = (done.clone(), tier.ingress.clone());
        async move {
            let client = reqwest::Client::new();
            let mut answers = Vec::new();
            // A reload every 50 ms at most: a visitor's pace, not a load test.
            let mut pace = tokio::time::interval(Duration::from_millis(50));
            while !done.load(Ordering::Relaxed) {
                pace.tick().await;
                let sent = client
                    .get(format!("http://{ingress}/api/info"))
                    .header("host", &host)
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await;
                answers.push(match sent {
                    Ok(r) => r.status().as_u16().to_string(),
                    Err(e) => format!("no answer: {e}"),
                });
            }
            answers
        }
    });
    stop_until_gone(&world, &tier, "drain-pr-1", &app_pods[0].0).await;
    done.store(true, Ordering::Relaxed);
    let answers = visitor.await.unwrap();
    let bad: Vec<&String> = answers
        .iter()
        .filter(|a| *a != "200" && *a != "503")
        .collect();
    assert!(
        bad.is_empty(),
        "every reload answered by the app (200) or the parked route (503); {} of {} were not, \
         the first: {:?}",
        bad.len(),
        answers.len(),
        &bad[..bad.len().min(5)]
    );
    assert_eq!(
        answers.last().map(String::as_str),
        Some("503"),
        "{answers:?}"
    );
}

/// Stop preview `name` and wait until it says Stopped and its app's pod `pod` and that pod's
/// containers are gone.
async fn stop_until_gone(world: &World, tier: &tier::RealTier, name: &str, pod: &str) {
    let ns = world.namespace_of(name);
    set_stopped(world, name, true).await;
    world.wait_phase(name, Phase::Stopped, T).await;
    eventually(
        "the stopped app's pod and containers are gone",
        T,
        || async {
            let pods = tier::pods(world, &ns, "web").await;
            match tier.containers_of_pod(&ns, pod) {
                c if c.is_empty() && pods.is_empty() => Ok(()),
                c => Err(format!("{pods:?} {c:?}")),
            }
        },
    )
    .await;
}

/// The Services the Ingresses of `ns` route to, each once.
async fn backends(world: &World, ns: &str) -> Vec<String> {
    use k8s_openapi::api::networking::v1::Ingress;
    let ingresses = kube::Api::<Ingress>::namespaced(world.client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap();
    let mut names: Vec<String> = ingresses
        .items
        .iter()
        .filter_map(|i| i.spec.as_ref()?.rules.as_ref())
        .flatten()
        .filter_map(|r| r.http.as_ref())
        .flat_map(|h| &h.paths)
        .filter_map(|p| Some(p.backend.service.as_ref()?.name.clone()))
        .collect();
    names.dedup();
    names
}

async fn set_stopped(world: &World, name: &str, stopped: bool) {
    use kube::api::{Patch, PatchParams};
    world
        .previews()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"stopped": stopped}})),
        )
        .await
        .unwrap();
}
