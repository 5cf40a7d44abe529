//! The MCP server, driven by the official SDKs as agents run them: the Python SDK (`mcp`) and the
//! TypeScript SDK (`@modelcontextprotocol/sdk`) over Streamable HTTP with a bearer token, and the
//! Python SDK's stdio client starting `sandcastle mcp` (whose writes are MCP's, and which says
//! why when it has no token). The clients are `tests/mcp/client.py`
//! and `client.mjs` (each asserts what it sees and prints a JSON summary); this side sets up
//! real previews on the local control plane and checks what happened to them.

use std::time::Duration;

use sandcastle::crd::PreviewEnvironment;
use sandcastle::crd::labels::LAST_ACTIVITY;
use serde_json::{Value, json};

use crate::support::api::{ALL, account, call};
use crate::support::logs::{ContainerLogs, set_pod_logs};
use crate::support::mcp_clients::{clients_dir, python, run_client};
use crate::support::world::{World, sha};
use crate::support::{audit, eventually, wait_for};

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
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  rules:
  - host: web.staging.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: v1
kind: Secret
metadata: {name: db}
stringData: {password: correct-horse-battery-staple-42}
";
const T: Duration = Duration::from_secs(30);
const SECRET: &str = "correct-horse-battery-staple-42";
const READ_TOOLS: [&str; 6] = [
    "list_previews",
    "get_preview",
    "wait_for_preview",
    "get_logs",
    "get_events",
    "diagnose_preview",
];

/// Node, with the TypeScript SDK installed in tests/mcp/node_modules.
fn node() -> String {
    assert!(
        clients_dir()
            .join("node_modules/@modelcontextprotocol/sdk")
            .exists(),
        "the TypeScript MCP SDK is not installed: run `npm ci --prefix tests/mcp` (scripts/test does)"
    );
    std::env::var("SANDCASTLE_MCP_NODE").unwrap_or_else(|_| "node".to_owned())
}

fn tools_of(summary: &Value) -> Vec<String> {
    summary["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {summary}"))
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

/// A sandbox made through the REST API, Ready, whose pod logs a line holding a Secret's value.
async fn ready_sandbox(world: &World, admin: &str, name: &str) -> String {
    let body = json!({"blueprint": world.repo.name(), "repository": world.repo.as_str(),
        "commit": sha().as_str(), "branch": name, "name": name});
    let made = call(world, "POST", "/api/v1/previews", Some(admin), Some(body)).await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let path = format!("/api/v1/previews/{name}/wait?timeout=90s");
    let waited = call(world, "GET", &path, Some(admin), None).await;
    assert_eq!(waited.body["outcome"], "ready", "{:?}", waited.body);
    let ns = waited.body["preview"]["namespace"]
        .as_str()
        .unwrap()
        .to_owned();
    let line = format!("connecting with password {SECRET}");
    set_pod_logs(
        &world.client,
        &ns,
        &[ContainerLogs {
            containers: &["web"],
            lines: &["web listening on :8080", &line],
            ..Default::default()
        }],
    )
    .await;
    ns
}

#[tokio::test]
async fn official_sdks_read_previews_over_http_and_see_no_write_tools() {
    let (py, node) = (python(), node());
    let world = World::new(
        "mcpread",
        APP,
        json!({"host": "{{preview}}.preview.example.com"}),
    )
    .await;
    let admin = account(&world, "admin", &[ALL]).await;
    ready_sandbox(&world, &admin, "mcpread-a").await;
    let url = format!("http://{}/mcp", world.addr());
    let case = json!({"url": url, "token": admin, "preview": "mcpread-a",
        "logLine": "web listening on :8080", "secretValue": SECRET});

    let py_read = run_client(&py, "client.py", "read", &case).await;
    let ts_read = run_client(&node, "client.mjs", "read", &case).await;
    let mut legacy = case.clone();
    legacy["mode"] = json!("legacy");
    let py_legacy = run_client(&py, "client.py", "read", &legacy).await;
    println!(
        "tools as the Python SDK lists them: {}",
        serde_json::to_string_pretty(&py_read["annotations"]).unwrap()
    );
    for summary in [&py_read, &ts_read, &py_legacy] {
        assert_eq!(tools_of(summary), READ_TOOLS, "{summary}");
        let progress = summary["progress"].as_array();
        assert!(
            progress.is_some_and(|p| !p.is_empty()),
            "wait_for_preview sends progress: {summary}"
        );
        println!(
            "{} spoke protocol {}",
            summary["sdk"], summary["protocolVersion"]
        );
    }
    println!("latencies (ms): {}", py_read["latencyMs"]);
    let refused = run_client(&py, "client.py", "unauthenticated", &json!({"url": url})).await;
    assert_eq!(refused["refused"], true, "{refused}");
    let refused = run_client(&node, "client.mjs", "unauthenticated", &json!({"url": url})).await;
    assert_eq!(refused["refused"], true, "{refused}");
    // Write tools are not callable either while writes are off.
    let case = json!({"url": url, "token": admin, "tool": "destroy",
        "arguments": {"name": "mcpread-a"}});
    let answer = run_client(&py, "client.py", "call", &case).await;
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(
        answer["text"]
            .as_str()
            .unwrap()
            .starts_with("writes_disabled"),
        "{answer}"
    );
    let pe = world.previews().get("mcpread-a").await.unwrap();
    assert!(pe.spec.teardown.is_none(), "nothing was destroyed");
}

