//! A Blueprint whose previews' data starts from volume snapshots (`spec.data`), where snapshots
//! cannot be taken: its previews fail with the reason — in their status, on GitHub and in the
//! sticky comment — and never fall back to empty data quietly. Restoring on real pods is
//! tests/real/snapshot_data.rs.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use sandcastle::crd::{Blueprint, Phase};
use serde_json::json;

use crate::support::api::{ALL, account, call};
use crate::support::eventually;
use crate::support::fixtures::TINY_APP;
use crate::support::world::{World, pr};

const T: Duration = Duration::from_secs(60);

/// The Blueprint's `status.data.message`, once there is one.
async fn data_message(world: &World, name: &str) -> String {
    let api: Api<Blueprint> = Api::namespaced(world.client.clone(), &world.home.name);
    eventually("the Blueprint's data message", T, || async {
        let bp = api.get(name).await.map_err(|e| e.to_string())?;
        bp.status
            .and_then(|s| s.data)
            .and_then(|d| d.message)
            .ok_or_else(|| "none yet".to_owned())
    })
    .await
}

/// Open pull request 1 and wait until its preview has failed; its status message.
async fn failed_with(world: &World, name: &str) -> String {
    let head = world.open(1).await;
    // GitHub hears the failure just before the status is written: wait for both.
    world.wait_github_state(&head, "failure", T).await;
    let pe = world.wait_phase(name, Phase::Failed, T).await;
    let st = pe.status.unwrap();
    assert!(st.data.is_none(), "no data was restored: {:?}", st.data);
    st.message.unwrap()
}

#[tokio::test]
async fn where_the_cluster_serves_no_snapshots_previews_fail_saying_so() {
    let world = World::new("nosnap", TINY_APP, json!({"data": {"from": "snapshot"}})).await;
    let why = data_message(&world, "nosnap").await;
    assert!(
        why.contains("does not serve snapshot.storage.k8s.io/v1 VolumeSnapshot"),
        "{why}"
    );
    let message = failed_with(&world, "nosnap-pr-1").await;
    assert!(
        message.starts_with("data: no snapshot to restore from: "),
        "{message}"
    );
    assert!(message.contains("VolumeSnapshot"), "{message}");
    // The pull request hears why: the sticky comment carries the reason.
    eventually("the sticky comment says why", T, || async {
        let comments = world.gh.comments(&world.repo, pr(1));
        comments
            .iter()
            .find(|c| c.body.contains("does not serve snapshot.storage.k8s.io/v1"))
            .map(|_| ())
            .ok_or_else(|| format!("{:?}", comments.iter().map(|c| &c.body).collect::<Vec<_>>()))
    })
    .await;
    // And nothing was made to run on empty data.
    let ns = world.namespace_of("nosnap-pr-1");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(world.client.clone(), &ns);
    assert!(deployments.get_opt("web").await.unwrap().is_none());
}

#[tokio::test]
async fn a_blueprint_without_a_live_source_namespace_cannot_snapshot_its_data() {
    let world = World::with_source(
        "nosrc",
        crate::support::world::Source::Manifests(TINY_APP),
        json!({"data": {"from": "snapshot"}}),
    )
    .await;
    let why = data_message(&world, "nosrc").await;
    assert!(why.contains("has no source.namespace"), "{why}");
    let message = failed_with(&world, "nosrc-pr-1").await;
    assert!(message.contains("has no source.namespace"), "{message}");
}

