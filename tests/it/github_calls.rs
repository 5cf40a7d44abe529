//! What a pull request costs in GitHub API calls, counted by the stand-in: opened → Ready for a
//! first and a second pull request of a repository with a `.github/sandcastle.yml`. The second
//! one's read of the file is conditional (the `ETag` of the first): GitHub answers `304 Not
//! Modified`, which does not count against the rate limit. Neither looks for a deployment or a
//! sticky comment a crashed leader might have left: both pull requests opened after this
//! leader began (`controller::term`). A leader that starts later does look (the last test).

use std::time::Duration;

use sandcastle::crd::Phase;
use sandcastle_fake_github::Call;

use crate::support::eventually;
use crate::support::fixtures::TINY_APP;
use crate::support::world::{World, pr};

const T: Duration = Duration::from_secs(90);
const CONFIG: &str = ".github/sandcastle.yml";

fn show(what: &str, calls: &[Call]) -> usize {
    let counted = calls.iter().filter(|c| c.status != 304).count();
    println!(
        "{what}: {} calls, {counted} counted against the rate limit",
        calls.len()
    );
    for c in calls {
        println!("  {c}");
    }
    counted
}

/// Wait until pull request `n`'s sticky comment says Ready (its last edit is in this window).
async fn sticky_ready(world: &World, n: u64) {
    eventually("the sticky comment says Ready", T, || async {
        let comments = world.gh.comments(&world.repo, pr(n));
        match comments.iter().any(|c| c.body.contains("✅ Ready")) {
            true => Ok(()),
            false => Err(format!("{} comments, none Ready", comments.len())),
        }
    })
    .await;
}

#[tokio::test]
async fn a_second_pull_request_reads_the_unchanged_config_conditionally() {
    let world = World::new("calls", TINY_APP, serde_json::json!({})).await;
    world.gh.put_file(&world.repo, "main", CONFIG, "ttl: 2h\n");
    world.gh.take_calls();
    let head = world.open(1).await;
    world.wait_phase("calls-pr-1", Phase::Ready, T).await;
    world.wait_github_state(&head, "success", T).await;
    sticky_ready(&world, 1).await;
    let first = world.gh.take_calls();
    show("opened → Ready, first pull request", &first);
    let read = |calls: &[Call]| -> Vec<u16> {
        calls
            .iter()
            .filter(|c| c.method == "GET" && c.path.ends_with(CONFIG))
            .map(|c| c.status)
            .collect()
    };
    assert_eq!(read(&first), [200], "the file is read once, in full");

    let head = world.open(2).await;
    world.wait_phase("calls-pr-2", Phase::Ready, T).await;
    world.wait_github_state(&head, "success", T).await;
    sticky_ready(&world, 2).await;
    let second = world.gh.take_calls();
    let counted = show("opened → Ready, second pull request", &second);
    assert_eq!(read(&second), [304], "the unchanged file is not sent again");
    assert_eq!(counted, second.len() - 1, "the 304 is not counted");
    // The deployment, in_progress and success, the sticky comment and its edit to Ready.
    assert!(counted <= 5, "{counted} calls counted for one pull request");
    let lookups: Vec<&Call> = second
        .iter()
        .filter(|c| {
            c.method == "GET" && (c.path.ends_with("/deployments") || c.path.ends_with("/comments"))
        })
        .collect();
    assert!(
        lookups.is_empty(),
        "no lookup for a fresh pull request: {lookups:?}"
    );
    // The remembered file applies: a 2 h lifetime.
    let ttl = |name: &'static str| {
        let previews = world.previews();
        async move {
            let pe = previews.get(name).await.unwrap();
            let created = pe.metadata.creation_timestamp.clone().unwrap().0;
            pe.spec
                .expires_at
                .unwrap()
                .0
                .duration_since(created)
                .as_secs()
        }
    };
    assert!((7000..=7300).contains(&ttl("calls-pr-2").await));

    // Changed on the base branch: read in full again.
    world.gh.put_file(&world.repo, "main", CONFIG, "ttl: 3h\n");
    world.open(3).await;
    world.wait_phase("calls-pr-3", Phase::Ready, T).await;
    assert_eq!(read(&world.gh.take_calls()), [200]);
    assert!((10_700..=10_900).contains(&ttl("calls-pr-3").await));
}

#[tokio::test]
async fn a_new_leader_looks_for_what_the_last_one_may_have_left() {
    let mut world = World::new("calls-lead", TINY_APP, serde_json::json!({})).await;
    let head = world.open(1).await;
    world.wait_phase("calls-lead-pr-1", Phase::Ready, T).await;
    world.wait_github_state(&head, "success", T).await;
    sticky_ready(&world, 1).await;

    // A new process leads: the last one may have made a deployment of the next commit and died
    // before saving its id, so this one looks before making one.
    world.sandcastle.take().unwrap().shutdown().await;
    world.start().await;
    world.gh.take_calls();
    let next = crate::support::world::sha();
    let (status, body) = world
        .deliver(&world.gh.push(&world.repo, pr(1), &next))
        .await;
    assert_eq!(status, 200, "{body}");
    world.wait_github_state(&next, "success", T).await;
    let calls = world.gh.take_calls();
    show("push after a change of leader", &calls);
    let lookups = calls
        .iter()
        .filter(|c| c.method == "GET" && c.path.ends_with("/deployments"))
        .count();
    assert_eq!(lookups, 1, "one lookup of the commit's deployment");
    assert_eq!(world.gh.deployments(&world.repo).len(), 2, "one per commit");
}
