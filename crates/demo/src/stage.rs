//! The demo's stage, also used by the benchmarks: the guestbook example loaded into a staging
//! namespace as a user would, a Blueprint over it, a local GitHub stand-in with one installed
//! repository, and a running Sandcastle to send signed deliveries to, whose dashboard signs
//! people in through the stand-in's OAuth.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::real::{RealTier, TESTAPP_YAML};

use sandcastle::controller::Settings;
use sandcastle::crd;
use sandcastle::crd::Access;
use sandcastle::domain::RepoName;
use sandcastle::domain::Secret;
use sandcastle::domain::clock::Clock;
use sandcastle::domain::edge::{Gate, GateProvider};
use sandcastle::github::client::{ClientSettings, GitHubApp};
use sandcastle::github::user::OAuthApp;
use sandcastle::k8s::apply::Resolver;
use sandcastle::probe::ProbeVia;
use sandcastle::serve::{self, Parts, Running};
use sandcastle_fake_github::{
    Delivery, FakeConfig, FakeGitHub, TEST_APP_ID, TEST_APP_PRIVATE_KEY_PEM,
};

/// The webhook secret of the stage.
pub const SECRET: &str = "sandcastle-demo-webhook-secret";

/// An Ingress for the guestbook's frontend, so that previews have a URL.
const INGRESS: &str = r"
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: frontend
spec:
  rules:
  - host: guestbook.staging.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: frontend
            port:
              number: 80
";

/// The guestbook blueprint's YAML (the published example plus the Ingress).
pub fn guestbook_yaml() -> anyhow::Result<String> {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("fixtures/blueprints/k8s-guestbook/guestbook-all-in-one.yaml");
    Ok(format!(
        "{}\n---\n{INGRESS}",
        std::fs::read_to_string(path)?
    ))
}

/// Apply every document of `yaml` into `ns` with server-side apply, as `kubectl apply` would.
pub async fn load(client: &Client, ns: &str, yaml: &str) -> anyhow::Result<usize> {
    let resolver = Resolver::new(client.clone());
    let docs = sandcastle::domain::plan::parse_manifests(yaml)?;
    for doc in &docs {
        let api: Api<DynamicObject> = resolver.api_for(ns, doc).await?;
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        api.patch(
            name,
            &PatchParams::apply("kubectl").force(),
            &Patch::Apply(doc),
        )
        .await?;
    }
    Ok(docs.len())
}

pub async fn ensure_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    api.patch(
        name,
        &PatchParams::apply("sandcastle-demo").force(),
        &Patch::Apply(&ns),
    )
    .await?;
    Ok(())
}

/// Everything set up and running.
#[derive(Debug)]
pub struct Stage {
    pub gh: FakeGitHub,
    pub repo: RepoName,
    /// The Blueprint's name (previews are `<blueprint>-pr-<n>`).
    pub blueprint: String,
    /// The Deployment whose image follows the pull request's commit.
    pub app: String,
    /// The real tier the stage runs on (`sandcastle demo --real`), if any.
    pub real: Option<RealTier>,
    pub running: Running,
    /// Objects loaded into the staging namespace.
    pub objects: usize,
    http: HttpClient<HttpConnector, Full<Bytes>>,
}

impl Stage {
    /// Load the guestbook into `staging`, make Blueprint `guestbook` in `home` for
    /// `acme/guestbook`, start the GitHub stand-in and Sandcastle (on `port`, 0 for any; with or
    /// without the controller).
    pub async fn prepare(
        client: Client,
        home: &str,
        staging: &str,
        port: u16,
        controller: bool,
    ) -> anyhow::Result<Self> {
        Self::prepare_with_prefix(client, home, staging, port, controller, "").await
    }

    /// [`Stage::prepare`] with preview namespaces named `<prefix>-<preview>` (tests keep theirs
    /// apart so).
    pub async fn prepare_with_prefix(
        client: Client,
        home: &str,
        staging: &str,
        port: u16,
        controller: bool,
        namespace_prefix: &str,
    ) -> anyhow::Result<Self> {
        Self::set_up(
            client,
            home,
            staging,
            port,
            controller,
            namespace_prefix,
            None,
        )
        .await
    }

    /// The test app and Redis on the real tier as Blueprint `shop` for `acme/shop`: each commit
    /// is its own image, and a preview is Ready once its page, fetched through Traefik with its
    /// host, shows the commit.
    pub async fn prepare_real(
        client: Client,
        home: &str,
        staging: &str,
        port: u16,
        tier: RealTier,
    ) -> anyhow::Result<Self> {
        Self::set_up(
            client,
            home,
            staging,
            port,
            true,
            "",
            Some((tier, Access::Public)),
        )
        .await
    }

    /// [`Stage::prepare_real`] with the Blueprint `access: signedIn`: Sandcastle's gate (on a
    /// wake listener of its own, on loopback, where the real tier's Traefik reaches it) in front
    /// of the preview's routes.
    pub async fn prepare_real_gated(
        client: Client,
        home: &str,
        staging: &str,
        port: u16,
        tier: RealTier,
    ) -> anyhow::Result<Self> {
        let real = Some((tier, Access::SignedIn));
        Self::set_up(client, home, staging, port, true, "", real).await
    }

