//! Sandcastle's Helm chart run as Sandcastle really runs: its image assembled offline (the
//! release binary, its libraries, the pinned Helm and Kustomize, the CA roots, the non-root user,
//! as the Dockerfile's), installed by `helm install` with two replicas in a namespace that
//! enforces the `restricted` Pod Security level, on the real node: the read-only root
//! filesystem with its `/tmp`, the probes, in-cluster configuration, the Service, leader
//! election between the replicas and the webhook reached through the ingress (Traefik). A signed
//! `opened` sent through Traefik to the chart's webhook route gives a preview serving its
//! commit; the leader's pod killed during a second pull request's rollout, the other replica
//! finishes it with nothing lost or duplicated; `helm uninstall` leaves what README's
//! "Uninstalling" says.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use sandcastle::crd::{Phase, PreviewEnvironment};
use sandcastle::domain::Sha;
use sandcastle_fake_github::{FakeConfig, FakeGitHub, PrSpec, TEST_APP_PRIVATE_KEY_PEM};
use serde_json::{Value, json};

use crate::support::eventually;
use crate::support::world::{INSTALLATION, SECRET, World, pr, sha};
use crate::tier::{self, RealTier, T};

/// The host the chart's Ingress serves Sandcastle on.
const HOST: &str = "sandcastle.localhost";
/// The real tier's host link: pods reach the host's servers there.
const HOST_IP: &str = "10.98.0.1";

fn var(name: &str, how: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: {how}"))
}

/// Run a command; its stdout, or a panic with its stderr.
fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sandcastle's image (`sandcastle.test/sandcastle:dev`) made from the release binary
/// `scripts/test` built, and imported into the real node's containerd.
fn import_image(tier: &RealTier) {
    let binary = PathBuf::from(var(
        "SANDCASTLE_RELEASE_BINARY",
        "run scripts/test, or `cargo build --release -p sandcastle --bin sandcastle` and export \
         SANDCASTLE_RELEASE_BINARY=target/release/sandcastle",
    ));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kube-harness");
    run(Command::new(script)
        .args(["image-sandcastle", binary.to_str().unwrap()])
        .env("SANDCASTLE_HARNESS_DIR", tier.harness_dir()));
}

/// `helm ARGS` against the real tier.
fn helm(args: &[&str]) -> String {
    let kubeconfig = var(
        "SANDCASTLE_REAL_KUBECONFIG",
        "run scripts/test, which starts the real tier",
    );
    run(Command::new(var(
        "SANDCASTLE_HELM",
        "run scripts/test, or export SANDCASTLE_HELM=$(scripts/helm path)",
    ))
    .args(args)
    .env("KUBECONFIG", kubeconfig)
    .env(
        "HELM_CACHE_HOME",
        std::env::temp_dir().join("sandcastle-helm-cache"),
    )
    .env(
        "HELM_CONFIG_HOME",
        std::env::temp_dir().join("sandcastle-helm-config"),
    ))
}

/// The release, uninstalled when the test ends however it ends.
struct Release {
    name: String,
    namespace: String,
}

impl Drop for Release {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(|| {
            helm(&[
                "uninstall",
                &self.name,
                "--namespace",
                &self.namespace,
                "--ignore-not-found",
                "--wait",
            ])
        });
    }
}

/// POST `d` to Sandcastle's webhook through Traefik, by the chart's Ingress host.
async fn through_the_ingress(tier: &RealTier, d: &sandcastle_fake_github::Delivery) -> Value {
    let mut req = reqwest::Client::new()
        .post(format!("http://{}/github/webhook", tier.ingress))
        .header("host", HOST)
        .timeout(Duration::from_secs(20))
        .body(d.body.clone());
    for (k, v) in d.signed_headers(SECRET) {
        req = req.header(k, v);
    }
    let r = req.send().await.expect("Traefik answers");
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 202, "the webhook through the ingress: {body}");
    body
}

/// Open pull request `n` at a fresh commit whose image is there; returns the commit.
async fn open(tier: &RealTier, world: &World, n: u64) -> Sha {
    let head = sha();
    tier.image_for(&head);
    let d = world.gh.open_pull_request(
        &world.repo,
        PrSpec::new(pr(n), head.clone(), &format!("b{n}")),
    );
    let answered = through_the_ingress(tier, &d).await;
    assert_eq!(answered["status"], "recorded", "{answered}");
    head
}

