//! What every reconcile needs: clients, settings, the clock, the metrics it counts into, and the
//! previews to look at again after a failed GitHub call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::mpsc;

use super::leader::LeaderElection;
use sandcastle_crd::{Blueprint, PreviewEnvironment};
use sandcastle_domain::clock::Clock;
use sandcastle_github::client::GitHubApp;
use sandcastle_kube::apply::Resolver;
use sandcastle_metrics::ControllerMetrics;

/// How long a recorded command waits for commands written before it but delivered after it
/// (GitHub does not promise to deliver in order).
pub const COMMAND_SETTLE: Duration = Duration::from_secs(1);

/// How long one read of a Blueprint's source serves the reconciles that ask for it: the edit of a
/// blueprint namespace reaches previews this much later at most.
const SOURCE_SHARED_FOR: Duration = Duration::from_secs(2);

/// New rollouts at once by default: under a burst, the first asked are Ready first
/// (`phases::rollout::line`, docs/benchmarks.md).
pub const DEFAULT_ROLLOUTS: u16 = 24;

/// Controller settings, from configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Sandcastle's own namespace: Blueprints and PreviewEnvironments live here.
    pub home: String,
    /// Prefix of preview namespace names (may be empty).
    pub namespace_prefix: String,
    /// Host template for previews whose Blueprint sets none.
    pub default_host: String,
    /// Public base URL of Sandcastle (for `log_url` links to its preview pages).
    pub public_url: String,
    /// Namespace of the ingress controller, allowed through previews' NetworkPolicies.
    pub ingress_namespace: String,
    /// How long a torn-down preview stays as a tombstone before the resource is deleted.
    pub tombstone_retention: Duration,
    /// How often a Ready preview is re-applied to repair drift.
    pub drift_interval: Duration,
    /// How soon to look again while a rollout is in progress (watches usually wake it sooner).
    pub progress_interval: Duration,
    /// How often a preview waiting for check runs asks GitHub again (a `check_run` delivery
    /// wakes it sooner; this bounds the delay when a delivery is lost).
    pub checks_poll_interval: Duration,

    // Lifecycle guardrails and housekeeping (run by the leader only).
    /// How often housekeeping runs: the catch-up resync with GitHub and the orphan sweep. It
    /// also runs when the controller starts.
    pub housekeeping_interval: Duration,
    /// Compare the open pull requests of installed repositories with the previews in each
    /// housekeeping round.
    pub resync: bool,
    /// Delete namespaces this Sandcastle made that have no PreviewEnvironment after this long
    /// (`None`: never).
    pub orphan_grace: Option<Duration>,
    /// Lease-based leader election among replicas (`None`: this process always runs the
    /// controller).
    pub leader_election: Option<LeaderElection>,
    /// The longest a token minted for a preview through the API lives.
    pub token_lifetime: Duration,
    /// The longest one API `wait` call may wait.
    pub api_max_wait: Duration,
    /// Whether `/mcp` offers write tools (`--mcp-write`).
    pub mcp_write: bool,
    /// The authorization server named in the protected resource metadata
    /// (`--authorization-server`).
    pub authorization_server: Option<String>,
    /// How long a recorded `/preview` command waits for commands written before it but
    /// delivered after it.
    pub command_settle: Duration,
    /// How the Blueprints' HTTP readiness probes reach previews.
    pub probe_via: sandcastle_probe::ProbeVia,
    /// Delete each preview's GitHub environment when its tombstone expires (needs the App's
    /// Administration permission).
    pub delete_github_environments: bool,
    /// Sign-in with GitHub on the dashboard (the App's OAuth client), when configured.
    pub oauth: Option<sandcastle_github::user::OAuthApp>,
    /// Dashboard pages readable without signing in (`--public-pages`).
    pub public_pages: bool,
    /// Where stopped previews' hosts are routed (Sandcastle's wake listener, as the ingress
    /// controller reaches it); `None`: their Ingresses are parked on a Service with no endpoints.
    pub wake: Option<sandcastle_domain::wake::WakeTarget>,
    /// Where stopped previews' HTTPRoutes are routed in Sandcastle's own cluster: a Service of its
    /// namespace whose port leads to the wake listener, reached through a ReferenceGrant there
    /// (`None`, and in other clusters: a Service with no endpoints in the preview's namespace).
    pub wake_route: Option<sandcastle_domain::wake::routes::WakeRouteService>,
    /// How often each registered cluster is checked (reachable, access).
    pub cluster_check_interval: Duration,
    /// How many previews are reconciled at once (`0`: no limit); the rest wait in the order
    /// their changes came.
    pub max_concurrent_reconciles: u16,
    /// How many new rollouts run at once ([`DEFAULT_ROLLOUTS`]; `0`: no limit); the rest wait `Pending`, in the order
    /// they were asked for, with their place in line (`phases::rollout::line`).
    pub max_concurrent_rollouts: u16,
    /// Helm and Kustomize, and the bounds of a render (`source.helm`, `source.kustomize`).
    pub render: sandcastle_render::Renderer,
    /// The wildcard certificate every preview host is served with (`--preview-tls-secret`).
    pub preview_tls: Option<sandcastle_kube::tls::TlsSource>,
    /// Who may open previews whose Blueprint does not say (`--preview-access`).
    pub default_access: sandcastle_crd::Access,
    /// The gate in front of `signedIn` previews, as the ingress controller reaches it
    /// (`--gate-url`, `--gate-provider`).
    pub gate: Option<sandcastle_domain::edge::Gate>,
    /// The longest a share link opens a preview (`--share-max-lifetime`).
    pub share_lifetime: Duration,
    /// The off-hours schedule of Blueprints that set none (`--schedule-stop`).
    pub schedule: Option<sandcastle_domain::schedule::Schedule>,
}

