//! One test's whole world: a Sandcastle namespace, a staging namespace holding the blueprint, the
//! GitHub stand-in with one installed repository, and a running Sandcastle (HTTP server and
//! controller) that deliveries are sent to over real HTTP.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use sandcastle::controller::Settings;
use sandcastle::crd::{self, Phase, PreviewEnvironment};
use sandcastle::domain::Secret;
use sandcastle::domain::clock::Clock;
use sandcastle::domain::{PrNumber, RepoName, Sha};
use sandcastle::github::client::{ClientSettings, GitHubApp};
use sandcastle::serve::{self, Parts, Running};
use sandcastle_fake_github::{
    Delivery, FakeConfig, FakeGitHub, TEST_APP_ID, TEST_APP_PRIVATE_KEY_PEM,
};
use serde_json::{Value, json};

use super::cluster::{self, TestNamespace, unique};

pub const SECRET: &str = "it's a test secret";
pub const INSTALLATION: u64 = 4242;

/// A fresh commit SHA.
pub fn sha() -> Sha {
    let bytes: [u8; 20] = rand::random();
    Sha::new(&hex::encode(bytes)).unwrap()
}

pub fn pr(n: u64) -> PrNumber {
    PrNumber::new(n).unwrap()
}

/// Apply every object into `ns` (server-side, one at a time, as `kubectl apply` would).
pub async fn load_objects(client: &Client, ns: &str, objects: &[Value]) {
    let resolver = sandcastle::k8s::apply::Resolver::new(client.clone());
    for doc in objects {
        let mut doc = doc.clone();
        doc["metadata"]["namespace"] = Value::from(ns);
        let params = PatchParams::apply("kubectl-client-side-apply").force();
        let api = resolver
            .api_for(ns, &doc)
            .await
            .expect("fixture kind is served");
        let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
        api.patch(&name, &params, &Patch::Apply(&doc))
            .await
            .unwrap_or_else(|e| panic!("applying {name}: {e}"));
    }
}

pub struct World {
    pub client: Client,
    pub home: TestNamespace,
    pub staging: TestNamespace,
    pub gh: FakeGitHub,
    pub repo: RepoName,
    /// Prefix of this test's preview namespaces (keeps parallel tests apart).
    pub prefix: String,
    pub clock: Clock,
    /// Changes to the parts every start uses (settings for lifecycle tests).
    pub configure: Option<fn(&mut Parts)>,
    /// How HTTP readiness probes reach previews (e.g. a test server through `connect-to`).
    pub probe_via: Option<sandcastle::probe::ProbeVia>,
    /// People sign in to the dashboard with the stand-in's OAuth.
    pub sign_in: bool,
    /// Listen here, and say so as the public URL (sign-in sends people back to it); `None`: any
    /// free port.
    pub listen: Option<SocketAddr>,
    /// Wake on visit: the wake listener's address, also the target stopped previews route to.
    pub wake: Option<SocketAddr>,
    pub sandcastle: Option<Running>,
    http: HttpClient<HttpConnector, Full<Bytes>>,
}

