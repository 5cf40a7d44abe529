//! The lifecycle guardrails end to end, against the real control plane and the GitHub stand-in,
//! with a manual clock where time matters: TTL expiry and extension, idle stop and wake, caps
//! (queue and reject), catch-up resync after lost deliveries, orphan namespaces, a deleted
//! Blueprint, and leader election with a takeover mid-deploy.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use sandcastle::controller::leader::LeaderElection;
use sandcastle::crd::labels::{ORPHANED_SINCE, STOPPED_REPLICAS};
use sandcastle::crd::{Blueprint, Phase, PreviewEnvironment, SlotState, TeardownReason};
use sandcastle::domain::Sha;
use sandcastle::domain::clock::Clock;
use sandcastle::k8s::previews;
use sandcastle::serve::{self, Parts};
use sandcastle_fake_github::{PrSpec, StatusRecord};
use serde_json::json;

use crate::support::eventually;
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);
const HOUR: Duration = Duration::from_secs(3600);

/// One small Deployment: quick to clone and to get Ready.
fn tiny() -> &'static str {
    crate::support::fixtures::TINY_APP
}

/// A stack with everything stop and wake must handle: a Deployment under an HPA, a StatefulSet,
/// a claim and a CronJob. (The claim is not mounted: the local control plane's volume
/// provisioner only runs while it starts up, so claims made later never bind.)
fn stateful() -> &'static str {
    r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example.com/shop/web:1.0}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: registry.example.com/shop/db:1.0}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: uploads}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: report}
spec:
  schedule: "0 0 1 1 *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: report, image: registry.example.com/shop/report:1.0}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
"#
}

/// A world on a manual clock that starts now.
async fn manual_world(name: &str, yaml: &str, extra: serde_json::Value) -> World {
    let mut world = World::unstarted(name, yaml, extra).await;
    world.clock = Clock::manual(Timestamp::from_second(Timestamp::now().as_second()).unwrap());
    world.start().await;
    world
}

async fn open(world: &World, n: u64) -> Sha {
    world.open(n).await
}

/// The newest status of the deployment of `sha`.
fn latest(world: &World, sha: &Sha) -> Option<StatusRecord> {
    world
        .gh
        .deployments(&world.repo)
        .into_iter()
        .find(|d| d.sha == *sha)?
        .statuses
        .last()
        .cloned()
}

async fn live_previews(world: &World) -> BTreeSet<String> {
    world
        .previews()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.spec.teardown.is_none())
        .map(|p| p.name_any())
        .collect()
}

async fn wait_for_preview(
    world: &World,
    name: &str,
    what: &str,
    cond: impl Fn(&PreviewEnvironment) -> bool,
) -> PreviewEnvironment {
    let api = world.previews();
    eventually(what, T, || {
        let api = api.clone();
        let cond = &cond;
        async move {
            let p = api.get_opt(name).await.map_err(|e| e.to_string())?;
            match p {
                Some(p) if cond(&p) => Ok(p),
                other => Err(format!("{:#?}", other.map(|p| p.status))),
            }
        }
    })
    .await
}

