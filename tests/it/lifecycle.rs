//! The core lifecycle end to end, through the real HTTP endpoint, the real control plane and the
//! GitHub stand-in: opened → Ready with "View deployment"; synchronize → new commit and images;
//! closed → namespace gone and deployment inactive. And the ways it must not break: duplicates,
//! reordering, GitHub outages, a crash mid-deploy.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams};
use sandcastle::crd::Phase;
use sandcastle_fake_github::{Fault, PrSpec};
use serde_json::json;

use crate::support::eventually;
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(60);

/// The guestbook from kubernetes/examples, plus an Ingress so the preview has a URL.
fn guestbook() -> String {
    sandcastle_demo::stage::guestbook_yaml().unwrap()
}

fn images() -> serde_json::Value {
    json!({"images": [{"repository": "gcr.io/google-samples/gb-frontend", "tag": "{{sha}}"}], "primaryService": "frontend"})
}

async fn image_of(world: &World, ns: &str, deployment: &str) -> String {
    let api: Api<Deployment> = Api::namespaced(world.client.clone(), ns);
    let d = api.get(deployment).await.unwrap();
    d.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap()
}

#[tokio::test]
async fn opened_synchronize_closed() {
    let world = World::new("guestbook", &guestbook(), images()).await;
    let repo = world.repo.clone();
    let first = sha();

    // opened → Ready, with the preview URL behind "View deployment".
    let opened = world
        .gh
        .open_pull_request(&repo, PrSpec::new(pr(7), first.clone(), "feature/login"));
    let (status, body) = world.deliver(&opened).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["previews"][0]["result"], "created");
    let pe = world.wait_phase("guestbook-pr-7", Phase::Ready, T).await;
    let st = pe.status.unwrap();
    let ns = world.namespace_of("guestbook-pr-7");
    assert_eq!(st.namespace.as_deref(), Some(ns.as_str()));
    assert_eq!(
        st.url.as_deref(),
        Some("http://7-guestbook.preview.example.com")
    );
    assert_eq!(st.deployed_sha.as_deref(), Some(first.as_str()));
    assert_eq!(st.services.len(), 3, "{:?}", st.services);
    assert!(st.services.iter().all(|s| s.ready == s.desired));
    // `kubectl describe` tells the same story as the status history.
    world
        .wait_event_reasons(
            "guestbook-pr-7",
            &["PullRequestOpened", "Deploying", "Ready"],
        )
        .await;

    let deployments: Api<Deployment> = Api::namespaced(world.client.clone(), &ns);
    let names: Vec<String> = deployments
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(
        image_of(&world, &ns, "frontend").await,
        format!("gcr.io/google-samples/gb-frontend:{first}")
    );
    assert_eq!(
        image_of(&world, &ns, "redis-master").await,
        "registry.k8s.io/redis:e2e",
        "images without a rule stay"
    );

    world.wait_github_state(&first, "success", T).await;
    let deployment = world
        .gh
        .deployments(&repo)
        .into_iter()
        .find(|d| d.sha == first)
        .unwrap();
    assert_eq!(deployment.environment, "preview/guestbook-pr-7");
    assert!(deployment.transient_environment && !deployment.production_environment);
    let success = deployment.statuses.last().unwrap();
    assert_eq!(
        success.environment_url,
        "http://7-guestbook.preview.example.com"
    );
    assert!(
        success.log_url.ends_with("/previews/guestbook-pr-7"),
        "{}",
        success.log_url
    );
    let states: Vec<&str> = deployment
        .statuses
        .iter()
        .map(|s| s.state.as_str())
        .collect();
    assert_eq!(states, ["in_progress", "success"]);
    world.gh.check("GET /repos/acme/guestbook/deployments");
    world.gh.check("POST /repos/acme/guestbook/deployments");
    world
        .gh
        .check("POST /repos/acme/guestbook/deployments/*/statuses");
    world.gh.check("POST /app/installations/*/access_tokens");

    // synchronize → a new deployment, new image tags, the old deployment inactive.
    let second = sha();
    let (status, body) = world.deliver(&world.gh.push(&repo, pr(7), &second)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["previews"][0]["result"], "updated");
    world.wait_github_state(&second, "success", T).await;
    let pe = world.wait_phase("guestbook-pr-7", Phase::Ready, T).await;
    assert_eq!(
        pe.status.unwrap().deployed_sha.as_deref(),
        Some(second.as_str())
    );
    assert_eq!(
        image_of(&world, &ns, "frontend").await,
        format!("gcr.io/google-samples/gb-frontend:{second}")
    );
    world.wait_github_state(&first, "inactive", T).await;
    world.gh.check("GET /repos/acme/guestbook/deployments");
    world.gh.check("POST /repos/acme/guestbook/deployments");
    world
        .gh
        .check("POST /repos/acme/guestbook/deployments/*/statuses");

    // closed (merged) → namespace gone, deployment inactive, the resource kept as a tombstone.
    let (status, _) = world.deliver(&world.gh.close(&repo, pr(7), true)).await;
    assert_eq!(status, 200);
    let pe = world.wait_phase("guestbook-pr-7", Phase::Removed, T).await;
    assert!(
        !world.namespace_exists(&ns).await,
        "namespace deleted before Removed"
    );
    assert!(pe.status.unwrap().message.unwrap().contains("merged"));
    world
        .wait_event_reasons(
            "guestbook-pr-7",
            &[
                "PullRequestSynchronize",
                "PullRequestClosed",
                "Terminating",
                "Removed",
            ],
        )
        .await;
    world.wait_github_state(&second, "inactive", T).await;
    world
        .gh
        .check("POST /repos/acme/guestbook/deployments/*/statuses");
    assert_eq!(
        world.gh.deployments(&repo).len(),
        2,
        "one deployment per commit"
    );
    // The repository's configuration was looked for on the base branch, and the sticky comment
    // followed along until it said why the preview went (tests/it/conversation.rs has the rest).
    eventually("the sticky comment says removed", T, || async {
        let comments = world.gh.comments(&repo, pr(7));
        match &comments[..] {
            [one] if one.body.contains("merged by @acme; namespace deleted") => Ok(()),
            other => Err(format!("{other:#?}")),
        }
    })
    .await;
    world
        .gh
        .check("GET /repos/acme/guestbook/contents/.github/sandcastle.yml");
    world.gh.check("/repos/acme/guestbook/issues/**");
    world.gh.assert_all_checked();
}