#[tokio::test]
async fn a_refresh_is_asked_of_the_blueprint_by_whoever_rbac_allows_and_never_by_a_preview() {
    // The world's Blueprint restores nothing; `snaps` beside it restores snapshots.
    let world = World::new("refresh", TINY_APP, json!({})).await;
    let api: Api<Blueprint> = Api::namespaced(world.client.clone(), &world.home.name);
    let snaps = json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
        "metadata": {"name": "snaps"},
        "spec": {"source": {"namespace": world.staging.name}, "repositories": ["acme/snaps"],
            "data": {"from": "snapshot"}}});
    api.patch(
        "snaps",
        &PatchParams::apply("test").force(),
        &Patch::Apply(&snaps),
    )
    .await
    .unwrap();
    let admin = account(&world, "admin", &[ALL]).await;
    let reader = account(
        &world,
        "reader",
        &[(&["previewenvironments"], &["get", "list"])],
    )
    .await;
    let refresh = |name: &str| format!("/api/v1/blueprints/{name}/data/refresh");

    let asked = call(&world, "POST", &refresh("snaps"), Some(&admin), None).await;
    assert_eq!(asked.status, 202, "{:?}", asked.body);
    let token = asked.body["asked"].as_str().unwrap().to_owned();
    let bp = api.get("snaps").await.unwrap();
    assert_eq!(
        bp.metadata.annotations.unwrap()["sandcastle.dev/data-refresh"],
        token
    );

    // RBAC decides, before anything is looked at.
    let refused = call(&world, "POST", &refresh("snaps"), Some(&reader), None).await;
    assert_eq!(
        (refused.status, refused.body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    let missing = call(&world, "POST", &refresh("nope"), Some(&admin), None).await;
    assert_eq!(
        (missing.status, missing.body["error"]["code"].as_str()),
        (404, Some("blueprint_not_found"))
    );
    // A Blueprint that does not restore snapshots has none to refresh.
    let conflict = call(&world, "POST", &refresh("refresh"), Some(&admin), None).await;
    assert_eq!(
        (conflict.status, conflict.body["error"]["code"].as_str()),
        (409, Some("no_data_snapshots")),
        "{:?}",
        conflict.body
    );

    // A preview's own token operates its preview, never a Blueprint previews come from.
    let head = world.open(1).await;
    world.wait_github_state(&head, "success", T).await;
    let minted = call(
        &world,
        "POST",
        "/api/v1/previews/refresh-pr-1/token",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(minted.status, 201, "{:?}", minted.body);
    let own = minted.body["token"].as_str().unwrap().to_owned();
    let by_preview = call(&world, "POST", &refresh("snaps"), Some(&own), None).await;
    assert_eq!(by_preview.status, 403, "{:?}", by_preview.body);
    let bp = api.get("snaps").await.unwrap();
    assert_eq!(
        bp.metadata.annotations.unwrap()["sandcastle.dev/data-refresh"],
        token
    );
}

#[tokio::test]
async fn maintainers_refresh_the_data_from_a_pull_request_and_writers_are_told_why_not() {
    use sandcastle_fake_github::Role;
    let world = World::new("cmdsnap", TINY_APP, json!({"data": {"from": "snapshot"}})).await;
    world.open(1).await;
    world.gh.set_role(&world.repo, "mia", Role::Maintain);
    world.gh.set_role(&world.repo, "wes", Role::Write);
    let api: Api<Blueprint> = Api::namespaced(world.client.clone(), &world.home.name);
    let asked = || async {
        let bp = api.get("cmdsnap").await.unwrap();
        bp.metadata
            .annotations
            .unwrap_or_default()
            .get("sandcastle.dev/data-refresh")
            .cloned()
    };
    let replied = |text: &'static str| {
        let world = &world;
        move || async move {
            let comments = world.gh.comments(&world.repo, pr(1));
            comments
                .iter()
                .find(|c| c.body.contains(text))
                .map(|_| ())
                .ok_or_else(|| {
                    format!("{:?}", comments.iter().map(|c| &c.body).collect::<Vec<_>>())
                })
        }
    };

    let by_writer = world
        .gh
        .comment(&world.repo, pr(1), "wes", "/preview refresh-data");
    world.deliver(&by_writer).await;
    eventually(
        "the writer is told why not",
        T,
        replied("Only maintainers of"),
    )
    .await;
    assert_eq!(asked().await, None);

    let by_maintainer = world
        .gh
        .comment(&world.repo, pr(1), "mia", "/preview refresh-data");
    world.deliver(&by_maintainer).await;
    eventually(
        "the maintainer's refresh is acknowledged",
        T,
        replied("Asked for a new snapshot of the data of `cmdsnap`"),
    )
    .await;
    assert!(asked().await.is_some());
}
