//! Per-preview data from CSI volume snapshots, as rules: when a Blueprint's claims are
//! snapshotted again, which snapshot sets are deleted (never one a live preview started from),
//! which set a preview restores (its own, or the newest), and the objects that restore a set in
//! the preview's namespace — a VolumeSnapshotContent bound in advance to a VolumeSnapshot there,
//! pointing at the source snapshot's handle and retained, the way Kubernetes documents restoring
//! a snapshot into another namespace. No I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::naming::fit_label;
use sandcastle_crd::labels::{BLUEPRINT, DATA_SET, MANAGED_BY, MANAGER, PREVIEW};
use sandcastle_crd::{DataElsewhere, DataSpec, DataStatus, SnapshotSet};

/// The API group and version of CSI snapshots.
pub const SNAPSHOT_API: &str = "snapshot.storage.k8s.io/v1";

/// The longest object name Kubernetes takes (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The id of a set taken at `now`: `20261207-031500` (UTC), sortable as text.
pub fn set_id(now: Timestamp) -> String {
    now.strftime("%Y%m%d-%H%M%S").to_string()
}

/// The VolumeSnapshot of `claim` in the source namespace.
pub fn source_snapshot_name(blueprint: &str, set: &str, claim: &str) -> String {
    fit_label(&format!("{blueprint}-{set}-{claim}"), MAX_NAME)
}

/// The VolumeSnapshot in a preview's namespace that its copy of `claim` is restored from.
pub fn local_snapshot_name(set: &str, claim: &str) -> String {
    fit_label(&format!("data-{set}-{claim}"), MAX_NAME)
}

/// The (cluster-scoped) VolumeSnapshotContent that binds [`local_snapshot_name`] in `namespace`
/// to the source snapshot.
pub fn content_name(namespace: &str, set: &str, claim: &str) -> String {
    fit_label(&format!("sandcastle-{namespace}-{set}-{claim}"), MAX_NAME)
}

/// How long after a set failed another is tried (the cause — a missing VolumeSnapshotClass, a
/// driver down — may be fixed meanwhile).
pub const RETRY_FAILED: Duration = Duration::from_secs(60);

/// Why a new set is due, if one is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// The Blueprint has no set yet.
    First,
    /// Asked for (the `data-refresh` annotation's token).
    Asked(String),
    /// The newest set is older than `every`.
    Every,
    /// The newest set failed [`RETRY_FAILED`] ago or more.
    Retry,
}

/// Whether a new set is due: never while one is being taken (not ready, no error).
pub fn due(
    spec: &DataSpec,
    status: &DataStatus,
    asked: Option<&str>,
    now: Timestamp,
) -> Option<Due> {
    let taking = status.sets.iter().any(|s| !s.ready && s.error.is_none());
    if taking {
        return None;
    }
    if let Some(token) = asked
        && status.refreshed.as_deref() != Some(token)
    {
        return Some(Due::Asked(token.to_owned()));
    }
    let Some(newest) = status.sets.first() else {
        return Some(Due::First);
    };
    let age = age(newest, now);
    if newest.error.is_some() {
        return (age >= RETRY_FAILED).then_some(Due::Retry);
    }
    let every = spec.every.get();
    (!every.is_zero() && age >= every).then_some(Due::Every)
}

/// How old `set` is at `now`.
pub fn age(set: &SnapshotSet, now: Timestamp) -> Duration {
    now.duration_since(set.taken_at.0)
        .try_into()
        .unwrap_or_default()
}

/// How long the newest ready set is older before the sets it pushes past `keep` are deleted: a
/// new preview that chose the set just before has written it into its status (and so pins it)
/// well within this.
pub const RETIRE_AFTER: Duration = Duration::from_secs(60);

/// The sets to delete (ids) at `now`: ready sets past the newest `keep` (once the newest ready
/// set is [`RETIRE_AFTER`] old), and failed sets but the newest set (which says why the last try
/// failed) — except those in `pinned` (sets live previews started from, which their reset
/// restores).
pub fn retired(
    status: &DataStatus,
    keep: u32,
    pinned: &BTreeSet<String>,
    now: Timestamp,
) -> Vec<String> {
    let settled = status
        .sets
        .iter()
        .find(|s| s.ready)
        .is_some_and(|newest| age(newest, now) >= RETIRE_AFTER);
    let mut ready_seen = 0;
    let mut out = Vec::new();
    for (i, set) in status.sets.iter().enumerate() {
        let drop = if set.ready {
            ready_seen += 1;
            ready_seen > keep && settled
        } else {
            set.error.is_some() && i > 0
        };
        if drop && !pinned.contains(&set.id) {
            out.push(set.id.clone());
        }
    }
    out
}

