//! What the REST API refuses before it does any work, against the real control plane: a body is
//! read only once the caller is known and allowed the route's operation, and only up to a
//! bound (413 past it, in the one error shape); every operation answers 403 to a caller without
//! RBAC whether the preview exists or not, before looking at what was sent; and a bad value is
//! quoted back cut to a short prefix.

use std::time::Duration;

use sandcastle::agent::Operation;
use sandcastle::http::api::route_of;
use serde_json::{Value, json};

use crate::support::api::{ALL, account, answer_before_the_body_ends, call};
use crate::support::world::{World, sha};

/// How long an answer that needs none of the body may take.
const PROMPT: Duration = Duration::from_secs(15);

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

/// A sandbox of `world`'s repository at a fresh commit, named `name`.
fn sandbox(world: &World, name: &str) -> Value {
    json!({"blueprint": world.repo.name(), "repository": world.repo.as_str(),
        "commit": sha().as_str(), "branch": "feature", "name": name})
}

/// Make sandbox `name` of `world` as `token`, which may.
async fn make_sandbox(world: &World, token: &str, name: &str) {
    let made = call(
        world,
        "POST",
        "/api/v1/previews",
        Some(token),
        Some(sandbox(world, name)),
    )
    .await;
    assert_eq!(made.status, 201, "{:?}", made.body);
}

/// The head of a POST promising `length` bytes of JSON.
pub(crate) fn promise(world: &World, path: &str, token: Option<&str>, length: usize) -> String {
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\n{auth}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n\r\n",
        world.addr()
    )
}

