//! What a real-tier test reaches besides the control plane: Traefik's entry point, the test app
//! built as a given commit, containerd's containers, the node's kube-proxy rules and the kubelet's
//! pod directories; and a world whose Blueprint is the test app with Redis and a seed Job.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use sandcastle::domain::Sha;
use sandcastle::probe::ProbeVia;
use serde_json::{Value, json};

use crate::support::world::{World, pr};

pub const T: Duration = Duration::from_secs(120);

/// The test app with Redis and a seed Job (`crates/demo/src/testapp.yaml`).
pub const REAL_APP: &str = sandcastle_demo::real::TESTAPP_YAML;

/// The real tier of this run, from the lines `scripts/kube-harness start --real` prints.
pub struct RealTier {
    /// Traefik's entry point for every preview host (`127.0.0.1:PORT`).
    pub ingress: String,
    /// Traefik's TLS entry point (`127.0.0.1:PORT`; send the host as SNI).
    pub https: String,
    harness_dir: PathBuf,
    ctr: String,
    containerd: String,
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: these tests need the real tier's lines (run `scripts/test`, which \
             starts it, or export what `scripts/kube-harness start --real` prints, with \
             SANDCASTLE_REAL_HARNESS_DIR set to its SANDCASTLE_HARNESS_DIR)"
        )
    })
}

pub fn tier() -> RealTier {
    RealTier {
        ingress: var("SANDCASTLE_INGRESS_HTTP"),
        https: var("SANDCASTLE_INGRESS_HTTPS"),
        harness_dir: PathBuf::from(
            std::env::var("SANDCASTLE_REAL_HARNESS_DIR")
                .unwrap_or_else(|_| var("SANDCASTLE_HARNESS_DIR")),
        ),
        ctr: var("SANDCASTLE_CTR"),
        containerd: var("SANDCASTLE_CONTAINERD_ADDRESS"),
    }
}

/// An answer through Traefik: its status, `X-Commit`, body.
#[derive(Debug)]
pub struct Page {
    pub status: u16,
    pub commit: Option<String>,
    pub body: String,
}

impl Page {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

impl RealTier {
    /// The real tier's control plane directory.
    pub fn harness_dir(&self) -> &str {
        self.harness_dir.to_str().expect("a UTF-8 path")
    }

