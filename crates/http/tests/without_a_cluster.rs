//! The HTTP surface driven in process with `Router::oneshot`, on state built without a cluster
//! (a Kubernetes client and a GitHub client pointed at a port nothing listens on): what is
//! decided before anything is asked of Kubernetes or GitHub — signatures, body bounds, who is
//! calling, where to authenticate, health — answered in milliseconds, no control plane needed.
//! Everything that writes or reads Kubernetes is tested against the real one (tests/it).

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt as _;
use kube::runtime::reflector;
use serde_json::Value;
use tower::ServiceExt as _;

use sandcastle_agent::{Addresses, Agent, Authority, Limits};
use sandcastle_domain::Secret;
use sandcastle_domain::clock::Clock;
use sandcastle_fake_github::{TEST_APP_PRIVATE_KEY_PEM, sign};
use sandcastle_github::client::{ClientSettings, GitHubApp};
use sandcastle_http::dashboard::{Dashboard, Sessions};
use sandcastle_http::{AppState, Deliveries, Shared, app};
use sandcastle_kube::clusters::Clusters;
use sandcastle_metrics::Metrics;

/// Nothing listens here: a call that reaches it fails at once.
const NOWHERE: &str = "http://127.0.0.1:9";
const SECRET: &str = "a-webhook-secret-for-tests";

fn state() -> AppState {
    let client = kube::Client::try_from(kube::Config::new(NOWHERE.parse().unwrap())).unwrap();
    let github = GitHubApp::new(
        1,
        &Secret::new(TEST_APP_PRIVATE_KEY_PEM),
        NOWHERE,
        ClientSettings::default(),
    )
    .unwrap();
    let metrics = Metrics::default();
    let clock = Clock::system();
    let (blueprints, _) = reflector::store();
    let (previews, _) = reflector::store();
    let agent = Agent {
        client: client.clone(),
        home: "sandcastle".to_owned(),
        addresses: Addresses {
            public_url: "http://sandcastle.test".to_owned(),
            github_api: NOWHERE.to_owned(),
            github_web: NOWHERE.to_owned(),
            namespace_prefix: String::new(),
        },
        github: github.clone(),
        clock: clock.clone(),
        previews,
        authority: Authority::new(client.clone(), "sandcastle"),
        limits: Limits::default(),
        clusters: Clusters::new(client.clone(), metrics.clusters.clone()),
        gate_keys: sandcastle_agent::GateKeys::new(&Secret::new(SECRET)),
    };
    AppState::new(Shared {
        client,
        home: "sandcastle".to_owned(),
        webhook_secrets: vec![Secret::new(SECRET)].into(),
        deliveries: Deliveries::new(100),
        blueprints,
        clock,
        github,
        public_url: "http://sandcastle.test".to_owned(),
        authorization_server: None,
        metrics,
        agent,
        dashboard: Dashboard::new(None, Sessions::new(&Secret::new(SECRET), false), false),
        records_checked: Default::default(),
    })
}

async fn call(req: Request<Body>) -> (StatusCode, header::HeaderMap, Value) {
    let response = app(state(), axum::Router::new())
        .oneshot(req)
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (parts.status, parts.headers, json)
}

fn delivery(body: &[u8], signature: &str) -> Request<Body> {
    Request::post("/github/webhook")
        .header("x-github-event", "pull_request")
        .header("x-github-delivery", "d-1")
        .header("x-hub-signature-256", signature)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_vec()))
        .unwrap()
}

#[tokio::test]
async fn a_delivery_is_refused_on_its_signature_and_size_before_anything_else() {
    let body = br#"{"action":"opened"}"#;
    let (status, _, json) = call(delivery(body, &sign(b"another-secret", body))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{json}");
    assert_eq!(json["error"]["code"], "signature_mismatch", "{json}");

    let huge = vec![b' '; 25 * 1024 * 1024 + 1];
    let (status, _, json) = call(delivery(&huge, &sign(SECRET.as_bytes(), &huge))).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{json}");
    assert_eq!(json["error"]["code"], "payload_too_large");

    // Signed, but not JSON: refused as such, without asking Kubernetes or GitHub anything.
    let (status, _, json) = call(delivery(b"{", &sign(SECRET.as_bytes(), b"{"))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
}

#[tokio::test]
async fn a_caller_without_a_token_is_told_where_to_authenticate() {
    let req = Request::get("/api/v1/previews")
        .body(Body::empty())
        .unwrap();
    let (status, headers, json) = call(req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(json["error"]["code"], "unauthenticated", "{json}");
    let challenge = headers[header::WWW_AUTHENTICATE].to_str().unwrap();
    assert!(
        challenge.starts_with("Bearer realm=") && challenge.contains("Kubernetes bearer token"),
        "{challenge}"
    );

    // No authorization server is configured: no metadata, a statement instead.
    let req = Request::get("/.well-known/oauth-protected-resource")
        .body(Body::empty())
        .unwrap();
    let (status, _, json) = call(req).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(json["error"]["code"], "no_authorization_server", "{json}");
}

#[tokio::test]
async fn health_answers_and_readiness_says_kubernetes_does_not() {
    let (status, _, _) = call(Request::get("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, json) = call(Request::get("/readyz").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let problems = json["problems"].to_string();
    assert!(problems.contains("Kubernetes"), "{json}");
}
