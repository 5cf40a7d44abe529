//! Off-hours schedules end to end, on a manual clock: previews stop at the Blueprint's stop
//! instant (routes parked first, as idle stop does) and wake at its wake instant; a pull
//! request labelled `preview-keep` and a preview an agent is using through the API are left
//! running; one stopped on request is never woken by the schedule; a schedule the API server
//! or the controller cannot read is refused, naming the field.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use sandcastle::crd::labels::{AGENT_ACTIVITY, KEEP, LAST_ACTIVITY};
use sandcastle::crd::{Blueprint, Phase, PreviewEnvironment, ScheduleState};
use sandcastle::domain::clock::Clock;
use sandcastle::k8s::previews;
use serde_json::json;

use crate::support::api::{ALL, account, call};
use crate::support::eventually;
use crate::support::fixtures::TINY_APP;
use crate::support::world::{World, pr};

const T: Duration = Duration::from_secs(90);
const ZONE: &str = "Europe/Paris";

/// A world on a manual clock standing at the current whole second.
async fn manual_world(name: &str, extra: serde_json::Value) -> World {
    let mut world = World::unstarted(name, TINY_APP, extra).await;
    world.clock = Clock::manual(Timestamp::from_second(Timestamp::now().as_second()).unwrap());
    world.start().await;
    world
}

/// A daily cron expression naming `at` (a whole minute) on Paris's clocks.
fn daily_at(at: Timestamp) -> String {
    let z = at.in_tz(ZONE).unwrap();
    format!("{} {} * * *", z.minute(), z.hour())
}

/// The first whole minute at least `after` from now.
fn minute_after(now: Timestamp, after: SignedDuration) -> Timestamp {
    let t = now + after;
    Timestamp::from_second((t.as_second() / 60 + 1) * 60).unwrap()
}

/// Move the clock to one second past `at`.
fn move_past(clock: &Clock, at: Timestamp) {
    let by = at.duration_since(clock.now()) + SignedDuration::from_secs(1);
    clock.advance(by.try_into().expect("ahead"));
}

async fn replicas(world: &World, preview: &str) -> Option<i32> {
    Api::<Deployment>::namespaced(world.client.clone(), &world.namespace_of(preview))
        .get("web")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.replicas)
}

async fn wait_for(
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
            match api.get_opt(name).await.map_err(|e| e.to_string())? {
                Some(p) if cond(&p) => Ok(p),
                other => Err(format!(
                    "{:#?}",
                    other.map(|p| (p.metadata.labels, p.status))
                )),
            }
        }
    })
    .await
}

fn phase(p: &PreviewEnvironment) -> Option<Phase> {
    p.status.as_ref().and_then(|s| s.phase)
}

fn message(p: &PreviewEnvironment) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn previews_stop_at_the_stop_instant_and_wake_at_the_wake_instant() {
    let now = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    let stop = minute_after(now, SignedDuration::from_mins(30));
    let wake = stop + SignedDuration::from_hours(2);
    let (stop_cron, wake_cron) = (daily_at(stop), daily_at(wake));
    let world = manual_world(
        "nights",
        json!({"schedule": {"stop": stop_cron, "wake": wake_cron, "timeZone": ZONE}}),
    )
    .await;
    world.open(1).await;
    world.open(2).await;
    world.wait_phase("nights-pr-1", Phase::Ready, T).await;
    world.wait_phase("nights-pr-2", Phase::Ready, T).await;
    // Pull request 2's preview is stopped on request before the night.
    previews::set_stopped(&world.previews(), "nights-pr-2", true, world.clock.now())
        .await
        .unwrap()
        .unwrap();
    world.wait_phase("nights-pr-2", Phase::Stopped, T).await;

    move_past(&world.clock, stop);
    let pe = world.wait_phase("nights-pr-1", Phase::Stopped, T).await;
    let said = format!(
        "Stopped outside working hours (schedule {stop_cron} {ZONE}); wakes at {}",
        wake.in_tz(ZONE).unwrap().strftime("%H:%M")
    );
    assert!(message(&pe).starts_with(&said), "{}", message(&pe));
    let record = pe.status.as_ref().unwrap().schedule.clone().unwrap();
    assert_eq!((record.state, record.at.0), (ScheduleState::Stopped, stop));
    assert_eq!(replicas(&world, "nights-pr-1").await, Some(0));
    assert!(pe.status.as_ref().unwrap().wake_page, "routes parked first");
    // In the history and as Events, as idle stop is.
    let history = &pe.status.as_ref().unwrap().history;
    assert!(
        history
            .iter()
            .any(|h| h.action == "Stopped"
                && h.result.as_deref().is_some_and(|n| n.starts_with(&said))),
        "{history:#?}"
    );
    let events = world
        .wait_event_reasons("nights-pr-1", &["Ready", "Stopped"])
        .await;
    assert!(
        events
            .iter()
            .any(|(r, note)| r == "Stopped" && note.starts_with(&said)),
        "{events:#?}"
    );

    move_past(&world.clock, wake);
    let pe = world.wait_phase("nights-pr-1", Phase::Ready, T).await;
    assert_eq!(replicas(&world, "nights-pr-1").await, Some(1));
    let record = pe.status.as_ref().unwrap().schedule.clone().unwrap();
    assert_eq!((record.state, record.at.0), (ScheduleState::Woken, wake));
    let woke = format!("Waking up for working hours (schedule {wake_cron} {ZONE})");
    assert!(
        pe.status
            .as_ref()
            .unwrap()
            .history
            .iter()
            .any(|h| h.result.as_deref().is_some_and(|n| n.starts_with(&woke))),
        "{:#?}",
        pe.status.as_ref().unwrap().history
    );
    // Stopped on request: the schedule never wakes it.
    let asked = world.previews().get("nights-pr-2").await.unwrap();
    assert_eq!(phase(&asked), Some(Phase::Stopped), "{}", message(&asked));
    assert!(
        message(&asked).starts_with("Stopped on request"),
        "{}",
        message(&asked)
    );
    assert_eq!(replicas(&world, "nights-pr-2").await, Some(0));
}