#[tokio::test]
async fn expiry_tears_down_and_extensions_stop_at_max_ttl() {
    let world = manual_world(
        "ttl",
        tiny(),
        json!({"ttl": "2h", "maxTtl": "4h", "stopAfterIdle": "0"}),
    )
    .await;
    let head = open(&world, 1).await;
    let pe = world.wait_phase("ttl-pr-1", Phase::Ready, T).await;
    world.wait_github_state(&head, "success", T).await;
    let created = pe.creation_timestamp().unwrap().0;
    let first = pe.spec.expires_at.clone().unwrap().0;
    assert_eq!(
        first,
        world.clock.now() + jiff::SignedDuration::from_hours(2)
    );

    // Within maxTtl: one hour more.
    let api = world.previews();
    let ext = previews::extend(&api, "ttl-pr-1", HOUR, 4 * HOUR, world.clock.now())
        .await
        .unwrap()
        .unwrap();
    assert!(!ext.capped);
    assert_eq!(ext.expires_at, first + jiff::SignedDuration::from_hours(1));

    // Past the original expiry, before the extended one: still there.
    world.clock.advance(Duration::from_secs(150 * 60));
    let ext2 = previews::extend(&api, "ttl-pr-1", 10 * HOUR, 4 * HOUR, world.clock.now())
        .await
        .unwrap()
        .expect("not expired after 2h30 with an extension to 3h");
    // Beyond maxTtl: cut at creation + maxTtl.
    assert!(ext2.capped);
    assert_eq!(
        ext2.expires_at,
        created + jiff::SignedDuration::from_hours(4)
    );
    let touched = world.clock.now();
    let pe = wait_for_preview(&world, "ttl-pr-1", "the extension seen", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.last_activity.as_ref())
            .is_some_and(|t| t.0 == touched)
    })
    .await;
    assert!(pe.spec.teardown.is_none());
    assert_eq!(pe.status.unwrap().phase, Some(Phase::Ready));

    // Past maxTtl: torn down like a closed PR, saying why.
    world.clock.advance(Duration::from_secs(95 * 60));
    let pe = world.wait_phase("ttl-pr-1", Phase::Removed, T).await;
    assert_eq!(pe.spec.teardown.unwrap().reason, TeardownReason::Expired);
    assert_eq!(
        pe.status.unwrap().message.as_deref(),
        Some("removed: the preview expired")
    );
    assert!(
        !world
            .namespace_exists(&world.namespace_of("ttl-pr-1"))
            .await
    );
    world.wait_github_state(&head, "inactive", T).await;
    let last = latest(&world, &head).unwrap();
    assert_eq!(last.description, "Removed: preview expired");

    // A late redelivery of the opening cannot bring it back.
    assert!(
        previews::extend(&api, "ttl-pr-1", HOUR, 4 * HOUR, world.clock.now())
            .await
            .unwrap()
            .is_none(),
        "a torn-down preview cannot be extended"
    );
}

async fn replicas_of(world: &World, ns: &str) -> (i32, i32, Option<String>, Option<String>) {
    let d = Api::<Deployment>::namespaced(world.client.clone(), ns)
        .get("web")
        .await
        .unwrap();
    let s = Api::<StatefulSet>::namespaced(world.client.clone(), ns)
        .get("db")
        .await
        .unwrap();
    (
        d.spec.as_ref().unwrap().replicas.unwrap(),
        s.spec.as_ref().unwrap().replicas.unwrap(),
        d.annotations().get(STOPPED_REPLICAS).cloned(),
        s.annotations().get(STOPPED_REPLICAS).cloned(),
    )
}

async fn suspended(world: &World, ns: &str) -> Option<bool> {
    Api::<CronJob>::namespaced(world.client.clone(), ns)
        .get("report")
        .await
        .unwrap()
        .spec
        .suspend
}

async fn claims(world: &World, ns: &str) -> BTreeSet<(String, String)> {
    Api::<PersistentVolumeClaim>::namespaced(world.client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| (c.name_any(), c.uid().unwrap()))
        .collect()
}

