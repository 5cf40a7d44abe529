//! CSI volume snapshots of a Blueprint's data, through the Kubernetes API: its source namespace's
//! bound claims, the VolumeSnapshots taken of them (grouped into sets by label, read back with
//! the handle their bound VolumeSnapshotContent holds), deleting a set, and the objects restoring
//! a set in a preview's namespace, made and released. The snapshot kinds are a CRD
//! (`snapshot.storage.k8s.io/v1`, external-snapshotter), not in `k8s-openapi`: they are handled
//! as dynamic objects.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use sandcastle_crd::labels::{
    BLUEPRINT, DATA_SET, FIELD_MANAGER, HOME, MANAGED_BY, MANAGER, PREVIEW,
};
use sandcastle_crd::{ClaimSnapshot, SnapshotSet};
use sandcastle_domain::data::source_snapshot_name;

const GROUP: &str = "snapshot.storage.k8s.io";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: "v1".into(),
        api_version: format!("{GROUP}/v1"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The VolumeSnapshots of namespace `ns`.
pub fn volume_snapshots(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = resource("VolumeSnapshot", "volumesnapshots");
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// The cluster's VolumeSnapshotContents.
pub fn contents(client: &Client) -> Api<DynamicObject> {
    let ar = resource("VolumeSnapshotContent", "volumesnapshotcontents");
    Api::all_with(client.clone(), &ar)
}

/// Why snapshots cannot be taken in a cluster, when the API says it does not serve them.
pub fn not_served(e: &kube::Error) -> Option<String> {
    matches!(e, kube::Error::Api(r) if r.code == 404).then(|| {
        format!(
            "the cluster does not serve {GROUP}/v1 VolumeSnapshot: install the CSI snapshot \
             CRDs and snapshot-controller (external-snapshotter) and a CSI driver with snapshots"
        )
    })
}

/// The bound PersistentVolumeClaims of namespace `ns`, by name.
pub async fn bound_claims(client: &Client, ns: &str) -> Result<Vec<String>, kube::Error> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let mut names: Vec<String> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| c.name_any())
        .collect();
    names.sort();
    Ok(names)
}

fn set_selector(blueprint: &str, set: Option<&str>) -> ListParams {
    let mut selector = format!("{MANAGED_BY}={MANAGER},{BLUEPRINT}={blueprint}");
    if let Some(set) = set {
        selector.push_str(&format!(",{DATA_SET}={set}"));
    }
    ListParams::default().labels(&selector)
}

/// Where a set is taken: the Blueprint's source namespace, of the Sandcastle whose namespace is
/// `home` (the label that tells its sets from another installation's).
#[derive(Debug, Clone, Copy)]
pub struct Taken<'a> {
    pub home: &'a str,
    pub ns: &'a str,
    pub blueprint: &'a str,
    pub set: &'a str,
}

/// Snapshot `claims` as set `at.set`, with `class` (or the driver's default).
pub async fn take(
    client: &Client,
    at: &Taken<'_>,
    claims: &[String],
    class: Option<&str>,
) -> Result<(), kube::Error> {
    let Taken {
        home,
        ns,
        blueprint,
        set,
    } = *at;
    let api = volume_snapshots(client, ns);
    for claim in claims {
        let name = source_snapshot_name(blueprint, set, claim);
        let mut spec = json!({"source": {"persistentVolumeClaimName": claim}});
        if let Some(class) = class {
            spec["volumeSnapshotClassName"] = json!(class);
        }
        let object = json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "VolumeSnapshot",
            "metadata": {"name": name, "labels": {
                MANAGED_BY: MANAGER, HOME: home, BLUEPRINT: blueprint, DATA_SET: set,
            }},
            "spec": spec,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&name, &params, &Patch::Apply(&object)).await?;
    }
    Ok(())
}

