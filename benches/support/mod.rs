//! Shared by the benchmarks: a kube client for the control plane the bench script started, and
//! percentile summaries.

#![allow(dead_code)]

pub mod agent;
pub mod burst;
pub mod floor;
pub mod timeline;

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::runtime::WatchStreamExt;
use serde_json::json;

/// A client from `KUBECONFIG` (set by `scripts/bench-*`); exits with instructions without one.
pub async fn client() -> Client {
    let Ok(path) = std::env::var("KUBECONFIG") else {
        eprintln!(
            "KUBECONFIG is not set: run this benchmark through scripts/bench-webhook or scripts/bench-lifecycle"
        );
        std::process::exit(2);
    };
    sandcastle::serve::kube_client(&sandcastle::cli::args::KubeArgs {
        kubeconfig: Some(path.into()),
        namespace: String::new(),
    })
    .await
    .expect("kube client")
}

pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{:06}", rand::random::<u32>() % 1_000_000)
}

/// p50, p90, p99 and max of `samples`, as milliseconds.
pub fn summary(samples: &mut [Duration]) -> String {
    samples.sort();
    let pick = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1000.0
    };
    format!(
        "n={:<4} p50={:>7.2} ms  p90={:>7.2} ms  p99={:>7.2} ms  max={:>7.2} ms",
        samples.len(),
        pick(0.5),
        pick(0.9),
        pick(0.99),
        pick(1.0)
    )
}

/// Fake nodes for `pods` pods at 110 per node, as kwok plays them (the harness has one).
pub async fn ensure_nodes(client: &kube::Client, pods: u64) {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    for i in 1..pods.div_ceil(100) {
        let name = format!("scale-node-{i}");
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64", "type": "kwok"},
            },
            "status": {
                "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"},
                "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"},
            },
        });
        nodes
            .patch(
                &name,
                &kube::api::PatchParams::apply("bench").force(),
                &kube::api::Patch::Apply(&node),
            )
            .await
            .unwrap();
    }
}

/// Wait (watching) until every preview in `names` is Ready; returns how long it took.
pub async fn all_ready(
    api: &kube::Api<sandcastle::crd::PreviewEnvironment>,
    names: &std::collections::HashSet<String>,
) -> Duration {
    let t = Instant::now();
    let mut left = names.clone();
    let mut events = kube::runtime::watcher(api.clone(), kube::runtime::watcher::Config::default())
        .applied_objects()
        .boxed();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1800);
    while !left.is_empty() {
        match tokio::time::timeout_at(deadline, events.try_next()).await {
            Ok(Ok(Some(pe))) => {
                if pe.status.as_ref().and_then(|s| s.phase) == Some(sandcastle::crd::Phase::Ready) {
                    left.remove(&kube::ResourceExt::name_any(&pe));
                }
            }
            Ok(Ok(None)) => panic!("watch ended"),
            Ok(Err(e)) => eprintln!("watch: {e}"),
            Err(_) => panic!("{} previews not Ready after 30 min", left.len()),
        }
    }
    t.elapsed()
}