#[tokio::test]
async fn writes_are_two_step_and_no_more_than_rbac_allows() {
    let py = python();
    let mut world = World::unstarted(
        "mcpwrite",
        APP,
        json!({"host": "{{preview}}.preview.example.com"}),
    )
    .await;
    world.configure = Some(|parts| parts.settings.mcp_write = true);
    let clock = world.use_manual_clock().await;
    let admin = account(&world, "admin", &[ALL]).await;
    let no_delete = account(
        &world,
        "nodelete",
        &[(
            &[
                "previewenvironments",
                "previewenvironments/events",
                "previewenvironments/logs",
            ],
            &["get", "list", "create", "update"],
        )],
    )
    .await;
    ready_sandbox(&world, &admin, "mcpwrite-a").await;
    ready_sandbox(&world, &admin, "mcpwrite-b").await;
    let url = format!("http://{}/mcp", world.addr());

    // Create, extend and destroy in two steps (the client asserts each answer).
    let case = json!({"url": url, "token": admin, "blueprint": world.repo.name(),
        "repository": world.repo.as_str(), "commit": sha().as_str(), "name": "mcpwrite-made",
        "idempotencyKey": "task-1"});
    let wrote = run_client(&py, "client.py", "write", &case).await;
    assert_eq!(tools_of(&wrote).len(), 19, "{wrote}");
    let made = world.previews().get("mcpwrite-made").await.unwrap();
    assert!(made.spec.teardown.is_some(), "destroyed: {:?}", made.spec);
    // Every write is attributed to the caller and says it came through MCP (the controller
    // writes the history from the requests, so it is waited for).
    let history = eventually("the MCP writes in the history", T, || async {
        let seen = call(
            &world,
            "GET",
            "/api/v1/previews/mcpwrite-made",
            Some(&admin),
            None,
        )
        .await;
        let history = seen.body["history"].as_array().cloned().unwrap_or_default();
        let has = |a: &str| history.iter().any(|h| h["action"] == a);
        [
            "mcp-create",
            "mcp-extend",
            "mcp-share",
            "mcp-unshare",
            "mcp-delete",
        ]
        .iter()
        .all(|a| has(a))
        .then(|| history.clone())
        .ok_or(format!("{history:?}"))
    })
    .await;
    for action in [
        "mcp-create",
        "mcp-extend",
        "mcp-share",
        "mcp-unshare",
        "mcp-delete",
    ] {
        let entry = history.iter().find(|h| h["action"] == action).unwrap();
        assert!(
            entry["actor"].as_str().unwrap().ends_with(":admin"),
            "{entry}"
        );
        assert!(
            entry["result"].as_str().unwrap().contains("through MCP"),
            "{entry}"
        );
    }

    let call_tool = |token: &str, tool: &str, arguments: Value| {
        let case = json!({"url": url, "token": token, "tool": tool, "arguments": arguments});
        let py = py.clone();
        async move { run_client(&py, "client.py", "call", &case).await }
    };
    // RBAC without `delete`: refused at the first step already.
    let answer = call_tool(&no_delete, "destroy", json!({"name": "mcpwrite-a"})).await;
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(
        answer["text"].as_str().unwrap().starts_with("forbidden"),
        "{answer}"
    );
    // A token of preview A reads A, and nothing of B.
    let minted = call_tool(&admin, "mint_preview_token", json!({"name": "mcpwrite-a"})).await;
    assert_eq!(minted["isError"], false, "{minted}");
    let token_a = minted["structured"]["token"].as_str().unwrap().to_owned();
    let own = call_tool(&token_a, "get_preview", json!({"name": "mcpwrite-a"})).await;
    assert_eq!(own["structured"]["name"], "mcpwrite-a", "{own}");
    let other = call_tool(&token_a, "get_preview", json!({"name": "mcpwrite-b"})).await;
    assert_eq!(other["isError"], true, "{other}");
    assert!(
        other["text"].as_str().unwrap().starts_with("forbidden"),
        "{other}"
    );
    let other = call_tool(&token_a, "destroy", json!({"name": "mcpwrite-b"})).await;
    assert!(
        other["text"].as_str().unwrap().starts_with("forbidden"),
        "{other}"
    );

    // A confirmation past its minute is refused, and nothing is deleted.
    let case = json!({"url": url, "token": admin, "name": "mcpwrite-b"});
    let asked = run_client(&py, "client.py", "ask-destroy", &case).await;
    let confirm = asked["confirm"].as_str().unwrap().to_owned();
    clock.advance(Duration::from_secs(61));
    let mut late = case.clone();
    late["confirm"] = json!(confirm);
    let answer = run_client(&py, "client.py", "confirm-destroy", &late).await;
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(
        answer["text"].as_str().unwrap().contains("expired"),
        "{answer}"
    );
    // An MCP read is activity: it keeps the preview from being stopped as idle.
    let stamp = |pe: &sandcastle::crd::PreviewEnvironment| -> jiff::Timestamp {
        pe.metadata.annotations.as_ref().unwrap()[LAST_ACTIVITY]
            .parse()
            .unwrap()
    };
    let before = stamp(&world.previews().get("mcpwrite-b").await.unwrap());
    let read = call_tool(&admin, "get_preview", json!({"name": "mcpwrite-b"})).await;
    assert_eq!(read["isError"], false, "{read}");
    let previews = world.previews();
    eventually(
        "the read stamped as activity",
        Duration::from_secs(30),
        || {
            let previews = previews.clone();
            let now = clock.now();
            async move {
                let after = stamp(
                    &previews
                        .get("mcpwrite-b")
                        .await
                        .map_err(|e| e.to_string())?,
                );
                (after == now).then_some(()).ok_or(format!(
                    "stamp {after} (before the read: {before}; now {now})"
                ))
            }
        },
    )
    .await;
    // Another caller cannot use a confirmation issued to admin.
    let asked = run_client(&py, "client.py", "ask-destroy", &case).await;
    let mut stolen = late.clone();
    stolen["confirm"] = asked["confirm"].clone();
    stolen["token"] = json!(no_delete);
    let answer = run_client(&py, "client.py", "confirm-destroy", &stolen).await;
    assert_eq!(answer["isError"], true, "{answer}");
    for name in ["mcpwrite-a", "mcpwrite-b"] {
        let pe = world.previews().get(name).await.unwrap();
        assert!(pe.spec.teardown.is_none(), "{name} was not destroyed");
    }
}

