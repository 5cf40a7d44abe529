//! `/preview` commands as records: the webhook only records a command (`PreviewCommand`) and
//! answers; the controller carries it out. So a command delivered while no controller runs is
//! carried out once one does, a redelivered command is recognised and done once, and the
//! commands of one pull request are carried out in the order they were written.

use std::time::Duration;

use kube::api::{Api, ListParams};
use sandcastle::crd::{CommandState, PreviewCommand, PreviewEnvironment};
use sandcastle_fake_github::{PrSpec, Role};
use serde_json::json;

use crate::support::world::{World, pr, sha};
use crate::support::{eventually, wait_for};

const T: Duration = Duration::from_secs(90);
const MAINTAINER: &str = "maria";

const APP: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: ghcr.io/acme/web:1.0}]
";

async fn ready_world(n: u64) -> World {
    let mut world = World::unstarted("cmds", APP, json!({})).await;
    // Room for the test's late delivery on a loaded machine (the default is a second).
    world.configure = Some(|parts| parts.settings.command_settle = Duration::from_secs(3));
    world.start().await;
    world.gh.set_role(&world.repo, MAINTAINER, Role::Write);
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(n), sha(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    world
        .wait_phase(&format!("cmds-pr-{n}"), sandcastle::crd::Phase::Ready, T)
        .await;
    world
}

fn reactions(world: &World, n: u64, id: u64) -> Vec<String> {
    world
        .gh
        .comments(&world.repo, pr(n))
        .into_iter()
        .find(|c| c.id == id)
        .map(|c| c.reactions.into_iter().map(|r| r.content).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_command_recorded_while_no_controller_runs_is_carried_out_later() {
    let mut world = ready_world(1).await;
    // Only the HTTP side runs: the webhook records, nothing carries out.
    world.sandcastle.take().unwrap().shutdown().await;
    world.configure = Some(|parts| parts.controller = false);
    world.start().await;
    let d = world
        .gh
        .comment(&world.repo, pr(1), MAINTAINER, "/preview stop");
    let id = d.json()["comment"]["id"].as_u64().unwrap();
    let (status, answer) = world.deliver(&d).await;
    assert_eq!(
        (status, answer["status"].as_str()),
        (202, Some("accepted")),
        "{answer}"
    );
    assert_eq!(answer["command"], "stop");
    let record = answer["record"].as_str().unwrap().to_owned();
    let commands: Api<PreviewCommand> = Api::namespaced(world.client.clone(), &world.home.name);
    let recorded = commands.get(&record).await.unwrap();
    assert_eq!(recorded.spec.command, "/preview stop");
    assert_eq!(recorded.spec.author, MAINTAINER);
    assert!(recorded.status.is_none(), "nothing carried it out yet");
    assert!(reactions(&world, 1, id).is_empty());

    // A controller starts: the command is carried out, acknowledged and answered.
    world.sandcastle.take().unwrap().shutdown().await;
    world.configure = None;
    world.start().await;
    let outcome = world.command_outcome(&record).await;
    assert_eq!(outcome["status"], "accepted", "{outcome}");
    assert_eq!(outcome["previews"][0]["result"], "updated");
    world
        .wait_phase("cmds-pr-1", sandcastle::crd::Phase::Stopped, T)
        .await;
    assert_eq!(reactions(&world, 1, id), ["eyes", "rocket"]);
}

#[tokio::test]
async fn a_redelivered_command_is_carried_out_once() {
    let world = ready_world(2).await;
    let d = world
        .gh
        .comment(&world.repo, pr(2), MAINTAINER, "/preview extend 2h");
    let id = d.json()["comment"]["id"].as_u64().unwrap();
    let (status, first) = world.deliver(&d).await;
    assert_eq!(status, 202, "{first}");
    let (status, again) = world.deliver(&d).await;
    assert_eq!(
        (status, again["status"].as_str()),
        (200, Some("duplicate")),
        "{again}"
    );
    let outcome = world
        .command_outcome(first["record"].as_str().unwrap())
        .await;
    assert_eq!(outcome["status"], "accepted", "{outcome}");
    // After a restart the process has forgotten the delivery; the record has not.
    let mut world = world;
    world.sandcastle.take().unwrap().shutdown().await;
    world.start().await;
    let (status, later) = world.deliver(&d).await;
    assert_eq!(
        (status, later["status"].as_str()),
        (200, Some("duplicate")),
        "{later}"
    );
    assert_eq!(later["record"], first["record"], "recognised by its record");
    eventually("one acknowledgement and one reply", T, || async {
        let replies: Vec<_> = world
            .gh
            .comments(&world.repo, pr(2))
            .into_iter()
            .filter(|c| c.by_app && c.body.contains("The preview now expires"))
            .collect();
        match (reactions(&world, 2, id).as_slice(), replies.len()) {
            ([e, r], 1) if e == "eyes" && r == "rocket" => Ok(()),
            (r, n) => Err(format!("reactions {r:?}, {n} replies")),
        }
    })
    .await;
}

#[tokio::test]
async fn a_pull_requests_commands_are_carried_out_in_the_order_written() {
    let world = ready_world(3).await;
    // Written in this order, delivered the last one first: the stop arrives only once the wake
    // has been acknowledged (👀), as a delivery a moment late does.
    let stop = world
        .gh
        .comment(&world.repo, pr(3), MAINTAINER, "/preview stop");
    let wake = world
        .gh
        .comment(&world.repo, pr(3), MAINTAINER, "/preview wake");
    let (s1, wake_answer) = world.deliver(&wake).await;
    let wake_id = serde_json::from_slice::<serde_json::Value>(&wake.body).unwrap()["comment"]["id"]
        .as_u64()
        .unwrap();
    eventually("the wake is acknowledged", T, || async {
        let seen = reactions(&world, 3, wake_id);
        seen.iter()
            .any(|r| r == "eyes")
            .then_some(())
            .ok_or(format!("reactions {seen:?}"))
    })
    .await;
    let (s2, stop_answer) = world.deliver(&stop).await;
    assert_eq!((s1, s2), (202, 202));
    let woke = world
        .command_outcome(wake_answer["record"].as_str().unwrap())
        .await;
    let stopped = world
        .command_outcome(stop_answer["record"].as_str().unwrap())
        .await;
    assert_eq!(
        (stopped["status"].as_str(), woke["status"].as_str()),
        (Some("accepted"), Some("accepted"))
    );
    let commands: Api<PreviewCommand> = Api::namespaced(world.client.clone(), &world.home.name);
    let finished = |name: &str| {
        let commands = commands.clone();
        let name = name.to_owned();
        async move {
            commands
                .get(&name)
                .await
                .unwrap()
                .status
                .unwrap()
                .finished_at
                .unwrap()
                .0
        }
    };
    let (stop_done, wake_done) = (
        finished(stop_answer["record"].as_str().unwrap()).await,
        finished(wake_answer["record"].as_str().unwrap()).await,
    );
    assert!(
        stop_done <= wake_done,
        "stop, written first, is carried out first (stop done {stop_done}, wake done {wake_done})"
    );
    // Stopped, then woken: the preview runs.
    let previews: Api<PreviewEnvironment> = Api::namespaced(world.client.clone(), &world.home.name);
    let pe = wait_for(
        &previews,
        "cmds-pr-3",
        "woken",
        T,
        |p: Option<&PreviewEnvironment>| p.is_some_and(|p| !p.spec.stopped),
    )
    .await
    .unwrap();
    assert!(!pe.spec.stopped);
    let states: Vec<Option<CommandState>> = commands
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.status.and_then(|s| s.state))
        .collect();
    assert_eq!(states, [Some(CommandState::Done), Some(CommandState::Done)]);
}
