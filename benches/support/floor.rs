//! The least a preview tool that keeps its state in the cluster must write beside each
//! preview's own objects, written straight into the API server: the floor under Sandcastle's
//! extra requests in a burst. Per preview: the webhook's durable record (create, and its state
//! once carried out), the PreviewEnvironment (create, its finalizer, a status when deploying and
//! one when Ready) and three Events of its history — nine writes, no read, small statuses.
//! Sandcastle writes all of these (more history, larger statuses) and reads besides, so a
//! burst of direct applies with this beside them shows how close to the direct applies alone
//! any design that records requests and reports status in the cluster can get.

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde_json::{Value, json};

use sandcastle::crd::labels::FINALIZER;
use sandcastle::crd::{PreviewEnvironment, PreviewEvent};

const MANAGER: &str = "bench-floor";

/// Writes one preview's bookkeeping into a namespace of its own.
pub struct Bookkeeping {
    events: Api<PreviewEvent>,
    previews: Api<PreviewEnvironment>,
    recorder: Recorder,
}

impl Bookkeeping {
    pub async fn new(client: &Client) -> Self {
        let home = super::unique("burst-floor");
        sandcastle_demo::stage::ensure_namespace(client, &home)
            .await
            .expect("a namespace for the bookkeeping");
        let reporter = Reporter {
            controller: MANAGER.into(),
            instance: None,
        };
        Self {
            events: Api::namespaced(client.clone(), &home),
            previews: Api::namespaced(client.clone(), &home),
            recorder: Recorder::new(client.clone(), reporter),
        }
    }

    /// What is written before a preview's objects are applied: the record, carried out, and
    /// the preview with its finalizer and first status.
    pub async fn before(&self, n: u64) -> PreviewEnvironment {
        let record: PreviewEvent = from(json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEvent",
            "metadata": {"name": format!("pr-{n}")},
            "spec": {"repository": "acme/burst", "pullRequest": n, "action": "opened",
                "sha": sha(n), "updatedAt": "2026-12-05T10:00:00Z", "delivery": format!("d-{n}"),
                "receivedAt": "2026-12-05T10:00:00Z", "receivedNs": 1, "event": {"number": n}},
        }));
        let record = self
            .events
            .create(&PostParams::default(), &record)
            .await
            .expect("the record is created");
        status(
            &self.events,
            &record.metadata.name.unwrap(),
            json!({"state": "Done"}),
        )
        .await;
        let pe: PreviewEnvironment = from(json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEnvironment",
            "metadata": {"name": format!("burst-pr-{n}")},
            "spec": {"blueprint": "burst", "repository": "acme/burst", "ref": "feature",
                "sha": sha(n), "requestedBy": {"kind": "github-user", "name": "agent"}},
        }));
        let pe = self
            .previews
            .create(&PostParams::default(), &pe)
            .await
            .expect("the preview is created");
        let name = pe.metadata.name.clone().unwrap();
        let finalizer = json!({"metadata": {"finalizers": [FINALIZER]}});
        self.previews
            .patch(&name, &PatchParams::default(), &Patch::Merge(&finalizer))
            .await
            .expect("the finalizer is added");
        status(&self.previews, &name, json!({"phase": "Deploying"})).await;
        self.event(&pe, "Requested").await;
        self.event(&pe, "Deploying").await;
        pe
    }

    /// What is written once a preview's objects are applied: its last status and Event.
    pub async fn after(&self, pe: &PreviewEnvironment) {
        status(
            &self.previews,
            &pe.metadata.name.clone().unwrap(),
            json!({"phase": "Ready"}),
        )
        .await;
        self.event(pe, "Ready").await;
    }

    async fn event(&self, pe: &PreviewEnvironment, reason: &str) {
        let event = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(format!("{reason} (commit 0123456)")),
            action: reason.into(),
            secondary: None,
        };
        self.recorder
            .publish(&event, &pe.object_ref(&()))
            .await
            .expect("the Event is published");
    }
}

async fn status<K>(api: &Api<K>, name: &str, status: Value)
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({
        "apiVersion": K::api_version(&()), "kind": K::kind(&()), "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .expect("the status is written");
}

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a valid object")
}

fn sha(n: u64) -> String {
    format!("{n:040x}")
}