/// A set as found in the cluster: its namespace, Blueprint and id.
pub type FoundSet = (String, String, String);

/// The sets no Blueprint keeps any more — its Blueprint was deleted, no longer restores
/// snapshots, or reads another namespace now (`kept`: Blueprint → the namespace whose sets it
/// keeps) — and no live preview started from (`pinned`: Blueprint → set ids).
pub fn orphaned(
    found: &[FoundSet],
    kept: &BTreeMap<String, String>,
    pinned: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<FoundSet> {
    found
        .iter()
        .filter(|(ns, bp, _)| kept.get(bp) != Some(ns))
        .filter(|(_, bp, set)| !pinned.get(bp).is_some_and(|p| p.contains(set)))
        .cloned()
        .collect()
}

/// Which set a preview restores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice<'a> {
    Restore(&'a SnapshotSet),
    /// Not yet: the first set is being taken (for people).
    Wait(String),
    /// Never, as things stand (for people).
    Fail(String),
}

/// The set a preview restores: the one it started from (`own`), unless `latest`; else the
/// newest ready one.
pub fn choose<'a>(status: Option<&'a DataStatus>, own: Option<&str>, latest: bool) -> Choice<'a> {
    let sets = status.map(|s| s.sets.as_slice()).unwrap_or_default();
    if let Some(own) = own.filter(|_| !latest) {
        return match sets.iter().find(|s| s.id == own && s.ready) {
            Some(set) => Choice::Restore(set),
            None => Choice::Fail(format!(
                "data: snapshot {own}, which this preview started from, is gone; reset with \
                 --latest to restore the newest"
            )),
        };
    }
    if let Some(set) = sets.iter().find(|s| s.ready) {
        return Choice::Restore(set);
    }
    if let Some(set) = sets.iter().find(|s| s.error.is_none()) {
        return Choice::Wait(format!(
            "data: waiting for snapshot {} of the Blueprint's claims to be ready",
            set.id
        ));
    }
    let why = sets
        .first()
        .and_then(|s| s.error.clone())
        .or_else(|| status.and_then(|s| s.message.clone()));
    match why {
        Some(why) => Choice::Fail(format!("data: no snapshot to restore from: {why}")),
        None => {
            Choice::Wait("data: waiting for the first snapshot of the Blueprint's claims".into())
        }
    }
}

/// What a preview placed in cluster `preview` does about snapshots taken in cluster `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// The same cluster: it restores them.
    Here,
    /// Another: it starts empty and is seeded (`elsewhere: seed`); the note says so.
    Seeded(String),
    /// Another: it is refused (for people).
    Refused(String),
}

/// Snapshots do not cross clusters: what a preview in cluster `preview` does.
pub fn placed(spec: &DataSpec, preview: &str, source: &str) -> Placed {
    if preview == source {
        return Placed::Here;
    }
    let why = format!(
        "snapshots do not cross clusters: this preview is in cluster {preview}, the Blueprint's \
         data is snapshotted in {source}"
    );
    match spec.elsewhere {
        DataElsewhere::Seed => Placed::Seeded(format!("started empty and seeded: {why}")),
        DataElsewhere::Refuse => Placed::Refused(format!(
            "data: {why}; set spec.data.elsewhere: seed to start such previews empty"
        )),
    }
}

/// The claims a preview restores from `set`: claim → the VolumeSnapshot in its namespace.
pub fn restored_claims(set: &SnapshotSet) -> BTreeMap<String, String> {
    set.claims
        .iter()
        .map(|c| (c.claim.clone(), local_snapshot_name(&set.id, &c.claim)))
        .collect()
}