#[tokio::test]
async fn a_body_is_read_only_from_a_caller_who_may_and_only_so_far() {
    let world = World::new("bodies", APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let nobody = account(&world, "nobody", &[]).await;
    make_sandbox(&world, &admin, "bodies-a").await;
    let huge = 100 * 1024 * 1024;
    let start = vec![b' '; 64 * 1024];

    // Each is answered while the 100 MB body is still on its way: 64 KiB of it were sent.
    for (path, token, status, code) in [
        ("/api/v1/previews", None, 401, "unauthenticated"),
        ("/api/v1/previews", Some(&nobody), 403, "forbidden"),
        (
            "/api/v1/previews/bodies-a/extend",
            Some(&nobody),
            403,
            "forbidden",
        ),
        (
            "/api/v1/previews/nowhere/extend",
            Some(&nobody),
            403,
            "forbidden",
        ),
        (
            "/api/v1/previews/bodies-a/token",
            Some(&nobody),
            403,
            "forbidden",
        ),
        ("/api/v1/previews", Some(&admin), 413, "body_too_large"),
        (
            "/api/v1/previews/bodies-a/redeploy",
            Some(&admin),
            413,
            "body_too_large",
        ),
        (
            "/api/v1/previews/bodies-a/token",
            Some(&admin),
            413,
            "body_too_large",
        ),
    ] {
        let head = promise(&world, path, token.map(String::as_str), huge);
        let answer = answer_before_the_body_ends(&world, &head, &start, PROMPT)
            .await
            .unwrap_or_else(|| {
                panic!("POST {path} ({code}) was not answered while its body was still coming")
            });
        assert_eq!(
            (answer.status, answer.body["error"]["code"].as_str()),
            (status, Some(code)),
            "POST {path}: {:?}",
            answer.body
        );
        if status == 413 {
            let message = answer.body["error"]["message"].as_str().unwrap();
            assert!(message.contains("KiB"), "the limit is named: {message}");
        }
    }
    let pe = world.previews().get("bodies-a").await.unwrap();
    assert!(pe.spec.teardown.is_none(), "nothing was done to it");
}

#[tokio::test]
async fn bad_values_are_quoted_back_cut_to_a_short_prefix() {
    let world = World::new("quoted", APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    make_sandbox(&world, &admin, "quoted-a").await;
    let long = "x".repeat(40_000);
    let url_long = &long[..8000];
    let with = |field: &str, value: Value| {
        let mut body = sandbox(&world, "quoted-b");
        body[field] = value;
        body
    };
    let post = |path: &str, body: Value| ("POST", path.to_owned(), Some(body));
    let get = |path: String| ("GET", path, None);
    let cases = [
        post("/api/v1/previews", with("name", json!(long))),
        post("/api/v1/previews", with("branch", json!(long))),
        post("/api/v1/previews", with("ttl", json!(long))),
        post("/api/v1/previews", with("blueprint", json!(long))),
        post("/api/v1/previews", with("repository", json!(long))),
        post("/api/v1/previews", with("commit", json!(long))),
        post("/api/v1/previews", with(&long, json!(1))),
        post(
            "/api/v1/previews/quoted-a/extend",
            json!({"duration": long}),
        ),
        post(
            "/api/v1/previews/quoted-a/redeploy",
            json!({"commit": long}),
        ),
        post(
            "/api/v1/previews/quoted-a/token",
            json!({"expirationSeconds": long}),
        ),
        // (A URL holds less than a body: 8,000 characters of the value.)
        get(format!("/api/v1/previews?phase={url_long}")),
        get(format!("/api/v1/previews?repo={url_long}&limit={url_long}")),
        get(format!("/api/v1/previews?continue={url_long}")),
        get(format!("/api/v1/previews/{url_long}")),
        get(format!("/api/v1/previews/quoted-a/wait?timeout={url_long}")),
        get(format!("/api/v1/previews/quoted-a/logs?since={url_long}")),
        get(format!(
            "/api/v1/previews/quoted-a/logs?workload={url_long}"
        )),
    ];
    for (method, path, body) in cases {
        let answer = call(&world, method, &path, Some(&admin), body).await;
        let shown = &path[..path.len().min(60)];
        assert!(
            (400..500).contains(&answer.status),
            "{method} {shown}: {}",
            answer.status
        );
        let text = answer.body.to_string();
        assert!(
            text.len() < 1024 && !text.contains(&long[..100]),
            "{method} {shown}: an answer of {} bytes: {}",
            text.len(),
            &text[..text.len().min(300)]
        );
        assert!(
            answer.body["error"]["code"].is_string(),
            "{method} {shown}: {text}"
        );
    }
}

/// Each operation's request, on preview `name`: method, path (with a query), body.
fn request_of(op: Operation, name: &str, world: &World) -> (String, String, Option<Value>) {
    let (method, path) = route_of(op);
    let path = path.replace("{name}", name);
    let (path, body) = match op {
        Operation::Create => (path, Some(sandbox(world, "made-by-nobody"))),
        Operation::Extend => (path, Some(json!({"duration": "1h"}))),
        Operation::Wait => (format!("{path}?timeout=1s"), None),
        _ => (path, None),
    };
    (method.to_ascii_uppercase(), path, body)
}

#[tokio::test]
async fn every_operation_answers_403_to_a_caller_without_rbac_before_anything_else() {
    let world = World::new("unallowed", APP, json!({"maxTtl": "48h"})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let nobody = account(&world, "nobody", &[]).await;
    world.gh.set_branch(&world.repo, "feature", &sha());
    make_sandbox(&world, &admin, "unallowed-here").await;
    // At its maxTtl already: an extension is refused to whoever may ask for one.
    let at_max = call(
        &world,
        "POST",
        "/api/v1/previews/unallowed-here/extend",
        Some(&admin),
        Some(json!({"duration": "1000h"})),
    )
    .await;
    assert_eq!(at_max.status, 200, "{:?}", at_max.body);

    let mut table = Vec::new();
    for op in Operation::ALL {
        let names: &[&str] = if route_of(op).1.contains("{name}") {
            &["unallowed-here", "unallowed-nowhere", "Not_A-Name"]
        } else {
            &[""]
        };
        for name in names {
            table.push(request_of(op, name, &world));
        }
    }
    // What was sent is not looked at before the caller may send it.
    let bad =
        |method: &str, path: &str, body: Option<Value>| (method.to_owned(), path.to_owned(), body);
    table.extend([
        bad(
            "POST",
            "/api/v1/previews/unallowed-here/extend",
            Some(json!({"duration": "soon"})),
        ),
        bad(
            "POST",
            "/api/v1/previews/unallowed-here/redeploy",
            Some(json!({"commit": "zz"})),
        ),
        bad(
            "POST",
            "/api/v1/previews",
            Some(json!({"blueprint": "nope", "repository": "x/y", "branch": "b"})),
        ),
        bad(
            "GET",
            "/api/v1/previews/unallowed-here/wait?timeout=forever",
            None,
        ),
        bad(
            "GET",
            "/api/v1/previews/unallowed-nowhere/logs?since=0",
            None,
        ),
        bad("GET", "/api/v1/previews?limit=lots", None),
    ]);
    let mut wrong = Vec::new();
    for (method, path, body) in table {
        let answer = call(&world, &method, &path, Some(&nobody), body).await;
        let code = answer.body["error"]["code"].as_str().unwrap_or_default();
        if (answer.status, code) != (403, "forbidden") {
            wrong.push(format!(
                "{method} {path}: {} {}",
                answer.status, answer.body
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "answered other than 403 forbidden:\n{}",
        wrong.join("\n")
    );
    let pe = world.previews().get("unallowed-here").await.unwrap();
    assert!(
        pe.spec.teardown.is_none() && !pe.spec.stopped,
        "{:?}",
        pe.spec
    );
    assert!(
        world
            .previews()
            .get_opt("made-by-nobody")
            .await
            .unwrap()
            .is_none(),
        "nobody made nothing"
    );
}

/// `POST`/`DELETE` `path` with `body` as `content_type`: status and error code.
async fn send_raw(
    world: &World,
    method: &str,
    path: &str,
    token: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Option<String>) {
    let r = crate::support::api::client()
        .request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("http://{}{path}", world.addr()),
        )
        .bearer_auth(token)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("Sandcastle answers");
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    (status, body["error"]["code"].as_str().map(str::to_owned))
}

/// Every write route bounds and checks its body the same way, those that take none included:
/// past 64 KiB 413, not JSON (or JSON in another charset) 415, not an object or a field it does
/// not take 422 — and nothing is done.
#[tokio::test]
async fn every_write_route_checks_its_body_the_same_way() {
    let world = World::new("writebodies", APP, json!({"maxTtl": "48h"})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    make_sandbox(&world, &admin, "writebodies-a").await;
    let ten_mb = vec![b' '; 10 * 1024 * 1024];
    for (method, path) in [
        ("POST", "/api/v1/previews/writebodies-a/stop"),
        ("POST", "/api/v1/previews/writebodies-a/wake"),
        ("POST", "/api/v1/previews/writebodies-a/redeploy"),
        ("POST", "/api/v1/previews/writebodies-a/reset"),
        ("POST", "/api/v1/previews/writebodies-a/extend"),
        ("POST", "/api/v1/previews/writebodies-a/token"),
        ("POST", "/api/v1/previews/writebodies-a/header-secret"),
        ("DELETE", "/api/v1/previews/writebodies-a"),
    ] {
        let json = "application/json";
        for (content_type, body, status, code) in [
            (json, ten_mb.clone(), 413, "body_too_large"),
            (
                "text/plain",
                b"stop".to_vec(),
                415,
                "unsupported_media_type",
            ),
            (
                "application/json; charset=latin1",
                b"{}".to_vec(),
                415,
                "unsupported_media_type",
            ),
            (json, b"not json".to_vec(), 400, "invalid_body"),
            (json, b"[]".to_vec(), 422, "invalid_field"),
        ] {
            let got = send_raw(&world, method, path, &admin, content_type, body).await;
            assert_eq!(
                got,
                (status, Some(code.to_owned())),
                "{method} {path} with {content_type}"
            );
        }
    }
    // A field stop does not take is named; an empty object or no body at all is fine.
    let stop = "/api/v1/previews/writebodies-a/stop";
    let got = send_raw(
        &world,
        "POST",
        stop,
        &admin,
        "application/json",
        br#"{"now": true}"#.to_vec(),
    )
    .await;
    assert_eq!(got, (422, Some("invalid_field".to_owned())));
    let pe = world.previews().get("writebodies-a").await.unwrap();
    assert!(
        !pe.spec.stopped && pe.spec.teardown.is_none(),
        "nothing was done by a refused request"
    );
    let got = send_raw(
        &world,
        "POST",
        stop,
        &admin,
        "application/json; charset=utf-8",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(got.0, 202, "{got:?}");
    let wake = call(
        &world,
        "POST",
        "/api/v1/previews/writebodies-a/wake",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(wake.status, 202, "{:?}", wake.body);
}
