//! Previews that go and come back: a pull request closed and reopened within seconds, the
//! `no-preview` label added and removed at once, a draft — each comeback is rolled out from
//! scratch into a namespace that is really new, with a new GitHub deployment, whatever the
//! timing. And tombstones that old or replayed deliveries cannot outlive.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use sandcastle::crd::{Phase, TeardownReason};
use sandcastle::domain::Sha;
use sandcastle_fake_github::{Delivery, PrSpec};
use serde_json::json;

use crate::support::eventually;
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);
const HOUR: Duration = Duration::from_secs(3600);

fn guestbook() -> String {
    sandcastle_demo::stage::guestbook_yaml().unwrap()
}

fn images() -> serde_json::Value {
    json!({"images": [{"repository": "gcr.io/google-samples/gb-frontend", "tag": "{{sha}}"}], "primaryService": "frontend"})
}

async fn namespace_uid(world: &World, name: &str) -> Option<String> {
    Api::<Namespace>::all(world.client.clone())
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|ns| ns.metadata.uid)
}

/// Open PR `n` at a fresh commit and wait until it is Ready with GitHub's `success`; returns the
/// commit and the preview namespace's uid.
async fn open_ready(world: &World, n: u64) -> (Sha, String) {
    let head = sha();
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(n), head.clone(), "feature"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    world
        .wait_phase(&format!("guestbook-pr-{n}"), Phase::Ready, T)
        .await;
    world.wait_github_state(&head, "success", T).await;
    let ns = world.namespace_of(&format!("guestbook-pr-{n}"));
    let uid = namespace_uid(world, &ns).await.expect("namespace exists");
    (head, uid)
}

/// After a teardown and a comeback at the same commit: the preview is Ready in a namespace
/// that is not the old one and holds every Deployment again; on GitHub the old deployment is
/// `inactive` and a second one for the same commit went queued → in_progress → success.
async fn assert_rolled_out_anew(world: &World, n: u64, head: &Sha, old_uid: &str) {
    let name = format!("guestbook-pr-{n}");
    let ns = world.namespace_of(&name);
    let deployments: Api<Deployment> = Api::namespaced(world.client.clone(), &ns);
    eventually(
        "Ready again in a new namespace with every app",
        T,
        || async {
            let pe = world
                .previews()
                .get(&name)
                .await
                .map_err(|e| e.to_string())?;
            let st = pe.status.clone().unwrap_or_default();
            let uid = namespace_uid(world, &ns).await;
            let apps = deployments
                .list(&ListParams::default())
                .await
                .map(|l| l.items.len())
                .unwrap_or(0);
            if st.phase == Some(Phase::Ready)
                && uid.is_some()
                && uid.as_deref() != Some(old_uid)
                && apps == 3
            {
                Ok(())
            } else {
                Err(format!(
                    "phase {:?} ({:?}), namespace uid {uid:?} (old {old_uid}), {apps} deployments",
                    st.phase, st.message
                ))
            }
        },
    )
    .await;
    eventually("GitHub told: old inactive, new success", T, || async {
        let mine: Vec<_> = world
            .gh
            .deployments(&world.repo)
            .into_iter()
            .filter(|d| &d.sha == head)
            .collect();
        let states = |i: usize| -> Vec<String> {
            mine[i].statuses.iter().map(|s| s.state.clone()).collect()
        };
        match mine.len() {
            2 if mine[0].latest_state() == Some("inactive")
                && states(1) == ["in_progress", "success"] =>
            {
                Ok(())
            }
            n => Err(format!(
                "{n} deployments: {:?}",
                (0..n).map(states).collect::<Vec<_>>()
            )),
        }
    })
    .await;
}

#[tokio::test]
async fn closed_and_reopened_at_once_is_rolled_out_from_scratch() {
    let world = World::new("guestbook", &guestbook(), images()).await;
    let (head, uid) = open_ready(&world, 21).await;

    // GitHub's `updated_at` has whole seconds: both carry the same one.
    world.gh.same_second(true);
    let closed = world.gh.close(&world.repo, pr(21), false);
    let reopened = world.gh.reopen(&world.repo, pr(21));
    assert_eq!(world.deliver(&closed).await.0, 200);
    let (status, body) = world.deliver(&reopened).await;
    assert_eq!(status, 200);
    assert_eq!(body["previews"][0]["result"], "updated", "{body}");

    assert_rolled_out_anew(&world, 21, &head, &uid).await;
    let pe = world.previews().get("guestbook-pr-21").await.unwrap();
    assert_eq!(pe.spec.incarnation, 1);
    assert_eq!(pe.status.unwrap().incarnation, 1);
}

#[tokio::test]
async fn no_preview_added_and_removed_at_once_is_rolled_out_from_scratch() {
    let world = World::new("guestbook", &guestbook(), images()).await;
    let (head, uid) = open_ready(&world, 22).await;

    world.gh.same_second(true);
    let labelled = world.gh.label(&world.repo, pr(22), "no-preview");
    let unlabelled = world.gh.unlabel(&world.repo, pr(22), "no-preview");
    assert_eq!(world.deliver(&labelled).await.0, 200);
    assert_eq!(world.deliver(&unlabelled).await.0, 200);

    assert_rolled_out_anew(&world, 22, &head, &uid).await;
}

