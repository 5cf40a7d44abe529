//! Assembles a running Sandcastle from its parts: the Blueprint cache, the registry of clusters,
//! the HTTP server and the controller, with one shutdown for all, and the metrics they count into. `sandcastle serve`,
//! `sandcastle demo` and the integration tests all start Sandcastle through [`start`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::serve::ListenerExt as _;
use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent::{Addresses, Agent, Authority, Limits, TokenClusters};
use crate::cli::args::KubeArgs;
use crate::controller::{self, Context, Settings};
use crate::crd::{Blueprint, PreviewEnvironment};
use crate::domain::Secret;
use crate::domain::clock::Clock;
use crate::github::client::GitHubApp;
use crate::http::{self, AppState, Deliveries};
use crate::mcp::{self, Backend, Confirmations, Mcp};
use crate::metrics::Metrics;

/// Everything needed to run Sandcastle.
#[derive(Clone)]
pub struct Parts {
    pub client: Client,
    pub github: GitHubApp,
    pub settings: Settings,
    pub webhook_secrets: Vec<Secret>,
    pub listen: SocketAddr,
    /// Where the wake listener (the page of stopped previews' hosts) listens; `None`: nowhere.
    pub wake_listen: Option<SocketAddr>,
    pub clock: Clock,
    /// Run the controller in this process (false: serve HTTP only).
    pub controller: bool,
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parts")
            .field("settings", &self.settings)
            .field("listen", &self.listen)
            .finish_non_exhaustive()
    }
}

/// A running Sandcastle.
#[derive(Debug)]
pub struct Running {
    /// The address the HTTP server is bound to.
    pub addr: SocketAddr,
    /// The address the wake listener is bound to, when it listens.
    pub wake_addr: Option<SocketAddr>,
    stop: CancellationToken,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
    leading: watch::Receiver<bool>,
}

/// How long each part of a running Sandcastle gets to stop on shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

impl Running {
    /// Stop accepting requests, finish those in flight, stop the controller, and wait — at most
    /// [`SHUTDOWN_GRACE`] for each part, after which it is dropped.
    pub async fn shutdown(self) {
        self.stop.cancel();
        for (name, mut task) in self.tasks {
            if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
            {
                tracing::warn!(
                    part = name,
                    "did not stop within {SHUTDOWN_GRACE:?}; dropping it"
                );
                task.abort();
            }
        }
    }

    /// Whether this process runs the controller now (always, without leader election).
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Stop at once, as a crash would (tests use this to kill Sandcastle mid-deploy).
    pub fn abort(self) {
        for (_, t) in &self.tasks {
            t.abort();
        }
    }
}

/// A Kubernetes client from `--kubeconfig`, or in-cluster / default configuration.
pub async fn kube_client(args: &KubeArgs) -> anyhow::Result<Client> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig and not running in a cluster")?,
    };
    Ok(Client::try_from(config)?)
}

/// The dashboard's sign-in and sessions (their keys derive from the current webhook secret, so
/// every replica opens every session).
fn dashboard(parts: &Parts) -> crate::http::dashboard::Dashboard {
    let secret = parts
        .webhook_secrets
        .first()
        .cloned()
        .unwrap_or_else(|| Secret::new(""));
    let secure = parts.settings.public_url.starts_with("https://");
    crate::http::dashboard::Dashboard::new(
        parts.settings.oauth.clone(),
        crate::http::dashboard::Sessions::new(&secret, secure),
        parts.settings.public_pages,
    )
}

/// The gate's keys, derived from the current webhook secret so that every replica opens what
/// another sealed; without one (the App not set up yet), from a random secret of this process.
fn gate_keys(parts: &Parts) -> crate::agent::GateKeys {
    let secret = parts
        .webhook_secrets
        .first()
        .cloned()
        .unwrap_or_else(|| Secret::new(crate::agent::sealed::random(32)));
    crate::agent::GateKeys::new(&secret)
}

