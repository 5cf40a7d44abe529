//! A `wait` right after a write answers about the write, never from the status before it:
//! reset, redeploy, stop, wake and extend through the API, each followed at once by `wait`,
//! end only once the controller has taken the write in; a wait for Ready right after a stop
//! does not count the Ready from before it.

use sandcastle::crd::Phase;
use serde_json::{Value, json};

use crate::support::api::{ALL, account, call};
use crate::support::world::World;

const SEEDED_APP: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: ghcr.io/acme/web:1.0}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: seed
  annotations: {sandcastle.dev/hook: seed}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: seed, image: ghcr.io/acme/seed:1.0}]
";

/// `POST /previews/{name}/{action}` then at once `GET …/wait?for={wanted}`: the wait's answer.
async fn write_then_wait(
    world: &World,
    token: &str,
    name: &str,
    action: &str,
    body: Option<Value>,
    wanted: &str,
) -> Value {
    let path = format!("/api/v1/previews/{name}/{action}");
    let written = call(world, "POST", &path, Some(token), body).await;
    assert!(
        written.status == 200 || written.status == 202,
        "{action}: {} {:?}",
        written.status,
        written.body
    );
    let wait = format!("/api/v1/previews/{name}/wait?for={wanted}&timeout=90s");
    let waited = call(world, "GET", &wait, Some(token), None).await;
    assert_eq!(waited.status, 200, "{action}: {:?}", waited.body);
    assert_eq!(
        waited.body["outcome"], wanted,
        "{action}: {:?}",
        waited.body
    );
    waited.body
}

#[tokio::test]
async fn a_wait_right_after_a_write_answers_about_the_write() {
    let world = World::new("waitw", SEEDED_APP, json!({"maxTtl": "48h"})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    world
        .gh
        .set_branch(&world.repo, "feature/w", &crate::support::world::sha());
    let created = call(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(
            json!({"blueprint": "waitw", "repository": world.repo.as_str(), "branch": "feature/w"}),
        ),
    )
    .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let name = created.body["name"].as_str().unwrap().to_owned();
    let ready = format!("/api/v1/previews/{name}/wait?for=ready&timeout=90s");
    assert_eq!(
        call(&world, "GET", &ready, Some(&admin), None).await.body["outcome"],
        "ready"
    );
    let read = || async { world.previews().get(&name).await.unwrap() };

    // Reset: Ready again only after the data was thrown away and seeded again.
    write_then_wait(&world, &admin, &name, "reset", None, "ready").await;
    let pe = read().await;
    let st = pe.status.clone().unwrap();
    assert_eq!(
        st.reset_done.as_ref(),
        pe.metadata
            .annotations
            .as_ref()
            .unwrap()
            .get("sandcastle.dev/reset"),
        "the wait ended before the reset was carried out: {:?}",
        st.history.iter().map(|h| &h.action).collect::<Vec<_>>()
    );
    assert!(st.history.iter().any(|h| h.action == "Reset"));

    // Redeploy of the same commit: a new rollout, started after the request, is Ready.
    let before = st.rollout.clone().unwrap().started_at;
    write_then_wait(&world, &admin, &name, "redeploy", Some(json!({})), "ready").await;
    let st = read().await.status.unwrap();
    let rollout = st.rollout.unwrap();
    assert!(
        rollout.started_at > before,
        "the wait ended on the rollout from before the redeploy ({:?} vs {:?})",
        rollout.started_at,
        before
    );

    // Stop, then at once a wait for Ready: the Ready from before the stop does not count (the
    // preview stays Ready while its routes are drained), so the wait runs to its timeout.
    let stop = format!("/api/v1/previews/{name}/stop");
    let written = call(&world, "POST", &stop, Some(&admin), None).await;
    assert_eq!(written.status, 202, "{:?}", written.body);
    let brief = format!("/api/v1/previews/{name}/wait?for=ready&timeout=3s");
    let waited = call(&world, "GET", &brief, Some(&admin), None).await;
    assert_eq!(waited.body["outcome"], "timeout", "{:?}", waited.body);
    let stopped = format!("/api/v1/previews/{name}/wait?for=stopped&timeout=90s");
    let waited = call(&world, "GET", &stopped, Some(&admin), None).await;
    assert_eq!(waited.body["outcome"], "stopped", "{:?}", waited.body);
    write_then_wait(&world, &admin, &name, "wake", None, "ready").await;

    // Stop, then wake: each wait ends on the state the write asked for.
    write_then_wait(&world, &admin, &name, "stop", None, "stopped").await;
    assert_eq!(read().await.status.unwrap().phase, Some(Phase::Stopped));
    write_then_wait(&world, &admin, &name, "wake", None, "ready").await;
    let pe = read().await;
    assert_eq!(pe.status.as_ref().unwrap().phase, Some(Phase::Ready));
    assert!(!pe.spec.stopped);

    // Extend: Ready, at the generation the extension made.
    write_then_wait(
        &world,
        &admin,
        &name,
        "extend",
        Some(json!({"duration": "1h"})),
        "ready",
    )
    .await;
    let pe = read().await;
    assert_eq!(
        pe.status.unwrap().observed_generation,
        pe.metadata.generation
    );
}
