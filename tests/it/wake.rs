//! Wake on visit, through an ingress controller that routes by the cluster's real Ingress and
//! Service objects (`support::ingress`): a preview stopped for idleness has its host answered by
//! Sandcastle's waking page, the visit wakes it, and once it is Ready its Ingress points at the
//! app again, exactly as before. A host no preview has gets 404 and wakes nothing; a preview
//! stopped on request is not woken by a visit. The time from the visit to the app serving is
//! printed (`visit to serving`) for `scripts/bench-wake`.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::ResourceExt;
use kube::api::Api;
use sandcastle::crd::Phase;
use sandcastle::crd::labels::{LAST_ACTIVITY, STOPPED_ROUTES};
use sandcastle::domain::clock::Clock;
use sandcastle::domain::wake::WAKE_SERVICE;
use sandcastle::k8s::previews;
use serde_json::json;

use crate::support::eventually;
use crate::support::fixtures::WEB_APP;
use crate::support::ingress::IngressController;
use crate::support::world::World;

const T: Duration = Duration::from_secs(90);
const MINUTE: Duration = Duration::from_secs(60);

/// A world with wake on visit, on a manual clock, whose previews stop after an hour idle.
pub async fn waking_world(name: &str) -> World {
    let mut world =
        World::unstarted(name, WEB_APP, json!({"stopAfterIdle": "1h", "ttl": "24h"})).await;
    world.clock = Clock::manual(Timestamp::from_second(Timestamp::now().as_second()).unwrap());
    world.wake_on_visit();
    world.start().await;
    world
}

/// The host of preview `name`'s URL.
pub async fn host_of(world: &World, name: &str) -> String {
    let pe = world.previews().get(name).await.unwrap();
    let url = pe.status.unwrap().url.expect("the preview has a URL");
    url.split("://")
        .nth(1)
        .unwrap()
        .trim_end_matches('/')
        .to_owned()
}

pub async fn ingress_spec(world: &World, ns: &str) -> (serde_json::Value, bool) {
    let ing = Api::<Ingress>::namespaced(world.client.clone(), ns)
        .get("web")
        .await
        .unwrap();
    let kept = ing.annotations().contains_key(STOPPED_ROUTES);
    (serde_json::to_value(ing.spec).unwrap(), kept)
}

/// Wait until the Ingress of namespace `ns` is parked on the waking page.
pub async fn parked(world: &World, ns: &str) {
    eventually("the Ingress routes to the waking page", T, || async {
        let (spec, kept) = ingress_spec(world, ns).await;
        let backend = &spec["rules"][0]["http"]["paths"][0]["backend"]["service"];
        match backend["name"].as_str() {
            Some(WAKE_SERVICE) if kept => Ok(()),
            _ => Err(format!("{spec}")),
        }
    })
    .await;
}

