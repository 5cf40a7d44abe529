//! A pull request event is answered after one write to Kubernetes, whatever GitHub does: GitHub
//! slow or down never makes the webhook wait or refuse (it used to read the repository's
//! configuration before answering, and answered 503 past four seconds). The controller asks
//! GitHub instead, says on the record and on the pull request's previews what it waits for, and
//! carries the event out once GitHub answers.

use std::time::Duration;

use kube::api::Api;
use sandcastle::crd::{EventState, Phase, PreviewEvent};
use sandcastle_fake_github::{Fault, PrSpec};
use serde_json::json;

use crate::support::api::{ALL, account, call};
use crate::support::eventually;
use crate::support::fixtures::TINY_APP;
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);

#[tokio::test]
async fn github_down_delays_a_push_and_says_so_without_refusing_the_delivery() {
    let world = World::new("down", TINY_APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    world.open(1).await;
    world.wait_phase("down-pr-1", Phase::Ready, T).await;

    // GitHub answers nothing now: every call fails.
    world
        .gh
        .fail_next("/**", 1_000_000, Fault::ServerError(502));
    let pushed = sha();
    let push = world.gh.push(&world.repo, pr(1), &pushed);
    let (status, body) = world.post_delivery(&push).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "recorded", "{body}");
    let record = body["record"].as_str().unwrap().to_owned();

    // The record and the preview say what they wait for; the preview stays where it was.
    let events: Api<PreviewEvent> = Api::namespaced(world.client.clone(), &world.home.name);
    eventually("the event waits for GitHub, saying why", T, || async {
        let e = events.get(&record).await.map_err(|e| e.to_string())?;
        let st = e.status.unwrap_or_default();
        let message = st.message.unwrap_or_default();
        if st.state == Some(EventState::WaitingForGitHub)
            && message.contains(".github/sandcastle.yml")
            && st.attempts >= 2
        {
            Ok(())
        } else {
            Err(format!("{:?}: {message}", st.state))
        }
    })
    .await;
    let view = eventually("the preview says it waits for GitHub", T, || async {
        let got = call(
            &world,
            "GET",
            "/api/v1/previews/down-pr-1",
            Some(&admin),
            None,
        )
        .await;
        match got.body["waitingForGithub"].as_str() {
            Some(w) if w.starts_with("waiting for GitHub") => Ok(got.body),
            _ => Err(format!("{:?}", got.body)),
        }
    })
    .await;
    assert_ne!(
        view["commit"]["desired"],
        pushed.as_str(),
        "nothing moved yet"
    );

    // GitHub back: the push is carried out, and nothing says it waits any more.
    world.gh.clear_faults();
    let done = world.event_outcome(&record).await;
    let st = done.status.unwrap();
    assert_eq!(st.state, Some(EventState::Done), "{:?}", st.message);
    assert_eq!(st.outcome.unwrap().previews[0].result, "updated");
    let pe = world.wait_phase("down-pr-1", Phase::Ready, T).await;
    assert_eq!(pe.spec.sha, pushed.as_str());
    eventually("nothing says it waits any more", T, || async {
        let got = call(
            &world,
            "GET",
            "/api/v1/previews/down-pr-1",
            Some(&admin),
            None,
        )
        .await;
        match &got.body["waitingForGithub"] {
            serde_json::Value::Null => Ok(()),
            other => Err(other.to_string()),
        }
    })
    .await;
}

#[tokio::test]
async fn a_pull_request_opened_while_github_is_slow_is_recorded_at_once_and_deployed_later() {
    let world = World::new("slowgh", TINY_APP, json!({})).await;
    // Every GitHub call answers after 6 s (past the 4 s the webhook used to wait).
    world
        .gh
        .fail_next("/**", 1_000_000, Fault::Slow(Duration::from_secs(6)));
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(1), sha(), "feature"));
    let (status, body) = world.post_delivery(&opened).await;
    // Recorded: the webhook asked GitHub nothing (it used to wait 4 s for the configuration
    // file, then answer 503 with nothing written).
    assert_eq!(
        (status, body["status"].as_str()),
        (202, Some("recorded")),
        "{body}"
    );
    world.wait_phase("slowgh-pr-1", Phase::Ready, T).await;
}