/// A small application: configuration, one workload, its Service.
pub const SMALL_APP: &str = r"
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {GREETING: hello}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.example/web:main
        envFrom: [{configMapRef: {name: settings}}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
";

/// The value after `name` among the benchmark's arguments, or `default`.
pub fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A random commit.
pub fn random_sha() -> sandcastle::domain::Sha {
    sandcastle::domain::Sha::new(&hex::encode(rand::random::<[u8; 20]>())).unwrap()
}

/// The `sandcastle` binary benchmarked: `SANDCASTLE_BIN`, or the benchmark's own build.
pub fn sandcastle_bin() -> std::path::PathBuf {
    std::env::var_os("SANDCASTLE_BIN").map_or_else(
        || env!("CARGO_BIN_EXE_sandcastle-dev").into(),
        std::path::PathBuf::from,
    )
}

/// `sandcastle serve` (binary `bin`) for namespace `home`, without leader election,
/// resync or orphan grace, against a GitHub stand-in holding `repo` whose budget no benchmark
/// exhausts (this measures the Kubernetes side; GitHub's 5000 calls an hour would stop
/// reporting after about 500 opens). Returns the stand-in, the process, its port and key file.
pub async fn serve_with_stand_in(
    bin: &std::path::Path,
    home: &str,
    repo: &sandcastle::domain::RepoName,
    secret: &str,
) -> (
    sandcastle_fake_github::FakeGitHub,
    std::process::Child,
    u16,
    std::path::PathBuf,
) {
    use sandcastle_fake_github::{FakeConfig, FakeGitHub, TEST_APP_ID, TEST_APP_PRIVATE_KEY_PEM};
    let gh = FakeGitHub::start(FakeConfig::test_app()).await.unwrap();
    gh.add_installation(1, repo.owner());
    gh.add_repo(1, repo);
    gh.set_rate_limit(1, 1_000_000);
    let key = std::env::temp_dir().join(format!("{home}.pem"));
    std::fs::write(&key, TEST_APP_PRIVATE_KEY_PEM).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new(bin)
        .arg("serve")
        .env("KUBECONFIG", std::env::var("KUBECONFIG").unwrap())
        .env("SANDCASTLE_NAMESPACE", home)
        .env("SANDCASTLE_NAMESPACE_PREFIX", home)
        .env("SANDCASTLE_LISTEN", format!("127.0.0.1:{port}"))
        // The wake listener on a free port of its own (replicas run side by side).
        .env("SANDCASTLE_WAKE_LISTEN", "127.0.0.1:0")
        .env("SANDCASTLE_GITHUB_APP_ID", TEST_APP_ID.to_string())
        .env("SANDCASTLE_GITHUB_PRIVATE_KEY_FILE", &key)
        .env("SANDCASTLE_WEBHOOK_SECRET", secret)
        .env("SANDCASTLE_GITHUB_API_URL", gh.url())
        .env("SANDCASTLE_LEADER_ELECTION", "false")
        .env("SANDCASTLE_RESYNC_INTERVAL", "0")
        .env("SANDCASTLE_ORPHAN_GRACE", "0")
        .env("SANDCASTLE_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("sandcastle serve starts");
    (gh, child, port, key)
}

/// A `sandcastle serve` process, stopped when dropped (a benchmark that panics leaves none).
pub struct Serve(pub std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An HTTP client for `sandcastle serve` on loopback.
pub type Http = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::Full<bytes::Bytes>,
>;

/// POST delivery `d`, signed with `secret`, to the webhook of `sandcastle serve` on `port`;
/// the status it answered (its body read).
pub async fn post_delivery(
    http: &Http,
    port: u16,
    d: &sandcastle_fake_github::Delivery,
    secret: &str,
) -> u16 {
    use http_body_util::BodyExt as _;
    let mut req = http::Request::post(format!("http://127.0.0.1:{port}/github/webhook"));
    for (k, v) in d.signed_headers(secret) {
        req = req.header(k, v);
    }
    let body = http_body_util::Full::new(bytes::Bytes::from(d.body.clone()));
    let resp = http.request(req.body(body).unwrap()).await.unwrap();
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    status
}

/// Install the CRDs `bin` writes (`sandcastle crds`), so that a build benchmarked beside
/// another finds its own schema (its `/readyz` checks it).
pub async fn install_crds_of(client: &Client, bin: &std::path::Path) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, Patch, PatchParams};
    use kube::runtime::wait::{await_condition, conditions};
    let out = std::process::Command::new(bin)
        .arg("crds")
        .output()
        .expect("sandcastle crds runs");
    assert!(out.status.success(), "sandcastle crds failed");
    let yaml = String::from_utf8(out.stdout).expect("CRDs are UTF-8");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for doc in sandcastle::domain::plan::parse_manifests(&yaml).expect("CRDs parse") {
        let crd: CustomResourceDefinition = serde_json::from_value(doc).expect("a CRD");
        let name = kube::ResourceExt::name_any(&crd);
        api.patch(
            &name,
            &PatchParams::apply("sandcastle").force(),
            &Patch::Apply(&crd),
        )
        .await
        .expect("CRD applied");
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(api.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .expect("CRD established in time")
        .expect("CRD watch");
    }
}

/// Wait until `sandcastle serve` on `port` answers `/readyz` with 200 (a minute at most).
pub async fn wait_serving(http: &Http, port: u16) {
    let t = Instant::now();
    loop {
        let req = http::Request::get(format!("http://127.0.0.1:{port}/readyz"))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        if matches!(http.request(req).await, Ok(r) if r.status() == 200) {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "sandcastle not ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
