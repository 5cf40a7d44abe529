//! What brings previews in other clusters back to the controller: a watch on the workloads and
//! namespaces Sandcastle made in each registered cluster (as the controller's own watches do in
//! Sandcastle's cluster), started when a cluster is registered and stopped when it goes; and, at
//! every change of a cluster (added, gone, down, back), a look at every preview waiting for a
//! cluster or living in a registered one.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use tokio::task::JoinHandle;

use super::context::Context;
use super::phases::place;
use sandcastle_crd::PreviewEnvironment;
use sandcastle_crd::labels::{MANAGED_BY, MANAGER, PREVIEW};
use sandcastle_kube::clusters::Cluster;

type Refs = futures::channel::mpsc::UnboundedSender<ObjectRef<PreviewEnvironment>>;

/// The previews whose objects changed in other clusters, until `stop` resolves.
pub(super) fn triggers(
    ctx: &Context,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> futures::channel::mpsc::UnboundedReceiver<ObjectRef<PreviewEnvironment>> {
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let ctx = ctx.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = supervise(ctx, tx) => {}
            () = stop => {}
        }
    });
    rx
}

/// Keep one watch per registered cluster, and poke the previews a change concerns.
async fn supervise(ctx: Context, tx: Refs) {
    let mut changes = ctx.clusters.subscribe();
    let mut running = Watches::default();
    loop {
        let registered = ctx.clusters.registered();
        running.0.retain(|name, (cluster, handle)| {
            let current = registered
                .iter()
                .any(|c| c.name.as_str() == name && Arc::ptr_eq(c, cluster));
            if !current {
                handle.abort();
            }
            current
        });
        for cluster in registered {
            let name = cluster.name.to_string();
            if running.0.contains_key(&name) {
                continue;
            }
            let handle = tokio::spawn(watch(
                cluster.watch_client.clone(),
                ctx.settings.home.clone(),
                tx.clone(),
            ));
            running.0.insert(name, (cluster, handle));
        }
        place::poke_waiting(&ctx);
        if changes.changed().await.is_err() {
            return;
        }
    }
}

/// The watch of each cluster, by name; aborted when dropped (the controller stopped).
#[derive(Default)]
struct Watches(HashMap<String, (Arc<Cluster>, JoinHandle<()>)>);

impl Drop for Watches {
    fn drop(&mut self) {
        for (_, (_, h)) in self.0.drain() {
            h.abort();
        }
    }
}

/// Forward changes to Sandcastle's objects in one cluster as the previews they belong to.
async fn watch(client: Client, home: String, tx: Refs) {
    let config = watcher::Config::default().labels(&format!("{MANAGED_BY}={MANAGER},{PREVIEW}"));
    let streams = vec![
        owners(
            Api::<Deployment>::all(client.clone()),
            config.clone(),
            &home,
        ),
        owners(
            Api::<StatefulSet>::all(client.clone()),
            config.clone(),
            &home,
        ),
        owners(Api::<Job>::all(client.clone()), config.clone(), &home),
        owners(Api::<Namespace>::all(client), config, &home),
    ];
    let mut all = futures::stream::select_all(streams);
    while let Some(found) = all.next().await {
        if let Some(r) = found
            && tx.unbounded_send(r).is_err()
        {
            return;
        }
    }
}

fn owners<K>(
    api: Api<K>,
    config: watcher::Config,
    home: &str,
) -> futures::stream::BoxStream<'static, Option<ObjectRef<PreviewEnvironment>>>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let home = home.to_owned();
    watcher(api, config)
        .default_backoff()
        .touched_objects()
        .map(move |o| match o {
            Ok(obj) => super::owner_of(&obj, &home),
            Err(e) => {
                tracing::debug!(error = %e, "watching a registered cluster");
                None
            }
        })
        .boxed()
}
