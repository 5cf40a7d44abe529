//! A blueprint whose app is reached only through an HTTPRoute of a shared Gateway, on the real
//! tier (Traefik's kubernetesGateway provider, the GatewayClass `traefik`): the preview's route
//! attaches to the same Gateway with the preview's host and serves the pull request's commit;
//! stopped for idleness, a visit to that host gets Sandcastle's waking page through the parked
//! route (the wake route Service of Sandcastle's namespace, allowed by the ReferenceGrant it
//! made there), and the visitor's reload lands in the app again, at the same commit. Without a
//! wake route Service, a stopped preview's host answers 503 at once, and the app once started.
//!
//! Sandcastle runs on the host here, not behind its chart's Service: the wake route Service is a
//! Service without a selector whose EndpointSlice names the host side of the real tier's link
//! (10.98.0.1), where the test's wake listener listens (an EndpointSlice may not name a loopback
//! address).

use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use sandcastle::crd::Phase;
use sandcastle::domain::clock::Clock;
use serde_json::{Value, json};

use crate::support::world::{World, sha};
use crate::support::{TestNamespace, client, eventually};
use crate::tier::{self, T, host_of, open_at};

const MINUTE: Duration = Duration::from_secs(60);

/// The host side of the real tier's link: Traefik (on the host) and the node reach it.
const HOST_IP: &str = "10.98.0.1";

/// The wake route Service of Sandcastle's namespace (`--wake-route-service`).
const WAKE_ROUTE_SERVICE: &str = "sandcastle";
const WAKE_ROUTE_PORT: u16 = 8081;

/// The test app ([`tier::REAL_APP`]) with its Ingress replaced by an HTTPRoute of Gateway
/// `shared` in namespace `gateways`.
pub fn routed_app(gateways: &str) -> String {
    let docs: Vec<&str> = tier::REAL_APP
        .split("\n---\n")
        .filter(|d| !d.contains("kind: Ingress"))
        .collect();
    assert_eq!(
        docs.len(),
        tier::REAL_APP.split("\n---\n").count() - 1,
        "the test app has one Ingress"
    );
    format!(
        "{}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: app}}\n\
         spec:\n  parentRefs: [{{name: shared, namespace: {gateways}, sectionName: web}}]\n  \
         hostnames: [app.staging.example.com]\n  rules:\n  - backendRefs: [{{name: app, port: 80}}]\n",
        docs.join("\n---\n")
    )
}

fn resource(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", version, kind),
        plural,
    )
}

async fn apply(api: &Api<DynamicObject>, name: &str, object: &Value) {
    api.patch(
        name,
        &PatchParams::apply("sandcastle-tests").force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {name}: {e}"));
}

/// The shared Gateway `shared` in `ns`: one HTTP listener on Traefik's preview entry point,
/// taking routes of every namespace.
pub async fn shared_gateway(ns: &str, ingress: &str) {
    let port: u16 = ingress
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .expect("SANDCASTLE_INGRESS_HTTP is HOST:PORT");
    let gateway = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "shared", "namespace": ns},
        "spec": {"gatewayClassName": "traefik", "listeners": [{"name": "web", "protocol": "HTTP",
            "port": port, "allowedRoutes": {"namespaces": {"from": "All"}}}]}});
    let api = Api::namespaced_with(client().await, ns, &resource("v1", "Gateway", "gateways"));
    apply(&api, "shared", &gateway).await;
}

/// The wake route Service of Sandcastle's namespace `home`: no selector, one EndpointSlice naming
/// the wake listener at `wake`.
async fn wake_route_service(home: &str, wake: std::net::SocketAddr) {
    let client = client().await;
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": WAKE_ROUTE_SERVICE, "namespace": home},
        "spec": {"ports": [{"name": "wake", "port": WAKE_ROUTE_PORT, "protocol": "TCP"}]}});
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), home);
    services
        .patch(
            WAKE_ROUTE_SERVICE,
            &PatchParams::apply("sandcastle-tests").force(),
            &Patch::Apply(&service),
        )
        .await
        .expect("the wake route Service");
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "sandcastle-wake-listener", "namespace": home, "labels": {
            "kubernetes.io/service-name": WAKE_ROUTE_SERVICE,
            "endpointslice.kubernetes.io/managed-by": "sandcastle-tests"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [wake.ip().to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "wake", "port": wake.port(), "protocol": "TCP"}]});
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> = Api::namespaced(client, home);
    slices
        .patch(
            "sandcastle-wake-listener",
            &PatchParams::apply("sandcastle-tests").force(),
            &Patch::Apply(&slice),
        )
        .await
        .expect("the wake route Service's EndpointSlice");
}

