//! Stopping and waking a preview's workloads. Stop: every Deployment, StatefulSet and ReplicaSet
//! of its own (not one a Deployment made: the Deployment scales those) scaled to zero with its
//! replicas remembered in `sandcastle.dev/stopped-replicas`, every CronJob
//! suspended with its previous `suspend` remembered in `sandcastle.dev/stopped-suspend` (one
//! patch per object, so a crash never loses a count). Wake: exactly the remembered values back,
//! annotations removed. PersistentVolumeClaims are never touched, so data survives.
//!
//! HorizontalPodAutoscalers are left as they are: Kubernetes disables an HPA whose target is
//! scaled to zero (`ScalingActive=False`, reason `ScalingDisabled`) and re-enables it when the
//! target has replicas again, so nothing has to be changed and restored.
//!
//! Routes first, pods after: a preview being stopped has its Ingresses parked [`ROUTE_DRAIN`]
//! before its workloads are scaled down ([`Drains`]), so that the ingress controller has stopped
//! sending visitors to the pods before they go.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::CronJob;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use sandcastle_crd::ServiceStatus;
use sandcastle_crd::labels::{LIFECYCLE_FIELD_MANAGER, STOPPED_REPLICAS, STOPPED_SUSPEND};

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(LIFECYCLE_FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

async fn patch<K>(api: &Api<K>, name: &str, body: Value) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match api.patch(name, &params(), &Patch::Merge(&body)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// A workload with replicas: its name, kind, replicas now and the remembered count.
struct Scalable {
    name: String,
    kind: &'static str,
    replicas: i32,
    remembered: Option<i32>,
}

fn remembered<K: Resource>(obj: &K) -> Option<i32> {
    obj.annotations()
        .get(STOPPED_REPLICAS)
        .and_then(|v| v.parse().ok())
}

async fn scalables(client: &Client, ns: &str) -> Result<Vec<Scalable>, kube::Error> {
    let lp = ListParams::default();
    let mut out = Vec::new();
    for d in Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
    {
        out.push(Scalable {
            replicas: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            remembered: remembered(&d),
            name: d.name_any(),
            kind: "Deployment",
        });
    }
    for s in Api::<StatefulSet>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
    {
        out.push(Scalable {
            replicas: s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            remembered: remembered(&s),
            name: s.name_any(),
            kind: "StatefulSet",
        });
    }
    let ownerless = |rs: &ReplicaSet| {
        rs.owner_references()
            .iter()
            .all(|o| o.controller != Some(true))
    };
    for rs in Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
        .into_iter()
        .filter(ownerless)
    {
        out.push(Scalable {
            replicas: rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            remembered: remembered(&rs),
            name: rs.name_any(),
            kind: "ReplicaSet",
        });
    }
    Ok(out)
}

async fn patch_scalable(
    client: &Client,
    ns: &str,
    w: &Scalable,
    body: Value,
) -> Result<(), kube::Error> {
    match w.kind {
        "Deployment" => {
            patch(
                &Api::<Deployment>::namespaced(client.clone(), ns),
                &w.name,
                body,
            )
            .await
        }
        "ReplicaSet" => {
            patch(
                &Api::<ReplicaSet>::namespaced(client.clone(), ns),
                &w.name,
                body,
            )
            .await
        }
        _ => {
            patch(
                &Api::<StatefulSet>::namespaced(client.clone(), ns),
                &w.name,
                body,
            )
            .await
        }
    }
}

/// How long a stopping preview's Ingresses are parked before its pods are stopped. An ingress
/// controller takes a moment to take a change in (Traefik rebuilds its routes at most every 2 s
/// by default); a pod gone before then leaves a visit sent to its address waiting for the
/// controller's dial timeout (30 s in Traefik) and answered 504.
pub(crate) const ROUTE_DRAIN: Duration = Duration::from_secs(3);

/// When each stopping preview's Ingresses were parked, in this process's memory (shared by the
/// context's clones) and by the system's monotonic clock: the ingress controller drains in real
/// time, whatever the previews' clock says. Forgotten when the pods are stopped or the stop is
/// called off; a leader that takes over mid-way waits the whole time again.
#[derive(Debug, Default, Clone)]
pub(crate) struct Drains(super::marks::Marks);

impl Drains {
    /// How much longer the pods of `preview`, whose Ingresses are parked, keep running (the
    /// first call starts the wait); `None`: stop them now.
    pub(crate) fn remaining(&self, preview: &str, now: Instant) -> Option<Duration> {
        let since = self.0.with(preview, |m| *m.get_or_insert(now));
        let left = ROUTE_DRAIN.saturating_sub(now.saturating_duration_since(since));
        (!left.is_zero()).then_some(left)
    }

    pub(crate) fn forget(&self, preview: &str) {
        self.0.forget(preview);
    }
}

/// Scale everything in `ns` to zero and suspend its CronJobs. Returns the workloads as services
/// (0 ready of the replicas they will get back).
pub(super) async fn stop(client: &Client, ns: &str) -> Result<Vec<ServiceStatus>, kube::Error> {
    let mut services = Vec::new();
    for w in scalables(client, ns).await? {
        match w.remembered {
            None => {
                let body = json!({
                    "metadata": {"annotations": {STOPPED_REPLICAS: w.replicas.to_string()}},
                    "spec": {"replicas": 0},
                });
                patch_scalable(client, ns, &w, body).await?;
            }
            // Scaled up by hand while stopped: down again, keeping the first record.
            Some(_) if w.replicas != 0 => {
                patch_scalable(client, ns, &w, json!({"spec": {"replicas": 0}})).await?;
            }
            Some(_) => {}
        }
        services.push(ServiceStatus {
            desired: w.remembered.unwrap_or(w.replicas),
            name: w.name,
            kind: w.kind.to_owned(),
            ready: 0,
        });
    }
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
    for c in cronjobs.list(&ListParams::default()).await? {
        let suspended = c.spec.suspend.unwrap_or(false);
        let body = match c.annotations().get(STOPPED_SUSPEND) {
            None => json!({
                "metadata": {"annotations": {STOPPED_SUSPEND: suspended.to_string()}},
                "spec": {"suspend": true},
            }),
            Some(_) if !suspended => json!({"spec": {"suspend": true}}),
            Some(_) => continue,
        };
        patch(&cronjobs, &c.name_any(), body).await?;
    }
    services.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    Ok(services)
}

/// Give every stopped workload in `ns` its remembered replicas and CronJobs their remembered
/// `suspend`. Returns how many objects were restored.
pub(super) async fn wake(client: &Client, ns: &str) -> Result<usize, kube::Error> {
    let mut restored = 0;
    for w in scalables(client, ns).await? {
        let Some(n) = w.remembered else { continue };
        let body = json!({
            "metadata": {"annotations": {STOPPED_REPLICAS: null}},
            "spec": {"replicas": n},
        });
        patch_scalable(client, ns, &w, body).await?;
        restored += 1;
    }
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
    for c in cronjobs.list(&ListParams::default()).await? {
        let Some(before) = c.annotations().get(STOPPED_SUSPEND) else {
            continue;
        };
        let body = json!({
            "metadata": {"annotations": {STOPPED_SUSPEND: null}},
            "spec": {"suspend": before == "true"},
        });
        patch(&cronjobs, &c.name_any(), body).await?;
        restored += 1;
    }
    Ok(restored)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pods_of_a_stopping_preview_wait_for_its_routes_to_drain_then_stop() {
        let drains = Drains::default();
        let t0 = Instant::now();
        assert_eq!(drains.remaining("a", t0), Some(ROUTE_DRAIN));
        let later = t0 + Duration::from_secs(1);
        assert_eq!(
            drains.remaining("a", later),
            Some(ROUTE_DRAIN - Duration::from_secs(1))
        );
        // Another preview's wait is its own.
        assert_eq!(drains.remaining("b", later), Some(ROUTE_DRAIN));
        assert_eq!(drains.remaining("a", t0 + ROUTE_DRAIN), None);
        // A stop called off and asked again waits the whole time again.
        drains.forget("a");
        assert_eq!(drains.remaining("a", t0 + ROUTE_DRAIN), Some(ROUTE_DRAIN));
    }
}