#[tokio::test]
async fn cloned_services_get_new_cluster_ips() {
    let world = World::new("guestbook", &guestbook(), images()).await;
    let (status, _) = world
        .deliver(
            &world
                .gh
                .open_pull_request(&world.repo, PrSpec::new(pr(3), sha(), "b")),
        )
        .await;
    assert_eq!(status, 200);
    world.wait_phase("guestbook-pr-3", Phase::Ready, T).await;
    let staging: Api<Service> = Api::namespaced(world.client.clone(), &world.staging.name);
    let preview: Api<Service> =
        Api::namespaced(world.client.clone(), &world.namespace_of("guestbook-pr-3"));
    for name in ["frontend", "redis-master", "redis-replica"] {
        let a = staging.get(name).await.unwrap().spec.unwrap();
        let b = preview.get(name).await.unwrap().spec.unwrap();
        assert_ne!(a.cluster_ip, b.cluster_ip, "{name} got its own cluster IP");
        if name == "frontend" {
            assert_ne!(
                a.ports.unwrap()[0].node_port,
                b.ports.unwrap()[0].node_port,
                "a fresh node port"
            );
        }
    }
}

#[tokio::test]
async fn the_same_delivery_twice_makes_one_preview_and_one_deployment() {
    let mut world = World::new("guestbook", &guestbook(), images()).await;
    let head = sha();
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(8), head.clone(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    let (status, body) = world.deliver(&opened).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("duplicate")));

    // After a restart the process forgot; the preview itself remembers the delivery.
    world.sandcastle.take().unwrap().shutdown().await;
    world.start().await;
    let (status, body) = world.deliver(&opened).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("duplicate")),
        "{body}"
    );

    world.wait_github_state(&head, "success", T).await;
    assert_eq!(
        world
            .previews()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(world.gh.deployments(&world.repo).len(), 1);
}