/// Start Sandcastle; it runs until [`Running::shutdown`].
pub async fn start(parts: Parts) -> anyhow::Result<Running> {
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    // One set of metrics per running Sandcastle, shown at `/metrics`.
    let metrics = Metrics::default();
    let github = parts.github.clone().with_metrics(metrics.github.clone());
    let home = &parts.settings.home;
    let store = cache::<Blueprint>(&parts, "blueprint cache", &stop, &mut tasks);
    // The clusters previews live in, kept in step with their Secrets and checked on an
    // interval, in every replica (each answers `/readyz` for itself).
    let clusters =
        crate::k8s::clusters::Clusters::new(parts.client.clone(), metrics.clusters.clone());
    tasks.push((
        "clusters",
        tokio::spawn(crate::k8s::clusters::watch::run(
            clusters.clone(),
            parts.client.clone(),
            home.clone(),
            parts.settings.cluster_check_interval,
            parts.clock.clone(),
            stop.clone().cancelled_owned(),
        )),
    ));
    // PreviewEnvironments, for the API's lists (reads of one preview go to the API server).
    let previews = cache::<PreviewEnvironment>(&parts, "preview cache", &stop, &mut tasks);
    let keys = gate_keys(&parts);
    let agent = agent(&parts, &github, previews, &clusters, keys.clone());
    let state = AppState::new(http::Shared {
        client: parts.client.clone(),
        home: home.clone(),
        webhook_secrets: Arc::from(parts.webhook_secrets.clone()),
        deliveries: Deliveries::new(10_000),
        blueprints: store,
        clock: parts.clock.clone(),
        github: github.clone(),
        public_url: parts.settings.public_url.clone(),
        authorization_server: parts.settings.authorization_server.clone(),
        metrics: metrics.clone(),
        agent,
        dashboard: dashboard(&parts),
        records_checked: Default::default(),
    });
    let listener = tokio::net::TcpListener::bind(parts.listen)
        .await
        .with_context(|| format!("binding {}", parts.listen))?;
    let addr = listener.local_addr()?;
    // Answers streamed in pieces (MCP's server-sent events) would otherwise wait on Nagle's
    // algorithm and the peer's delayed ACK: about 40 ms a call.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set on a connection");
        }
    });
    let mcp = mcp_routes(&parts, &state);
    let wake_addr = match parts.wake_listen {
        Some(at) => Some(serve_wake(at, state.clone(), &stop, &mut tasks).await?),
        None => None,
    };
    let router = http::app(state, mcp);
    tasks.push(("http server", spawn_server(listener, router, &stop)));
    let (leading_tx, leading) = watch::channel(false);
    if parts.controller {
        let mut ctx = Context::new(
            parts.client.clone(),
            github,
            parts.settings.clone(),
            parts.clock.clone(),
        )
        .with_clusters(clusters);
        ctx.metrics = metrics.controller.clone();
        ctx.gate_keys = Some(keys);
        tasks.push(("controller", run_controller(&parts, ctx, leading_tx, &stop)));
    }
    tracing::info!(%addr, "Sandcastle is listening");
    Ok(Running {
        addr,
        wake_addr,
        stop,
        tasks,
        leading,
    })
}

/// A watch cache of Sandcastle's `K`s in its namespace, kept filled by a task until `stop`.
fn cache<K>(
    parts: &Parts,
    name: &'static str,
    stop: &CancellationToken,
    tasks: &mut Vec<(&'static str, JoinHandle<()>)>,
) -> reflector::Store<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (store, writer) = reflector::store::<K>();
    let api: Api<K> = Api::namespaced(parts.client.clone(), &parts.settings.home);
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let until = stop.clone().cancelled_owned();
    tasks.push((
        name,
        tokio::spawn(async move {
            tokio::select! {
                () = stream.for_each(|_| async {}) => {}
                () = until => {}
            }
        }),
    ));
    store
}

/// The operations on previews, for the API, MCP and the dashboard.
fn agent(
    parts: &Parts,
    github: &GitHubApp,
    previews: reflector::Store<PreviewEnvironment>,
    clusters: &crate::k8s::clusters::Clusters,
    keys: crate::agent::GateKeys,
) -> Agent {
    let settings = &parts.settings;
    let tokens = TokenClusters {
        clusters: clusters.clone(),
        previews: previews.clone(),
        namespace_prefix: settings.namespace_prefix.clone(),
    };
    Agent {
        client: parts.client.clone(),
        home: settings.home.clone(),
        addresses: Addresses {
            public_url: settings.public_url.clone(),
            github_api: github.api_url().to_owned(),
            github_web: Addresses::web_of(github.api_url()),
            namespace_prefix: settings.namespace_prefix.clone(),
        },
        github: github.clone(),
        clock: parts.clock.clone(),
        previews,
        authority: Authority::new(parts.client.clone(), &settings.home).with_clusters(tokens),
        gate_keys: keys,
        limits: Limits {
            token_lifetime: settings.token_lifetime,
            wait: settings.api_max_wait,
            share_lifetime: settings.share_lifetime,
            ..Limits::default()
        },
        clusters: clusters.clone(),
    }
}

