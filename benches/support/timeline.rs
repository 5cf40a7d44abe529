//! Where the time to a served page goes: watches PreviewEnvironments, namespaces, Ingresses, the
//! test app's pods and its Service's EndpointSlices across the cluster and notes, per namespace,
//! when each milestone was first seen (by this
//! process's clock, as the watch events arrive: tens of milliseconds late at most, the same for
//! every path measured).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use sandcastle::crd::PreviewEnvironment;

/// The label the test app's pods carry (crates/demo/src/testapp.yaml).
const APP_POD: &str = "app=web";
/// The label of its Service's EndpointSlices.
const APP_SLICES: &str = "kubernetes.io/service-name=app";

/// When one namespace reached each milestone.
#[derive(Debug, Clone, Copy, Default)]
pub struct Marks {
    /// The PreviewEnvironment made for it (Sandcastle's paths only).
    pub preview: Option<Instant>,
    pub namespace: Option<Instant>,
    pub ingress: Option<Instant>,
    pub app_pod: Option<Instant>,
    /// The app's address in its Service's EndpointSlice (Traefik v3.6 rebuilds its routes on an
    /// address change, not on a change of the endpoint's conditions alone).
    pub address: Option<Instant>,
    pub app_ready: Option<Instant>,
}

impl Marks {
    /// The milestones as seconds after `since`, for one line of a report.
    pub fn after(&self, since: Instant) -> [Option<Duration>; 6] {
        [
            self.preview,
            self.namespace,
            self.ingress,
            self.app_pod,
            self.address,
            self.app_ready,
        ]
        .map(|m| m.map(|t| t.saturating_duration_since(since)))
    }
}

/// The milestones seen so far, by namespace.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    namespaces: Arc<Mutex<HashMap<String, Marks>>>,
    /// When each PreviewEnvironment was first seen, by name.
    previews: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Timeline {
    /// Start watching (the watches run until the process ends).
    pub fn watch(client: &Client) -> Self {
        let timeline = Self::default();
        let seen = timeline.previews.clone();
        let previews = Api::<PreviewEnvironment>::all(client.clone());
        tokio::spawn(watch_each(
            previews,
            None,
            move |pe: &PreviewEnvironment| {
                let mut all = seen.lock().unwrap();
                all.entry(pe.name_any()).or_insert_with(Instant::now);
            },
        ));
        let t = timeline.clone();
        tokio::spawn(watch_each(
            Api::<Namespace>::all(client.clone()),
            None,
            move |ns: &Namespace| {
                t.mark(&ns.name_any(), |m| &mut m.namespace);
            },
        ));
        let t = timeline.clone();
        tokio::spawn(watch_each(
            Api::<Ingress>::all(client.clone()),
            None,
            move |i: &Ingress| {
                t.mark(&i.namespace().unwrap_or_default(), |m| &mut m.ingress);
            },
        ));
        let t = timeline.clone();
        let slices = Api::<EndpointSlice>::all(client.clone());
        tokio::spawn(watch_each(
            slices,
            Some(APP_SLICES),
            move |s: &EndpointSlice| {
                if s.endpoints
                    .iter()
                    .flatten()
                    .any(|e| !e.addresses.is_empty())
                {
                    t.mark(&s.namespace().unwrap_or_default(), |m| &mut m.address);
                }
            },
        ));
        let t = timeline.clone();
        tokio::spawn(watch_each(
            Api::<Pod>::all(client.clone()),
            Some(APP_POD),
            move |p: &Pod| {
                let ns = p.namespace().unwrap_or_default();
                t.mark(&ns, |m| &mut m.app_pod);
                if ready(p) {
                    t.mark(&ns, |m| &mut m.app_ready);
                }
            },
        ));
        timeline
    }

    /// What was seen of namespace `ns`.
    pub fn marks(&self, ns: &str) -> Marks {
        let all = self.namespaces.lock().unwrap();
        all.get(ns).copied().unwrap_or_default()
    }

    /// What was seen of preview `name` and its namespace `ns`.
    pub fn preview_marks(&self, name: &str, ns: &str) -> Marks {
        let preview = self.previews.lock().unwrap().get(name).copied();
        Marks {
            preview,
            ..self.marks(ns)
        }
    }

    fn mark(&self, ns: &str, which: impl Fn(&mut Marks) -> &mut Option<Instant>) {
        let now = Instant::now();
        let mut all = self.namespaces.lock().unwrap();
        which(all.entry(ns.to_owned()).or_default()).get_or_insert(now);
    }
}

fn ready(p: &Pod) -> bool {
    let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn watch_each<K>(api: Api<K>, labels: Option<&'static str>, mut seen: impl FnMut(&K))
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    let mut config = watcher::Config::default();
    if let Some(l) = labels {
        config = config.labels(l);
    }
    let mut events = std::pin::pin!(watcher(api, config).default_backoff().applied_objects());
    while let Some(event) = events.next().await {
        if let Ok(obj) = event {
            seen(&obj);
        }
    }
}

/// The median of each milestone seen over `rows`, as a line: "namespace 0.41 s, Ingress
/// 0.52 s, …".
pub fn medians(rows: &[[Option<Duration>; 6]]) -> String {
    let names = [
        "PreviewEnvironment",
        "namespace",
        "Ingress",
        "app pod",
        "app address",
        "app pod Ready",
    ];
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mut seen: Vec<Duration> = rows.iter().filter_map(|r| r[i]).collect();
        seen.sort();
        if let Some(d) = seen.get(seen.len() / 2) {
            out.push(format!("{name} {:.2} s", d.as_secs_f64()));
        }
    }
    out.join(", ")
}