/// The sets of Blueprint `blueprint` in namespace `ns`, newest first, as their VolumeSnapshots
/// and contents stand. The handle of a snapshot in `known` (the sets as last seen) is not read
/// again: a ready snapshot's handle never changes, and a round then costs one list.
pub async fn observe(
    client: &Client,
    ns: &str,
    blueprint: &str,
    known: &[SnapshotSet],
) -> Result<Vec<SnapshotSet>, kube::Error> {
    let list = volume_snapshots(client, ns)
        .list(&set_selector(blueprint, None))
        .await?;
    let mut by_set: BTreeMap<String, Vec<DynamicObject>> = BTreeMap::new();
    for vs in list.items {
        if let Some(set) = vs.labels().get(DATA_SET).cloned() {
            by_set.entry(set).or_default().push(vs);
        }
    }
    let mut out = Vec::with_capacity(by_set.len());
    for (id, mut members) in by_set.into_iter().rev() {
        members.sort_by_key(|vs| vs.name_any());
        out.push(read_set(client, id, &members, known).await?);
    }
    Ok(out)
}

async fn read_set(
    client: &Client,
    id: String,
    members: &[DynamicObject],
    known: &[SnapshotSet],
) -> Result<SnapshotSet, kube::Error> {
    let mut claims = Vec::with_capacity(members.len());
    let mut ready = true;
    let mut error = None;
    let mut taken_at: Option<Timestamp> = None;
    for vs in members {
        let status = &vs.data["status"];
        if let Some(t) = vs.creation_timestamp() {
            taken_at = Some(taken_at.map_or(t.0, |a| a.min(t.0)));
        }
        let message = status["error"]["message"].as_str();
        if error.is_none()
            && let Some(m) = message
        {
            error = Some(format!("VolumeSnapshot {}: {m}", vs.name_any()));
        }
        let mut snap = ClaimSnapshot {
            claim: vs.data["spec"]["source"]["persistentVolumeClaimName"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            volume_snapshot: vs.name_any(),
            handle: None,
            driver: None,
            class: vs.data["spec"]["volumeSnapshotClassName"]
                .as_str()
                .map(str::to_owned),
            restore_size: status["restoreSize"].as_str().map(str::to_owned),
        };
        let bound = status["boundVolumeSnapshotContentName"].as_str();
        let seen = known
            .iter()
            .flat_map(|s| &s.claims)
            .find(|c| c.volume_snapshot == snap.volume_snapshot && c.handle.is_some());
        if status["readyToUse"].as_bool() == Some(true)
            && let Some(seen) = seen
        {
            snap.handle.clone_from(&seen.handle);
            snap.driver.clone_from(&seen.driver);
            snap.class = snap.class.or_else(|| seen.class.clone());
        } else if status["readyToUse"].as_bool() == Some(true)
            && let Some(content) = bound
        {
            match contents(client).get_opt(content).await? {
                Some(c) => {
                    snap.handle = c.data["status"]["snapshotHandle"]
                        .as_str()
                        .map(str::to_owned);
                    snap.driver = c.data["spec"]["driver"].as_str().map(str::to_owned);
                    snap.class = snap.class.or_else(|| {
                        c.data["spec"]["volumeSnapshotClassName"]
                            .as_str()
                            .map(str::to_owned)
                    });
                }
                None => ready = false,
            }
        }
        ready &= snap.handle.is_some();
        claims.push(snap);
    }
    Ok(SnapshotSet {
        id,
        taken_at: Time(taken_at.unwrap_or_default()),
        ready: ready && !claims.is_empty(),
        error,
        claims,
    })
}

/// Delete set `set` of Blueprint `blueprint` from namespace `ns` (its VolumeSnapshots; their
/// class's deletion policy says whether the driver's snapshots go too).
pub async fn delete_set(
    client: &Client,
    ns: &str,
    blueprint: &str,
    set: &str,
) -> Result<(), kube::Error> {
    let api = volume_snapshots(client, ns);
    match api
        .delete_collection(
            &DeleteParams::background(),
            &set_selector(blueprint, Some(set)),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Every set the Sandcastle of namespace `home` has taken, in any namespace: (namespace,
/// Blueprint, set id), each once.
pub async fn all_sets(
    client: &Client,
    home: &str,
) -> Result<Vec<(String, String, String)>, kube::Error> {
    let ar = resource("VolumeSnapshot", "volumesnapshots");
    let selector = format!("{MANAGED_BY}={MANAGER},{HOME}={home},{BLUEPRINT},{DATA_SET}");
    let list = Api::<DynamicObject>::all_with(client.clone(), &ar)
        .list(&ListParams::default().labels(&selector))
        .await?;
    let mut sets: Vec<(String, String, String)> = list
        .items
        .iter()
        .filter_map(|vs| {
            let labels = vs.labels();
            Some((
                vs.namespace()?,
                labels.get(BLUEPRINT)?.clone(),
                labels.get(DATA_SET)?.clone(),
            ))
        })
        .collect();
    sets.sort();
    sets.dedup();
    Ok(sets)
}

/// Make the objects restoring a set in a preview's namespace (`domain::data::restore_objects`):
/// contents (cluster-scoped) and the snapshots bound to them. Those already there are left as
/// they are: once bound, the snapshot controller has written the snapshot's uid into the
/// content's reference, which an apply of the same reference would take away (the reference is
/// atomic), and a restore would then find the content bound to another snapshot.
pub async fn restore(client: &Client, objects: &[Value]) -> Result<(), kube::Error> {
    for object in objects {
        let api = match object["metadata"]["namespace"].as_str() {
            Some(ns) => volume_snapshots(client, ns),
            None => contents(client),
        };
        let object: DynamicObject =
            serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(kube::Error::Api(r)) if r.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Delete the VolumeSnapshotContents restoring data into preview `preview`, except set `keep`'s;
/// how many are left to go (0: none). They are retained: the source's snapshots stay.
pub async fn release(
    client: &Client,
    preview: &str,
    keep: Option<&str>,
) -> Result<usize, kube::Error> {
    let selector = format!("{MANAGED_BY}={MANAGER},{PREVIEW}={preview}");
    let list = match contents(client)
        .list(&ListParams::default().labels(&selector))
        .await
    {
        Ok(l) => l,
        // A cluster without snapshots has none to release.
        Err(kube::Error::Api(r)) if r.code == 404 => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut left = 0;
    for content in list.items {
        if keep.is_some() && content.labels().get(DATA_SET).map(String::as_str) == keep {
            continue;
        }
        left += 1;
        if content.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match contents(client)
            .delete(&content.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(r)) if r.code == 404 => left -= 1,
            Err(e) => return Err(e),
        }
    }
    Ok(left)
}

/// Delete the VolumeSnapshots of namespace `ns` that restored another set than `keep` (a reset
/// to the newest leaves the old one unused).
pub async fn forget_others(client: &Client, ns: &str, keep: &str) -> Result<(), kube::Error> {
    let api = volume_snapshots(client, ns);
    let selector = format!("{MANAGED_BY}={MANAGER},{DATA_SET}!={keep}");
    match api
        .delete_collection(
            &DeleteParams::background(),
            &ListParams::default().labels(&selector),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Why a claim of namespace `ns` restored from a snapshot cannot be provisioned, when the
/// provisioner said so (its last `ProvisioningFailed` Warning on a claim still Pending).
pub async fn restore_failure(client: &Client, ns: &str) -> Result<Option<String>, kube::Error> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let pending: Vec<String> = claims
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"))
        .filter(|c| c.spec.as_ref().is_some_and(|s| s.data_source.is_some()))
        .map(|c| c.name_any())
        .collect();
    if pending.is_empty() {
        return Ok(None);
    }
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = events
        .list(&ListParams::default().fields("involvedObject.kind=PersistentVolumeClaim"))
        .await?;
    let failed = list
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("ProvisioningFailed"))
        .filter(|e| {
            pending
                .iter()
                .any(|c| e.involved_object.name.as_deref() == Some(c))
        })
        .max_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0));
    Ok(failed.map(|e| {
        format!(
            "PersistentVolumeClaim {}: restoring its snapshot failed: {}",
            e.involved_object.name.unwrap_or_default(),
            e.message.unwrap_or_default()
        )
    }))
}