#[tokio::test]
async fn kept_pull_requests_and_agents_at_work_are_left_running() {
    let now = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    let stop = minute_after(now, SignedDuration::from_mins(20));
    // No idle stop: an agent's session lasts an hour after its last call.
    let world = manual_world(
        "late",
        json!({"stopAfterIdle": "0", "schedule": {"stop": daily_at(stop), "timeZone": ZONE}}),
    )
    .await;
    for n in 1..=3 {
        world.open(n).await;
    }
    for n in 1..=3 {
        world
            .wait_phase(&format!("late-pr-{n}"), Phase::Ready, T)
            .await;
    }
    // Pull request 2 is labelled preview-keep.
    let (status, body) = world
        .deliver(&world.gh.label(&world.repo, pr(2), "preview-keep"))
        .await;
    assert_eq!(status, 200, "{body}");
    wait_for(&world, "late-pr-2", "the keep label recorded", |p| {
        p.labels().get(KEEP).is_some_and(|v| v == "true")
    })
    .await;
    // An agent reads pull request 3's preview through the API.
    let agent = account(&world, "agent", &[ALL]).await;
    let read = call(
        &world,
        "GET",
        "/api/v1/previews/late-pr-3",
        Some(&agent),
        None,
    )
    .await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    let at_work = world.clock.now();
    wait_for(&world, "late-pr-3", "the agent's activity stamped", |p| {
        p.annotations().contains_key(AGENT_ACTIVITY)
    })
    .await;

    move_past(&world.clock, stop);
    world.wait_phase("late-pr-1", Phase::Stopped, T).await;
    for name in ["late-pr-2", "late-pr-3"] {
        let pe = world.previews().get(name).await.unwrap();
        assert_eq!(phase(&pe), Some(Phase::Ready), "{name}: {}", message(&pe));
        assert_eq!(replicas(&world, name).await, Some(1), "{name}");
    }

    // The agent's session over (an hour after its call), still off hours: stopped then. The
    // kept one keeps running.
    move_past(&world.clock, at_work + SignedDuration::from_hours(1));
    let pe = world.wait_phase("late-pr-3", Phase::Stopped, T).await;
    assert!(
        message(&pe).starts_with("Stopped outside working hours"),
        "{}",
        message(&pe)
    );
    let kept = world.previews().get("late-pr-2").await.unwrap();
    assert_eq!(phase(&kept), Some(Phase::Ready), "{}", message(&kept));

    // Without `wake`, activity (here the stamp a visit writes) wakes it as it does an idle one.
    let stamp =
        json!({"metadata": {"annotations": {LAST_ACTIVITY: world.clock.now().to_string()}}});
    world
        .previews()
        .patch("late-pr-1", &PatchParams::default(), &Patch::Merge(&stamp))
        .await
        .unwrap();
    world.wait_phase("late-pr-1", Phase::Ready, T).await;
}

#[tokio::test]
async fn a_schedule_that_cannot_be_read_is_refused_naming_the_field() {
    let world = World::new(
        "zones",
        TINY_APP,
        json!({"schedule": {"stop": "0 20 * * 1-5", "timeZone": "Mars/Olympus_Mons"}}),
    )
    .await;
    // The API server refuses what is not cron, naming the field.
    let api: Api<Blueprint> = Api::namespaced(world.client.clone(), &world.home.name);
    for (schedule, field) in [
        (json!({"stop": "0 25 * * 1-5"}), "spec.schedule.stop"),
        (json!({"stop": "0 20 * *"}), "spec.schedule.stop"),
        (
            json!({"stop": "0 20 * * 1-5", "wake": "@daily"}),
            "spec.schedule.wake",
        ),
        (
            json!({"stop": "0 20 * * 1-5", "timeZone": "../../etc/passwd"}),
            "spec.schedule.timeZone",
        ),
    ] {
        let bp = json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
            "metadata": {"name": "bad"},
            "spec": {"source": {"namespace": world.staging.name}, "repositories": [world.repo.as_str()],
                "schedule": schedule}});
        let refused = api
            .patch(
                "bad",
                &PatchParams::apply("test").force(),
                &Patch::Apply(&bp),
            )
            .await
            .expect_err("refused");
        assert!(refused.to_string().contains(field), "{field}: {refused}");
    }
    // A zone the database does not have passes the API server's shape check; the controller
    // refuses the Blueprint's previews, naming the field.
    world.open(1).await;
    let pe = world.wait_phase("zones-pr-1", Phase::Failed, T).await;
    let said = message(&pe);
    assert!(
        said.starts_with("Blueprint zones cannot be used until its schedule is fixed: spec.schedule.timeZone: `Mars/Olympus_Mons` is not a time zone"),
        "{said}"
    );
    // Fixed, the preview goes on.
    let fix = json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
        "metadata": {"name": "zones"}, "spec": {"schedule": {"stop": "0 20 * * 1-5", "timeZone": ZONE}}});
    api.patch(
        "zones",
        &PatchParams::apply("fix").force(),
        &Patch::Apply(&fix),
    )
    .await
    .unwrap();
    world.wait_phase("zones-pr-1", Phase::Ready, T).await;
}
