//! Blueprints without the usual workloads, against the real control plane: a staging namespace
//! running an ownerless ReplicaSet is cloned with that ReplicaSet (Ready only once its pods are,
//! stopped and woken like a Deployment, its pods replaced when a commit changes their image),
//! and a blueprint of ConfigMaps alone fails instead of being called Ready.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use sandcastle::crd::Phase;
use sandcastle::crd::labels::STOPPED_REPLICAS;
use sandcastle::domain::Sha;
use sandcastle::domain::clock::Clock;
use sandcastle::k8s::previews;
use sandcastle_fake_github::PrSpec;
use serde_json::json;

use crate::fidelity::assert_refused;
use crate::support::eventually;
use crate::support::world::{Source, World, pr, sha};

const T: Duration = Duration::from_secs(120);

/// A ReplicaSet nobody owns, behind a Service: how some old stacks still run.
const LEGACY: &str = r"
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: legacy
  labels: {app: legacy}
spec:
  replicas: 2
  selector: {matchLabels: {app: legacy}}
  template:
    metadata: {labels: {app: legacy}}
    spec:
      containers:
      - {name: legacy, image: ghcr.io/acme/legacy:staging}
---
apiVersion: v1
kind: Service
metadata: {name: legacy}
spec:
  selector: {app: legacy}
  ports: [{port: 80}]
";

/// The pods of `legacy` in `ns` once they are exactly `n`, all Ready, all running `image`.
async fn wait_legacy_pods(world: &World, ns: &str, n: usize, image: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), ns);
    eventually(
        &format!("{n} ready legacy pods running {image} in {ns}"),
        T,
        || {
            let pods = pods.clone();
            async move {
                let list = pods
                    .list(&ListParams::default().labels("app=legacy"))
                    .await
                    .map_err(|e| e.to_string())?;
                let live: Vec<Pod> = list
                    .items
                    .into_iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect();
                let ready = |p: &Pod| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        })
                };
                let image_of = |p: &Pod| {
                    p.spec
                        .as_ref()
                        .and_then(|s| s.containers.first())
                        .and_then(|c| c.image.clone())
                };
                let summary: Vec<(String, Option<String>, bool)> = live
                    .iter()
                    .map(|p| (p.name_any(), image_of(p), ready(p)))
                    .collect();
                let fine = live.len() == n
                    && live
                        .iter()
                        .all(|p| ready(p) && image_of(p).as_deref() == Some(image));
                if fine {
                    Ok(live)
                } else {
                    Err(format!("{summary:?}"))
                }
            }
        },
    )
    .await
}

fn image(head: &Sha) -> String {
    format!("ghcr.io/acme/legacy:{}", head.short())
}