#[tokio::test]
async fn the_stdio_server_serves_a_local_agent_with_a_token() {
    let py = python();
    let world = World::new(
        "mcpstdio",
        APP,
        json!({"host": "{{preview}}.preview.example.com"}),
    )
    .await;
    let admin = account(&world, "admin", &[ALL]).await;
    ready_sandbox(&world, &admin, "mcpstdio-a").await;
    let case = json!({"sandcastle": env!("CARGO_BIN_EXE_sandcastle-dev"),
        "server": format!("http://{}", world.addr()), "token": admin, "preview": "mcpstdio-a"});
    let summary = run_client(&py, "client.py", "stdio", &case).await;
    assert_eq!(tools_of(&summary), READ_TOOLS, "{summary}");
    assert_eq!(summary["name"], "mcpstdio-a", "{summary}");
    assert_eq!(summary["phase"], "Ready", "{summary}");
}

#[tokio::test]
async fn the_stdio_server_writes_as_mcp_and_says_why_it_cannot_start() {
    let py = python();
    let world = World::new(
        "mcpstdiow",
        APP,
        json!({"host": "{{preview}}.preview.example.com"}),
    )
    .await;
    let admin = account(&world, "admin", &[ALL]).await;
    let body = json!({"blueprint": world.repo.name(), "repository": world.repo.as_str(),
        "commit": sha().as_str(), "branch": "b", "name": "mcpstdiow-a"});
    let made = call(&world, "POST", "/api/v1/previews", Some(&admin), Some(body)).await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let server = format!("http://{}", world.addr());
    let case = json!({"sandcastle": env!("CARGO_BIN_EXE_sandcastle-dev"), "server": server,
        "token": admin, "write": true, "tool": "extend",
        "arguments": {"name": "mcpstdiow-a", "duration": "1h"}});
    let answer = run_client(&py, "client.py", "stdio-call", &case).await;
    assert_eq!(answer["isError"], false, "{answer}");

    let pe = wait_for(
        &world.previews(),
        "mcpstdiow-a",
        "the extension in the history",
        T,
        |p: Option<&PreviewEnvironment>| {
            p.and_then(|p| p.status.as_ref())
                .is_some_and(|s| s.history.iter().any(|h| h.action.ends_with("-extend")))
        },
    )
    .await
    .unwrap();
    let history = pe.status.unwrap().history;
    let entry = history
        .iter()
        .find(|h| h.action.ends_with("-extend"))
        .unwrap();
    assert_eq!(entry.action, "mcp-extend", "{history:?}");
    let line = audit::lines()
        .into_iter()
        .find(|l| {
            l.get("preview").map(String::as_str) == Some("mcpstdiow-a")
                && l.get("action").map(String::as_str) == Some("extend")
        })
        .expect("an audit line for the extension");
    assert_eq!(line.get("via").map(String::as_str), Some("mcp"), "{line:?}");

    // Without a token it does not start, and the client hears why.
    let case = json!({"sandcastle": env!("CARGO_BIN_EXE_sandcastle-dev"), "server": server});
    let refused = run_client(&py, "client.py", "stdio-refused", &case).await;
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("no token") && error.contains("SANDCASTLE_TOKEN"),
        "{error}"
    );
}
