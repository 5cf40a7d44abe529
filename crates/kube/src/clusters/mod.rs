//! The clusters Sandcastle works in: its own (`in-cluster`, where the PreviewEnvironments are)
//! and those registered as Secrets (`secret`), each with a client, the resolver that applies to
//! it, its cap, and what the last check found (`check`: reachable, and whether its credentials
//! hold every permission previews need). `watch` keeps the registry in step with the Secrets
//! and checks each cluster on an interval; whoever subscribes hears of every change (a cluster
//! added, gone, down, back). Everything that acts on a preview namespace asks here for the
//! preview's cluster.

pub mod check;
pub mod secret;
pub mod watch;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use jiff::Timestamp;
use kube::Client;
use tokio::sync::watch as signal;

use super::apply::Resolver;
use sandcastle_domain::placement::{ClusterName, Standing};
use sandcastle_domain::wake::WakeTarget;
use sandcastle_metrics::ClusterMetrics;

/// Whether a cluster's API answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    Unknown,
    Up,
    Down(String),
}

/// Whether a cluster's credentials hold what previews need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    Unknown,
    Complete,
    /// The permissions missing, as `kubectl auth can-i` names them.
    Lacks(Vec<String>),
}

/// What the last checks found, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub reach: Reach,
    pub access: Access,
    /// When `reach` last changed.
    pub since: Option<Timestamp>,
    /// When access was last checked.
    pub access_checked: Option<std::time::Instant>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            reach: Reach::Unknown,
            access: Access::Unknown,
            since: None,
            access_checked: None,
        }
    }
}

/// One cluster: how to reach it and what is known of it.
pub struct Cluster {
    pub name: ClusterName,
    /// Applies to this cluster (its client is [`Cluster::client`]).
    pub resolver: Resolver,
    /// For watches: no read timeout.
    pub watch_client: Client,
    /// The API's address, for agents given a token (`None`: Sandcastle's own, as its pods see
    /// it).
    pub server: Option<String>,
    pub max_previews: Option<u32>,
    /// The wake listener as this cluster's ingress controller reaches it, when not the default.
    pub wake: Option<WakeTarget>,
    /// The Secret's resourceVersion it was read from (a new one replaces it).
    pub(crate) version: String,
    health: Mutex<Health>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.name)
            .field("server", &self.server)
            .field("max_previews", &self.max_previews)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Sandcastle's own cluster: always reachable as far as placement is concerned (when its
    /// API is down, nothing is placed anyway), with the access the chart gives.
    fn local(client: Client) -> Self {
        Self {
            name: ClusterName::in_cluster(),
            resolver: Resolver::new(client.clone()),
            watch_client: client,
            server: None,
            max_previews: None,
            wake: None,
            version: String::new(),
            health: Mutex::new(Health {
                reach: Reach::Up,
                access: Access::Complete,
                since: None,
                access_checked: None,
            }),
        }
    }

    fn registered(r: secret::Registration, version: String) -> Result<Self, String> {
        let client = Client::try_from(r.config).map_err(|e| format!("no client: {e}"))?;
        let watch_client =
            Client::try_from(r.watch_config).map_err(|e| format!("no client: {e}"))?;
        Ok(Self {
            name: r.name,
            resolver: Resolver::new(client),
            watch_client,
            server: Some(r.server),
            max_previews: r.max_previews,
            wake: r.wake,
            version,
            health: Mutex::default(),
        })
    }

    /// The client for requests to this cluster.
    pub fn client(&self) -> &Client {
        self.resolver.client()
    }

    pub fn is_local(&self) -> bool {
        self.name.is_local()
    }

    pub fn health(&self) -> Health {
        self.health
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Record what a check found; returns whether anything placement or people see changed.
    pub(crate) fn set_health(&self, f: impl FnOnce(&mut Health)) -> bool {
        let mut h = self
            .health
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = (h.reach.clone(), h.access.clone());
        f(&mut h);
        before != (h.reach.clone(), h.access.clone())
    }

    /// How placement sees it now.
    pub fn standing(&self) -> Standing {
        let h = self.health();
        match (h.reach, h.access) {
            (Reach::Down(e), _) => Standing::Unreachable(e),
            (Reach::Unknown, _) | (Reach::Up, Access::Unknown) => Standing::Checking,
            (Reach::Up, Access::Lacks(missing)) => Standing::Lacks(missing),
            (Reach::Up, Access::Complete) => Standing::Ready,
        }
    }

    /// Whether its API answered at the last check.
    pub fn reachable(&self) -> bool {
        self.health().reach == Reach::Up
    }
}