#[tokio::test]
async fn idle_previews_stop_and_wake_with_their_exact_replicas() {
    let world = manual_world(
        "idle",
        stateful(),
        json!({"stopAfterIdle": "1h", "ttl": "24h"}),
    )
    .await;
    let head = open(&world, 1).await;
    world.wait_phase("idle-pr-1", Phase::Ready, T).await;
    let ns = world.namespace_of("idle-pr-1");

    // Someone scaled the web tier by hand; a wake must bring back exactly that.
    let deployments: Api<Deployment> = Api::namespaced(world.client.clone(), &ns);
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    wait_for_preview(&world, "idle-pr-1", "web 3/3 and Ready", |p| {
        p.status.as_ref().is_some_and(|s| {
            s.phase == Some(Phase::Ready)
                && s.services
                    .iter()
                    .any(|w| w.name == "web" && w.desired == 3 && w.ready == 3)
        })
    })
    .await;
    let before = claims(&world, &ns).await;
    assert_eq!(before.len(), 1, "{before:?}");

    // An hour without activity: stopped.
    world.clock.advance(Duration::from_secs(61 * 60));
    let pe = world.wait_phase("idle-pr-1", Phase::Stopped, T).await;
    let message = pe.status.unwrap().message.unwrap();
    assert!(message.contains("/preview wake"), "{message}");
    assert_eq!(
        replicas_of(&world, &ns).await,
        (0, 0, Some("3".into()), Some("1".into()))
    );
    assert_eq!(suspended(&world, &ns).await, Some(true));
    let hpa = Api::<HorizontalPodAutoscaler>::namespaced(world.client.clone(), &ns)
        .get("web")
        .await
        .unwrap();
    assert_eq!(hpa.spec.min_replicas, Some(2), "the HPA is left as it was");
    world.wait_github_state(&head, "inactive", T).await;
    let status = latest(&world, &head).unwrap();
    assert!(status.description.contains("/preview wake"), "{status:?}");
    assert_eq!(claims(&world, &ns).await, before, "claims untouched");

    // `/preview wake`: the exact replicas back, CronJob resumed, Ready again, same claims.
    previews::set_stopped(&world.previews(), "idle-pr-1", false, world.clock.now())
        .await
        .unwrap()
        .unwrap();
    world.wait_phase("idle-pr-1", Phase::Ready, T).await;
    assert_eq!(replicas_of(&world, &ns).await, (3, 1, None, None));
    assert_eq!(suspended(&world, &ns).await, Some(false));
    assert_eq!(claims(&world, &ns).await, before);
    world.wait_github_state(&head, "success", T).await;
    let deployments_made = world.gh.deployments(&world.repo);
    assert_eq!(deployments_made.len(), 1, "woken on the same deployment");
    let states: Vec<&str> = deployments_made[0]
        .statuses
        .iter()
        .map(|s| s.state.as_str())
        .collect();
    // Scaling web by hand to 3 may be seen while its third pod starts (in progress, then
    // success again) or not at all; then the stop (inactive) and the wake.
    let (hand_scaled, rest) = match states.as_slice() {
        [
            "in_progress",
            "success",
            "in_progress",
            "success",
            rest @ ..,
        ] => (true, rest),
        ["in_progress", "success", rest @ ..] => (false, rest),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        rest,
        ["inactive", "in_progress", "success"],
        "{states:?} (hand scale seen: {hand_scaled})"
    );

    // Idle again, then a push wakes it at the new commit.
    world.clock.advance(Duration::from_secs(61 * 60));
    world.wait_phase("idle-pr-1", Phase::Stopped, T).await;
    let second = sha();
    let (status, _) = world
        .deliver(&world.gh.push(&world.repo, pr(1), &second))
        .await;
    assert_eq!(status, 200);
    world.wait_github_state(&second, "success", T).await;
    let pe = world.wait_phase("idle-pr-1", Phase::Ready, T).await;
    assert_eq!(
        pe.status.unwrap().deployed_sha.as_deref(),
        Some(second.as_str())
    );
    assert_eq!(suspended(&world, &ns).await, Some(false));
    assert_eq!(claims(&world, &ns).await, before);
}