impl Settings {
    /// Settings suitable for tests and the demo: home namespace `home`, short intervals.
    pub fn for_namespace(home: &str) -> Self {
        Self {
            home: home.to_owned(),
            namespace_prefix: String::new(),
            default_host: "{{host}}-{{preview}}.preview.localhost".to_owned(),
            public_url: "http://localhost:8080".to_owned(),
            ingress_namespace: "ingress-nginx".to_owned(),
            tombstone_retention: Duration::from_secs(72 * 3600),
            drift_interval: Duration::from_secs(600),
            progress_interval: Duration::from_secs(2),
            checks_poll_interval: super::phases::check_answers::POLL,
            housekeeping_interval: Duration::from_secs(600),
            resync: false,
            orphan_grace: None,
            leader_election: None,
            token_lifetime: Duration::from_secs(3600),
            api_max_wait: Duration::from_secs(600),
            mcp_write: false,
            authorization_server: None,
            command_settle: COMMAND_SETTLE,
            probe_via: sandcastle_probe::ProbeVia::Url,
            delete_github_environments: false,
            oauth: None,
            public_pages: false,
            wake: None,
            wake_route: None,
            cluster_check_interval: Duration::from_secs(10),
            render: sandcastle_render::Renderer::default(),
            max_concurrent_reconciles: 0,
            max_concurrent_rollouts: DEFAULT_ROLLOUTS,
            preview_tls: None,
            default_access: sandcastle_crd::Access::Public,
            gate: None,
            share_lifetime: Duration::from_secs(7 * 24 * 3600),
            schedule: None,
        }
    }
}