    async fn set_up(
        client: Client,
        home: &str,
        staging: &str,
        port: u16,
        controller: bool,
        namespace_prefix: &str,
        real: Option<(RealTier, Access)>,
    ) -> anyhow::Result<Self> {
        sandcastle::k8s::crd_install::install(&client, Duration::from_secs(30)).await?;
        ensure_namespace(&client, home).await?;
        ensure_namespace(&client, staging).await?;
        let (name, app, yaml, blueprint) = match &real {
            None => (
                "guestbook",
                "frontend",
                guestbook_yaml()?,
                json!({
                    "source": {"namespace": staging},
                    "repositories": ["acme/guestbook"],
                    "images": [{"repository": "gcr.io/google-samples/gb-frontend", "tag": "{{shortSha}}"}],
                    "host": "{{pr}}-{{repo}}.preview.localhost",
                    "primaryService": "frontend",
                }),
            ),
            Some((_, access)) => (
                "shop",
                "app",
                TESTAPP_YAML.to_owned(),
                json!({
                    "access": access,
                    "source": {"namespace": staging},
                    "repositories": ["acme/shop"],
                    "images": [{"repository": "sandcastle.test/app", "tag": "{{sha}}"}],
                    "host": "{{pr}}-{{repo}}.preview.localhost",
                    "primaryService": "app",
                    "readiness": {"http": {"path": "/healthz", "interval": "1s",
                        "commit": {"header": "X-Commit"}}},
                }),
            ),
        };
        let objects = load(&client, staging, &yaml).await?;
        let blueprint = json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint", "metadata": {"name": name},
            "spec": blueprint,
        });
        let blueprints: Api<crd::Blueprint> = Api::namespaced(client.clone(), home);
        blueprints
            .patch(
                name,
                &PatchParams::apply("sandcastle-demo").force(),
                &Patch::Apply(&blueprint),
            )
            .await?;

        let gh = FakeGitHub::start(FakeConfig::test_app()).await?;
        let repo = RepoName::new(&format!("acme/{name}"))?;
        gh.add_installation(1, "acme");
        gh.add_repo(1, &repo);

        let github = GitHubApp::new(
            TEST_APP_ID,
            &Secret::new(TEST_APP_PRIVATE_KEY_PEM),
            gh.url(),
            ClientSettings::default(),
        )?;
        let mut settings = Settings::for_namespace(home);
        settings.progress_interval = Duration::from_millis(500);
        // The dashboard signs people in through the stand-in's OAuth, at the address it serves.
        let listen: SocketAddr = std::net::TcpListener::bind(("127.0.0.1", port))?.local_addr()?;
        settings.public_url = format!("http://{listen}");
        let (client_id, client_secret) = gh.oauth_client();
        settings.oauth = Some(OAuthApp {
            client_id,
            client_secret: Secret::new(client_secret),
            web_url: gh.url().to_owned(),
            api_url: gh.url().to_owned(),
        });
        namespace_prefix.clone_into(&mut settings.namespace_prefix);
        let mut wake_listen = None;
        if let Some((tier, access)) = &real {
            settings.probe_via = ProbeVia::ConnectTo(tier.ingress.clone());
            if *access == Access::SignedIn {
                let edge = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
                wake_listen = Some(edge);
                settings.gate = Some(Gate {
                    provider: GateProvider::Traefik,
                    address: format!("http://{edge}"),
                });
            }
        }
        let running = serve::start(Parts {
            client,
            github,
            settings,
            webhook_secrets: vec![Secret::new(SECRET)],
            listen,
            wake_listen,
            clock: Clock::system(),
            controller,
        })
        .await?;
        Ok(Self {
            gh,
            repo,
            blueprint: name.to_owned(),
            app: app.to_owned(),
            real: real.map(|(tier, _)| tier),
            running,
            objects,
            http: HttpClient::builder(TokioExecutor::new()).build_http(),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.running.addr
    }

    /// Where people open Sandcastle: its dashboard, and the preview pages GitHub links to.
    pub fn public_url(&self) -> String {
        format!("http://{}", self.running.addr)
    }

    /// Wait until Sandcastle's `/readyz` answers 200, as a Service's readiness probe waits
    /// before it sends the pod any traffic; an error after `deadline`.
    pub async fn until_ready(&self, deadline: std::time::Duration) -> anyhow::Result<()> {
        let start = std::time::Instant::now();
        loop {
            let req = http::Request::get(format!("http://{}/readyz", self.addr()))
                .body(Full::new(Bytes::new()))?;
            if let Ok(resp) = self.http.request(req).await
                && resp.status() == http::StatusCode::OK
            {
                return Ok(());
            }
            if start.elapsed() > deadline {
                anyhow::bail!("Sandcastle was not ready within {deadline:?}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// POST a delivery, signed with [`SECRET`], to the webhook; returns status and JSON body.
    pub async fn deliver(&self, d: &Delivery) -> anyhow::Result<(u16, Value)> {
        let mut req = http::Request::post(format!("http://{}/github/webhook", self.addr()));
        for (k, v) in d.signed_headers(SECRET) {
            req = req.header(k, v);
        }
        let resp = self
            .http
            .request(req.body(Full::new(Bytes::from(d.body.clone())))?)
            .await?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    }
}