#[tokio::test]
async fn over_the_cap_previews_queue_in_order_and_start_when_a_slot_frees() {
    let world = World::new("cap", tiny(), json!({"maxPreviews": 2})).await;
    let first = open(&world, 1).await;
    open(&world, 2).await;
    let third = open(&world, 3).await;
    world.wait_phase("cap-pr-1", Phase::Ready, T).await;
    world.wait_phase("cap-pr-2", Phase::Ready, T).await;
    let pe = world.wait_phase("cap-pr-3", Phase::Pending, T).await;
    let st = pe.status.unwrap();
    let slot = st.slot.unwrap();
    assert_eq!(
        (slot.state, slot.position, slot.in_use, slot.cap),
        (SlotState::Queued, Some(1), 2, 2)
    );
    assert_eq!(
        st.message.as_deref(),
        Some("1st in line; 2/2 previews of cap in use")
    );
    assert!(
        !world
            .namespace_exists(&world.namespace_of("cap-pr-3"))
            .await
    );
    world.wait_github_state(&third, "queued", T).await;
    eventually("the sticky comment says it is queued, and where", T, || {
        let comments = world.gh.comments(&world.repo, pr(3));
        async move {
            let bodies: Vec<&String> = comments.iter().map(|c| &c.body).collect();
            match bodies.as_slice() {
                [one]
                    if one.contains("🕒 Queued")
                        && one.contains(
                            "| **Status** | 1st in line; 2/2 previews of cap in use |",
                        ) =>
                {
                    Ok(())
                }
                _ => Err(format!("{bodies:?}")),
            }
        }
    })
    .await;
    let bp_api: Api<Blueprint> = Api::namespaced(world.client.clone(), &world.home.name);
    eventually("the Blueprint counts 2 active, 1 queued", T, || async {
        let s = bp_api.get("cap").await.unwrap().status.unwrap_or_default();
        if (s.active_previews, s.queued_previews) == (2, 1) {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;

    // A slot frees: the queued one starts.
    let (status, _) = world
        .deliver(&world.gh.close(&world.repo, pr(1), false))
        .await;
    assert_eq!(status, 200);
    world.wait_phase("cap-pr-1", Phase::Removed, T).await;
    world.wait_github_state(&first, "inactive", T).await;
    world.wait_phase("cap-pr-3", Phase::Ready, T).await;
    world.wait_github_state(&third, "success", T).await;
    eventually("the Blueprint counts 2 active, 0 queued", T, || async {
        let s = bp_api.get("cap").await.unwrap().status.unwrap_or_default();
        if (s.active_previews, s.queued_previews) == (2, 0) {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    let d = world
        .gh
        .deployments(&world.repo)
        .into_iter()
        .find(|d| d.sha == third)
        .unwrap();
    let states: Vec<&str> = d.statuses.iter().map(|s| s.state.as_str()).collect();
    assert_eq!(states, ["queued", "in_progress", "success"]);
}

#[tokio::test]
async fn reject_mode_refuses_over_the_cap() {
    let world = World::new(
        "rej",
        tiny(),
        json!({"maxPreviews": 1, "overCapacity": "reject"}),
    )
    .await;
    open(&world, 1).await;
    world.wait_phase("rej-pr-1", Phase::Ready, T).await;
    let second = open(&world, 2).await;
    let pe = world.wait_phase("rej-pr-2", Phase::Failed, T).await;
    let st = pe.status.unwrap();
    let message = st.message.unwrap();
    assert!(
        message.contains("1/1 previews of blueprint rej are in use (maxPreviews)"),
        "{message}"
    );
    assert_eq!(st.slot.unwrap().state, SlotState::Rejected);
    assert!(
        !world
            .namespace_exists(&world.namespace_of("rej-pr-2"))
            .await
    );
    world.wait_github_state(&second, "failure", T).await;
    let status = latest(&world, &second).unwrap();
    assert!(status.description.contains("maxPreviews"), "{status:?}");
}

#[tokio::test]
async fn one_resync_after_downtime_matches_the_open_pull_requests() {
    let mut world = World::unstarted("sync", tiny(), json!({})).await;
    world.configure = Some(|parts: &mut Parts| {
        parts.settings.resync = true;
        // Only the start-up round runs during the test.
        parts.settings.housekeeping_interval = HOUR;
    });
    world.start().await;
    let one = open(&world, 1).await;
    open(&world, 2).await;
    world.wait_phase("sync-pr-1", Phase::Ready, T).await;
    world.wait_phase("sync-pr-2", Phase::Ready, T).await;
    world.wait_github_state(&one, "success", T).await;

    // Down: three pull requests open and two close; every delivery is lost.
    world.sandcastle.take().unwrap().abort();
    for n in [3, 4, 5] {
        let _lost = world
            .gh
            .open_pull_request(&world.repo, PrSpec::new(pr(n), sha(), &format!("b{n}")));
    }
    let _lost = world.gh.close(&world.repo, pr(1), true);
    let _lost = world.gh.close(&world.repo, pr(3), false);
    world.gh.take_calls();

    world.start().await;
    world.wait_phase("sync-pr-4", Phase::Ready, T).await;
    world.wait_phase("sync-pr-5", Phase::Ready, T).await;
    let removed = world.wait_phase("sync-pr-1", Phase::Removed, T).await;
    assert!(
        removed.status.unwrap().message.unwrap().contains("merged"),
        "merged, as GitHub says"
    );
    world.wait_github_state(&one, "inactive", T).await;
    assert_eq!(
        live_previews(&world).await,
        BTreeSet::from(["sync-pr-2".into(), "sync-pr-4".into(), "sync-pr-5".into()])
    );
    assert!(
        world
            .previews()
            .get_opt("sync-pr-3")
            .await
            .unwrap()
            .is_none(),
        "a pull request opened and closed while down never gets a preview"
    );
    // One round: the installation, its repositories, one page of open pull requests, and the
    // pull request that closed.
    assert_eq!(world.gh.check("GET /app/installations").len(), 1);
    assert_eq!(world.gh.check("GET /installation/repositories").len(), 1);
    assert_eq!(world.gh.check("GET /repos/acme/sync/pulls").len(), 1);
    assert_eq!(world.gh.check("GET /repos/acme/sync/pulls/1").len(), 1);
}

async fn labelled_namespace(world: &World, name: &str, labels: serde_json::Value) {
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels}
    }))
    .unwrap();
    Api::<Namespace>::all(world.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

async fn namespace(world: &World, name: &str) -> Option<Namespace> {
    Api::<Namespace>::all(world.client.clone())
        .get_opt(name)
        .await
        .unwrap()
        .filter(|n| n.meta().deletion_timestamp.is_none())
}

#[tokio::test]
async fn orphan_namespaces_go_after_the_grace_period_and_nothing_else_is_touched() {
    let mut world = World::unstarted("orph", tiny(), json!({})).await;
    world.clock = Clock::manual(Timestamp::from_second(Timestamp::now().as_second()).unwrap());
    world.configure = Some(|parts: &mut Parts| {
        parts.settings.orphan_grace = Some(HOUR);
        parts.settings.housekeeping_interval = HOUR;
    });
    world.start().await;
    let home = world.home.name.clone();
    let orphan = format!("{}-ghost", world.prefix);
    let later = format!("{}-ghost-later", world.prefix);
    let plain = format!("{}-plain", world.prefix);
    let foreign = format!("{}-foreign", world.prefix);
    let ours = |preview: &str| json!({"app.kubernetes.io/managed-by": "sandcastle", "sandcastle.dev/preview": preview, "sandcastle.dev/home": home});
    labelled_namespace(&world, &orphan, ours("ghost")).await;
    labelled_namespace(&world, &plain, json!({"team": "shop"})).await;
    labelled_namespace(
        &world,
        &foreign,
        json!({"app.kubernetes.io/managed-by": "sandcastle", "sandcastle.dev/preview": "ghost", "sandcastle.dev/home": "another-sandcastle"}),
    )
    .await;

    let marked = |name: String| {
        let world = &world;
        async move {
            namespace(world, &name)
                .await
                .and_then(|n| n.annotations().get(ORPHANED_SINCE).cloned())
        }
    };
    world.clock.advance(Duration::from_secs(60));
    eventually("the orphan is marked", T, || async {
        marked(orphan.clone())
            .await
            .ok_or_else(|| "not marked".to_owned())
    })
    .await;

    // 59 minutes in: a second orphan gets marked by the same sweep that spares the first.
    labelled_namespace(&world, &later, ours("ghost-later")).await;
    world.clock.advance(Duration::from_secs(58 * 60));
    eventually("the later orphan is marked", T, || async {
        marked(later.clone())
            .await
            .ok_or_else(|| "not marked".to_owned())
    })
    .await;
    assert!(namespace(&world, &orphan).await.is_some(), "still in grace");

    world.clock.advance(Duration::from_secs(2 * 60));
    eventually("the orphan is deleted", T, || async {
        match namespace(&world, &orphan).await {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        }
    })
    .await;
    assert!(
        namespace(&world, &later).await.is_some(),
        "its grace runs on"
    );
    for name in [&plain, &foreign] {
        let ns = namespace(&world, name).await.expect("never touched");
        assert!(!ns.annotations().contains_key(ORPHANED_SINCE), "{name}");
    }
    let all: Api<Namespace> = Api::all(world.client.clone());
    for name in [&plain, &foreign, &later] {
        let _ = all.delete(name, &DeleteParams::background()).await;
    }
}

#[tokio::test]
async fn a_preview_whose_blueprint_is_deleted_fails_and_goes_at_expiry() {
    let world = manual_world("gone", tiny(), json!({"ttl": "2h"})).await;
    open(&world, 1).await;
    world.wait_phase("gone-pr-1", Phase::Ready, T).await;
    Api::<Blueprint>::namespaced(world.client.clone(), &world.home.name)
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap();
    wait_for_preview(&world, "gone-pr-1", "failed, saying why", |p| {
        p.status.as_ref().is_some_and(|s| {
            s.phase == Some(Phase::Failed)
                && s.message.as_deref().is_some_and(|m| {
                    m.starts_with(
                        "Blueprint gone was deleted; this preview is removed when it expires",
                    )
                })
        })
    })
    .await;
    world.clock.advance(Duration::from_secs(121 * 60));
    world.wait_phase("gone-pr-1", Phase::Removed, T).await;
    assert!(
        !world
            .namespace_exists(&world.namespace_of("gone-pr-1"))
            .await
    );
}

#[tokio::test]
async fn only_the_leader_reconciles_and_another_takes_over_mid_deploy() {
    // Pods take a few seconds to become ready, so the leader can die mid-deploy.
    let slow = crate::support::fixtures::slow_app("4s");
    let mut world = World::new("lead", &slow, json!({})).await;
    world.sandcastle.take().unwrap().abort();
    let replica = |identity: &str| {
        let mut parts = world.parts(world.client.clone());
        parts.settings.leader_election = Some(LeaderElection {
            lease_name: "sandcastle-leader".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(3),
        });
        parts
    };
    let a = serve::start(replica("a")).await.unwrap();
    eventually("a leads", T, || async {
        if a.is_leader() {
            Ok(())
        } else {
            Err("not yet".to_owned())
        }
    })
    .await;
    let b = serve::start(replica("b")).await.unwrap();
    let leases: Api<Lease> = Api::namespaced(world.client.clone(), &world.home.name);
    let holder = leases
        .get("sandcastle-leader")
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder.as_deref(), Some("a"));

    // Every replica serves the webhook; only the leader acts on it.
    let head = sha();
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(1), head.clone(), "b1"));
    let (status, body) = world
        .post_to(
            b.addr,
            opened.body.clone(),
            opened.signed_headers(crate::support::world::SECRET),
        )
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (202, Some("recorded")),
        "{body}"
    );
    world.wait_phase("lead-pr-1", Phase::Deploying, T).await;
    assert!(a.is_leader() && !b.is_leader(), "one leader at a time");

    // The leader dies mid-deploy; b takes over within the lease duration and finishes.
    a.abort();
    eventually("b leads", T, || async {
        if b.is_leader() {
            Ok(())
        } else {
            Err("not yet".to_owned())
        }
    })
    .await;
    let pe = world.wait_phase("lead-pr-1", Phase::Ready, T).await;
    assert_eq!(
        pe.status.unwrap().deployed_sha.as_deref(),
        Some(head.as_str())
    );
    world.wait_github_state(&head, "success", T).await;
    let lease = leases.get("sandcastle-leader").await.unwrap().spec.unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("b"));
    assert_eq!(lease.lease_transitions, Some(1));
    let deployments = world.gh.deployments(&world.repo);
    assert_eq!(deployments.len(), 1, "no duplicate deployment");
    let states: Vec<&str> = deployments[0]
        .statuses
        .iter()
        .map(|s| s.state.as_str())
        .collect();
    assert_eq!(states, ["in_progress", "success"], "no status posted twice");
    b.shutdown().await;
    let released = leases.get("sandcastle-leader").await.unwrap().spec.unwrap();
    assert_eq!(
        released.holder_identity, None,
        "a clean shutdown hands the lease back"
    );
}
