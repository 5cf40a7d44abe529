//! Other clusters, for the tests of previews placed outside Sandcastle's own: whole control
//! planes of their own (`kube-harness up`: etcd, kube-apiserver, controller-manager, scheduler,
//! kwok), started once per test process and shared by those tests, which take turns
//! ([`exclusive`]: one of them stops a cluster's API for a while). Each is registered the way an
//! admin would: `charts/sandcastle/files/target-cluster.yaml` applied in it, the token its
//! ServiceAccount gets, a cluster Secret in Sandcastle's namespace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{Scope, pinned_kind};
use kube::{Client, Config};
use serde_json::{Value, json};

use super::cluster::unique;
use super::eventually;

/// A control plane of its own.
#[derive(Debug, Clone)]
pub struct Extra {
    pub name: &'static str,
    pub dir: PathBuf,
    pid: u32,
}

/// The tests that use other clusters take turns: one stops a cluster's API meanwhile.
pub async fn exclusive() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

/// The control plane `name`, started on first use (this takes a while: its own etcd and
/// kube-apiserver).
pub async fn extra(name: &'static str) -> Extra {
    static STARTED: OnceLock<Mutex<BTreeMap<&'static str, Extra>>> = OnceLock::new();
    let started = STARTED.get_or_init(Mutex::default);
    if let Some(e) = started.lock().unwrap().get(name) {
        return e.clone();
    }
    let e = tokio::task::spawn_blocking(move || start(name))
        .await
        .expect("starting a control plane");
    started.lock().unwrap().insert(name, e.clone());
    e
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The built control plane binary (built by `scripts/kube-harness`, cached).
fn harness_binary() -> PathBuf {
    let out = std::process::Command::new(root().join("scripts/kube-harness"))
        .arg("path")
        .output()
        .expect("scripts/kube-harness runs");
    assert!(
        out.status.success(),
        "scripts/kube-harness path failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Start `kube-harness up` for `name` and wait until it is ready. The process is started from a
/// thread that lives as long as it, with `setpriv --pdeathsig`: when the test process ends, so
/// does the control plane (its supervisor stops its own children).
fn start(name: &'static str) -> Extra {
    let dir = std::env::temp_dir().join(unique(&format!("sandcastle-extra-{name}")));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = harness_binary();
    let stages = root().join("tests/kwok-stages");
    let (tx, rx) = std::sync::mpsc::channel();
    let log = dir.join("up.log");
    let d = dir.clone();
    std::thread::spawn(move || {
        let out = std::fs::File::create(&log).unwrap();
        let child = std::process::Command::new("setpriv")
            .args(["--pdeathsig", "SIGTERM", "--"])
            .arg(&bin)
            .arg("up")
            .arg("--dir")
            .arg(&d)
            .arg("--ready-file")
            .arg(d.join("ready"))
            .arg("--stages")
            .arg(&stages)
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn();
        match child {
            Ok(mut c) => {
                tx.send(Ok(c.id())).unwrap();
                let _ = c.wait();
            }
            Err(e) => tx.send(Err(e.to_string())).unwrap(),
        }
    });
    let pid = rx
        .recv()
        .unwrap()
        .unwrap_or_else(|e| panic!("setpriv (util-linux) and the control plane must start: {e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    while !dir.join("ready").exists() {
        let alive = Path::new(&format!("/proc/{pid}")).exists();
        if !alive || std::time::Instant::now() > deadline {
            let log = std::fs::read_to_string(dir.join("up.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "control plane {name} did not become ready ({}); last lines of its log:\n{}",
                if alive { "timed out" } else { "it exited" },
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Extra { name, dir, pid }
}

impl Extra {
    /// An admin's client (system:masters).
    pub async fn client(&self) -> Client {
        let kc = Kubeconfig::read_from(self.dir.join("kubeconfig")).expect("its kubeconfig");
        let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("a usable kubeconfig");
        Client::try_from(config).expect("a client")
    }

    /// A client for its API with bearer `token`.
    pub fn client_with_token(&self, token: &str) -> Client {
        let (server, ca) = self.server_and_ca();
        let mut config = Config::new(server.parse().expect("a URL"));
        config.root_cert = Some(vec![pem_der(&ca)]);
        config.auth_info.token = Some(token.to_owned().into());
        Client::try_from(config).expect("a client")
    }

    /// Its API's address and CA certificate (PEM).
    pub fn server_and_ca(&self) -> (String, Vec<u8>) {
        use base64::Engine as _;
        let kc = Kubeconfig::read_from(self.dir.join("kubeconfig")).expect("its kubeconfig");
        let cluster = kc.clusters[0].cluster.clone().expect("a cluster entry");
        let ca = base64::engine::general_purpose::STANDARD
            .decode(cluster.certificate_authority_data.expect("CA data"))
            .expect("base64 CA");
        (cluster.server.expect("a server"), ca)
    }

    fn signal(&self, sig: &str) {
        let ok = std::process::Command::new("kill")
            .args([sig, &self.pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(
            ok.success(),
            "signalling control plane {} failed",
            self.name
        );
    }

    fn restarts(&self) -> u32 {
        std::fs::read_to_string(self.dir.join("apiserver-restarts"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Stop its kube-apiserver and leave it stopped: the cluster is away.
    pub async fn stop_apiserver(&self) {
        let _ = std::fs::remove_file(self.dir.join("apiserver-down"));
        self.signal("-USR2");
        let down = self.dir.join("apiserver-down");
        eventually(
            &format!("kube-apiserver of {} stopped", self.name),
            Duration::from_secs(30),
            || async {
                if down.exists() {
                    Ok(())
                } else {
                    Err("stopping".to_owned())
                }
            },
        )
        .await;
    }

    /// Start its stopped kube-apiserver again; returns once it is ready.
    pub async fn start_apiserver(&self) {
        let before = self.restarts();
        self.signal("-USR1");
        eventually(
            &format!("kube-apiserver of {} back", self.name),
            Duration::from_secs(90),
            || async {
                if self.restarts() > before {
                    Ok(())
                } else {
                    Err("starting".to_owned())
                }
            },
        )
        .await;
    }

    /// Apply `target-cluster.yaml` of the chart (the documented access), then return the token
    /// its ServiceAccount was given.
    pub async fn documented_access(&self) -> String {
        let client = self.client().await;
        let yaml =
            std::fs::read_to_string(root().join("charts/sandcastle/files/target-cluster.yaml"))
                .expect("the chart's target-cluster.yaml");
        let docs = sandcastle::domain::plan::parse_manifests(&yaml).expect("it parses");
        apply(&client, &docs).await;
        let secrets: Api<Secret> = Api::namespaced(client, "sandcastle-target");
        eventually(
            "the ServiceAccount token Secret is filled",
            Duration::from_secs(60),
            || {
                let secrets = secrets.clone();
                async move {
                    let s = secrets
                        .get("sandcastle-token")
                        .await
                        .map_err(|e| e.to_string())?;
                    let token = s.data.unwrap_or_default().remove("token");
                    token
                        .map(|t| String::from_utf8(t.0).unwrap())
                        .ok_or_else(|| "no token yet".to_owned())
                }
            },
        )
        .await
    }

    /// The cluster Secret registering this control plane as `cluster` with `token`, with
    /// `annotations`.
    pub fn registration(&self, cluster: &str, token: &str, annotations: Value) -> Value {
        use base64::Engine as _;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let (server, ca) = self.server_and_ca();
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {
                "name": format!("cluster-{cluster}"),
                "labels": {"sandcastle.dev/cluster": cluster},
                "annotations": annotations,
            },
            "type": "Opaque",
            "data": {"server": b64(server.as_bytes()), "ca.crt": b64(&ca), "token": b64(token.as_bytes())},
        })
    }
}

/// Apply `docs` (namespaced or not) as an admin would with `kubectl apply`.
pub async fn apply(client: &Client, docs: &[Value]) {
    for doc in docs {
        let api_version = doc["apiVersion"].as_str().unwrap();
        let kind = doc["kind"].as_str().unwrap();
        let name = doc["metadata"]["name"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = pinned_kind(client, &gvk).await.expect("a served kind");
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Cluster => Api::all_with(client.clone(), &ar),
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                doc["metadata"]["namespace"].as_str().unwrap_or("default"),
                &ar,
            ),
        };
        api.patch(
            name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(doc),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
    }
}

/// The DER of the first certificate of a PEM bundle.
fn pem_der(pem: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    let text = String::from_utf8_lossy(pem);
    let body: String = text
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("a PEM certificate")
}
