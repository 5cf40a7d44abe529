//! `sandcastle serve` as a real process: configured from the environment, it becomes ready,
//! handles a delivery end to end, logs JSON, and shuts down cleanly on SIGTERM.

use std::time::Duration;

use sandcastle::crd::Phase;
use sandcastle_fake_github::PrSpec;

use crate::support::process::ServeProcess;
use crate::support::world::{SECRET, World, pr, sha};

#[tokio::test]
async fn serve_runs_from_environment_and_stops_on_sigterm() {
    let yaml =
        std::fs::read_to_string("fixtures/blueprints/k8s-guestbook/guestbook-all-in-one.yaml")
            .unwrap();
    let mut world = World::new("guestbook", &yaml, serde_json::json!({})).await;
    // Only the process under test reconciles.
    world.sandcastle.take().unwrap().shutdown().await;

    let serve = ServeProcess::start(
        &world,
        &format!("{SECRET},an-older-webhook-secret"),
        &[
            ("SANDCASTLE_LOG", "info".into()),
            ("SANDCASTLE_LOG_FORMAT", "json".into()),
        ],
    )
    .await;
    let addr = serve.addr;
    let d = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(21), sha(), "b"));
    let (status, body) = world
        .post_to(addr, d.body.clone(), d.signed_headers(SECRET))
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (202, Some("recorded")),
        "{body}"
    );
    world
        .wait_phase("guestbook-pr-21", Phase::Ready, Duration::from_secs(90))
        .await;

    let (status, (_, logs)) = serve.stop_with_status().await;
    assert!(status.success(), "exit status {status}");
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        !lines.is_empty() && lines.len() == logs.lines().count(),
        "every log line is JSON:\n{logs}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["target"] == "audit" && l["preview"] == "guestbook-pr-21"),
        "an audit line for the write:\n{logs}"
    );
    assert!(
        !logs.contains(SECRET) && !logs.contains("BEGIN RSA"),
        "no secret in the logs"
    );
}