#[tokio::test]
async fn closed_before_the_deploy_finishes_leaves_nothing_behind() {
    let world = World::new("guestbook", &guestbook(), images()).await;
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(9), sha(), "b"));
    // A push made before the PR was closed, whose delivery arrives after the close.
    let late = world.gh.push(&world.repo, pr(9), &sha());
    let closed = world.gh.close(&world.repo, pr(9), false);
    assert_eq!(world.deliver(&opened).await.0, 200);
    assert_eq!(world.deliver(&closed).await.0, 200);
    let pe = world.wait_phase("guestbook-pr-9", Phase::Removed, T).await;
    assert!(pe.status.unwrap().message.unwrap().contains("closed"));
    assert!(
        !world
            .namespace_exists(&world.namespace_of("guestbook-pr-9"))
            .await
    );

    // Neither the late synchronize nor a redelivered opened brings it back.
    let (status, body) = world.deliver(&late).await;
    assert_eq!(status, 200);
    assert_eq!(body["previews"][0]["result"], "stale", "{body}");
    let (status, body) = world.deliver(&opened).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("duplicate")),
        "{body}"
    );
    let pe = world.previews().get("guestbook-pr-9").await.unwrap();
    assert!(pe.spec.teardown.is_some());
    assert_eq!(pe.status.unwrap().phase, Some(Phase::Removed));
}

#[tokio::test]
async fn closed_delivered_before_opened_creates_nothing() {
    let world = World::new("guestbook", &guestbook(), images()).await;
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(11), sha(), "b"));
    let closed = world.gh.close(&world.repo, pr(11), false);
    assert_eq!(world.deliver(&closed).await.0, 200);
    let (status, body) = world.deliver(&opened).await;
    assert_eq!(status, 200);
    assert_eq!(body["previews"][0]["result"], "stale", "{body}");
    world.wait_phase("guestbook-pr-11", Phase::Removed, T).await;
    assert!(
        !world
            .namespace_exists(&world.namespace_of("guestbook-pr-11"))
            .await
    );
    assert!(
        world.gh.deployments(&world.repo).is_empty(),
        "nothing was ever deployed"
    );
}

#[tokio::test]
async fn github_outage_while_deploying_does_not_stop_the_preview() {
    let world = World::new("guestbook", &guestbook(), images()).await;
    // More failures than the client retries within one reconcile, then a rate limit.
    world
        .gh
        .fail_next("POST /repos/*/*/deployments", 12, Fault::ServerError(502));
    world.gh.fail_next(
        "POST /repos/*/*/deployments/*/statuses",
        2,
        Fault::SecondaryRateLimit {
            retry_after_secs: 1,
        },
    );
    let head = sha();
    let (status, _) = world
        .deliver(
            &world
                .gh
                .open_pull_request(&world.repo, PrSpec::new(pr(12), head.clone(), "b")),
        )
        .await;
    assert_eq!(status, 200);
    let pe = world.wait_phase("guestbook-pr-12", Phase::Ready, T).await;
    assert_eq!(
        pe.status.unwrap().deployed_sha.as_deref(),
        Some(head.as_str()),
        "Kubernetes side is not held up"
    );
    world.wait_github_state(&head, "success", T).await;
    let deployments = world.gh.deployments(&world.repo);
    assert_eq!(
        deployments.len(),
        1,
        "retries never made a second deployment"
    );
    let states: Vec<&str> = deployments[0]
        .statuses
        .iter()
        .map(|s| s.state.as_str())
        .collect();
    assert_eq!(
        states.iter().filter(|s| **s == "success").count(),
        1,
        "{states:?}"
    );
}