#[tokio::test]
async fn converted_to_draft_and_ready_again_at_once_is_rolled_out_from_scratch() {
    let world = World::new("guestbook", &guestbook(), images()).await;
    let (head, uid) = open_ready(&world, 26).await;

    world.gh.same_second(true);
    let drafted = world.gh.convert_to_draft(&world.repo, pr(26));
    let ready = world.gh.ready_for_review(&world.repo, pr(26));
    assert_eq!(world.deliver(&drafted).await.0, 200);
    let (status, body) = world.deliver(&ready).await;
    assert_eq!(status, 200);
    assert_eq!(body["previews"][0]["result"], "updated", "{body}");

    assert_rolled_out_anew(&world, 26, &head, &uid).await;
}

#[tokio::test]
async fn a_comeback_after_the_teardown_finished_gets_a_new_deployment_too() {
    let world = World::new("guestbook", &guestbook(), images()).await;
    let (head, uid) = open_ready(&world, 23).await;

    let closed = world.gh.close(&world.repo, pr(23), false);
    assert_eq!(world.deliver(&closed).await.0, 200);
    world.wait_phase("guestbook-pr-23", Phase::Removed, T).await;
    let reopened = world.gh.reopen(&world.repo, pr(23));
    assert_eq!(world.deliver(&reopened).await.0, 200);

    assert_rolled_out_anew(&world, 23, &head, &uid).await;
}

/// A `closed` whose own time lies further back than the tombstone's retention (a late
/// redelivery, a replay) must not make the tombstone go at once: retention counts from the
/// removal, and an older `opened` delivered within it stays stale.
#[tokio::test]
async fn tombstones_outlive_old_deliveries() {
    let mut world = World::new(
        "guestbook",
        &guestbook(),
        json!({"ttl": "150h", "maxTtl": "168h", "stopAfterIdle": "0"}),
    )
    .await;
    let clock = world.use_manual_clock().await;
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(24), sha(), "feature"));
    let closed = world.gh.close(&world.repo, pr(24), false);
    assert_eq!(world.deliver(&opened).await.0, 200);
    world.wait_phase("guestbook-pr-24", Phase::Ready, T).await;

    // The close arrives 73 hours after it happened (retention is 72 h).
    clock.advance(73 * HOUR);
    assert_eq!(world.deliver(&closed).await.0, 200);
    let pe = world.wait_phase("guestbook-pr-24", Phase::Removed, T).await;
    assert!(pe.status.unwrap().removed_at.is_some());

    // A replay of the old `opened` (a new delivery id, the old payload) within the retention.
    let replay = |id: &str| Delivery {
        id: id.to_owned(),
        ..opened.clone()
    };
    let (status, body) = world.deliver(&replay("replay-1")).await;
    assert_eq!(status, 200);
    assert_eq!(body["previews"][0]["result"], "stale", "{body}");

    clock.advance(71 * HOUR);
    let (status, body) = world.deliver(&replay("replay-2")).await;
    assert_eq!(status, 200);
    assert_eq!(
        body["previews"][0]["result"], "stale",
        "71 h after removal the tombstone still holds: {body}"
    );
    let pe = world.previews().get("guestbook-pr-24").await.unwrap();
    assert_eq!(pe.status.unwrap().phase, Some(Phase::Removed));
    assert!(
        !world
            .namespace_exists(&world.namespace_of("guestbook-pr-24"))
            .await
    );

    // Past the retention, counted from the removal, the record goes.
    clock.advance(2 * HOUR);
    eventually("the tombstone is deleted", T, || async {
        match world.previews().get_opt("guestbook-pr-24").await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|p| p.map(|p| p.status)))),
        }
    })
    .await;
}

/// Drafts follow one rule: no preview of their own; converting to draft takes the preview down
/// (a push to the draft does not bring it back); ready for review deploys it again, anew.
#[tokio::test]
async fn converting_to_draft_takes_the_preview_down_until_it_is_ready() {
    let world = World::new("guestbook", &guestbook(), images()).await;
    let (_, uid) = open_ready(&world, 25).await;

    let draft = world.gh.convert_to_draft(&world.repo, pr(25));
    let (status, body) = world.deliver(&draft).await;
    assert_eq!(status, 200);
    assert_eq!(body["previews"][0]["result"], "updated", "{body}");
    let pe = world.wait_phase("guestbook-pr-25", Phase::Removed, T).await;
    assert_eq!(
        pe.spec.teardown.as_ref().map(|t| t.reason),
        Some(TeardownReason::Draft)
    );
    eventually("the sticky comment says how it comes back", T, || async {
        let comments = world.gh.comments(&world.repo, pr(25));
        match &comments[..] {
            [one]
                if one.body.contains("converted to draft")
                    && one.body.contains("ready for review") =>
            {
                Ok(())
            }
            other => Err(format!("{other:#?}")),
        }
    })
    .await;

    let pushed = sha();
    let (status, body) = world
        .deliver(&world.gh.push(&world.repo, pr(25), &pushed))
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["previews"][0]["result"], "skipped", "{body}");
    assert!(
        !world
            .namespace_exists(&world.namespace_of("guestbook-pr-25"))
            .await,
        "a push to a draft deploys nothing"
    );

    let ready = world.gh.ready_for_review(&world.repo, pr(25));
    assert_eq!(world.deliver(&ready).await.0, 200);
    world.wait_github_state(&pushed, "success", T).await;
    let ns = world.namespace_of("guestbook-pr-25");
    let pe = world.wait_phase("guestbook-pr-25", Phase::Ready, T).await;
    assert_eq!(
        pe.status.unwrap().deployed_sha.as_deref(),
        Some(pushed.as_str())
    );
    assert_ne!(
        namespace_uid(&world, &ns).await.as_deref(),
        Some(uid.as_str())
    );
}
