//! `sandcastle serve` as a real process: configured from the environment, it becomes ready,
//! handles a delivery end to end, logs JSON, and shuts down cleanly on SIGTERM.

use std::process::Stdio;
use std::time::Duration;

use sandcastle::crd::Phase;
use sandcastle::fake_github::{PrSpec, TEST_APP_ID, TEST_APP_PRIVATE_KEY_PEM};
use tokio::io::AsyncReadExt;

use crate::support::cluster;
use crate::support::eventually;
use crate::support::world::{SECRET, World, pr, sha};

#[tokio::test]
async fn serve_runs_from_environment_and_stops_on_sigterm() {
    let yaml =
        std::fs::read_to_string("fixtures/blueprints/k8s-guestbook/guestbook-all-in-one.yaml")
            .unwrap();
    let mut world = World::new("guestbook", &yaml, serde_json::json!({})).await;
    // Only the process under test reconciles.
    world.sandcastle.take().unwrap().shutdown().await;

    let dir = std::env::temp_dir().join(cluster::unique("sandcastle-serve"));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("app.pem");
    std::fs::write(&key, TEST_APP_PRIVATE_KEY_PEM).unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let kubeconfig = std::env::var("SANDCASTLE_TEST_KUBECONFIG")
        .or_else(|_| std::env::var("KUBECONFIG"))
        .unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sandcastle"))
        .arg("serve")
        .env_clear()
        .env("KUBECONFIG", kubeconfig)
        .env("SANDCASTLE_LISTEN", format!("127.0.0.1:{port}"))
        .env("SANDCASTLE_NAMESPACE", &world.home.name)
        .env("SANDCASTLE_NAMESPACE_PREFIX", &world.prefix)
        .env("SANDCASTLE_GITHUB_APP_ID", TEST_APP_ID.to_string())
        .env("SANDCASTLE_GITHUB_PRIVATE_KEY_FILE", &key)
        .env(
            "SANDCASTLE_WEBHOOK_SECRET",
            format!("{SECRET},an-older-webhook-secret"),
        )
        .env("SANDCASTLE_GITHUB_API_URL", world.gh.url())
        .env("SANDCASTLE_LOG_FORMAT", "json")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("sandcastle serve starts");
    let addr = format!("127.0.0.1:{port}").parse().unwrap();

    eventually("serve is ready", Duration::from_secs(60), || async {
        let (status, body) = world.get_from(addr, "/readyz").await;
        if status == 200 {
            Ok(())
        } else {
            Err(format!("{status} {body}"))
        }
    })
    .await;
    let d = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(21), sha(), "b"));
    let (status, body) = world
        .post_to(addr, d.body.clone(), d.signed_headers(SECRET))
        .await;
    assert_eq!(status, 200, "{body}");
    world
        .wait_phase("guestbook-pr-21", Phase::Ready, Duration::from_secs(90))
        .await;

    let pid = child.id().unwrap();
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("stops within 30 s")
        .unwrap();
    assert!(status.success(), "exit status {status}");
    let mut logs = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .await
        .unwrap();
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
    let _ = std::fs::remove_dir_all(dir);
}
