//! What people read about who did what, end to end: a preview deleted through the API says so on
//! its pull request (the interface, and the ServiceAccount without an `@` that would make it a
//! GitHub mention), in its status and in GitHub's `inactive` description; a sandbox taken over
//! by a pull request names the pull request as it is; and a preview without an Ingress says why
//! it has no URL.

use std::time::Duration;

use sandcastle::crd::{Phase, TeardownReason};
use sandcastle::domain::PrNumber;
use sandcastle::github::text::parse_marker;
use sandcastle_fake_github::{CommentRecord, PrSpec};
use serde_json::json;

use crate::support::api::{ALL, account, call};
use crate::support::eventually;
use crate::support::fixtures::TINY_APP;
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);

/// Wait until the sticky comment of `preview` on PR `n` satisfies `ok`; returns its body.
async fn sticky(world: &World, n: PrNumber, preview: &str, ok: impl Fn(&str) -> bool) -> String {
    eventually(&format!("the sticky comment of {preview}"), T, || {
        let found: Vec<CommentRecord> = world
            .gh
            .comments(&world.repo, n)
            .into_iter()
            .filter(|c| c.by_app && parse_marker(&c.body).is_some_and(|m| m.preview == preview))
            .collect();
        let answer = match &found[..] {
            [one] if ok(&one.body) => Ok(one.body.clone()),
            [one] => Err(format!("it says:\n{}", one.body)),
            many => Err(format!("{} sticky comments", many.len())),
        };
        async move { answer }
    })
    .await
}

/// The `Status` row of a sticky comment.
fn status_row(body: &str) -> &str {
    body.lines()
        .find(|l| l.starts_with("| **Status** |"))
        .unwrap_or_default()
}

#[tokio::test]
async fn an_api_delete_is_told_as_one_and_a_preview_without_ingress_says_why_it_has_no_url() {
    let world = World::new("attr", TINY_APP, json!({})).await;
    let ci = account(&world, "ci-agent", &[ALL]).await;
    let who = format!("system:serviceaccount:{}:ci-agent", world.home.name);
    world.open(5).await;
    world.wait_phase("attr-pr-5", Phase::Ready, T).await;

    // No Ingress in the Blueprint: no URL, and the comment says why.
    let ready = sticky(&world, pr(5), "attr-pr-5", |b| b.contains("✅ Ready")).await;
    let url = ready
        .lines()
        .find(|l| l.starts_with("| **URL** |"))
        .unwrap_or_else(|| panic!("no URL row:\n{ready}"));
    assert!(
        url.contains("none: nothing in Blueprint `attr` is an Ingress with a host"),
        "{url}"
    );

    // Deleted through the API by a ServiceAccount.
    let deleted = call(
        &world,
        "DELETE",
        "/api/v1/previews/attr-pr-5",
        Some(&ci),
        None,
    )
    .await;
    assert_eq!(deleted.status, 202, "{:?}", deleted.body);
    let gone = world.wait_phase("attr-pr-5", Phase::Removed, T).await;
    let removed = sticky(&world, pr(5), "attr-pr-5", |b| b.contains("🧹 Removed")).await;
    let status = status_row(&removed);
    assert_eq!(
        status,
        format!("| **Status** | destroyed through the API by `{who}`; namespace deleted |"),
        "{removed}"
    );
    assert!(
        !removed.contains("@system") && !removed.contains("with `/preview destroy`"),
        "{removed}"
    );
    assert_eq!(
        gone.status.unwrap().message.as_deref(),
        Some(format!("removed: destroyed through the API by {who}").as_str())
    );
    let inactive: Vec<String> = world
        .gh
        .deployments(&world.repo)
        .iter()
        .flat_map(|d| &d.statuses)
        .filter(|s| s.state == "inactive")
        .map(|s| s.description.clone())
        .collect();
    assert_eq!(inactive, ["Removed through the API"]);

    // A sandbox taken over by a pull request: named as it is, never as a mention.
    let head = sha();
    world.gh.set_branch(&world.repo, "b6", &head);
    let created = call(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&ci),
        Some(
            json!({"blueprint": "attr", "repository": world.repo.as_str(), "branch": "b6",
            "name": "attr-b6"}),
        ),
    )
    .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    world.wait_phase("attr-b6", Phase::Ready, T).await;
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(6), head, "b6"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    let sandbox = world.wait_phase("attr-b6", Phase::Removed, T).await;
    assert_eq!(
        sandbox.spec.teardown.as_ref().map(|t| t.reason),
        Some(TeardownReason::Adopted)
    );
    assert_eq!(
        sandbox.status.unwrap().message.as_deref(),
        Some("taken over by pull request #6 (attr-pr-6): its namespace lives on there")
    );
}

/// A stopped preview's deployment shows `inactive` already (saying how to wake it); deleted
/// through the API, its last status says it was removed, and how.
#[tokio::test]
async fn a_stopped_preview_deleted_through_the_api_says_why_it_went() {
    let world = World::new("attrst", TINY_APP, json!({})).await;
    let ci = account(&world, "ci-agent", &[ALL]).await;
    world.open(7).await;
    world.wait_phase("attrst-pr-7", Phase::Ready, T).await;
    let stop = call(
        &world,
        "POST",
        "/api/v1/previews/attrst-pr-7/stop",
        Some(&ci),
        None,
    )
    .await;
    assert_eq!(stop.status, 202, "{:?}", stop.body);
    world.wait_phase("attrst-pr-7", Phase::Stopped, T).await;
    let last = || {
        let deployments = world.gh.deployments(&world.repo);
        let d = deployments.last().expect("a deployment");
        let s = d.statuses.last().expect("a status");
        (s.state.clone(), s.description.clone())
    };
    eventually("the stop told to GitHub", T, || {
        let (state, description) = last();
        let told = state == "inactive" && description.starts_with("Stopped on request");
        async move {
            if told {
                Ok(())
            } else {
                Err(format!("{state}: {description}"))
            }
        }
    })
    .await;
    let deleted = call(
        &world,
        "DELETE",
        "/api/v1/previews/attrst-pr-7",
        Some(&ci),
        None,
    )
    .await;
    assert_eq!(deleted.status, 202, "{:?}", deleted.body);
    world.wait_phase("attrst-pr-7", Phase::Removed, T).await;
    sticky(&world, pr(7), "attrst-pr-7", |b| b.contains("🧹 Removed")).await;
    eventually("the removal told to GitHub", T, || {
        let (state, description) = last();
        let told = state == "inactive" && description == "Removed through the API";
        async move {
            if told {
                Ok(())
            } else {
                Err(format!("{state}: {description}"))
            }
        }
    })
    .await;
}
