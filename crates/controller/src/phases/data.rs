//! A rollout's data (`spec.data.from: snapshot`): which snapshot set the preview's claims are
//! restored from — the one it started from, or the newest on its first rollout and on a reset
//! with `latest` — recorded in `status.data`; the objects binding that set into the preview's
//! namespace, made once the namespace exists and before the claims that name them; and why a
//! restore cannot be done, for the preview's status and the sticky comment. Nothing falls back
//! to empty data silently: a preview placed in another cluster than the snapshots starts empty
//! only when its Blueprint says `elsewhere: seed`, and its status says so.

use std::collections::BTreeMap;

use sandcastle_crd::{
    Blueprint, DataFrom, PreviewData, PreviewEnvironment, PreviewStatus, SnapshotSet,
};
use sandcastle_domain::data::{self, Choice, Placed};
use sandcastle_kube::clusters::Cluster;
use sandcastle_kube::snapshots;

use crate::error::Error;

/// What the rollout does about the preview's data.
pub(crate) enum Restore {
    /// Claims start empty.
    Empty,
    /// Restore this set.
    Set(SnapshotSet),
    /// Restored before from a set the Blueprint no longer has: the claims stay as they are
    /// (claim → the VolumeSnapshot they name); only a new restore (a reset) would need the set.
    Kept(BTreeMap<String, String>),
    /// Not yet (for people).
    Wait(String),
    /// The preview fails with this.
    Fail(String),
}

impl Restore {
    /// Claim name → the VolumeSnapshot in the preview's namespace, for the plan.
    pub(crate) fn claims(&self) -> BTreeMap<String, String> {
        match self {
            Restore::Set(set) => data::restored_claims(set),
            Restore::Kept(claims) => claims.clone(),
            _ => BTreeMap::new(),
        }
    }
}

/// Decide the preview's data and record it in `st.data`; `latest`: a reset asked for the newest
/// set.
pub(crate) fn decide(
    st: &mut PreviewStatus,
    blueprint: &Blueprint,
    cluster: &Cluster,
    latest: bool,
) -> Restore {
    let Some(spec) = blueprint
        .spec
        .data
        .as_ref()
        .filter(|d| d.from == DataFrom::Snapshot)
    else {
        // Switched off: claims restored before keep their (immutable) source until a reset.
        if let Some(claims) = kept(st) {
            return Restore::Kept(claims);
        }
        st.data = None;
        return Restore::Empty;
    };
    match data::placed(spec, cluster.name.as_str(), blueprint.spec.source_cluster()) {
        Placed::Here => {}
        Placed::Seeded(note) => {
            st.data = Some(PreviewData {
                note: Some(note),
                ..PreviewData::default()
            });
            return Restore::Empty;
        }
        Placed::Refused(why) => return Restore::Fail(why),
    }
    let own = st.data.as_ref().and_then(|d| d.snapshot.clone());
    let status = blueprint.status.as_ref().and_then(|s| s.data.as_ref());
    match data::choose(status, own.as_deref(), latest) {
        Choice::Restore(set) => {
            st.data = Some(PreviewData {
                snapshot: Some(set.id.clone()),
                taken_at: Some(set.taken_at.clone()),
                claims: set.claims.iter().map(|c| c.claim.clone()).collect(),
                note: None,
            });
            Restore::Set(set.clone())
        }
        Choice::Wait(why) => Restore::Wait(why),
        Choice::Fail(why) => match kept(st).filter(|_| !latest) {
            Some(claims) => Restore::Kept(claims),
            None => Restore::Fail(why),
        },
    }
}

/// The claims a preview already rolled out restored from a set (claim → the VolumeSnapshot they
/// name), which stay as they are: a claim's data source cannot change once made. None after a
/// reset (`st.rollout` cleared: the claims are made anew) or when nothing was restored.
fn kept(st: &PreviewStatus) -> Option<BTreeMap<String, String>> {
    st.rollout.as_ref()?;
    let data = st.data.as_ref()?;
    let own = data.snapshot.as_deref()?;
    Some(
        data.claims
            .iter()
            .map(|c| (c.clone(), data::local_snapshot_name(own, c)))
            .collect(),
    )
}

/// Make the objects restoring `set` in namespace `ns`, and release those of another set the
/// preview restored before (a reset to the newest).
pub(crate) async fn bind(
    pe: &PreviewEnvironment,
    set: &SnapshotSet,
    ns: &str,
    blueprint: &str,
    cluster: &Cluster,
) -> Result<Result<(), String>, Error> {
    let preview = kube::ResourceExt::name_any(pe);
    let objects = match data::restore_objects(set, ns, &preview, blueprint) {
        Ok(o) => o,
        Err(why) => return Ok(Err(why)),
    };
    match snapshots::restore(cluster.client(), &objects).await {
        Ok(()) => {}
        Err(e) => {
            if let Some(why) = snapshots::not_served(&e) {
                return Ok(Err(format!("data: {why}")));
            }
            return match e {
                kube::Error::Api(r) if r.code < 500 && r.code != 429 => Ok(Err(format!(
                    "data: restoring snapshot {} was refused: {}",
                    set.id, r.message
                ))),
                e => Err(Error::Kube(e)),
            };
        }
    }
    snapshots::forget_others(cluster.client(), ns, &set.id).await?;
    snapshots::release(cluster.client(), &preview, Some(&set.id)).await?;
    Ok(Ok(()))
}

/// Why a claim restored from the snapshot cannot be provisioned, once the provisioner said so.
pub(crate) async fn restore_failure(cluster: &Cluster, ns: &str) -> Result<Option<String>, Error> {
    Ok(snapshots::restore_failure(cluster.client(), ns).await?)
}
