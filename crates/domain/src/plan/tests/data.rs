//! Claims restored from a snapshot of the Blueprint's data.

use serde_json::json;

use super::*;

const DB: &str = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  replicas: 2\n  serviceName: db\n  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n    spec: {containers: [{name: db, image: db}]}\n  volumeClaimTemplates:\n    - metadata: {name: data, labels: {tier: data}}\n      spec: {accessModes: [ReadWriteOnce], storageClassName: csi-hostpath, resources: {requests: {storage: 1Gi}}}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: uploads}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, volumeName: pv-123}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: scratch}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n";

fn restoring(claims: &[(&str, &str)]) -> Plan {
    let mut c = ctx();
    c.data = claims
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    plan(&objects(&with_app(DB)), &blueprint(""), &c).unwrap()
}

fn source_of(claim: &Value) -> &Value {
    &claim["spec"]["dataSource"]
}

#[test]
fn a_copied_claim_is_restored_from_the_preview_snapshot_and_others_start_empty() {
    let p = restoring(&[("uploads", "data-s1-uploads")]);
    let uploads = find(&p, "PersistentVolumeClaim", "uploads");
    let source = json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "data-s1-uploads"});
    assert_eq!(source_of(uploads), &source);
    assert_eq!(uploads["spec"]["dataSourceRef"], source);
    assert!(uploads["spec"].get("volumeName").is_none(), "{uploads}");
    assert!(source_of(find(&p, "PersistentVolumeClaim", "scratch")).is_null());
}

#[test]
fn a_statefulset_claim_is_made_restored_under_the_name_the_statefulset_adopts() {
    let p = restoring(&[
        ("data-db-0", "data-s1-data-db-0"),
        ("data-db-1", "data-s1-data-db-1"),
    ]);
    for n in 0..2 {
        let claim = find(&p, "PersistentVolumeClaim", &format!("data-db-{n}"));
        assert_eq!(source_of(claim)["name"], format!("data-s1-data-db-{n}"));
        assert_eq!(claim["spec"]["storageClassName"], "csi-hostpath");
        assert_eq!(claim["metadata"]["labels"]["app"], "db");
        assert_eq!(claim["metadata"]["labels"]["tier"], "data");
        assert_eq!(
            claim["metadata"]["labels"]["sandcastle.dev/preview"],
            "shop-pr-42"
        );
        assert_eq!(claim["metadata"]["namespace"], "shop-pr-42");
    }
    // Made before the StatefulSet: with the configuration, which the data tier waits for.
    let config = p.steps.iter().find(|s| s.stage == Stage::Config).unwrap();
    assert!(
        config
            .objects
            .iter()
            .any(|o| o["metadata"]["name"] == "data-db-1")
    );
}

#[test]
fn without_snapshots_no_claim_is_made_for_a_statefulset() {
    let p = restoring(&[]);
    assert!(p.objects().all(|o| o["metadata"]["name"] != "data-db-0"));
    assert!(source_of(find(&p, "PersistentVolumeClaim", "uploads")).is_null());
}
