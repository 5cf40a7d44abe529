//! Each preview's own copy of the Blueprint's data, from CSI volume snapshots, on real pods: the
//! staging Redis keeps its data on a `csi-hostpath` claim; Sandcastle snapshots it, and each
//! preview's Redis starts from a restore of that snapshot (read back through the app, through
//! Traefik). A preview's writes stay its own; a refresh gives new previews the staging data as it
//! is now while older previews keep theirs; reset restores the snapshot the preview started
//! from; teardown leaves no VolumeSnapshotContent behind.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use sandcastle::crd::Blueprint;
use serde_json::{Value, json};

use crate::support::api::{ALL, account, call};
use crate::support::eventually;
use crate::support::world::{World, sha};
use crate::tier::{self, REAL_APP, T, host_of, open_at};

/// The test app, its Redis keeping its data on a snapshottable claim (no seed Job: the data
/// comes from the snapshot).
fn staging_yaml() -> String {
    let docs: Vec<&str> = REAL_APP
        .split("\n---\n")
        .filter(|d| !d.contains("name: seed"))
        .collect();
    docs.join("\n---\n")
        .replace(
            "      volumes: [{name: data, emptyDir: {}}]\n",
            "  volumeClaimTemplates:\n    - metadata: {name: data}\n      spec: {accessModes: [ReadWriteOnce], storageClassName: csi-hostpath, resources: {requests: {storage: 64Mi}}}\n",
        )
        .replace(
            "          image: sandcastle.test/redis:7\n",
            "          image: sandcastle.test/redis:7\n          args: [--protected-mode, \"no\", --dir, /data, --save, \"\", --appendonly, \"no\"]\n",
        )
}

/// Run `commands` (Redis protocol lines) against the staging Redis, wait for the Job, and
/// delete it (the staging namespace is what previews clone: a Job left there would run in them).
async fn redis_do(world: &World, name: &str, commands: &str) {
    let ns = &world.staging.name;
    let script = format!(
        "i=0; while [ $i -lt 100 ]; do printf '{commands}' | nc -w 3 redis 6379 | tee /dev/stderr | grep -q -e OK -e 600 && exit 0; i=$((i+1)); sleep 0.2; done; exit 1"
    );
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "redis", "image": "sandcastle.test/busybox:1",
                "command": ["sh", "-c", script],
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
            }],
        }}},
    }))
    .unwrap();
    let jobs: Api<Job> = Api::namespaced(world.client.clone(), ns);
    jobs.create(&PostParams::default(), &job).await.unwrap();
    eventually(&format!("job {name} succeeded"), T, || async {
        let j = jobs.get(name).await.map_err(|e| e.to_string())?;
        let st = j.status.unwrap_or_default();
        if st.failed.unwrap_or(0) > 0 {
            panic!("job {name} failed: {st:?}");
        }
        (st.succeeded.unwrap_or(0) > 0)
            .then_some(())
            .ok_or_else(|| format!("{st:?}"))
    })
    .await;
    jobs.delete(name, &DeleteParams::foreground())
        .await
        .unwrap();
    eventually(&format!("job {name} gone"), T, || async {
        match jobs.get_opt(name).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        }
    })
    .await;
}

/// The visit counter the app answers `/api/info` with (each call is a visit). Ready means the
/// page serves the commit; the app reaches Redis through its Service once kube-proxy has its
/// rules, which may come a moment later: until then the app answers 503 and counts nothing.
async fn visit(tier: &tier::RealTier, host: &str) -> i64 {
    eventually(
        "the app counts a visit",
        Duration::from_secs(30),
        || async {
            let page = tier.get(host, "/api/info").await;
            match page.status {
                200 => page.json()["counter"]
                    .as_i64()
                    .ok_or_else(|| panic!("no counter: {page:?}")),
                503 => Err(format!("{page:?}")),
                _ => panic!("{page:?}"),
            }
        },
    )
    .await
}

/// The Blueprint's newest ready snapshot set, once it is another than `not`.
async fn newest_set(world: &World, name: &str, not: Option<&str>) -> Value {
    let api: Api<Blueprint> = Api::namespaced(world.client.clone(), &world.home.name);
    eventually("a ready snapshot set", T, || async {
        let bp = api.get(name).await.map_err(|e| e.to_string())?;
        let data = json!(bp.status.and_then(|s| s.data));
        let set = data["sets"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["ready"] == true).cloned());
        match set {
            Some(s) if s["id"].as_str() != not => Ok(s),
            _ => Err(format!("{data}")),
        }
    })
    .await
}

