//! Gateway API routes on the fast tier, whose control plane is given the Gateway API's standard
//! definitions (`support::gateway`): a blueprint exposing its app through an HTTPRoute clones
//! into a preview whose route has the preview's host, still names the shared Gateway (the
//! source namespace written out) and leads to the preview's own Service, accepted by the API
//! server's own validation of HTTPRoutes; a Gateway in the blueprint fails the preview, named. Stopped for idleness, the preview's route is parked on the wake route Service
//! of Sandcastle's namespace, which a ReferenceGrant made there lets it name; a visit to its host
//! finds the preview and wakes it, and once it is Ready the route has its own rules back byte
//! for byte and the grant is gone. Stopped again and closed, teardown takes the grant too; the
//! orphan sweep takes the grant of a preview that is gone.

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use sandcastle::crd::Phase;
use sandcastle::crd::labels::STOPPED_ROUTES;
use sandcastle::domain::clock::Clock;
use serde_json::{Value, json};

use crate::support::gateway::ensure_gateway_api;
use crate::support::world::{World, pr};
use crate::support::{client, eventually};

const T: Duration = Duration::from_secs(90);
const MINUTE: Duration = Duration::from_secs(60);

/// A web app reached only through an HTTPRoute of the shared Gateway `shared` of its own
/// namespace (no `namespace` on the parent: the route's own).
const ROUTED_APP: &str = r"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example.com/shop/web:1.0}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: shared, sectionName: http}]
  hostnames: [shop.staging.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /api}}]
    filters:
    - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Env, value: preview}]}}
    backendRefs: [{name: web, port: 80}]
  - backendRefs: [{name: web, port: 80}]
";

fn http_routes() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
        "httproutes",
    )
}

fn reference_grants() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1beta1", "ReferenceGrant"),
        "referencegrants",
    )
}

/// The HTTPRoute `web` of namespace `ns`.
async fn route(world: &World, ns: &str) -> DynamicObject {
    Api::<DynamicObject>::namespaced_with(world.client.clone(), ns, &http_routes())
        .get("web")
        .await
        .expect("the preview's HTTPRoute")
}

/// The ReferenceGrant of preview `name` in Sandcastle's namespace, if there is one.
async fn grant(world: &World, name: &str) -> Option<DynamicObject> {
    Api::<DynamicObject>::namespaced_with(
        world.client.clone(),
        &world.home.name,
        &reference_grants(),
    )
    .get_opt(name)
    .await
    .expect("reading ReferenceGrants")
}

#[tokio::test]
async fn an_http_route_is_cloned_onto_the_shared_gateway() {
    ensure_gateway_api(&client().await).await;
    let world = World::new("gw", ROUTED_APP, json!({"primaryService": "web"})).await;
    world.open(1).await;
    let pe = world.wait_phase("gw-pr-1", Phase::Ready, T).await;
    let st = pe.status.unwrap();
    assert_eq!(st.url.as_deref(), Some("http://1-gw.preview.example.com"));

    let ns = world.namespace_of("gw-pr-1");
    let spec = route(&world, &ns).await.data["spec"].clone();
    assert_eq!(spec["hostnames"], json!(["1-gw.preview.example.com"]));
    // The shared Gateway of the source namespace, named outright; the preview's own Service.
    assert_eq!(
        spec["parentRefs"],
        json!([{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "shared",
                "namespace": world.staging.name, "sectionName": "http"}])
    );
    for rule in spec["rules"].as_array().unwrap() {
        assert_eq!(
            rule["backendRefs"],
            json!([{"group": "", "kind": "Service", "name": "web", "port": 80, "weight": 1}])
        );
    }
}

#[tokio::test]
async fn a_gateway_in_the_blueprint_fails_the_preview_naming_it() {
    ensure_gateway_api(&client().await).await;
    let gateway = r"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: shared}
spec:
  gatewayClassName: traefik
  listeners: [{name: http, port: 80, protocol: HTTP}]
";
    let yaml = format!("{ROUTED_APP}---\n{gateway}");
    let world = World::new("gwref", &yaml, json!({})).await;
    world.open(1).await;
    let failed = world.wait_phase("gwref-pr-1", Phase::Failed, T).await;
    let message = failed.status.unwrap().message.unwrap_or_default();
    assert!(
        message.contains(
            "Gateway shared is not allowed: a Gateway is shared by every preview and never cloned"
        ),
        "{message}"
    );
    // Refused before anything is made.
    assert!(
        !world
            .namespace_exists(&world.namespace_of("gwref-pr-1"))
            .await
    );
}