#[tokio::test]
async fn a_crash_mid_deploy_converges_after_restart() {
    // Pods take a while to become ready, so Sandcastle can be killed during the rollout.
    let slow = guestbook().replace(
        "      labels:\n        app: redis\n        role: master",
        "      annotations:\n        test.sandcastle.dev/fate: slow\n        test.sandcastle.dev/ready-after: 3s\n      labels:\n        app: redis\n        role: master",
    );
    assert_ne!(
        slow,
        guestbook(),
        "the fixture changed: the slow annotation was not placed"
    );
    let mut world = World::new("guestbook", &slow, images()).await;
    let head = sha();
    assert_eq!(
        world
            .deliver(
                &world
                    .gh
                    .open_pull_request(&world.repo, PrSpec::new(pr(13), head.clone(), "b"))
            )
            .await
            .0,
        200
    );
    world
        .wait_phase("guestbook-pr-13", Phase::Deploying, T)
        .await;
    world.sandcastle.take().unwrap().abort();

    world.start().await;
    let pe = world.wait_phase("guestbook-pr-13", Phase::Ready, T).await;
    assert_eq!(
        pe.status.unwrap().deployed_sha.as_deref(),
        Some(head.as_str())
    );
    world.wait_github_state(&head, "success", T).await;
    assert_eq!(
        world.gh.deployments(&world.repo).len(),
        1,
        "no duplicate deployment"
    );
    let deployments: Api<Deployment> =
        Api::namespaced(world.client.clone(), &world.namespace_of("guestbook-pr-13"));
    assert_eq!(
        deployments
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        3,
        "no duplicate objects"
    );
    eventually("one success status", T, || async {
        let d = world.gh.deployments(&world.repo);
        let n = d[0]
            .statuses
            .iter()
            .filter(|s| s.state == "success")
            .count();
        if n == 1 {
            Ok(())
        } else {
            Err(format!("{n} success statuses"))
        }
    })
    .await;
}

/// Tombstones kept a second, environments deleted with them.
fn short_tombstones(parts: &mut sandcastle::serve::Parts) {
    parts.settings.tombstone_retention = Duration::from_secs(1);
    parts.settings.delete_github_environments = true;
}

/// Open a pull request, wait until its preview is Ready, close it, and wait until the tombstone
/// is gone; returns the preview's GitHub environment.
async fn open_close_and_forget(world: &World, n: u64) -> String {
    let head = sha();
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(n), head.clone(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    world.wait_github_state(&head, "success", T).await;
    let name = format!("guestbook-pr-{n}");
    let environment = format!("preview/{name}");
    assert!(world.gh.environments(&world.repo).contains(&environment));
    let closed = world.gh.close(&world.repo, pr(n), false);
    assert_eq!(world.deliver(&closed).await.0, 200);
    let previews = world.previews();
    eventually("the tombstone is gone", T, || async {
        match previews.get_opt(&name).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(pe) => Err(format!("{:?}", pe.status.and_then(|s| s.phase))),
        }
    })
    .await;
    environment
}

#[tokio::test]
async fn a_tombstone_takes_its_github_environment_with_it() {
    let mut world = World::unstarted("guestbook", &guestbook(), images()).await;
    world.configure = Some(short_tombstones);
    world
        .gh
        .grant_administration(crate::support::world::INSTALLATION);
    world.start().await;
    let environment = open_close_and_forget(&world, 21).await;
    eventually("the environment is deleted", T, || async {
        let left = world.gh.environments(&world.repo);
        if left.contains(&environment) {
            Err(format!("{left:?}"))
        } else {
            Ok(())
        }
    })
    .await;
    let calls = world.gh.calls();
    assert!(
        calls
            .iter()
            .any(|c| c.method == "DELETE"
                && c.path.ends_with("/environments/preview%2Fguestbook-pr-21")),
        "the name is one encoded path segment"
    );
}

#[tokio::test]
async fn without_the_administration_permission_the_tombstone_still_goes() {
    let mut world = World::unstarted("guestbook", &guestbook(), images()).await;
    world.configure = Some(short_tombstones);
    world.start().await;
    let environment = open_close_and_forget(&world, 22).await;
    let refused = world
        .gh
        .calls()
        .into_iter()
        .filter(|c| c.method == "DELETE" && c.path.contains("/environments/"))
        .map(|c| c.status)
        .collect::<Vec<_>>();
    assert_eq!(refused, [403], "asked once, refused, not retried");
    assert!(world.gh.environments(&world.repo).contains(&environment));
}