/// `/mcp`: one MCP server per session over the agent's operations.
fn mcp_routes(parts: &Parts, state: &AppState) -> axum::Router {
    let (agent, writes, clock) = (
        state.agent.clone(),
        parts.settings.mcp_write,
        parts.clock.clone(),
    );
    // Replicas share the webhook secret, so each accepts the others' destroy confirmations.
    let secret = parts
        .webhook_secrets
        .first()
        .map_or(&b""[..], |s| s.expose().as_bytes());
    let confirmations = Arc::new(Confirmations::from_secret(secret));
    let guard = agent.clone();
    mcp::router(
        move || Mcp {
            backend: Backend::Local(Box::new(agent.clone())),
            writes,
            confirmations: confirmations.clone(),
            clock: clock.clone(),
        },
        guard,
        mcp::SessionLimits::default(),
    )
}

/// The controller, run until `stop`: at once, or while this replica leads (every replica serves
/// HTTP). `leading` says which.
fn run_controller(
    parts: &Parts,
    ctx: Context,
    leading: watch::Sender<bool>,
    stop: &CancellationToken,
) -> JoinHandle<()> {
    let Some(le) = parts.settings.leader_election.clone() else {
        leading.send_replace(true);
        return tokio::spawn(controller::run(ctx, stop.clone().cancelled_owned()));
    };
    let (client, home, shutdown) = (
        parts.client.clone(),
        parts.settings.home.clone(),
        stop.clone(),
    );
    tokio::spawn(async move {
        controller::leader::run(client, &home, le, leading, shutdown, |token| {
            controller::run(ctx.clone(), token.cancelled_owned())
        })
        .await;
    })
}

/// Serve the wake listener at `at` until `stop`; returns the address it is bound to.
async fn serve_wake(
    at: SocketAddr,
    state: AppState,
    stop: &CancellationToken,
    tasks: &mut Vec<(&'static str, JoinHandle<()>)>,
) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(at)
        .await
        .with_context(|| format!("binding the wake listener {at}"))?;
    let addr = listener.local_addr()?;
    let router = http::wake::router(state);
    tasks.push(("wake listener", spawn_server(listener, router, stop)));
    tracing::info!(%addr, "wake listener is listening");
    Ok(addr)
}

/// Serve `router` on `listener` until `stop`, finishing the requests in flight.
fn spawn_server<L>(listener: L, router: axum::Router, stop: &CancellationToken) -> JoinHandle<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let until = stop.clone().cancelled_owned();
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router)
            .with_graceful_shutdown(until)
            .await
        {
            tracing::error!(error = %e, "HTTP server stopped");
        }
    })
}

/// What a Sandcastle without a GitHub App needs to serve `/setup`.
pub struct SetupParts {
    pub client: Client,
    pub settings: Settings,
    /// GitHub's web pages and API.
    pub web_url: String,
    pub api_url: String,
    pub listen: SocketAddr,
}

impl std::fmt::Debug for SetupParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetupParts")
            .field("listen", &self.listen)
            .finish_non_exhaustive()
    }
}

/// Serve only `/setup` (and health; the webhook answers 503) until stopped.
pub async fn start_setup(parts: SetupParts) -> anyhow::Result<Running> {
    let state = crate::http::dashboard::setup::SetupState {
        client: parts.client,
        home: parts.settings.home.clone(),
        public_url: parts.settings.public_url.clone(),
        web_url: parts.web_url,
        api_url: parts.api_url,
        // No App, no webhook secret yet: the setup cookie only needs its attributes.
        sessions: crate::http::dashboard::Sessions::new(
            &Secret::new(crate::http::dashboard::random_state()),
            parts.settings.public_url.starts_with("https://"),
        ),
    };
    let listener = tokio::net::TcpListener::bind(parts.listen)
        .await
        .with_context(|| format!("binding {}", parts.listen))?;
    let addr = listener.local_addr()?;
    let stop = CancellationToken::new();
    let until = stop.clone().cancelled_owned();
    let router = crate::http::dashboard::setup::router(state);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router)
            .with_graceful_shutdown(until)
            .await
        {
            tracing::error!(error = %e, "setup server stopped");
        }
    });
    tracing::info!(%addr, "no GitHub App yet: serving /setup");
    let (_, leading) = watch::channel(false);
    Ok(Running {
        addr,
        wake_addr: None,
        stop,
        tasks: vec![("setup server", task)],
        leading,
    })
}