/// Shared state of the controller.
#[derive(Clone)]
pub struct Context {
    /// Sandcastle's own cluster: PreviewEnvironments, Blueprints, Events, the Lease.
    pub client: Client,
    /// Applies to Sandcastle's own cluster (`clusters` has one for each cluster).
    pub resolver: Resolver,
    /// The clusters previews are placed in and sources read from (Sandcastle's own among them).
    pub clusters: sandcastle_kube::clusters::Clusters,
    /// Serializes placement decisions, remembering those the cache has not shown yet.
    pub(crate) placements: Arc<super::phases::place::placements::Placements>,
    /// Blueprint sources read once for the reconciles that run together (a burst).
    pub sources: Arc<sandcastle_kube::source::SourceCache>,
    /// Repository archives by commit and renders by preview and commit (`source.helm`,
    /// `source.kustomize`).
    pub(crate) rendered: Arc<sandcastle_render::cache::Kept>,
    pub github: GitHubApp,
    pub settings: Settings,
    pub clock: Clock,
    pub retry: Retry,
    /// Reconciles counted and timed; the previews counted from the cache while it runs.
    pub metrics: ControllerMetrics,
    /// Set while the controller runs: asks for a reconcile of one preview (a freed slot wakes
    /// the queue).
    pub(crate) pokes:
        Option<futures::channel::mpsc::UnboundedSender<ObjectRef<PreviewEnvironment>>>,
    /// Pull request events waiting behind one that finished, looked at again at once.
    pub(crate) event_pokes:
        Option<futures::channel::mpsc::UnboundedSender<ObjectRef<sandcastle_crd::PreviewEvent>>>,
    /// Set while the controller runs: its cache of PreviewEnvironments.
    pub(crate) previews: Option<Store<PreviewEnvironment>>,
    /// Set while the controller runs: its cache of Blueprints (`Context::blueprint`).
    pub(crate) blueprints: Option<Store<Blueprint>>,
    /// Set while the controller runs: its cache of the pull request events recorded.
    pub(crate) records: Option<Store<sandcastle_crd::PreviewEvent>>,
    /// Set while the controller runs: its caches of the namespaces and workloads it made in its
    /// own cluster.
    pub(crate) watched: Option<Arc<sandcastle_kube::watched::Watched>>,
    /// The rollouts under way and the previews waiting in line to start one.
    pub(crate) rollouts: Arc<super::phases::rollout::line::Rollouts>,
    /// Serializes slot decisions, so two previews never take the last slot together.
    pub(crate) admission: std::sync::Arc<super::phases::capacity::line::Admissions>,
    /// GitHub's last answer about each waiting preview's checks.
    pub(crate) checks_asked: super::phases::check_answers::Asked,
    /// When each deploying preview was last diagnosed (`phases::diagnoses`).
    pub(crate) diagnoses: super::phases::diagnoses::Diagnoses,
    /// Stopping previews whose routes are parked and whose pods still run (`idle::Drains`).
    pub(crate) drains: super::phases::idle::Drains,
    /// Kubernetes Events for each preview's history (`kubectl describe`).
    pub events: sandcastle_kube::events::Events,
    /// This process's own status writes, whose echo on the watch starts no pass.
    pub(crate) echoes: Arc<super::echoes::Echoes>,
    /// Who may run `/preview` commands, briefly remembered.
    pub permissions: Arc<sandcastle_github::permissions::PermissionCache>,
    /// What this leadership term knows of GitHub (`controller::term`); new for each term.
    pub(crate) term: Arc<super::term::Term>,
    /// The wildcard certificate, followed while the controller runs (`--preview-tls-secret`).
    pub wildcard: Option<sandcastle_kube::tls::Wildcard>,
    /// The gate's keys: the readiness probe sends a `signedIn` preview's header secret.
    pub gate_keys: Option<sandcastle_agent::GateKeys>,
}

type Wakeups = mpsc::UnboundedReceiver<ObjectRef<PreviewEnvironment>>;

/// Previews to reconcile again once a pause after a failed GitHub call is over, whatever their
/// next requeue is (a removed preview's is days away). One pending wake-up per preview.
#[derive(Clone, Debug)]
pub struct Retry {
    tx: mpsc::UnboundedSender<ObjectRef<PreviewEnvironment>>,
    rx: Arc<Mutex<Option<Wakeups>>>,
    until: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Default for Retry {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            tx,
            rx: Arc::new(Mutex::new(Some(rx))),
            until: Arc::default(),
        }
    }
}

impl Retry {
    /// Whether preview `name` is in a pause after a failure.
    pub fn waiting(&self, name: &str) -> bool {
        let until = self.until.lock().unwrap_or_else(|p| p.into_inner());
        until.get(name).is_some_and(|t| *t > Instant::now())
    }