#[tokio::test]
async fn a_preview_reached_through_an_http_route_serves_its_commit_and_wakes_on_a_visit() {
    let tier = tier::tier();
    let gateways = TestNamespace::new(&client().await, "gateways").await;
    shared_gateway(&gateways.name, &tier.ingress).await;
    let mut world = World::unstarted(
        "gwreal",
        &routed_app(&gateways.name),
        // The clock is manual here, so no HTTP probe (its interval would never pass): the page
        // is checked by the test instead.
        tier::blueprint(json!({"stopAfterIdle": "1h", "ttl": "24h", "readiness": {}})),
    )
    .await;
    world.clock = Clock::manual(Timestamp::from_second(Timestamp::now().as_second()).unwrap());
    world.probe_via = Some(tier.probe_via());
    let wake = world.wake_on_visit_at(HOST_IP.parse().unwrap());
    world.configure = Some(|parts| {
        let service = format!("{WAKE_ROUTE_SERVICE}:{WAKE_ROUTE_PORT}");
        parts.settings.wake_route = Some(service.parse().unwrap());
    });
    wake_route_service(&world.home.name, wake).await;
    world.start().await;

    // The preview's route, on the shared Gateway with the preview's host, serves the commit.
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_phase("gwreal-pr-1", Phase::Ready, T).await;
    let host = host_of(&world, "gwreal-pr-1").await;
    assert_eq!(host, "1-gwreal.preview.localhost");
    eventually("Traefik serves the commit through the route", T, || async {
        let page = tier.get(&host, "/api/info").await;
        if page.commit.as_deref() == Some(head.as_str()) {
            Ok(())
        } else {
            Err(format!("{page:?}"))
        }
    })
    .await;
    // No Ingress anywhere: the route is the only way in.
    let ns = world.namespace_of("gwreal-pr-1");
    let ingresses =
        Api::<k8s_openapi::api::networking::v1::Ingress>::namespaced(world.client.clone(), &ns)
            .list(&Default::default())
            .await
            .unwrap();
    assert!(ingresses.items.is_empty());

    // An hour idle: stopped, and the host answered by the waking page through the parked route.
    world.clock.advance(61 * MINUTE);
    world.wait_phase("gwreal-pr-1", Phase::Stopped, T).await;
    let grants = Api::<DynamicObject>::namespaced_with(
        world.client.clone(),
        &world.home.name,
        &resource("v1beta1", "ReferenceGrant", "referencegrants"),
    );
    assert!(grants.get_opt("gwreal-pr-1").await.unwrap().is_some());
    let waking = eventually("Traefik serves the waking page", T, || async {
        let page = tier.get(&host, "/api/info").await;
        if page.status == 503 && page.body.contains("Waking up this preview") {
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
    let visited = Instant::now();
    assert!(waking.commit.is_none(), "{waking:?}");

    // The visitor's reload lands in the app again, at the same commit.
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
        "visit to serving through an HTTPRoute (real pods): {:.1} s",
        visited.elapsed().as_secs_f64()
    );
    assert_eq!(page.commit.as_deref(), Some(head.as_str()), "{page:?}");
    world.wait_phase("gwreal-pr-1", Phase::Ready, T).await;
    assert!(grants.get_opt("gwreal-pr-1").await.unwrap().is_none());
}

/// Without a wake route Service, a stopped preview's route is parked on a Service of its own
/// namespace whose selector no pod carries: Traefik answers 503 at once (the Service's
/// EndpointSlice lists no endpoint), and the app again once the preview is started.
#[tokio::test]
async fn a_stopped_previews_route_without_a_wake_route_service_answers_503_at_once() {
    let tier = tier::tier();
    let gateways = TestNamespace::new(&client().await, "gateways").await;
    shared_gateway(&gateways.name, &tier.ingress).await;
    let world = tier::world_of(&tier, "gwclosed", &routed_app(&gateways.name), json!({})).await;
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_github_state(&head, "success", T).await;
    let host = host_of(&world, "gwclosed-pr-1").await;
    let page = tier.get(&host, "/api/info").await;
    assert_eq!(page.commit.as_deref(), Some(head.as_str()), "{page:?}");

    let stopped = |stopped: bool| {
        let previews = world.previews();
        async move {
            previews
                .patch(
                    "gwclosed-pr-1",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"stopped": stopped}})),
                )
                .await
                .unwrap();
        }
    };
    stopped(true).await;
    world.wait_phase("gwclosed-pr-1", Phase::Stopped, T).await;
    // Each request gives up after 10 s (`tier.get`): one sent to a gone pod fails the test.
    eventually("the parked route answers 503", T, || async {
        let page = tier.get(&host, "/api/info").await;
        match (page.status, &page.commit) {
            (503, None) => Ok(()),
            _ => Err(format!("{page:?}")),
        }
    })
    .await;

    stopped(false).await;
    let page = eventually("the app serves again", T, || async {
        let page = tier.get(&host, "/api/info").await;
        match page.status {
            200 => Ok(page),
            _ => Err(format!("{page:?}")),
        }
    })
    .await;
    assert_eq!(page.commit.as_deref(), Some(head.as_str()), "{page:?}");
    world.wait_phase("gwclosed-pr-1", Phase::Ready, T).await;
}