/// The holder of the controller's Lease.
async fn leader(world: &World, lease: &str) -> Option<String> {
    Api::<Lease>::namespaced(world.client.clone(), &world.home.name)
        .get_opt(lease)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
}

/// The names of the release's running, ready pods.
async fn ready_pods(world: &World) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), &world.home.name);
    pods.list(&ListParams::default().labels("app.kubernetes.io/name=sandcastle"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// Wait until preview `name` is Ready and serves `head` through Traefik. The chart's replicas
/// probe the app at its Service (`probeVia: service`, as in a cluster where preview hosts do not
/// resolve), so Traefik's route may follow Ready by up to its 2 s rebuild.
async fn serves(tier: &RealTier, world: &World, name: &str, head: &Sha) {
    world.wait_phase(name, Phase::Ready, T).await;
    let host = tier::host_of(world, name).await;
    eventually(
        &format!("{name} serves {head} through Traefik"),
        T,
        || async {
            let page = tier.get(&host, "/api/info").await;
            if page.commit.as_deref() == Some(head.as_str()) {
                Ok(())
            } else {
                Err(format!("{page:?}"))
            }
        },
    )
    .await;
}

/// What GitHub was told for `head`: its deployments and each one's states in order.
fn told(world: &World, head: &Sha) -> Vec<Vec<String>> {
    world
        .gh
        .deployments(&world.repo)
        .into_iter()
        .filter(|d| d.sha == *head)
        .map(|d| d.statuses.iter().map(|s| s.state.clone()).collect())
        .collect()
}

#[tokio::test]
async fn the_chart_runs_sandcastle_as_pods_through_a_leader_failover() {
    let tier = tier::tier();
    import_image(&tier);
    let mut world = World::unstarted("chartpod", tier::REAL_APP, tier::blueprint(json!({}))).await;
    // The stand-in listens where the pods reach the host.
    let mut config = FakeConfig::test_app();
    config.listen = HOST_IP.parse().unwrap();
    world.gh.shutdown();
    world.gh = FakeGitHub::start(config)
        .await
        .expect("the stand-in starts");
    world.gh.add_installation(INSTALLATION, world.repo.owner());
    world.gh.add_repo(INSTALLATION, &world.repo);
    let ns = world.home.name.clone();

    // The release's namespace enforces `restricted`; the App's credentials are its Secret.
    let restricted = json!({"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest"}}});
    Api::<Namespace>::all(world.client.clone())
        .patch(&ns, &PatchParams::default(), &Patch::Merge(&restricted))
        .await
        .unwrap();
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sandcastle-github"},
        "stringData": {"app-id": world.gh.app_id().to_string(),
            "private-key.pem": TEST_APP_PRIVATE_KEY_PEM, "webhook-secret": SECRET},
    }))
    .unwrap();
    Api::<Secret>::namespaced(world.client.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let release = Release {
        name: "sc".to_owned(),
        namespace: ns.clone(),
    };
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/sandcastle");
    let sets = [
        "replicaCount=2".to_owned(),
        "image.repository=sandcastle.test/sandcastle".to_owned(),
        "image.tag=dev".to_owned(),
        "image.pullPolicy=Never".to_owned(),
        format!("github.apiUrl={}", world.gh.url()),
        format!("github.webUrl={}", world.gh.url()),
        format!("publicUrl=http://{HOST}"),
        "ingress.enabled=true".to_owned(),
        format!("ingress.host={HOST}"),
        format!("previews.namespacePrefix={}", world.prefix),
        "previews.probeVia=service".to_owned(),
        "previews.access=public".to_owned(),
        "previews.gateProvider=".to_owned(),
    ];
    let mut args = vec!["install", &release.name, chart, "--namespace", &ns];
    for s in &sets {
        args.extend(["--set", s.as_str()]);
    }
    args.extend(["--wait", "--timeout", "3m"]);
    helm(&args);
    let pods = ready_pods(&world).await;
    assert_eq!(pods.len(), 2, "two replicas are Ready: {pods:?}");
    // Traefik routes the chart's Ingress once it has rebuilt (within 2 s of the Ingress).
    eventually("the chart's Ingress routes to Sandcastle", T, || async {
        let page = tier.get(HOST, "/healthz").await;
        if page.status == 200 {
            Ok(())
        } else {
            Err(format!("{page:?}"))
        }
    })
    .await;
    let lease = "sc-sandcastle-leader";
    eventually("one replica leads", T, || async {
        match leader(&world, lease).await {
            Some(l) if pods.contains(&l) => Ok(l),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // A pull request opened: the delivery goes through Traefik to a replica, the leader rolls
    // the preview out, and it serves its commit.
    let first = open(&tier, &world, 1).await;
    serves(&tier, &world, "chartpod-pr-1", &first).await;

    // A second one; while it rolls out, the leader's pod is killed.
    let second = open(&tier, &world, 2).await;
    eventually("pull request 2's rollout is under way", T, || async {
        match world.previews().get_opt("chartpod-pr-2").await {
            Ok(Some(pe)) if pe.status.as_ref().and_then(|s| s.phase) == Some(Phase::Deploying) => {
                Ok(())
            }
            other => Err(format!("{:?}", other.map(|p| p.map(|p| p.status)))),
        }
    })
    .await;
    let pods_api: Api<Pod> = Api::namespaced(world.client.clone(), &ns);
    let leader_now = leader(&world, lease).await.expect("a leader");
    pods_api
        .delete(&leader_now, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let killed = std::time::Instant::now();
    serves(&tier, &world, "chartpod-pr-2", &second).await;
    println!(
        "pull request 2 served {:.1} s after its leader's pod was killed",
        killed.elapsed().as_secs_f64()
    );
    let next = leader(&world, lease).await.expect("a leader");
    assert_ne!(next, leader_now, "another replica took the lead");
    assert!(
        ready_pods(&world).await.contains(&next),
        "the new leader {next} is a running replica"
    );

    // Nothing lost or duplicated: one preview per pull request, one deployment per commit whose
    // states never repeat and end in success, one sticky comment each; the first still serves.
    let previews = world.previews().list(&ListParams::default()).await.unwrap();
    let mut names: Vec<String> = previews
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["chartpod-pr-1", "chartpod-pr-2"]);
    for (n, head) in [(1, &first), (2, &second)] {
        let deployments = told(&world, head);
        assert_eq!(deployments.len(), 1, "PR {n}: {deployments:?}");
        let states = &deployments[0];
        assert_eq!(
            states.last().map(String::as_str),
            Some("success"),
            "PR {n}: {states:?}"
        );
        assert!(
            states.windows(2).all(|w| w[0] != w[1]),
            "PR {n}: a state was posted twice: {states:?}"
        );
        let sticky = world
            .gh
            .comments(&world.repo, pr(n))
            .into_iter()
            .filter(|c| c.by_app && c.body.contains("<!-- sandcastle "))
            .count();
        assert_eq!(sticky, 1, "PR {n}: one sticky comment");
    }
    serves(&tier, &world, "chartpod-pr-1", &first).await;

    // `helm uninstall`: what Helm made goes; what Sandcastle made, and the CRDs, stay.
    helm(&["uninstall", "sc", "--namespace", &ns, "--wait"]);
    eventually("Sandcastle's pods are gone", T, || async {
        let left = pods_api
            .list(&ListParams::default().labels("app.kubernetes.io/name=sandcastle"))
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        if left == 0 {
            Ok(())
        } else {
            Err(format!("{left} pods"))
        }
    })
    .await;
    let cluster_roles: Api<ClusterRole> = Api::all(world.client.clone());
    assert!(
        cluster_roles
            .get_opt("sc-sandcastle")
            .await
            .unwrap()
            .is_none(),
        "the chart's ClusterRole goes with it"
    );
    let crds: Api<CustomResourceDefinition> = Api::all(world.client.clone());
    for crd in [
        "blueprints.sandcastle.dev",
        "previewenvironments.sandcastle.dev",
    ] {
        assert!(crds.get_opt(crd).await.unwrap().is_some(), "{crd} stays");
    }
    let left: Vec<PreviewEnvironment> = world
        .previews()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(left.len(), 2, "the previews stay, with their namespaces");
    for pe in &left {
        let preview_ns = pe
            .status
            .as_ref()
            .and_then(|s| s.namespace.clone())
            .unwrap();
        assert!(
            world.namespace_exists(&preview_ns).await,
            "{preview_ns} stays"
        );
    }
    assert!(
        leader(&world, lease).await.is_some(),
        "the Lease Sandcastle made stays (in the release's namespace)"
    );
    drop(release);
}