    /// Pause `name` for `wait`, then reconcile it (unless a pause is already running).
    pub fn schedule(&self, name: &str, home: &str, wait: Duration) {
        {
            let mut until = self.until.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            until.retain(|_, t| *t > now);
            if until.contains_key(name) {
                return;
            }
            until.insert(name.to_owned(), now + wait);
        }
        let tx = self.tx.clone();
        let obj = ObjectRef::new(name).within(home);
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let _ = tx.send(obj);
        });
    }

    /// The wake-ups, for the controller (once).
    pub(super) fn take_wakeups(&self) -> Option<Wakeups> {
        self.rx.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// Ask for another pass over `pe` while the controller runs. A preview never looked at yet
    /// (no status) is left alone: its first pass is already due, and a request now would only
    /// put it off (kube's debounce starts again with each request).
    pub(crate) fn poke(&self, pe: &PreviewEnvironment) {
        if let (Some(pokes), Some(_)) = (&self.pokes, &pe.status) {
            let _ = pokes.unbounded_send(ObjectRef::from_obj(pe));
        }
    }

    /// Ask for another pass over preview `name` (one already looked at) while the controller
    /// runs.
    pub(crate) fn poke_name(&self, name: &str) {
        if let Some(pokes) = &self.pokes {
            let _ = pokes.unbounded_send(ObjectRef::new(name).within(&self.settings.home));
        }
    }

    /// The controller's caches of what it made, for work in `cluster` (they hold its own
    /// cluster's objects only).
    pub(crate) fn watched_in(
        &self,
        cluster: &sandcastle_kube::clusters::Cluster,
    ) -> Option<&sandcastle_kube::watched::Watched> {
        self.watched.as_deref().filter(|_| cluster.is_local())
    }

    /// What reporting to GitHub needs of this context.
    pub(crate) fn reporting(&self) -> super::report::Reporting<'_> {
        super::report::Reporting {
            github: &self.github,
            clock: &self.clock,
            term: &self.term,
            public_url: &self.settings.public_url,
        }
    }

    /// The Blueprint `name`, from the controller's watch cache while it runs: a change of it
    /// reaches the cache before the reconciles it starts. Not cached (not seen yet, or gone):
    /// from the API, so a Blueprint created a moment ago is found and a deleted one is not.
    pub(crate) async fn blueprint(&self, name: &str) -> Result<Option<Blueprint>, kube::Error> {
        let key = ObjectRef::new(name).within(&self.settings.home);
        if let Some(bp) = self.blueprints.as_ref().and_then(|s| s.get(&key)) {
            return Ok(Some(Blueprint::clone(&bp)));
        }
        kube::Api::<Blueprint>::namespaced(self.client.clone(), &self.settings.home)
            .get_opt(name)
            .await
    }

    /// Use `clusters` (kept by `k8s::clusters::watch`, shared with the API) for the clusters
    /// previews go to.
    pub fn with_clusters(mut self, clusters: sandcastle_kube::clusters::Clusters) -> Self {
        self.resolver = clusters.local().resolver.clone();
        self.clusters = clusters;
        self
    }

    pub fn new(client: Client, github: GitHubApp, settings: Settings, clock: Clock) -> Self {
        let events = sandcastle_kube::events::Events::new(
            client.clone(),
            settings
                .leader_election
                .as_ref()
                .map(|l| l.identity.clone()),
        );
        let clusters = sandcastle_kube::clusters::Clusters::new(
            client.clone(),
            sandcastle_metrics::ClusterMetrics::default(),
        );
        let settings_tls = settings.preview_tls.clone();
        let rollout_limit = settings.max_concurrent_rollouts;
        Self {
            resolver: clusters.local().resolver.clone(),
            clusters,
            placements: Arc::default(),
            sources: Arc::new(sandcastle_kube::source::SourceCache::new(SOURCE_SHARED_FOR)),
            rendered: Arc::default(),
            client,
            github,
            settings,
            clock,
            retry: Retry::default(),
            metrics: ControllerMetrics::default(),
            pokes: None,
            event_pokes: None,
            previews: None,
            blueprints: None,
            watched: None,
            records: None,
            admission: std::sync::Arc::default(),
            rollouts: Arc::new(super::phases::rollout::line::Rollouts::new(usize::from(
                rollout_limit,
            ))),
            checks_asked: super::phases::check_answers::Asked::default(),
            drains: super::phases::idle::Drains::default(),
            diagnoses: super::phases::diagnoses::Diagnoses::default(),
            events,
            echoes: Arc::default(),
            permissions: Arc::default(),
            term: Arc::default(),
            wildcard: settings_tls.map(sandcastle_kube::tls::Wildcard::new),
            gate_keys: None,
        }
    }
}