    fn harness(&self, args: &[&str]) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kube-harness");
        let out = Command::new(script)
            .args(args)
            .env("SANDCASTLE_HARNESS_DIR", &self.harness_dir)
            .output()
            .expect("scripts/kube-harness runs");
        assert!(
            out.status.success(),
            "scripts/kube-harness {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Build the test app as commit `sha` (its own image, serving that commit) and import it as
    /// `sandcastle.test/app:<sha>`, as a CI would push the pull request's image.
    pub fn image_for(&self, sha: &Sha) {
        self.harness(&["image-commit", sha.as_str()]);
    }

    /// Give image `from` the reference `to` as well (an image that serves another commit).
    pub fn tag(&self, from: &str, to: &str) {
        self.harness(&["image-tag", from, to]);
    }

    /// Readiness probes go through Traefik with the preview's host, as a visitor's request does.
    pub fn probe_via(&self) -> ProbeVia {
        ProbeVia::ConnectTo(self.ingress.clone())
    }

    /// GET `path` of `host` through Traefik.
    pub async fn get(&self, host: &str, path: &str) -> Page {
        self.get_as(host, path, "sandcastle-real-tests").await
    }

    /// GET `path` of `host` through Traefik with this `User-Agent` (the test app logs it).
    pub async fn get_as(&self, host: &str, path: &str, agent: &str) -> Page {
        let r = reqwest::Client::new()
            .get(format!("http://{}{path}", self.ingress))
            .header("host", host)
            .header("user-agent", agent)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .expect("Traefik answers");
        let status = r.status().as_u16();
        let commit = r
            .headers()
            .get("x-commit")
            .map(|v| v.to_str().unwrap().to_owned());
        Page {
            status,
            commit,
            body: r.text().await.unwrap_or_default(),
        }
    }

    /// The containers containerd has for pods of namespace `ns`.
    pub fn containers_of(&self, ns: &str) -> Vec<String> {
        self.containers(&format!("labels.\"io.kubernetes.pod.namespace\"=={ns}"))
    }

    /// The containers containerd has for pod `pod` of namespace `ns`.
    pub fn containers_of_pod(&self, ns: &str, pod: &str) -> Vec<String> {
        self.containers(&format!(
            "labels.\"io.kubernetes.pod.namespace\"=={ns},labels.\"io.kubernetes.pod.name\"=={pod}"
        ))
    }

    fn containers(&self, filter: &str) -> Vec<String> {
        let out = Command::new(&self.ctr)
            .args(["--address", &self.containerd, "-n", "k8s.io"])
            .args(["containers", "ls", "-q", filter])
            .output()
            .expect("ctr runs");
        assert!(
            out.status.success(),
            "ctr containers ls: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The lines of the node's nftables rules (kube-proxy's) that name namespace `ns`.
    pub fn service_rules_of(&self, ns: &str) -> Vec<String> {
        let out = Command::new("nsenter")
            .args(["--target", &self.node_pid().to_string(), "--net", "--"])
            .args(["nft", "list", "ruleset"])
            .output()
            .expect("nsenter runs");
        assert!(
            out.status.success(),
            "nft list ruleset in the node: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let needle = format!("{ns}/");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains(&needle))
            .map(str::to_owned)
            .collect()
    }

    /// The host PID of the node's first process (`kube-harness node-init` of this tier).
    fn node_pid(&self) -> u32 {
        let dir = self.harness_dir.to_string_lossy().into_owned();
        std::fs::read_dir("/proc")
            .expect("/proc")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let args: Vec<String> = cmdline
                    .split(|b| *b == 0)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                args.get(1).is_some_and(|a| a == "node-init")
                    && args.get(2).is_some_and(|a| a.starts_with(&dir))
            })
            .unwrap_or_else(|| panic!("no node-init process of the real tier in {dir}"))
    }

    /// The kubelet's directory of the pod with this UID (its volumes live there).
    pub fn pod_dir(&self, uid: &str) -> PathBuf {
        self.harness_dir.join("node/kubelet/pods").join(uid)
    }
}

/// The Blueprint settings every real-tier world uses: the test app's image follows the pull
/// request's commit, Service `app` is the primary one, and the preview is Ready only once its
/// page answers with the commit (`X-Commit`), through Traefik.
pub fn blueprint(extra: Value) -> Value {
    let mut spec = json!({
        "images": [{"repository": "sandcastle.test/app", "tag": "{{sha}}"}],
        "primaryService": "app",
        "host": "{{pr}}-{{repo}}.preview.localhost",
        "readiness": {"http": {"path": "/healthz", "interval": "1s", "commit": {"header": "X-Commit"}}},
    });
    if let (Value::Object(s), Value::Object(e)) = (&mut spec, extra) {
        s.extend(e);
    }
    spec
}

/// A started world cloning [`REAL_APP`] on the real tier.
pub async fn world(tier: &RealTier, name: &str, extra: Value) -> World {
    world_of(tier, name, REAL_APP, extra).await
}

/// A started world cloning `yaml` on the real tier, with [`blueprint`]'s settings.
pub async fn world_of(tier: &RealTier, name: &str, yaml: &str, extra: Value) -> World {
    let mut world = World::unstarted(name, yaml, blueprint(extra)).await;
    world.probe_via = Some(tier.probe_via());
    world.start().await;
    world
}

/// Open pull request `n` at `head`, whose image is already there, and deliver it.
pub async fn open_at(world: &World, n: u64, head: &Sha) {
    let d = world.gh.open_pull_request(
        &world.repo,
        sandcastle_fake_github::PrSpec::new(pr(n), head.clone(), &format!("b{n}")),
    );
    let (status, body) = world.deliver(&d).await;
    assert_eq!(status, 200, "{body}");
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

/// The pods of namespace `ns` with label `app=<app>`: name and UID.
pub async fn pods(world: &World, ns: &str, app: &str) -> Vec<(String, String)> {
    Api::<Pod>::namespaced(world.client.clone(), ns)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.metadata.uid.unwrap_or_default(),
            )
        })
        .collect()
}

/// A started world on the real tier whose Blueprint renders `source` (`{"helm": …}`) from the
/// repository, with [`blueprint`]'s settings; the test puts the chart on the stand-in.
pub async fn world_rendered(tier: &RealTier, name: &str, source: Value, extra: Value) -> World {
    let mut world = World::unstarted_with_source(
        name,
        crate::support::world::Source::Rendered(source),
        blueprint(extra),
    )
    .await;
    world.probe_via = Some(tier.probe_via());
    world.start().await;
    world
}