/// Where a world's Blueprint takes its objects from.
pub enum Source<'a> {
    /// The staging namespace, loaded with these objects first.
    Staging(&'a [Value]),
    /// A manifests ConfigMap in Sandcastle's namespace holding this YAML (the staging namespace
    /// stays empty).
    Manifests(&'a str),
    /// A chart or overlay in the repository (`{"helm": {...}}` or `{"kustomize": {...}}`), its
    /// files put on the stand-in by the test at each commit; Helm and Kustomize as
    /// `scripts/test` builds them.
    Rendered(Value),
}

/// `helm` and `kustomize` as `scripts/test` builds them, or a clear failure.
pub fn render_tools() -> (String, String) {
    let tool = |var: &str, script: &str| {
        std::env::var(var).unwrap_or_else(|_| {
            panic!(
                "{var} is not set: run the tests with scripts/test, or set it to `{script} path`"
            )
        })
    };
    (
        tool("SANDCASTLE_HELM", "scripts/helm"),
        tool("SANDCASTLE_KUSTOMIZE", "scripts/kustomize"),
    )
}

impl World {
    /// A world whose Blueprint `name` clones the staging namespace, loaded with `yaml`, for `repo`.
    pub async fn new(name: &str, yaml: &str, blueprint_extra: Value) -> Self {
        let mut world = Self::unstarted(name, yaml, blueprint_extra).await;
        world.start().await;
        world
    }

    /// The same world with Sandcastle not started yet (set `clock` and `configure`, then
    /// [`World::start`]).
    pub async fn unstarted(name: &str, yaml: &str, blueprint_extra: Value) -> Self {
        let objects = sandcastle::domain::plan::parse_manifests(yaml).expect("fixture parses");
        Self::unstarted_with_source(name, Source::Staging(&objects), blueprint_extra).await
    }

    /// A world whose Blueprint `name` clones `source`, for `acme/<name>`.
    pub async fn with_source(name: &str, source: Source<'_>, blueprint_extra: Value) -> Self {
        let mut world = Self::unstarted_with_source(name, source, blueprint_extra).await;
        world.start().await;
        world
    }

    /// [`World::with_source`] with Sandcastle not started yet.
    pub async fn unstarted_with_source(
        name: &str,
        source: Source<'_>,
        blueprint_extra: Value,
    ) -> Self {
        {
            use tracing_subscriber::Layer as _;
            use tracing_subscriber::layer::SubscriberExt as _;
            use tracing_subscriber::util::SubscriberInitExt as _;
            let filter = tracing_subscriber::EnvFilter::new(
                std::env::var("SANDCASTLE_TEST_LOG").unwrap_or_else(|_| "sandcastle=debug".into()),
            );
            let audit = tracing_subscriber::filter::Targets::new()
                .with_target("audit", tracing::Level::INFO);
            let _ = tracing_subscriber::registry()
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_test_writer()
                        .with_filter(filter),
                )
                .with(super::audit::Capture.with_filter(audit))
                .try_init();
        }
        let client = cluster::client().await;
        sandcastle::k8s::crd_install::install(&client, Duration::from_secs(30))
            .await
            .expect("CRDs install");
        let home = TestNamespace::new(&client, "it-home").await;
        let staging = TestNamespace::new(&client, "it-staging").await;
        let source = match source {
            Source::Staging(objects) => {
                load_objects(&client, &staging.name, objects).await;
                json!({"namespace": staging.name})
            }
            Source::Manifests(yaml) => {
                let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("{name}-manifests")}, "data": {"manifests.yaml": yaml}});
                Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
                    client.clone(),
                    &home.name,
                )
                .patch(
                    &format!("{name}-manifests"),
                    &PatchParams::apply("test").force(),
                    &Patch::Apply(&cm),
                )
                .await
                .expect("manifests ConfigMap accepted");
                json!({"manifests": {"configMap": format!("{name}-manifests")}})
            }
            Source::Rendered(source) => {
                render_tools();
                source
            }
        };

        let repo = RepoName::new(&format!("acme/{name}")).unwrap();
        let mut spec = json!({
            "source": source,
            "repositories": [repo.as_str()],
            "host": "{{pr}}-{{repo}}.preview.example.com",
            "readinessTimeout": "2m",
        });
        if let (Value::Object(s), Value::Object(extra)) = (&mut spec, blueprint_extra) {
            s.extend(extra);
        }
        let bp = json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint", "metadata": {"name": name}, "spec": spec});
        let api: Api<crd::Blueprint> = Api::namespaced(client.clone(), &home.name);
        api.patch(
            name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(&bp),
        )
        .await
        .expect("Blueprint accepted");

        let gh = FakeGitHub::start(FakeConfig::test_app())
            .await
            .expect("GitHub stand-in starts");
        gh.add_installation(INSTALLATION, repo.owner());
        gh.add_repo(INSTALLATION, &repo);

        let prefix = unique("t");
        Self {
            client,
            home,
            staging,
            gh,
            repo,
            prefix,
            clock: Clock::system(),
            configure: None,
            probe_via: None,
            sign_in: false,
            listen: None,
            wake: None,
            sandcastle: None,
            http: HttpClient::builder(TokioExecutor::new()).build_http(),
        }
    }

    pub fn settings(&self) -> Settings {
        let mut s = Settings::for_namespace(&self.home.name);
        s.namespace_prefix = self.prefix.clone();
        s.progress_interval = Duration::from_millis(500);
        // Registered clusters (tests/it/clusters.rs) are seen down or back within a second.
        s.cluster_check_interval = Duration::from_secs(1);
        if let Some(via) = &self.probe_via {
            s.probe_via = via.clone();
        }
        if let (Ok(helm), Ok(kustomize)) = (
            std::env::var("SANDCASTLE_HELM"),
            std::env::var("SANDCASTLE_KUSTOMIZE"),
        ) {
            s.render.helm = helm.into();
            s.render.kustomize = kustomize.into();
        }
        if let Some(addr) = self.listen {
            s.public_url = format!("http://{addr}");
        }
        if let Some(wake) = self.wake {
            s.wake = Some(format!("localhost:{}", wake.port()).parse().unwrap());
        }
        if self.sign_in {
            let (client_id, secret) = self.gh.oauth_client();
            s.oauth = Some(sandcastle::github::user::OAuthApp {
                client_id,
                client_secret: Secret::new(secret),
                web_url: self.gh.url().to_owned(),
                api_url: self.gh.url().to_owned(),
            });
        }
        s
    }

    pub fn parts(&self, client: Client) -> Parts {
        let settings = ClientSettings {
            backoff_base: Duration::from_millis(20),
            backoff_cap: Duration::from_millis(200),
            max_wait: Duration::from_secs(3),
            ..ClientSettings::default()
        };
        let github = GitHubApp::new(
            TEST_APP_ID,
            &Secret::new(TEST_APP_PRIVATE_KEY_PEM),
            self.gh.url(),
            settings,
        )
        .expect("GitHub client");
        let mut parts = Parts {
            client,
            github,
            settings: self.settings(),
            webhook_secrets: vec![Secret::new(SECRET)],
            listen: self
                .listen
                .unwrap_or_else(|| "127.0.0.1:0".parse().unwrap()),
            wake_listen: self.wake,
            clock: self.clock.clone(),
            controller: true,
        };
        if let Some(configure) = self.configure {
            configure(&mut parts);
        }
        parts
    }

    /// Listen on a free port of its own from now on, named as Sandcastle's public URL.
    pub fn listen_on_a_port_of_its_own(&mut self) -> SocketAddr {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        self.listen = Some(port);
        port
    }

    /// Sandcastle's gate on its wake (edge) listener, as the ingress controller on this host
    /// reaches it (`http://127.0.0.1:PORT`), for `access: signedIn` previews; with the wake
    /// listener that needs.
    pub fn gate_on_the_edge_listener(&mut self) {
        self.wake_on_visit();
        self.configure = Some(|parts| {
            let edge = parts.wake_listen.expect("an edge listener");
            parts.settings.gate = Some(sandcastle::domain::edge::Gate {
                provider: sandcastle::domain::edge::GateProvider::Traefik,
                address: format!("http://127.0.0.1:{}", edge.port()),
            });
        });
    }

    /// Wake on visit from now on: a wake listener on a free port of its own, which stopped
    /// previews' Ingresses route to (as `localhost:PORT`).
    pub fn wake_on_visit(&mut self) -> SocketAddr {
        self.wake_on_visit_at("127.0.0.1".parse().unwrap())
    }

    /// [`World::wake_on_visit`] on a free port of `ip`: an address the real tier's pods and
    /// Traefik reach, where a Service's EndpointSlice may name it (never a loopback one).
    pub fn wake_on_visit_at(&mut self, ip: std::net::IpAddr) -> SocketAddr {
        let at = std::net::TcpListener::bind(SocketAddr::new(ip, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port");
        self.wake = Some(at);
        at
    }

    /// Open pull request `n` at a fresh commit and deliver it; returns the commit.
    pub async fn open(&self, n: u64) -> Sha {
        let head = sha();
        let d = self.gh.open_pull_request(
            &self.repo,
            sandcastle_fake_github::PrSpec::new(pr(n), head.clone(), &format!("b{n}")),
        );
        let (status, body) = self.deliver(&d).await;
        assert_eq!(status, 200, "{body}");
        head
    }

    /// Start (or restart) Sandcastle.
    pub async fn start(&mut self) {
        self.start_as(self.client.clone()).await;
    }

    /// Start Sandcastle talking to Kubernetes through `client` (e.g. as a ServiceAccount).
    pub async fn start_as(&mut self, client: Client) {
        let running = serve::start(self.parts(client))
            .await
            .expect("Sandcastle starts");
        self.sandcastle = Some(running);
    }

    /// Restart Sandcastle on a manual clock standing at the current time; returns the clock.
    /// Call it before anything is delivered.
    pub async fn use_manual_clock(&mut self) -> Clock {
        if let Some(running) = self.sandcastle.take() {
            // Not `shutdown`: the controller's graceful shutdown does not return when asked
            // right after start-up (seen with kube 5's Controller); nothing is in flight yet.
            running.abort();
        }
        self.clock = Clock::manual(jiff::Timestamp::now());
        self.start().await;
        self.clock.clone()
    }

    /// Wait until the Kubernetes Events on preview `name` (as `kubectl describe` lists them)
    /// include every reason in `reasons`; returns their reasons and notes, oldest first.
    pub async fn wait_event_reasons(&self, name: &str, reasons: &[&str]) -> Vec<(String, String)> {
        let api: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.client.clone(), &self.home.name);
        let pe = self.previews().get(name).await.expect("the preview exists");
        let uid = pe.metadata.uid.clone();
        crate::support::eventually(
            &format!("Events on {name} say {reasons:?}"),
            Duration::from_secs(60),
            || {
                let api = api.clone();
                let uid = uid.clone();
                async move {
                    let mut events: Vec<_> = api
                        .list(&Default::default())
                        .await
                        .map_err(|e| e.to_string())?
                        .items
                        .into_iter()
                        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.clone()) == uid)
                        .collect();
                    events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
                    let found: Vec<(String, String)> = events
                        .into_iter()
                        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
                        .collect();
                    if reasons.iter().all(|r| found.iter().any(|(f, _)| f == r)) {
                        Ok(found)
                    } else {
                        Err(format!("{found:?}"))
                    }
                }
            },
        )
        .await
    }

    pub fn addr(&self) -> SocketAddr {
        self.sandcastle
            .as_ref()
            .expect("Sandcastle is running")
            .addr
    }

    /// POST a delivery, signed with the world's secret; returns the webhook's status and JSON
    /// body as it answered (a pull request event: `202 {"status": "recorded", "record": …}`).
    pub async fn post_delivery(&self, d: &Delivery) -> (u16, Value) {
        self.post(d.body.clone(), d.signed_headers(SECRET)).await
    }

    /// POST a delivery and, when the webhook recorded it (a pull request event), wait until the
    /// controller has carried it out; returns what it came to in the shape the tests read:
    /// `200 {"status": "accepted"|"duplicate", "previews": [{"preview", "result"}]}` for
    /// previews written, `202 {"status": "ignored", "reason"}` when no preview was written
    /// (the first Blueprint passed over, and why), `503` when the event failed. Any other answer
    /// (a command, a check run, a refusal, a redelivery) is returned as the webhook gave it.
    pub async fn deliver(&self, d: &Delivery) -> (u16, Value) {
        let (status, body) = self.post_delivery(d).await;
        if body["status"] != "recorded" {
            return (status, body);
        }
        let record = body["record"].as_str().expect("a recorded event is named");
        let done = self.event_outcome(record).await;
        let st = done.status.unwrap_or_default();
        if st.state != Some(sandcastle::crd::EventState::Done) {
            return (503, json!({"status": "failed", "message": st.message}));
        }
        let outcome = st.outcome.unwrap_or_default();
        if outcome.previews.is_empty() {
            let reason = outcome.skipped.first().map_or_else(
                || "nothing to do for this action".to_owned(),
                |s| format!("{}: {}", s.blueprint, s.reason),
            );
            return (202, json!({"status": "ignored", "reason": reason}));
        }
        let duplicate = outcome.previews.iter().all(|p| p.result == "duplicate");
        let status = if duplicate { "duplicate" } else { "accepted" };
        (200, json!({"status": status, "previews": outcome.previews}))
    }

    /// The pull request event recorded as `record`, once the controller finished it.
    pub async fn event_outcome(&self, record: &str) -> sandcastle::crd::PreviewEvent {
        let api: Api<sandcastle::crd::PreviewEvent> =
            Api::namespaced(self.client.clone(), &self.home.name);
        crate::support::eventually(
            &format!("pull request event {record} carried out"),
            Duration::from_secs(60),
            || async {
                let e = api.get(record).await.map_err(|e| e.to_string())?;
                if e.status.as_ref().is_some_and(|s| s.finished_at.is_some()) {
                    Ok(e)
                } else {
                    Err(format!("{:?}", e.status))
                }
            },
        )
        .await
    }

    /// POST raw bytes with the given headers to the webhook endpoint of Sandcastle at `addr`.
    pub async fn post_to(
        &self,
        addr: SocketAddr,
        body: Vec<u8>,
        headers: Vec<(&'static str, String)>,
    ) -> (u16, Value) {
        self.request(http::Method::POST, addr, "/github/webhook", body, headers)
            .await
    }

    /// GET `path` from Sandcastle at `addr`.
    pub async fn get_from(&self, addr: SocketAddr, path: &str) -> (u16, Value) {
        self.request(http::Method::GET, addr, path, Vec::new(), Vec::new())
            .await
    }

    /// GET `path` from the running Sandcastle with `headers`; returns status, content type and
    /// the body as text (for what is not JSON, like `/metrics`).
    pub async fn get_text(
        &self,
        path: &str,
        headers: Vec<(&'static str, String)>,
    ) -> (u16, String, String) {
        let (status, content_type, bytes) = self
            .request_raw(http::Method::GET, self.addr(), path, Vec::new(), headers)
            .await;
        (
            status,
            content_type,
            String::from_utf8_lossy(&bytes).into_owned(),
        )
    }

    async fn request(
        &self,
        method: http::Method,
        addr: SocketAddr,
        path: &str,
        body: Vec<u8>,
        headers: Vec<(&'static str, String)>,
    ) -> (u16, Value) {
        let (status, _, bytes) = self.request_raw(method, addr, path, body, headers).await;
        // Status 0: nothing answered (not listening yet, or gone); the body says why.
        if status == 0 {
            return (0, json!({"connection": String::from_utf8_lossy(&bytes)}));
        }
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// Status (0 when nothing answered, the error then in the body), content type and body.
    async fn request_raw(
        &self,
        method: http::Method,
        addr: SocketAddr,
        path: &str,
        body: Vec<u8>,
        headers: Vec<(&'static str, String)>,
    ) -> (u16, String, Bytes) {
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("http://{addr}{path}"));
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let resp = self
            .http
            .request(req.body(Full::new(Bytes::from(body))).unwrap())
            .await;
        let resp = match resp {
            Ok(r) => r,
            Err(e) => return (0, String::new(), Bytes::from(e.to_string())),
        };
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        (status, content_type, bytes)
    }

    pub async fn post(&self, body: Vec<u8>, headers: Vec<(&'static str, String)>) -> (u16, Value) {
        self.post_to(self.addr(), body, headers).await
    }

    pub fn previews(&self) -> Api<PreviewEnvironment> {
        Api::namespaced(self.client.clone(), &self.home.name)
    }

    /// The preview namespace for preview `name`.
    pub fn namespace_of(&self, preview: &str) -> String {
        format!("{}-{preview}", self.prefix)
    }

    /// Wait until preview `name` is in `phase`; returns it.
    pub async fn wait_phase(
        &self,
        name: &str,
        phase: Phase,
        timeout: Duration,
    ) -> PreviewEnvironment {
        let api = self.previews();
        let want = Some(phase);
        cluster::wait_for(
            &api,
            name,
            &format!("preview {name} {phase:?}"),
            timeout,
            move |pe: Option<&PreviewEnvironment>| {
                pe.and_then(|p| p.status.as_ref())
                    .is_some_and(|s| s.phase == want)
            },
        )
        .await
        .expect("preview exists")
    }

    /// Wait until the GitHub deployment for `sha` has `state` as its latest status.
    pub async fn wait_github_state(&self, sha: &Sha, state: &str, timeout: Duration) {
        let gh = self.gh.clone();
        let repo = self.repo.clone();
        let sha = sha.clone();
        let state = state.to_owned();
        let previews = self.previews();
        cluster::eventually(
            &format!("GitHub deployment of {} is {state}", sha.short()),
            timeout,
            || {
                let deployments = gh.deployments(&repo);
                let (sha, state, previews) = (sha.clone(), state.clone(), previews.clone());
                async move {
                    let statuses: Vec<_> = previews
                        .list(&ListParams::default())
                        .await
                        .map(|l| l.items.into_iter().map(|p| p.status).collect())
                        .unwrap_or_default();
                    let d = deployments.iter().find(|d| d.sha == sha).ok_or(format!(
                        "no deployment for that commit yet; previews: {statuses:?}"
                    ))?;
                    match d.latest_state() {
                        Some(s) if s == state => Ok(()),
                        other => Err(format!("latest state {other:?}; previews: {statuses:#?}")),
                    }
                }
            },
        )
        .await;
    }

    /// Wait until the `/preview` command recorded as `record` is carried out; returns what it
    /// came to as `{"status": "accepted" | "refused" | "failed", "command", "previews"}`.
    pub async fn command_outcome(&self, record: &str) -> Value {
        let api: Api<sandcastle::crd::PreviewCommand> =
            Api::namespaced(self.client.clone(), &self.home.name);
        let done = cluster::wait_for(
            &api,
            record,
            &format!("command {record} carried out"),
            Duration::from_secs(60),
            |c: Option<&sandcastle::crd::PreviewCommand>| {
                c.and_then(|c| c.status.as_ref())
                    .is_some_and(|s| s.finished_at.is_some())
            },
        )
        .await
        .expect("the command record exists");
        let st = done.status.unwrap_or_default();
        let outcome = st.outcome.unwrap_or_default();
        let status = match st.state {
            Some(sandcastle::crd::CommandState::Done) => "accepted",
            Some(sandcastle::crd::CommandState::Refused) => "refused",
            other => panic!("command {record} ended {other:?}: {:?}", st.message),
        };
        json!({"status": status, "command": outcome.command, "previews": outcome.previews})
    }

    pub async fn namespace_exists(&self, name: &str) -> bool {
        Api::<Namespace>::all(self.client.clone())
            .get_opt(name)
            .await
            .unwrap()
            .is_some()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(running) = self.sandcastle.take() {
            running.abort();
        }
        self.gh.shutdown();
        let home = self.home.name.clone();
        let prefix = self.prefix.clone();
        // Clean up on a runtime of its own: the test's runtime is ending.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let client = Client::try_from(cluster::config().await).unwrap();
                let previews: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);
                if let Ok(list) = previews.list(&ListParams::default()).await {
                    for pe in list {
                        let patch = json!({"metadata": {"finalizers": null}});
                        let _ = previews
                            .patch(
                                &pe.name_any(),
                                &PatchParams::default(),
                                &Patch::Merge(&patch),
                            )
                            .await;
                    }
                }
                let namespaces: Api<Namespace> = Api::all(client);
                if let Ok(list) = namespaces
                    .list(&ListParams::default().labels("app.kubernetes.io/managed-by=sandcastle"))
                    .await
                {
                    for ns in list
                        .into_iter()
                        .filter(|n| n.name_any().starts_with(&prefix))
                    {
                        let _ = namespaces
                            .delete(&ns.name_any(), &DeleteParams::background())
                            .await;
                    }
                }
            });
        })
        .join();
    }
}
