//! The official MCP SDKs' test clients (`tests/mcp/client.py`, `client.mjs`): where they are, the
//! Python that has the SDK, and running one scenario to its JSON summary.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

pub fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// Run `program client scenario` with `case`; the client's JSON summary.
pub async fn run_client(program: &str, client: &str, scenario: &str, case: &Value) -> Value {
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new(program)
            .arg(clients_dir().join(client))
            .arg(scenario)
            .env("SANDCASTLE_MCP_CASE", case.to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{client} {scenario} ends within 5 minutes"))
    .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{client} {scenario} failed ({:?}):\n{stdout}\n{stderr}",
        out.status.code()
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("{client} {scenario} printed no JSON summary ({e}):\n{stdout}"))
}

/// The Python with the `mcp` SDK (`SANDCASTLE_MCP_PYTHON`, set by `scripts/test`).
pub fn python() -> String {
    std::env::var("SANDCASTLE_MCP_PYTHON").unwrap_or_else(|_| {
        panic!(
            "SANDCASTLE_MCP_PYTHON is not set: it names a Python with the `mcp` SDK (pip install -r tests/requirements.txt); scripts/test sets it (scripts/test-clients)"
        )
    })
}
