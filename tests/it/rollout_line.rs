//! The line for new rollouts (`--max-concurrent-rollouts`): with room for one rollout at a
//! time, previews asked for together start one after the other in the order they were asked
//! for, each waiting `Pending` with its place in line, and never two rolling out at once.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use sandcastle::crd::{Phase, PreviewEnvironment};
use serde_json::json;

use crate::support::api::{account, call};
use crate::support::eventually;
use crate::support::fixtures::slow_app;
use crate::support::world::{World, pr};

const T: Duration = Duration::from_secs(90);

/// What a watch on the previews saw, in order, until all of `names` were Ready: (preview,
/// phase, message) for each change, and the most previews seen rolling out at once.
async fn watch_until_ready(
    api: Api<PreviewEnvironment>,
    names: Vec<String>,
    established: tokio::sync::oneshot::Sender<()>,
) -> (Vec<(String, Phase, String)>, usize) {
    let mut events = watcher(api, watcher::Config::default()).boxed();
    let mut established = Some(established);
    let mut phases: BTreeMap<String, Phase> = BTreeMap::new();
    let mut seen = Vec::new();
    let mut most = 0;
    while let Some(event) = events.try_next().await.expect("watching the previews") {
        let pe = match event {
            watcher::Event::InitDone => {
                established.take().map(|tx| tx.send(()));
                continue;
            }
            watcher::Event::Apply(pe) | watcher::Event::InitApply(pe) => pe,
            _ => continue,
        };
        let Some(st) = pe.status.as_ref() else {
            continue;
        };
        let Some(phase) = st.phase else { continue };
        assert_ne!(phase, Phase::Failed, "{}: {:?}", pe.name_any(), st.message);
        let message = st.message.clone().unwrap_or_default();
        if seen.last() != Some(&(pe.name_any(), phase, message.clone())) {
            seen.push((pe.name_any(), phase, message));
        }
        phases.insert(pe.name_any(), phase);
        most = most.max(phases.values().filter(|p| **p == Phase::Deploying).count());
        if names.iter().all(|n| phases.get(n) == Some(&Phase::Ready)) {
            return (seen, most);
        }
    }
    panic!("the watch ended")
}

#[tokio::test]
async fn new_rollouts_start_one_at_a_time_in_the_order_asked_and_those_waiting_say_their_place() {
    // Each preview's pod is ready 2 s after it starts: a rollout takes a while.
    let mut world = World::unstarted("line", &slow_app("2s"), json!({})).await;
    world.configure = Some(|parts| parts.settings.max_concurrent_rollouts = 1);
    world.start().await;
    let names: Vec<String> = (1..=3).map(|n| format!("line-pr-{n}")).collect();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let watch = tokio::spawn(watch_until_ready(world.previews(), names.clone(), tx));
    rx.await.expect("the watch is in place");
    let reader = account(
        &world,
        "reader",
        &[(&["previewenvironments"], &["get", "list"])],
    )
    .await;
    for n in 1..=3 {
        world.open(n).await;
    }
    // While it waits, the API counts its place (1: next).
    eventually("the third preview's place in line", T, || async {
        let got = call(
            &world,
            "GET",
            "/api/v1/previews/line-pr-3",
            Some(&reader),
            None,
        )
        .await;
        let listed = call(&world, "GET", "/api/v1/previews", Some(&reader), None).await;
        let in_list = listed.body["items"]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["name"] == "line-pr-3"))
            .map(|i| i["queuePosition"].clone());
        match (got.body["queuePosition"].as_u64(), in_list) {
            (Some(n @ (1 | 2)), Some(l)) if l == n => Ok(()),
            _ => Err(format!("{}: {} / {}", got.status, got.body, listed.body)),
        }
    })
    .await;
    // What people see of it meanwhile: the preview's page counts its place, and its sticky
    // comment says it is queued, and why.
    let bearer = vec![("authorization", format!("Bearer {reader}"))];
    eventually("the third preview's page shows its place", T, || async {
        let (status, _, html) = world.get_text("/previews/line-pr-3", bearer.clone()).await;
        let row = ["1", "2"].iter().any(|n| {
            html.contains(&format!(
                r#"<th scope="row">Queue</th><td>{n} in line</td>"#
            ))
        });
        (status == 200 && row)
            .then_some(())
            .ok_or_else(|| format!("{status}: {html}"))
    })
    .await;
    let (seen, most) = tokio::time::timeout(T, watch)
        .await
        .expect("all Ready in time")
        .expect("the watch");
    assert_eq!(most, 1, "never two rolling out at once: {seen:#?}");
    // Ready in the order asked.
    let ready: Vec<&str> = seen
        .iter()
        .filter(|(_, p, _)| *p == Phase::Ready)
        .map(|(n, _, _)| n.as_str())
        .collect();
    assert_eq!(ready, ["line-pr-1", "line-pr-2", "line-pr-3"], "{seen:#?}");
    // The two asked later waited, saying their place when they joined.
    for name in &names[1..] {
        let waited: Vec<&str> = seen
            .iter()
            .filter(|(n, p, _)| n == name && *p == Phase::Pending)
            .map(|(_, _, m)| m.as_str())
            .filter(|m| m.starts_with("in line to roll out"))
            .collect();
        assert!(
            waited.iter().all(|m| [
                "(joined 1st, 1 rollout under way)",
                "(joined 2nd, 1 rollout under way)"
            ]
            .iter()
            .any(|end| m.ends_with(end))),
            "{waited:?}"
        );
        assert!(!waited.is_empty(), "{name} never said its place: {seen:#?}");
    }
    // Its sticky comment said it was queued, in line, before it said it was deploying.
    let bodies: Vec<String> = world
        .gh
        .calls()
        .into_iter()
        .filter(|c| c.path.contains("/issues/3/comments") || c.path.contains("/issues/comments/"))
        .filter_map(|c| c.body?["body"].as_str().map(str::to_owned))
        .filter(|b| b.contains("line-pr-3"))
        .collect();
    let queued = bodies
        .iter()
        .position(|b| b.contains("🕒 Queued") && b.contains("in line to roll out (joined"));
    let deploying = bodies.iter().position(|b| b.contains("⏳ Deploying"));
    assert!(
        matches!((queued, deploying), (Some(q), Some(d)) if q < d),
        "{bodies:#?}"
    );
}

#[tokio::test]
async fn a_preview_closed_while_in_line_leaves_it_and_the_next_goes_on() {
    let mut world = World::unstarted("leave", &slow_app("2s"), json!({})).await;
    world.configure = Some(|parts| parts.settings.max_concurrent_rollouts = 1);
    world.start().await;
    for n in 1..=3 {
        world.open(n).await;
    }
    let api = world.previews();
    eventually("the second preview in line", T, || async {
        let pe = api.get("leave-pr-2").await.map_err(|e| e.to_string())?;
        let st = pe.status.unwrap_or_default();
        (st.phase == Some(Phase::Pending) && st.in_line.is_some())
            .then_some(())
            .ok_or_else(|| format!("{:?}: {:?}", st.phase, st.message))
    })
    .await;
    let closed = world.gh.close(&world.repo, pr(2), false);
    world.deliver(&closed).await;
    world.wait_phase("leave-pr-1", Phase::Ready, T).await;
    // Next in line now: well before a forgotten place would have expired.
    let pe = world
        .wait_phase("leave-pr-3", Phase::Ready, Duration::from_secs(20))
        .await;
    assert!(pe.status.unwrap().in_line.is_none());
}