#[tokio::test]
async fn an_ownerless_replicaset_is_cloned_ready_stopped_woken_and_rolled() {
    let mut world = World::unstarted(
        "legacy",
        LEGACY,
        json!({
            "stopAfterIdle": "1h",
            "ttl": "24h",
            "images": [{"repository": "ghcr.io/acme/legacy", "tag": "{{shortSha}}"}],
        }),
    )
    .await;
    world.clock = Clock::manual(Timestamp::from_second(Timestamp::now().as_second()).unwrap());
    world.start().await;
    let head = sha();
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(1), head.clone(), "b1"));
    let (status, body) = world.deliver(&opened).await;
    assert_eq!(status, 200, "{body}");

    let pe = world.wait_phase("legacy-pr-1", Phase::Ready, T).await;
    world.wait_github_state(&head, "success", T).await;
    let ns = world.namespace_of("legacy-pr-1");
    let services = pe.status.unwrap().services;
    assert!(
        services.iter().any(|s| s.kind == "ReplicaSet"
            && s.name == "legacy"
            && s.ready == 2
            && s.desired == 2),
        "the ReplicaSet's readiness is what was waited for: {services:?}"
    );
    let sets: Api<ReplicaSet> = Api::namespaced(world.client.clone(), &ns);
    let copied = sets.get("legacy").await.expect("the ReplicaSet is copied");
    assert!(copied.owner_references().is_empty());
    assert_eq!(copied.spec.as_ref().unwrap().replicas, Some(2));
    assert_eq!(
        copied.status.as_ref().and_then(|s| s.ready_replicas),
        Some(2)
    );
    let pods = wait_legacy_pods(&world, &ns, 2, &image(&head)).await;
    for p in &pods {
        let owner = &p.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("ReplicaSet", "legacy")
        );
    }
    let service = Api::<k8s_openapi::api::core::v1::Service>::namespaced(world.client.clone(), &ns)
        .get("legacy")
        .await;
    assert!(service.is_ok(), "the Service is copied too");

    // Idle: scaled to zero like a Deployment, the count remembered; woken: exactly that back.
    world.clock.advance(Duration::from_secs(61 * 60));
    world.wait_phase("legacy-pr-1", Phase::Stopped, T).await;
    let stopped = sets.get("legacy").await.unwrap();
    assert_eq!(stopped.spec.as_ref().unwrap().replicas, Some(0));
    assert_eq!(
        stopped
            .annotations()
            .get(STOPPED_REPLICAS)
            .map(String::as_str),
        Some("2")
    );
    previews::set_stopped(&world.previews(), "legacy-pr-1", false, world.clock.now())
        .await
        .unwrap()
        .unwrap();
    world.wait_phase("legacy-pr-1", Phase::Ready, T).await;
    let woken = sets.get("legacy").await.unwrap();
    assert_eq!(woken.spec.as_ref().unwrap().replicas, Some(2));
    assert!(woken.annotations().get(STOPPED_REPLICAS).is_none());
    wait_legacy_pods(&world, &ns, 2, &image(&head)).await;

    // A new commit changes the image: a ReplicaSet never replaces its pods, so the preview's
    // is replaced and its pods run the new image.
    let second = sha();
    let (status, _) = world
        .deliver(&world.gh.push(&world.repo, pr(1), &second))
        .await;
    assert_eq!(status, 200);
    world.wait_github_state(&second, "success", T).await;
    wait_legacy_pods(&world, &ns, 2, &image(&second)).await;
    world.wait_phase("legacy-pr-1", Phase::Ready, T).await;
}

#[tokio::test]
async fn a_blueprint_of_configmaps_alone_fails_naming_the_blueprint() {
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: fast}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: flags}\ndata: {beta: 'true'}\n";
    let world = World::new("config-only", config, json!({})).await;
    assert_refused(
        &world,
        "blueprint refused: Blueprint config-only: spec.source: nothing to run: the source has no Deployment, StatefulSet, ReplicaSet, Job or CronJob (",
    )
    .await;
}

/// An upstream app as it ships: its own Namespace (enforcing `restricted`) and every object
/// naming it. The preview gets the objects in its own namespace, which enforces the stricter
/// level the Namespace asks for (never a looser one).
const SHIPS_ITS_NAMESPACE: &str = r"
apiVersion: v1
kind: Namespace
metadata:
  name: upstream
  labels:
    pod-security.kubernetes.io/enforce: restricted
    team: upstream
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: upstream}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: web
        image: ghcr.io/acme/web:1.0
        securityContext:
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: upstream}
spec:
  selector: {app: web}
  ports: [{port: 80}]
";

#[tokio::test]
async fn manifests_that_declare_their_namespace_clone_into_the_previews_own() {
    let world = World::with_source(
        "upstream",
        Source::Manifests(SHIPS_ITS_NAMESPACE),
        json!({}),
    )
    .await;
    let head = sha();
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(5), head.clone(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    world.wait_phase("upstream-pr-5", Phase::Ready, T).await;
    world.wait_github_state(&head, "success", T).await;

    let ns = world.namespace_of("upstream-pr-5");
    let namespace = Api::<Namespace>::all(world.client.clone())
        .get(&ns)
        .await
        .unwrap();
    let labels = namespace.labels();
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("restricted"),
        "the declared Namespace tightens the default baseline: {labels:?}"
    );
    assert!(
        !labels.contains_key("team"),
        "only Pod Security labels are kept"
    );
    let services: Api<Service> = Api::namespaced(world.client.clone(), &ns);
    assert!(services.get_opt("web").await.unwrap().is_some());
    assert!(
        !world.namespace_exists("upstream").await,
        "the Namespace object itself is not applied"
    );
}