/// The objects restoring `set` in `namespace` (preview `preview` of Blueprint `blueprint`): for
/// each claim, a VolumeSnapshotContent (cluster-scoped, retained: deleting it never deletes
/// the source's snapshot) bound in advance to a VolumeSnapshot in the namespace. Contents
/// first: the snapshot binds to one that exists.
pub fn restore_objects(
    set: &SnapshotSet,
    namespace: &str,
    preview: &str,
    blueprint: &str,
) -> Result<Vec<Value>, String> {
    let labels = json!({
        MANAGED_BY: MANAGER, PREVIEW: preview, BLUEPRINT: blueprint, DATA_SET: set.id,
    });
    let mut contents = Vec::new();
    let mut snapshots = Vec::new();
    for c in &set.claims {
        let (Some(handle), Some(driver)) = (&c.handle, &c.driver) else {
            return Err(format!(
                "data: snapshot {} of claim {} has no handle yet",
                set.id, c.claim
            ));
        };
        let local = local_snapshot_name(&set.id, &c.claim);
        let content = content_name(namespace, &set.id, &c.claim);
        let mut content_spec = json!({
            "deletionPolicy": "Retain",
            "driver": driver,
            "source": {"snapshotHandle": handle},
            "volumeSnapshotRef": {"namespace": namespace, "name": local},
        });
        if let Some(class) = &c.class {
            content_spec["volumeSnapshotClassName"] = json!(class);
        }
        contents.push(json!({
            "apiVersion": SNAPSHOT_API, "kind": "VolumeSnapshotContent",
            "metadata": {"name": content, "labels": labels},
            "spec": content_spec,
        }));
        snapshots.push(json!({
            "apiVersion": SNAPSHOT_API, "kind": "VolumeSnapshot",
            "metadata": {"name": local, "namespace": namespace, "labels": labels},
            "spec": {"source": {"volumeSnapshotContentName": content}},
        }));
    }
    contents.extend(snapshots);
    Ok(contents)
}

