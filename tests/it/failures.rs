//! Failed previews as GitHub and people see them: a commit that fails gets one `failure` and
//! nothing more until something changes; while a rollout waits, what its pods are stuck on (the
//! scheduler's reason) is said at once, not only when the readiness timeout ends.

use std::time::Duration;

use sandcastle::crd::{Phase, PreviewEnvironment};
use sandcastle_fake_github::PrSpec;
use serde_json::json;

use crate::support::world::{World, pr, sha};
use crate::support::{eventually, wait_for};

const T: Duration = Duration::from_secs(90);

const NEVER_READY: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata:
      labels: {app: api}
      annotations: {test.sandcastle.dev/fate: never-ready}
    spec:
      containers: [{name: api, image: ghcr.io/acme/api:1.0}]
";

const UNSCHEDULABLE: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      nodeSelector: {sandcastle.test/disktype: holographic}
      containers: [{name: api, image: ghcr.io/acme/api:1.0}]
";

fn states(world: &World, sha: &sandcastle::domain::Sha) -> Vec<String> {
    world
        .gh
        .deployments(&world.repo)
        .into_iter()
        .find(|d| &d.sha == sha)
        .map(|d| d.statuses.into_iter().map(|s| s.state).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_failed_commit_gets_one_failure_and_nothing_more() {
    let mut world = World::new("flap", NEVER_READY, json!({})).await;
    let clock = world.use_manual_clock().await;
    let first = sha();
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(1), first.clone(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    world.wait_phase("flap-pr-1", Phase::Deploying, T).await;
    clock.advance(Duration::from_secs(121));
    world.wait_github_state(&first, "failure", T).await;

    // Time passes and every preview is looked at again: nothing changed, nothing is posted.
    clock.advance(Duration::from_secs(300));
    clock.advance(Duration::from_secs(300));

    // A new commit is the change that starts a new rollout; it fails the same way, once.
    let second = sha();
    assert_eq!(
        world
            .deliver(&world.gh.push(&world.repo, pr(1), &second))
            .await
            .0,
        200
    );
    wait_for(
        &world.previews(),
        "flap-pr-1",
        "deploying the second commit",
        T,
        |pe: Option<&PreviewEnvironment>| {
            pe.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.phase == Some(Phase::Deploying)
                    && s.rollout.as_ref().is_some_and(|r| r.sha == second.as_str())
            })
        },
    )
    .await;
    clock.advance(Duration::from_secs(121));
    world.wait_github_state(&second, "failure", T).await;
    clock.advance(Duration::from_secs(300));
    // The second commit's failure and one more reconcile of everything are the sync point:
    // anything the first commit's failure would still post has been posted by now.
    world.wait_phase("flap-pr-1", Phase::Failed, T).await;

    assert_eq!(states(&world, &first), ["in_progress", "failure"]);
    eventually("the second commit's failure stands alone", T, || async {
        match states(&world, &second)[..] {
            [ref i, ref f] if i == "in_progress" && f == "failure" => Ok(()),
            ref other => Err(format!("{other:?}")),
        }
    })
    .await;
    let pe = world.previews().get("flap-pr-1").await.unwrap();
    let failed: Vec<_> = pe
        .status
        .unwrap()
        .history
        .into_iter()
        .filter(|h| h.action == "Failed")
        .map(|h| h.sha)
        .collect();
    assert_eq!(
        failed,
        [Some(first.to_string()), Some(second.to_string())],
        "one Failed entry per commit"
    );
}

#[tokio::test]
async fn the_schedulers_reason_is_said_while_deploying() {
    let world = World::new("unplaced", UNSCHEDULABLE, json!({})).await;
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(2), sha(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    let pe = wait_for(
        &world.previews(),
        "unplaced-pr-2",
        "the scheduler's reason in the status",
        T,
        |pe: Option<&PreviewEnvironment>| {
            pe.and_then(|p| p.status.as_ref())
                .and_then(|s| s.message.as_deref())
                .is_some_and(|m| m.contains("didn't match Pod's node affinity/selector"))
        },
    )
    .await
    .unwrap();
    let st = pe.status.unwrap();
    assert_eq!(st.phase, Some(Phase::Deploying), "{:?}", st.message);
    assert!(
        st.message
            .as_deref()
            .unwrap()
            .starts_with("starting apps: api 0/1 ready: pods cannot be scheduled: 0/"),
        "{:?}",
        st.message
    );
    eventually("the sticky comment says it too", T, || async {
        let comments = world.gh.comments(&world.repo, pr(2));
        match &comments[..] {
            [one]
                if one
                    .body
                    .contains("didn't match Pod's node affinity/selector") =>
            {
                Ok(())
            }
            other => Err(format!("{other:#?}")),
        }
    })
    .await;
}
