//! What every reconcile needs: clients, settings and the clock.

use std::time::Duration;

use kube::Client;
use kube::runtime::reflector::{ObjectRef, Store};

use super::clock::Clock;
use super::leader::LeaderElection;
use crate::github::client::GitHubApp;
use crate::k8s::apply::Resolver;
use crate::k8s::crd::PreviewEnvironment;

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
            housekeeping_interval: Duration::from_secs(600),
            resync: false,
            orphan_grace: None,
            leader_election: None,
        }
    }
}

/// Shared state of the controller.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    pub resolver: Resolver,
    pub github: GitHubApp,
    pub settings: Settings,
    pub clock: Clock,
    /// Set while the controller runs: asks for a reconcile of one preview (a freed slot wakes
    /// the queue).
    pub(crate) pokes:
        Option<futures::channel::mpsc::UnboundedSender<ObjectRef<PreviewEnvironment>>>,
    /// Set while the controller runs: its cache of PreviewEnvironments.
    pub(crate) previews: Option<Store<PreviewEnvironment>>,
    /// Serializes slot decisions, so two previews never take the last slot together.
    pub(crate) admission: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Context {
    pub fn new(client: Client, github: GitHubApp, settings: Settings, clock: Clock) -> Self {
        Self {
            resolver: Resolver::new(client.clone()),
            client,
            github,
            settings,
            clock,
            pokes: None,
            previews: None,
            admission: std::sync::Arc::default(),
        }
    }
}
