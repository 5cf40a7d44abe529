//! A request refused before its body was read leaves its connection in a state a client can
//! trust, on every listener and every route that refuses early: the answer says `Connection:
//! close` (the client opens a new connection), or the connection is kept and the next request
//! on it is answered. Each request here promises a body, is answered before the body is sent,
//! and then sends it followed by a second request on the same connection, as a pooled
//! HTTP/1.1 client does.

use serde_json::json;

use crate::support::api::{AfterEarlyAnswer, account, reuse_after_an_early_answer};
use crate::support::fixtures::TINY_APP;
use crate::support::world::World;

/// The head of a `POST path` promising `length` bytes of `content_type`.
fn head(
    addr: std::net::SocketAddr,
    path: &str,
    extra: &str,
    content_type: &str,
    length: usize,
) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Content-Type: {content_type}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n\r\n"
    )
}

#[tokio::test]
async fn a_refusal_before_the_body_is_read_says_the_connection_closes() {
    let mut world = World::unstarted("keepalive", TINY_APP, json!({})).await;
    world.gate_on_the_edge_listener();
    world.start().await;
    let nobody = account(&world, "nobody", &[]).await;
    let admin = account(&world, "admin", &[crate::support::api::ALL]).await;
    let api = world.addr();
    let edge = world.sandcastle.as_ref().unwrap().wake_addr.unwrap();
    let json_body = br#"{"duration": "1h"}"#.to_vec();
    let bearer = |t: &str| format!("Authorization: Bearer {t}\r\n");
    let huge = 30 * 1024 * 1024;

    // (where, what, the head, the status it is refused with; 0: any refusal)
    let early = [
        (
            api,
            "API, no token",
            head(
                api,
                "/api/v1/previews",
                "",
                "application/json",
                json_body.len(),
            ),
            401,
        ),
        (
            api,
            "API, not allowed",
            head(
                api,
                "/api/v1/previews/keepalive-a/extend",
                &bearer(&nobody),
                "application/json",
                json_body.len(),
            ),
            403,
        ),
        (
            api,
            "API, past the bound",
            head(
                api,
                "/api/v1/previews/keepalive-a/extend",
                &bearer(&admin),
                "application/json",
                huge,
            ),
            413,
        ),
        (
            api,
            "MCP, no token",
            head(api, "/mcp", "", "application/json", json_body.len()),
            401,
        ),
        (
            api,
            "MCP, not allowed",
            head(
                api,
                "/mcp",
                &bearer(&nobody),
                "application/json",
                json_body.len(),
            ),
            403,
        ),
        (
            api,
            "webhook, past the bound",
            head(
                api,
                "/github/webhook",
                "X-GitHub-Event: ping\r\n",
                "application/json",
                huge,
            ),
            413,
        ),
        (
            edge,
            "gate",
            head(
                edge,
                "/.sandcastle/gate/keepalive-a",
                "",
                "application/json",
                json_body.len(),
            ),
            0,
        ),
    ];
    for (addr, what, head, status) in early {
        let body = if head.contains(&format!("Content-Length: {huge}")) {
            vec![b' '; 64 * 1024]
        } else {
            json_body.clone()
        };
        let after = reuse_after_an_early_answer(addr, &head, &body).await;
        match after {
            AfterEarlyAnswer::SaidClose { status: s }
            | AfterEarlyAnswer::Kept { status: s, .. } => {
                if status == 0 {
                    assert!((400..500).contains(&s), "{what}: {after:?}");
                } else {
                    assert_eq!(s, status, "{what}: {after:?}");
                }
            }
        }
        if let AfterEarlyAnswer::Kept { second, .. } = after {
            assert_eq!(second, 200, "{what}: the next request on the connection");
        }
    }

    // A body read whole, then refused (not JSON: 400), keeps the connection for the next one.
    let whole = head(
        api,
        "/api/v1/previews",
        &bearer(&admin),
        "application/json",
        5,
    ) + "{nope";
    let read = reuse_after_an_early_answer(api, &whole, b"").await;
    assert!(
        matches!(
            read,
            AfterEarlyAnswer::SaidClose { status: 400 }
                | AfterEarlyAnswer::Kept {
                    status: 400,
                    second: 200
                }
        ),
        "{read:?}"
    );
}