#[tokio::test]
async fn a_stopped_previews_route_waits_on_the_waking_page_and_comes_back_as_it_was() {
    ensure_gateway_api(&client().await).await;
    let mut world = World::unstarted(
        "gwwake",
        ROUTED_APP,
        json!({"stopAfterIdle": "1h", "ttl": "24h"}),
    )
    .await;
    world.clock = Clock::manual(Timestamp::from_second(Timestamp::now().as_second()).unwrap());
    world.wake_on_visit();
    world.configure = Some(|parts| {
        parts.settings.wake_route = Some("sandcastle:8081".parse().unwrap());
    });
    world.start().await;
    let name = "gwwake-pr-1";
    world.open(1).await;
    world.wait_phase(name, Phase::Ready, T).await;
    let ns = world.namespace_of(name);
    let before = route(&world, &ns).await.data["spec"].to_string();

    // An hour idle: stopped, every rule of its route sent to the wake route Service of
    // Sandcastle's namespace, which the preview's ReferenceGrant there lets it name.
    world.clock.advance(61 * MINUTE);
    let pe = world.wait_phase(name, Phase::Stopped, T).await;
    let host = "1-gwwake.preview.example.com";
    assert_eq!(pe.status.unwrap().hosts, [host]);
    let parked = eventually("the route is parked", T, || async {
        let r = route(&world, &ns).await;
        match r.annotations().get(STOPPED_ROUTES) {
            Some(_) => Ok(r),
            None => Err(r.data["spec"].to_string()),
        }
    })
    .await;
    let home = world.home.name.clone();
    let wake_backend = json!([{"group": "", "kind": "Service", "name": "sandcastle",
                               "namespace": home, "port": 8081, "weight": 1}]);
    let rules = parked.data["spec"]["rules"].as_array().unwrap().clone();
    assert_eq!(rules.len(), 2);
    for rule in &rules {
        assert_eq!(rule["backendRefs"], wake_backend, "{rule}");
        assert!(rule.get("filters").is_none(), "{rule}");
    }
    assert_eq!(
        rules[0]["matches"],
        json!([{"path": {"type": "PathPrefix", "value": "/api"}}])
    );
    let kept: Value = serde_json::from_str(&parked.annotations()[STOPPED_ROUTES]).unwrap();
    assert_eq!(
        kept["rules"].to_string(),
        serde_json::from_str::<Value>(&before).unwrap()["rules"].to_string()
    );
    let made = grant(&world, name)
        .await
        .expect("the preview's ReferenceGrant");
    assert_eq!(made.labels()["sandcastle.dev/preview"], name);
    assert_eq!(
        made.data["spec"],
        json!({"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": ns}],
               "to": [{"group": "", "kind": "Service", "name": "sandcastle"}]})
    );

    // A visit to the route's host finds the preview: the waking page, and it wakes.
    let wake = world.wake.unwrap();
    let r = reqwest::Client::new()
        .get(format!("http://{wake}/"))
        .header("host", host)
        .send()
        .await
        .unwrap();
    let preview = r
        .headers()
        .get("x-sandcastle-preview")
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!((r.status().as_u16(), preview.as_deref()), (503, Some(name)));
    assert!(r.text().await.unwrap().contains("Waking up this preview"));
    world.wait_phase(name, Phase::Ready, T).await;

    // Its own rules back, byte for byte, the record and the grant gone.
    let back = route(&world, &ns).await;
    assert_eq!(back.data["spec"].to_string(), before);
    assert!(!back.annotations().contains_key(STOPPED_ROUTES));
    assert!(grant(&world, name).await.is_none());

    // Stopped again and closed: teardown takes the grant with the namespace.
    world
        .previews()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"stopped": true}})),
        )
        .await
        .unwrap();
    world.wait_phase(name, Phase::Stopped, T).await;
    eventually("the grant is made again", T, || async {
        grant(&world, name)
            .await
            .map(|_| ())
            .ok_or_else(|| "no grant".to_owned())
    })
    .await;
    let (status, body) = world
        .deliver(&world.gh.close(&world.repo, pr(1), false))
        .await;
    assert_eq!(status, 200, "{body}");
    world.wait_phase(name, Phase::Removed, T).await;
    assert!(grant(&world, name).await.is_none());
}

/// A ReferenceGrant Sandcastle made for a preview that is gone (its teardown never ran to its
/// end) goes with the next orphan sweep; one of a live preview, and one Sandcastle did not make,
/// stay.
#[tokio::test]
async fn grants_of_previews_that_are_gone_are_swept() {
    ensure_gateway_api(&client().await).await;
    let mut world = World::unstarted("gworph", ROUTED_APP, json!({})).await;
    world.clock = Clock::manual(Timestamp::from_second(Timestamp::now().as_second()).unwrap());
    world.configure = Some(|parts| {
        parts.settings.orphan_grace = Some(60 * MINUTE);
        parts.settings.housekeeping_interval = 60 * MINUTE;
    });
    world.start().await;
    world.open(1).await;
    world.wait_phase("gworph-pr-1", Phase::Ready, T).await;

    let grants = Api::<DynamicObject>::namespaced_with(
        world.client.clone(),
        &world.home.name,
        &reference_grants(),
    );
    let grant = |name: &str, labels: Value| {
        json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": name, "labels": labels},
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "x"}],
                     "to": [{"group": "", "kind": "Service", "name": "sandcastle"}]}})
    };
    let ours = |preview: &str| json!({"app.kubernetes.io/managed-by": "sandcastle", "sandcastle.dev/preview": preview});
    for (name, labels) in [
        ("gworph-ghost", ours("gworph-ghost")),
        ("gworph-pr-1", ours("gworph-pr-1")),
        (
            "someone-elses",
            json!({"sandcastle.dev/preview": "gworph-ghost"}),
        ),
    ] {
        grants
            .patch(
                name,
                &PatchParams::apply("sandcastle-tests").force(),
                &Patch::Apply(&grant(name, labels)),
            )
            .await
            .expect("a ReferenceGrant");
    }
    // A moved clock runs a sweep.
    world.clock.advance(MINUTE);
    eventually("the gone preview's grant is swept", T, || async {
        match grants.get_opt("gworph-ghost").await.unwrap() {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        }
    })
    .await;
    for kept in ["gworph-pr-1", "someone-elses"] {
        assert!(grants.get_opt(kept).await.unwrap().is_some(), "{kept}");
    }
}