/// Every cluster Sandcastle knows. Cheap to clone: clones share the registry.
#[derive(Clone)]
pub struct Clusters {
    inner: Arc<Inner>,
}

struct Inner {
    local: Arc<Cluster>,
    /// By cluster name.
    registered: RwLock<BTreeMap<String, Arc<Cluster>>>,
    /// Cluster Secrets that cannot be used: cluster name (or Secret name, without a usable
    /// label) → why.
    invalid: RwLock<BTreeMap<String, String>>,
    /// Bumped at every change of a cluster or its health.
    changed: signal::Sender<u64>,
    /// The uid of Sandcastle's namespace, once read (labels its namespaces in other clusters).
    installation: RwLock<Option<String>>,
    metrics: ClusterMetrics,
}

impl std::fmt::Debug for Clusters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clusters")
            .field("registered", &self.names())
            .finish_non_exhaustive()
    }
}

impl Clusters {
    /// Only Sandcastle's own cluster, until [`watch::run`] reads the registered ones.
    pub fn new(local: Client, metrics: ClusterMetrics) -> Self {
        Self {
            inner: Arc::new(Inner {
                local: Arc::new(Cluster::local(local)),
                registered: RwLock::default(),
                invalid: RwLock::default(),
                changed: signal::channel(0).0,
                installation: RwLock::default(),
                metrics,
            }),
        }
    }

    pub fn local(&self) -> &Arc<Cluster> {
        &self.inner.local
    }

    /// The cluster `name`, or how placement sees one that cannot be used.
    pub fn get(&self, name: &str) -> Result<Arc<Cluster>, Standing> {
        if name == sandcastle_crd::IN_CLUSTER {
            return Ok(self.inner.local.clone());
        }
        if let Some(c) = read(&self.inner.registered).get(name) {
            return Ok(c.clone());
        }
        match read(&self.inner.invalid).get(name) {
            Some(why) => Err(Standing::Invalid(why.clone())),
            None => Err(Standing::Unregistered),
        }
    }

    /// How placement sees cluster `name` now.
    pub fn standing(&self, name: &str) -> Standing {
        self.get(name).map_or_else(|s| s, |c| c.standing())
    }

    /// The registered clusters (not Sandcastle's own), by name.
    pub fn registered(&self) -> Vec<Arc<Cluster>> {
        read(&self.inner.registered).values().cloned().collect()
    }

    /// Cluster Secrets that cannot be used, and why.
    pub fn invalid(&self) -> BTreeMap<String, String> {
        read(&self.inner.invalid).clone()
    }

    fn names(&self) -> Vec<String> {
        read(&self.inner.registered).keys().cloned().collect()
    }

    /// Hear of every change (a cluster added, replaced, gone, down, back).
    pub fn subscribe(&self) -> signal::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    pub(crate) fn changed(&self) {
        self.inner.changed.send_modify(|n| *n += 1);
        for c in self.registered() {
            self.inner.metrics.reachable(c.name.as_str(), c.reachable());
        }
    }

    pub fn metrics(&self) -> &ClusterMetrics {
        &self.inner.metrics
    }

    /// The uid of Sandcastle's namespace, once read.
    pub fn installation(&self) -> Option<String> {
        read(&self.inner.installation).clone()
    }

    pub(crate) fn set_installation(&self, uid: String) {
        *self
            .inner
            .installation
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(uid);
    }

    /// Register (or replace) a cluster; returns whether anything changed.
    pub(crate) fn put(&self, cluster: Cluster) -> bool {
        let name = cluster.name.to_string();
        write(&self.inner.invalid).remove(&name);
        let mut registered = write(&self.inner.registered);
        if registered
            .get(&name)
            .is_some_and(|c| c.version == cluster.version)
        {
            return false;
        }
        registered.insert(name, Arc::new(cluster));
        true
    }

    /// A Secret for `name` cannot be used.
    pub(crate) fn refuse(&self, name: &str, why: String) {
        write(&self.inner.registered).remove(name);
        write(&self.inner.invalid).insert(name.to_owned(), why);
        self.inner.metrics.forget(name);
    }

    /// The Secret for `name` is gone.
    pub(crate) fn remove(&self, name: &str) {
        write(&self.inner.registered).remove(name);
        write(&self.inner.invalid).remove(name);
        self.inner.metrics.forget(name);
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
