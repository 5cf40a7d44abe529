//! Logs come from real containers: what the test app writes to stderr reaches the REST API, the
//! CLI and the MCP server (the official Python SDK), with the preview's Secret values redacted
//! — a visitor's request that carries one is logged by the app, and nobody reads it back.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::api::{ALL, account, call};
use crate::support::eventually;
use crate::support::mcp_clients::{python, run_client};
use crate::support::world::sha;
use crate::tier::{self, REAL_APP, host_of, open_at};

const SECRET: &str = "correct-horse-battery-staple-real";

#[tokio::test]
async fn logs_of_real_containers_reach_the_api_the_cli_and_mcp_redacted() {
    let tier = tier::tier();
    let yaml = format!(
        "{REAL_APP}---\napiVersion: v1\nkind: Secret\nmetadata: {{name: db}}\nstringData: {{password: {SECRET}}}\n"
    );
    let world = tier::world_of(&tier, "logs", &yaml, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_github_state(&head, "success", tier::T).await;
    let host = host_of(&world, "logs-pr-1").await;
    // The app logs each request's User-Agent: this one carries the Secret's value.
    let page = tier
        .get_as(&host, "/api/info", &format!("probe with {SECRET}"))
        .await;
    assert_eq!(page.status, 200, "{page:?}");

    let path = "/api/v1/previews/logs-pr-1/logs?workload=app&tailLines=50";
    let logs = eventually("the API serves the app's request line", tier::T, || async {
        let got = call(&world, "GET", path, Some(&admin), None).await;
        let text = got.body.to_string();
        if got.status == 200 && text.contains("GET /api/info probe with") {
            Ok(got.body)
        } else {
            Err(format!(
                "{} {}",
                got.status,
                text.chars().take(400).collect::<String>()
            ))
        }
    })
    .await;
    let text = logs.to_string();
    assert!(
        text.contains(&format!("commit {head}")),
        "the app's start line: {text}"
    );
    assert!(!text.contains(SECRET), "{text}");
    assert!(redacted(&logs) >= 1, "{logs}");

    // The CLI prints the same lines, redacted.
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_sandcastle-dev"))
            .env_clear()
            .env("SANDCASTLE_TOKEN", &admin)
            .args(["previews", "--server", &format!("http://{}", world.addr())])
            .args(["logs", "logs-pr-1", "--tail", "50"])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the CLI ends")
    .expect("the CLI runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("GET /api/info probe with"), "{stdout}");
    assert!(stdout.contains(&format!("commit {head}")), "{stdout}");
    assert!(!stdout.contains(SECRET), "{stdout}");

    // MCP, through the official Python SDK.
    let case = json!({"url": format!("http://{}/mcp", world.addr()), "token": admin,
        "tool": "get_logs", "arguments": {"name": "logs-pr-1", "tailLines": 50}});
    let answer = run_client(&python(), "client.py", "call", &case).await;
    assert_eq!(answer["isError"], false, "{answer}");
    let seen = answer["structured"].to_string() + answer["text"].as_str().unwrap_or_default();
    assert!(seen.contains("GET /api/info probe with"), "{answer}");
    assert!(!seen.contains(SECRET), "{answer}");
}

/// How many values the answer says it redacted.
fn redacted(logs: &Value) -> u64 {
    logs["redacted"].as_u64().unwrap_or(0)
}