/// The claims to snapshot among the source's bound claims (`bound`), as `spec.claims` names
/// them (every one when it names none); `Err` names a claim asked for and not there.
pub fn claims_to_take(spec: &DataSpec, bound: &[String]) -> Result<Vec<String>, String> {
    if spec.claims.is_empty() {
        return if bound.is_empty() {
            Err("the source namespace has no bound PersistentVolumeClaim to snapshot".into())
        } else {
            Ok(bound.to_vec())
        };
    }
    let have: BTreeSet<&String> = bound.iter().collect();
    match spec.claims.iter().find(|c| !have.contains(c)) {
        Some(missing) => Err(format!(
            "spec.data.claims: {missing} is not a bound PersistentVolumeClaim of the source namespace"
        )),
        None => Ok(spec.claims.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use sandcastle_crd::{ClaimSnapshot, GoDuration};

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn set(id: &str, taken: &str, ready: bool, error: Option<&str>) -> SnapshotSet {
        SnapshotSet {
            id: id.into(),
            taken_at: Time(at(taken)),
            ready,
            error: error.map(str::to_owned),
            claims: vec![ClaimSnapshot {
                claim: "data-redis-0".into(),
                volume_snapshot: format!("bp-{id}-data-redis-0"),
                handle: ready.then(|| format!("snap-{id}")),
                driver: Some("hostpath.csi.k8s.io".into()),
                class: Some("csi-hostpath-snapclass".into()),
                restore_size: Some("1Gi".into()),
            }],
        }
    }

    fn spec(every: u64) -> DataSpec {
        serde_json::from_value(
            json!({"from": "snapshot", "every": GoDuration::from_secs(every).to_string()}),
        )
        .unwrap()
    }

    fn status(sets: Vec<SnapshotSet>) -> DataStatus {
        DataStatus {
            sets,
            ..DataStatus::default()
        }
    }

    #[test]
    fn set_ids_sort_as_their_times() {
        assert_eq!(set_id(at("2026-12-07T03:15:00Z")), "20261207-031500");
        assert!(set_id(at("2026-12-07T03:15:00Z")) < set_id(at("2026-12-07T10:00:00Z")));
    }

    #[test]
    fn a_set_is_due_first_when_asked_and_when_the_newest_is_old() {
        let now = at("2026-12-07T12:00:00Z");
        assert_eq!(
            due(&spec(3600), &status(vec![]), None, now),
            Some(Due::First)
        );
        let fresh = status(vec![set("a", "2026-12-07T11:30:00Z", true, None)]);
        assert_eq!(due(&spec(3600), &fresh, None, now), None);
        assert_eq!(
            due(&spec(3600), &fresh, Some("t1"), now),
            Some(Due::Asked("t1".into()))
        );
        let taken = DataStatus {
            refreshed: Some("t1".into()),
            ..fresh
        };
        assert_eq!(due(&spec(3600), &taken, Some("t1"), now), None);
        let old = status(vec![set("a", "2026-12-07T10:00:00Z", true, None)]);
        assert_eq!(due(&spec(3600), &old, None, now), Some(Due::Every));
        // `every: 0`: only when asked.
        assert_eq!(due(&spec(0), &old, None, now), None);
    }

    #[test]
    fn no_set_is_due_while_one_is_being_taken() {
        let now = at("2026-12-07T12:00:00Z");
        let taking = status(vec![set("b", "2026-12-07T11:59:00Z", false, None)]);
        assert_eq!(due(&spec(60), &taking, Some("t"), now), None);
        let failed = status(vec![set(
            "b",
            "2026-12-07T11:59:00Z",
            false,
            Some("no class"),
        )]);
        assert_eq!(
            due(&spec(60), &failed, Some("t"), now),
            Some(Due::Asked("t".into()))
        );
    }

    #[test]
    fn retiring_keeps_the_newest_ready_sets_and_every_pinned_one() {
        let st = status(vec![
            set("e", "2026-12-07T05:00:00Z", false, Some("refused")),
            set("d", "2026-12-07T04:00:00Z", true, None),
            set("c", "2026-12-07T03:00:00Z", false, Some("refused")),
            set("b", "2026-12-07T02:00:00Z", true, None),
            set("a", "2026-12-07T01:00:00Z", true, None),
        ]);
        let now = at("2026-12-07T12:00:00Z");
        // "e" failed after the newest ready one: kept, it says why the refresh failed.
        assert_eq!(retired(&st, 2, &BTreeSet::new(), now), vec!["c", "a"]);
        assert_eq!(retired(&st, 1, &BTreeSet::new(), now), vec!["c", "b", "a"]);
        let pinned = BTreeSet::from(["a".to_owned()]);
        assert_eq!(retired(&st, 1, &pinned, now), vec!["c", "b"]);
        // Until the newest ready set is a minute old, a preview that just chose the set it
        // pushes out may not have pinned it yet: only failed sets go.
        let soon = at("2026-12-07T04:00:59Z");
        assert_eq!(retired(&st, 1, &BTreeSet::new(), soon), vec!["c"]);
    }

    #[test]
    fn a_failed_set_is_tried_again_after_a_minute_and_failures_do_not_pile_up() {
        let now = at("2026-12-07T12:00:00Z");
        let failed = status(vec![set(
            "b",
            "2026-12-07T11:59:00Z",
            false,
            Some("no class"),
        )]);
        assert_eq!(due(&spec(86_400), &failed, None, now), Some(Due::Retry));
        let just = status(vec![set(
            "b",
            "2026-12-07T11:59:30Z",
            false,
            Some("no class"),
        )]);
        assert_eq!(due(&spec(86_400), &just, None, now), None);
        let failing = status(vec![
            set("c", "2026-12-07T03:00:00Z", false, Some("no class")),
            set("b", "2026-12-07T02:00:00Z", false, Some("no class")),
            set("a", "2026-12-07T01:00:00Z", false, Some("no class")),
        ]);
        assert_eq!(retired(&failing, 2, &BTreeSet::new(), now), vec!["b", "a"]);
    }

    #[test]
    fn a_preview_restores_its_own_set_or_the_newest() {
        let st = status(vec![
            set("c", "2026-12-07T03:00:00Z", false, None),
            set("b", "2026-12-07T02:00:00Z", true, None),
            set("a", "2026-12-07T01:00:00Z", true, None),
        ]);
        let id = |c: Choice<'_>| match c {
            Choice::Restore(s) => s.id.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(id(choose(Some(&st), None, false)), "b");
        assert_eq!(id(choose(Some(&st), Some("a"), false)), "a");
        assert_eq!(id(choose(Some(&st), Some("a"), true)), "b");
        let Choice::Fail(why) = choose(Some(&st), Some("z"), false) else {
            panic!()
        };
        assert!(
            why.contains("snapshot z") && why.contains("--latest"),
            "{why}"
        );
    }

    #[test]
    fn without_a_ready_set_a_preview_waits_or_fails_with_the_reason() {
        assert!(matches!(choose(None, None, false), Choice::Wait(_)));
        let taking = status(vec![set("a", "2026-12-07T01:00:00Z", false, None)]);
        assert!(matches!(choose(Some(&taking), None, false), Choice::Wait(w) if w.contains("a")));
        let failed = status(vec![set(
            "a",
            "2026-12-07T01:00:00Z",
            false,
            Some("VolumeSnapshot bp-a-data: no default VolumeSnapshotClass"),
        )]);
        let Choice::Fail(why) = choose(Some(&failed), None, false) else {
            panic!()
        };
        assert!(why.contains("no default VolumeSnapshotClass"), "{why}");
        let refused = DataStatus {
            message: Some("the cluster does not serve snapshot.storage.k8s.io/v1".into()),
            ..DataStatus::default()
        };
        assert!(
            matches!(choose(Some(&refused), None, false), Choice::Fail(w) if w.contains("does not serve"))
        );
    }

    #[test]
    fn restoring_binds_a_retained_content_to_a_snapshot_in_the_preview_namespace() {
        let s = set("b", "2026-12-07T02:00:00Z", true, None);
        let objects = restore_objects(&s, "preview-shop-pr-1", "shop-pr-1", "shop").unwrap();
        assert_eq!(objects.len(), 2);
        let (content, snapshot) = (&objects[0], &objects[1]);
        assert_eq!(content["kind"], "VolumeSnapshotContent");
        assert_eq!(content["spec"]["deletionPolicy"], "Retain");
        assert_eq!(content["spec"]["source"]["snapshotHandle"], "snap-b");
        assert_eq!(
            content["spec"]["volumeSnapshotRef"],
            json!({"namespace": "preview-shop-pr-1", "name": "data-b-data-redis-0"})
        );
        assert_eq!(snapshot["metadata"]["namespace"], "preview-shop-pr-1");
        assert_eq!(
            snapshot["spec"]["source"]["volumeSnapshotContentName"],
            content["metadata"]["name"]
        );
        assert_eq!(snapshot["metadata"]["labels"][PREVIEW], "shop-pr-1");
        assert_eq!(
            restored_claims(&s),
            BTreeMap::from([("data-redis-0".to_owned(), "data-b-data-redis-0".to_owned())])
        );
        // A set whose snapshot has no handle yet cannot be restored.
        let pending = set("c", "2026-12-07T02:00:00Z", false, None);
        assert!(restore_objects(&pending, "ns", "p", "bp").is_err());
    }

    #[test]
    fn a_preview_in_another_cluster_is_refused_unless_the_blueprint_seeds_it() {
        let refuse = spec(0);
        assert_eq!(placed(&refuse, "in-cluster", "in-cluster"), Placed::Here);
        let Placed::Refused(why) = placed(&refuse, "b", "in-cluster") else {
            panic!()
        };
        assert!(
            why.contains("cluster b") && why.contains("elsewhere: seed"),
            "{why}"
        );
        let seed = DataSpec {
            elsewhere: DataElsewhere::Seed,
            ..refuse
        };
        let Placed::Seeded(note) = placed(&seed, "b", "in-cluster") else {
            panic!()
        };
        assert!(note.starts_with("started empty and seeded"), "{note}");
    }

    #[test]
    fn long_names_are_cut_with_a_hash() {
        let claim = "c".repeat(250);
        let a = content_name("ns", "20261207-031500", &claim);
        let b = content_name("ns", "20261207-031501", &claim);
        assert!(a.len() <= 253 && b.len() <= 253);
        assert_ne!(a, b);
    }

    #[test]
    fn the_claims_taken_are_those_named_or_every_bound_one() {
        let bound = vec!["data-redis-0".to_owned(), "uploads".to_owned()];
        let all = spec(0);
        assert_eq!(claims_to_take(&all, &bound).unwrap(), bound);
        assert!(claims_to_take(&all, &[]).unwrap_err().contains("no bound"));
        let named = DataSpec {
            claims: vec!["uploads".into()],
            ..all.clone()
        };
        assert_eq!(claims_to_take(&named, &bound).unwrap(), vec!["uploads"]);
        let missing = DataSpec {
            claims: vec!["gone".into()],
            ..all
        };
        assert!(
            claims_to_take(&missing, &bound)
                .unwrap_err()
                .contains("gone")
        );
    }
    #[test]
    fn sets_no_blueprint_keeps_go_unless_a_live_preview_started_from_them() {
        let found: Vec<FoundSet> = [
            ("staging", "shop", "a"),
            ("staging", "gone", "b"),
            ("staging", "gone", "c"),
            ("old", "moved", "d"),
            ("new", "moved", "e"),
        ]
        .iter()
        .map(|(n, b, s)| (n.to_string(), b.to_string(), s.to_string()))
        .collect();
        let kept = BTreeMap::from([
            ("shop".to_owned(), "staging".to_owned()),
            ("moved".to_owned(), "new".to_owned()),
        ]);
        let pinned = BTreeMap::from([("gone".to_owned(), BTreeSet::from(["c".to_owned()]))]);
        let ids = |v: Vec<FoundSet>| v.into_iter().map(|(_, _, s)| s).collect::<Vec<_>>();
        assert_eq!(ids(orphaned(&found, &kept, &pinned)), ["b", "d"]);
        assert_eq!(
            ids(orphaned(&found, &kept, &BTreeMap::new())),
            ["b", "c", "d"]
        );
    }
}
