//! The edges of the MCP server, against the real control plane: sessions bounded per caller
//! (429 past the bound, freed by the session's `DELETE`), refused to a caller who may read no
//! preview; a message read only from a caller who may, and only so far; and values quoted back
//! cut short.

use std::time::Duration;

use serde_json::{Value, json};

use crate::api_guard::promise;
use crate::support::api::{ALL, account, answer_before_the_body_ends, client};
use crate::support::mcp_clients::{python, run_client};
use crate::support::world::World;

const T: Duration = Duration::from_secs(60);
/// The sessions one caller may hold open at once.
const PER_CALLER: usize = 20;

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

/// An MCP `initialize` over Streamable HTTP as `token`: the status, the session id, the body
/// (JSON when the server refused).
async fn initialize(world: &World, token: &str) -> (u16, Option<String>, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "sandcastle-tests", "version": "1"}}});
    let resp = client()
        .post(format!("http://{}/mcp", world.addr()))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .timeout(T)
        .send()
        .await
        .expect("Sandcastle answers");
    let status = resp.status().as_u16();
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let refused = if status == 200 {
        Value::Null
    } else {
        resp.json().await.unwrap_or(Value::Null)
    };
    (status, session, refused)
}

async fn end_session(world: &World, token: &str, session: &str) -> u16 {
    client()
        .delete(format!("http://{}/mcp", world.addr()))
        .bearer_auth(token)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .timeout(T)
        .send()
        .await
        .expect("Sandcastle answers")
        .status()
        .as_u16()
}

#[tokio::test]
async fn sessions_are_bounded_per_caller_and_freed_by_their_delete() {
    let world = World::new("mcpsessions", APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let reader = account(&world, "reader", &[(&["previewenvironments"], &["list"])]).await;
    let nobody = account(&world, "nobody", &[]).await;

    let (status, session, refused) = initialize(&world, &nobody).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str(), session),
        (403, Some("forbidden"), None),
        "a caller who may read no preview gets no session: {refused}"
    );

    let mut sessions = Vec::new();
    for _ in 0..PER_CALLER {
        let (status, session, refused) = initialize(&world, &admin).await;
        assert_eq!(status, 200, "{refused}");
        sessions.push(session.expect("a session id"));
    }
    let (status, session, refused) = initialize(&world, &admin).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str(), session),
        (429, Some("too_many_sessions"), None),
        "{refused}"
    );
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&PER_CALLER.to_string())
            && message.contains("DELETE")
            && message.contains("Mcp-Session-Id"),
        "the limit and how to free a session: {message}"
    );
    // Another caller has sessions of its own, and cannot end the first caller's.
    let (status, theirs, _) = initialize(&world, &reader).await;
    assert_eq!(status, 200);
    assert_eq!(end_session(&world, &reader, &sessions[0]).await, 404);

    let ended = end_session(&world, &admin, &sessions[0]).await;
    assert!(ended == 200 || ended == 204, "DELETE answered {ended}");
    let (status, _, refused) = initialize(&world, &admin).await;
    assert_eq!(status, 200, "a session ended frees its place: {refused}");
    assert_eq!(
        end_session(&world, &reader, &theirs.unwrap()).await / 100,
        2
    );
}

#[tokio::test]
async fn mcp_refusals_quote_values_cut_short() {
    let py = python();
    let world = World::new("mcpquoted", APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let url = format!("http://{}/mcp", world.addr());
    let long = "x".repeat(40_000);
    for (tool, arguments) in [
        ("get_preview", json!({"name": long})),
        ("get_logs", json!({"name": "p", "tailLines": long})),
        ("list_previews", json!({"phase": long})),
        (long.as_str(), json!({})),
    ] {
        let case = json!({"url": url, "token": admin, "tool": tool, "arguments": arguments});
        let answer = run_client(&py, "client.py", "call", &case).await;
        assert_eq!(answer["isError"], true, "{}", &answer.to_string()[..300]);
        let text = answer.to_string();
        assert!(
            text.len() < 1500 && !text.contains(&long[..100]),
            "{} bytes: {}",
            text.len(),
            &text[..text.len().min(300)]
        );
    }
}

#[tokio::test]
async fn a_message_is_read_only_from_a_caller_who_may_and_only_so_far() {
    let world = World::new("mcpbodies", APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let nobody = account(&world, "nobody", &[]).await;
    let start = vec![b' '; 64 * 1024];
    for (token, status, code) in [(&nobody, 403, "forbidden"), (&admin, 413, "body_too_large")] {
        let head = promise(&world, "/mcp", Some(token), 100 * 1024 * 1024);
        let answer = answer_before_the_body_ends(&world, &head, &start, T)
            .await
            .unwrap_or_else(|| panic!("/mcp ({code}) was not answered while its body was coming"));
        assert_eq!(
            (answer.status, answer.body["error"]["code"].as_str()),
            (status, Some(code)),
            "{:?}",
            answer.body
        );
    }
}