/// Reset preview `name` through the API (with `body`), and wait until it is Ready again.
async fn reset_and_wait(world: &World, token: &str, name: &str, body: Option<Value>) {
    let path = format!("/api/v1/previews/{name}/reset");
    let reset = call(world, "POST", &path, Some(token), body).await;
    assert_eq!(reset.status, 202, "{:?}", reset.body);
    let path = format!("/api/v1/previews/{name}/wait?for=ready&timeout=2m");
    let waited = call(world, "GET", &path, Some(token), None).await;
    assert_eq!(waited.body["outcome"], "ready", "{:?}", waited.body);
}

async fn preview_data(world: &World, name: &str) -> Value {
    let pe = world.previews().get(name).await.unwrap();
    json!(pe.status.and_then(|s| s.data))
}

#[tokio::test]
async fn previews_start_from_a_snapshot_of_the_blueprint_data_and_keep_their_own() {
    let tier = tier::tier();
    let yaml = staging_yaml();
    let blueprint = tier::blueprint(json!({"data": {"from": "snapshot", "every": "0", "keep": 1}}));
    let mut world = World::unstarted("snapdata", &yaml, blueprint).await;
    world.probe_via = Some(tier.probe_via());

    // The staging data, written and saved before Sandcastle first snapshots it.
    let staging = world.staging.name.clone();
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), &staging);
    eventually("the staging Redis running", T, || async {
        let p = pods.get_opt("redis-0").await.map_err(|e| e.to_string())?;
        let ready = p.as_ref().and_then(|p| p.status.as_ref()).is_some_and(|s| {
            s.conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        ready.then_some(()).ok_or_else(|| "not ready".to_owned())
    })
    .await;
    redis_do(&world, "rows-500", "SET testapp:visits 500\\r\\nSAVE\\r\\n").await;
    world.start().await;
    let admin = account(&world, "admin", &[ALL]).await;
    let first = newest_set(&world, "snapdata", None).await;
    let first_id = first["id"].as_str().unwrap().to_owned();
    assert_eq!(first["claims"][0]["claim"], "data-redis-0", "{first}");

    // A preview sees the staging rows; its writes are its own.
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_github_state(&head, "success", T).await;
    let one = host_of(&world, "snapdata-pr-1").await;
    assert_eq!(visit(&tier, &one).await, 501);
    assert_eq!(visit(&tier, &one).await, 502);
    let data = preview_data(&world, "snapdata-pr-1").await;
    assert_eq!(data["snapshot"], first_id.as_str(), "{data}");
    assert_eq!(data["claims"], json!(["data-redis-0"]), "{data}");

    // Another preview from the same snapshot does not see the first one's writes.
    let head2 = sha();
    tier.image_for(&head2);
    open_at(&world, 2, &head2).await;
    world.wait_github_state(&head2, "success", T).await;
    let two = host_of(&world, "snapdata-pr-2").await;
    assert_eq!(visit(&tier, &two).await, 501);

    // Staging moves on (had it seen the previews' writes, it would not be at 600), and a
    // refresh is asked for through the API: a new preview starts from the newer data, the older
    // ones keep their own.
    redis_do(
        &world,
        "rows-600",
        "INCRBY testapp:visits 100\\r\\nSAVE\\r\\n",
    )
    .await;
    redis_do(&world, "check-600", "GET testapp:visits\\r\\n").await;
    let api: Api<Blueprint> = Api::namespaced(world.client.clone(), &world.home.name);
    let refresh = call(
        &world,
        "POST",
        "/api/v1/blueprints/snapdata/data/refresh",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(refresh.status, 202, "{:?}", refresh.body);
    assert_eq!(refresh.body["snapshots"][0]["id"], first_id.as_str());
    let second = newest_set(&world, "snapdata", Some(&first_id)).await;
    let second_id = second["id"].as_str().unwrap().to_owned();
    let head3 = sha();
    tier.image_for(&head3);
    open_at(&world, 3, &head3).await;
    world.wait_github_state(&head3, "success", T).await;
    let three = host_of(&world, "snapdata-pr-3").await;
    assert_eq!(visit(&tier, &three).await, 601);
    assert_eq!(visit(&tier, &one).await, 503);
    assert_eq!(
        preview_data(&world, "snapdata-pr-3").await["snapshot"],
        second_id.as_str()
    );

    // `keep: 1`, yet the first set stays: previews restore from it on reset.
    let bp = api.get("snapdata").await.unwrap();
    let ids: Vec<String> = bp
        .status
        .unwrap()
        .data
        .unwrap()
        .sets
        .iter()
        .map(|s| s.id.clone())
        .collect();
    assert!(ids.contains(&first_id), "{ids:?}");

    // Reset restores the snapshot the preview started from, not the newest.
    reset_and_wait(&world, &admin, "snapdata-pr-1", None).await;
    assert_eq!(visit(&tier, &one).await, 501);

    // Reset to the newest snapshot: the staging data as it was refreshed.
    reset_and_wait(
        &world,
        &admin,
        "snapdata-pr-1",
        Some(json!({"latest": true})),
    )
    .await;
    assert_eq!(visit(&tier, &one).await, 601);
    let data = preview_data(&world, "snapdata-pr-1").await;
    assert_eq!(data["snapshot"], second_id.as_str(), "{data}");

    // Switching the Blueprint's data off changes new previews only: a push to a running one
    // rolls out with its claims as they are (a claim's data source cannot change) and its data.
    let data_spec = api.get("snapdata").await.unwrap().spec.data;
    api.patch(
        "snapdata",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"data": null}})),
    )
    .await
    .unwrap();
    let head4 = sha();
    tier.image_for(&head4);
    let pushed = world
        .gh
        .push(&world.repo, crate::support::world::pr(1), &head4);
    world.deliver(&pushed).await;
    world.wait_github_state(&head4, "success", T).await;
    assert_eq!(visit(&tier, &one).await, 602);
    let data = preview_data(&world, "snapdata-pr-1").await;
    assert_eq!(data["snapshot"], second_id.as_str(), "{data}");
    api.patch(
        "snapdata",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"data": data_spec}})),
    )
    .await
    .unwrap();

    // Teardown releases what bound the snapshots into the previews; once no preview started
    // from the first set, it is retired.
    for n in [1, 2, 3] {
        let closed = world
            .gh
            .close(&world.repo, crate::support::world::pr(n), false);
        world.deliver(&closed).await;
    }
    let contents = sandcastle::k8s::snapshots::contents(&world.client);
    eventually(
        "no VolumeSnapshotContent of the previews left",
        T,
        || async {
            let left: Vec<String> = contents
                .list(&ListParams::default().labels("sandcastle.dev/blueprint=snapdata"))
                .await
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .map(|c| c.name_any())
                .collect();
            left.is_empty()
                .then_some(())
                .ok_or_else(|| format!("{left:?}"))
        },
    )
    .await;
    eventually("the first set retired", Duration::from_secs(60), || async {
        let bp = api.get("snapdata").await.map_err(|e| e.to_string())?;
        let ids: Vec<String> = bp
            .status
            .unwrap()
            .data
            .unwrap()
            .sets
            .iter()
            .map(|s| s.id.clone())
            .collect();
        (!ids.contains(&first_id))
            .then_some(())
            .ok_or_else(|| format!("{ids:?}"))
    })
    .await;

    // Deleting the Blueprint leaves no snapshot of its data in the source namespace (an
    // ownerReference cannot cross namespaces: the data keeper deletes them).
    api.delete("snapdata", &DeleteParams::default())
        .await
        .unwrap();
    let left = sandcastle::k8s::snapshots::volume_snapshots(&world.client, &world.staging.name);
    eventually(
        "no VolumeSnapshot of the deleted Blueprint left",
        Duration::from_secs(90),
        || async {
            let names: Vec<String> = left
                .list(&ListParams::default().labels("sandcastle.dev/blueprint=snapdata"))
                .await
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .map(|s| s.name_any())
                .collect();
            names
                .is_empty()
                .then_some(())
                .ok_or_else(|| format!("{names:?}"))
        },
    )
    .await;
}