#[tokio::test]
async fn a_visit_to_a_stopped_preview_wakes_it_and_its_host_goes_back_to_the_app() {
    let world = waking_world("wake").await;
    let ingress = IngressController::start(world.client.clone(), &world.prefix).await;
    world.open(1).await;
    world.open(2).await;
    let (one, two) = ("wake-pr-1", "wake-pr-2");
    world.wait_phase(one, Phase::Ready, T).await;
    world.wait_phase(two, Phase::Ready, T).await;
    let ns = world.namespace_of(one);
    let host = host_of(&world, one).await;
    let (status, _, body) = ingress.get(&host, "/").await;
    assert_eq!((status, body.contains("app web in")), (200, true), "{body}");
    let (before, _) = ingress_spec(&world, &ns).await;

    // An hour idle: stopped, and its host answered by the waking page.
    world.clock.advance(61 * MINUTE);
    let pe = world.wait_phase(one, Phase::Stopped, T).await;
    world.wait_phase(two, Phase::Stopped, T).await;
    let st = pe.status.clone().unwrap();
    let message = st.message.unwrap();
    assert!(
        message.contains("open it, comment /preview wake"),
        "{message}"
    );
    parked(&world, &ns).await;
    let wake_service = Api::<Service>::namespaced(world.client.clone(), &ns)
        .get(WAKE_SERVICE)
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(wake_service.type_.as_deref(), Some("ExternalName"));
    assert_eq!(wake_service.external_name.as_deref(), Some("localhost"));
    let pe = world.previews().get(one).await.unwrap();
    assert_eq!(pe.status.as_ref().unwrap().hosts, vec![host.clone()]);
    let activity_of_two = world
        .previews()
        .get(two)
        .await
        .unwrap()
        .annotations()
        .get(LAST_ACTIVITY)
        .cloned();

    // A host no preview has: 404 from Sandcastle, naming no preview.
    let wake = world.wake.unwrap();
    let direct = |host: String| async move {
        let r = reqwest::Client::new()
            .get(format!("http://{wake}/"))
            .header("host", host)
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        let preview = r
            .headers()
            .get("x-sandcastle-preview")
            .map(|v| v.to_str().unwrap().to_owned());
        (r.status().as_u16(), preview, r.text().await.unwrap())
    };
    let unknown = host.replacen("1-", "9-", 1);
    assert_ne!(unknown, host);
    let (status, preview, body) = direct(unknown).await;
    assert_eq!((status, preview), (404, None), "{body}");
    assert!(body.contains("unknown_host"), "{body}");

    // The visit: the waking page, which reloads itself, and the preview wakes.
    let visited = Instant::now();
    let (status, preview, page) = ingress.get(&host, "/cart?item=3").await;
    assert_eq!(status, 503, "{page}");
    assert_eq!(preview.as_deref(), Some(one));
    assert!(page.contains("Waking up this preview"), "{page}");
    assert!(page.contains(r#"http-equiv="refresh""#), "{page}");
    let served = eventually("the app serves its host again", T, || async {
        match ingress.get(&host, "/cart?item=3").await {
            (200, _, body) if body.contains("app web in") => Ok(visited.elapsed()),
            (status, _, body) => Err(format!("{status} {body}")),
        }
    })
    .await;
    eprintln!("visit to serving: {} ms", served.as_millis());
    // The routes come back in the pass that makes it Ready, just before that pass writes the
    // status (after telling GitHub): the status may follow a moment after the app serves.
    let pe = world.wait_phase(one, Phase::Ready, T).await;
    let st = pe.status.unwrap();
    assert!(!st.wake_page);
    let by_visit = st.history.iter().find(|h| h.actor == "visitor");
    let by_visit = by_visit.unwrap_or_else(|| panic!("{:#?}", st.history));
    assert!(
        by_visit
            .result
            .as_deref()
            .unwrap_or_default()
            .contains(&host),
        "{by_visit:?}"
    );

    // Exactly the Ingress it had, its record and the wake Service gone.
    let (after, kept) = ingress_spec(&world, &ns).await;
    assert_eq!(after, before);
    assert!(!kept);
    let gone = Api::<Service>::namespaced(world.client.clone(), &ns)
        .get_opt(WAKE_SERVICE)
        .await
        .unwrap();
    assert!(gone.is_none(), "{gone:?}");

    // The other preview was never looked at: still stopped, its activity as it was.
    let other = world.previews().get(two).await.unwrap();
    assert_eq!(other.status.as_ref().unwrap().phase, Some(Phase::Stopped));
    assert_eq!(
        other.annotations().get(LAST_ACTIVITY).cloned(),
        activity_of_two
    );

    // Stopped on request: a visit shows the page and wakes nothing.
    previews::set_stopped(&world.previews(), two, true, world.clock.now())
        .await
        .unwrap()
        .unwrap();
    let host_two = host_of(&world, two).await;
    eventually("preview 2 shows as stopped on request", T, || async {
        match direct(host_two.clone()).await {
            (503, Some(p), body) if p == two && body.contains(r#""state":"stopped""#) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let (status, _, page) = ingress.get(&host_two, "/").await;
    assert_eq!(status, 503, "{page}");
    assert!(page.contains("stopped it on purpose"), "{page}");
    let other = world.previews().get(two).await.unwrap();
    assert_eq!(other.status.unwrap().phase, Some(Phase::Stopped));
}
