//! Keeping the registry true: a watch on the cluster Secrets of Sandcastle's namespace
//! registers, replaces and forgets clusters as their Secrets come, change and go (a Secret
//! that cannot be used is kept with the reason, for placement and `/readyz` to say), and every
//! cluster is checked when it is registered and then on an interval. Every replica runs this
//! (each answers `/readyz` for itself); only the leader acts on what it finds.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use super::{Cluster, Clusters, check, secret};
use sandcastle_crd::labels::CLUSTER;
use sandcastle_domain::clock::Clock;

/// Run until `stop` resolves.
pub async fn run(
    clusters: Clusters,
    home_client: Client,
    home: String,
    interval: Duration,
    clock: Clock,
    stop: impl std::future::Future<Output = ()> + Send,
) {
    let api: Api<Secret> = Api::namespaced(home_client.clone(), &home);
    let events = watcher(api, watcher::Config::default().labels(CLUSTER)).default_backoff();
    let checks = checks(clusters.clone(), home_client, home, interval, clock.clone());
    let secrets = async {
        let mut registry = Registry::default();
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            let added = match event {
                Ok(e) => registry.apply(&clusters, e).await,
                Err(e) => {
                    tracing::debug!(error = %e, "watching cluster Secrets");
                    continue;
                }
            };
            // A new cluster is checked at once: placement need not wait for the interval.
            if !added.is_empty() {
                futures::future::join_all(added.iter().map(|c| check::once(c, clock.now()))).await;
                clusters.changed();
            }
        }
    };
    tokio::select! {
        () = secrets => {}
        () = checks => {}
        () = stop => {}
    }
}

/// Check every registered cluster each `interval`, and read the installation's uid until it is
/// known.
async fn checks(
    clusters: Clusters,
    home_client: Client,
    home: String,
    interval: Duration,
    clock: Clock,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if clusters.installation().is_none() {
            let namespaces: Api<Namespace> = Api::all(home_client.clone());
            match namespaces.get_opt(&home).await {
                Ok(Some(ns)) => {
                    if let Some(uid) = ns.uid() {
                        clusters.set_installation(uid);
                    }
                }
                Ok(None) => {
                    tracing::warn!(namespace = %home, "Sandcastle's namespace does not exist");
                }
                Err(e) => tracing::debug!(error = %e, "reading Sandcastle's namespace"),
            }
        }
        let all = clusters.registered();
        let changed = futures::future::join_all(all.iter().map(|c| check::once(c, clock.now())))
            .await
            .into_iter()
            .any(|c| c);
        if changed {
            clusters.changed();
        }
    }
}

/// Which Secret registers which cluster.
#[derive(Default)]
struct Registry {
    /// Secret name → (cluster name, resourceVersion).
    secrets: BTreeMap<String, (String, String)>,
    /// Secrets seen since the watch (re)started listing.
    listing: Option<Vec<String>>,
}

impl Registry {
    /// Apply one watch event; returns the clusters registered anew (to check at once). Any
    /// change at all is announced.
    async fn apply(
        &mut self,
        clusters: &Clusters,
        event: watcher::Event<Secret>,
    ) -> Vec<std::sync::Arc<Cluster>> {
        match event {
            watcher::Event::Init => {
                self.listing = Some(Vec::new());
                Vec::new()
            }
            watcher::Event::InitApply(s) => {
                if let Some(l) = self.listing.as_mut() {
                    l.push(s.name_any());
                }
                self.register(clusters, &s).await
            }
            watcher::Event::Apply(s) => self.register(clusters, &s).await,
            watcher::Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                let gone: Vec<String> = self
                    .secrets
                    .keys()
                    .filter(|k| !listed.contains(k))
                    .cloned()
                    .collect();
                for secret in gone {
                    self.forget(clusters, &secret);
                }
                clusters.changed();
                Vec::new()
            }
            watcher::Event::Delete(s) => {
                self.forget(clusters, &s.name_any());
                clusters.changed();
                Vec::new()
            }
        }
    }

    fn forget(&mut self, clusters: &Clusters, secret: &str) {
        if let Some((cluster, _)) = self.secrets.remove(secret) {
            tracing::info!(%cluster, %secret, "cluster no longer registered");
            clusters.remove(&cluster);
        }
    }

    async fn register(&mut self, clusters: &Clusters, s: &Secret) -> Vec<std::sync::Arc<Cluster>> {
        let secret_name = s.name_any();
        let version = s.resource_version().unwrap_or_default();
        let name = secret::cluster_name(s).unwrap_or_default().to_owned();
        if self.secrets.get(&secret_name) == Some(&(name.clone(), version.clone())) {
            return Vec::new();
        }
        // A Secret whose label now names another cluster no longer registers the old one.
        if let Some((old, _)) = self.secrets.get(&secret_name)
            && *old != name
        {
            clusters.remove(old);
        }
        let twin = self
            .secrets
            .iter()
            .find(|(other, (cluster, _))| **other != secret_name && *cluster == name)
            .map(|(other, _)| other.clone());
        self.secrets
            .insert(secret_name.clone(), (name.clone(), version.clone()));
        if let Some(twin) = twin {
            let why = format!("registered twice, by Secrets {twin} and {secret_name}; delete one");
            tracing::warn!(cluster = %name, "{why}");
            clusters.refuse(&name, why);
            clusters.changed();
            return Vec::new();
        }
        let registration = secret::read(s).await;
        let cluster = registration.and_then(|r| Cluster::registered(r, version));
        match cluster {
            Ok(c) => {
                tracing::info!(cluster = %c.name, server = ?c.server, secret = %secret_name, "cluster registered");
                clusters.put(c);
                clusters.get(&name).into_iter().collect()
            }
            Err(why) => {
                tracing::warn!(cluster = %name, secret = %secret_name, %why, "cluster Secret cannot be used");
                let key = if name.is_empty() { secret_name } else { name };
                clusters.refuse(&key, why);
                clusters.changed();
                Vec::new()
            }
        }
    }
}
