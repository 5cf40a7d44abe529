//! Secret hygiene over a whole lifecycle: `sandcastle serve` runs as a real process logging at
//! debug level, a pull request is opened, commanded, pushed to, read through the API and the
//! dashboard by a person and by an agent with its preview's token, and closed. Then every log
//! line, every HTTP answer, every PreviewEnvironment, Blueprint and Event, and every request
//! Sandcastle made to GitHub (comments, deployment statuses) is searched for the secrets it
//! handled: the webhook secret, the App's private key, the OAuth client secret, every
//! installation token GitHub issued, the Kubernetes and preview tokens agents used, and a
//! blueprint Secret's value (plain and base64). None may appear.

use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use sandcastle::crd::{Blueprint, Phase};
use sandcastle_fake_github::{PrSpec, TEST_APP_PRIVATE_KEY_PEM};
use serde_json::{Value, json};

use crate::support::api::{ALL, account, client};
use crate::support::process::ServeProcess;
use crate::support::world::{World, pr, sha};
use crate::support::{cluster, eventually};

const T: Duration = Duration::from_secs(90);

fn stack(password: &str) -> String {
    format!(
        r"apiVersion: v1
kind: Secret
metadata: {{name: db}}
stringData: {{password: {password}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: web
        image: registry.example.com/shop/web:1.0
        env: [{{name: DB_PASSWORD, valueFrom: {{secretKeyRef: {{name: db, key: password}}}}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: web}}
spec:
  rules:
  - host: web.staging.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {{service: {{name: web, port: {{number: 80}}}}}}
"
    )
}

/// Everything Sandcastle said, labelled by where it was said.
#[derive(Default)]
struct Transcript(Vec<(String, String)>);

impl Transcript {
    fn add(&mut self, place: impl Into<String>, text: impl Into<String>) {
        self.0.push((place.into(), text.into()));
    }

    /// Where each secret appears: `(secret name, place)`.
    fn leaks(&self, secrets: &[(String, String)]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, value) in secrets {
            for (place, text) in &self.0 {
                if text.contains(value.as_str()) {
                    out.push((name.clone(), place.clone()));
                }
            }
        }
        out
    }
}

/// One HTTP exchange with the process, its answer recorded (unless it is the one answer meant
/// to hold a secret).
async fn http(
    log: &mut Transcript,
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
    record: bool,
) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = client()
        .request(method.clone(), format!("http://{addr}{path}"))
        .timeout(Duration::from_secs(60));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("serve answers");
    let status = resp.status().as_u16();
    let headers = format!("{:?}", resp.headers());
    let text = resp.text().await.unwrap_or_default();
    if record {
        log.add(format!("{method} {path} → {status} (headers)"), headers);
        log.add(format!("{method} {path} → {status}"), text.clone());
    }
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn kube_objects(world: &World, preview_ns: Option<&str>, log: &mut Transcript) {
    let previews = world.previews().list(&ListParams::default()).await.unwrap();
    for pe in previews {
        let name = pe.metadata.name.clone().unwrap_or_default();
        log.add(
            format!("PreviewEnvironment {name}"),
            serde_json::to_string(&pe).unwrap(),
        );
    }
    let blueprints: Api<Blueprint> = Api::namespaced(world.client.clone(), &world.home.name);
    for bp in blueprints.list(&ListParams::default()).await.unwrap() {
        log.add("Blueprint", serde_json::to_string(&bp).unwrap());
    }
    for ns in std::iter::once(world.home.name.as_str()).chain(preview_ns) {
        let events: Api<Event> = Api::namespaced(world.client.clone(), ns);
        for e in events.list(&ListParams::default()).await.unwrap() {
            log.add(format!("Event in {ns}"), serde_json::to_string(&e).unwrap());
        }
    }
}

#[tokio::test]
async fn no_secret_appears_in_any_log_status_event_comment_or_answer() {
    let unique = cluster::unique("s3cr3t");
    let password = format!("blueprint-{unique}");
    let webhook_secret = format!("whsec-{unique}");
    let mut world = World::new(
        "hygiene",
        &stack(&password),
        json!({"primaryService": "web"}),
    )
    .await;
    // Only the process under test reconciles.
    world.sandcastle.take().unwrap().shutdown().await;

    let (client_id, client_secret) = world.gh.oauth_client();
    let serve = ServeProcess::start(
        &world,
        &webhook_secret,
        &[
            ("SANDCASTLE_GITHUB_CLIENT_ID", client_id),
            ("SANDCASTLE_GITHUB_CLIENT_SECRET", client_secret.clone()),
            ("SANDCASTLE_PUBLIC_PAGES", "true".to_owned()),
            ("SANDCASTLE_LOG", "debug".to_owned()),
            ("SANDCASTLE_LOG_FORMAT", "json".to_owned()),
        ],
    )
    .await;
    let addr = serve.addr.to_string();
    let mut log = Transcript::default();
    let deliver = |d: sandcastle_fake_github::Delivery| {
        let headers = d.signed_headers(&webhook_secret);
        let addr = addr.parse().unwrap();
        let world = &world;
        async move { world.post_to(addr, d.body.clone(), headers).await }
    };

    // The reviewer's loop: opened, a command, help, a push.
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(1), sha(), "b1"));
    let answer = deliver(opened).await;
    assert_eq!(answer.0, 202, "{}", answer.1);
    log.add("opened → answer", answer.1.to_string());
    world.wait_phase("hygiene-pr-1", Phase::Ready, T).await;
    for body in ["/preview", "/preview help", "/preview destroy please"] {
        let answer = deliver(world.gh.comment(&world.repo, pr(1), "maria", body)).await;
        log.add(format!("comment {body:?} → answer"), answer.1.to_string());
    }
    let head = sha();
    let answer = deliver(world.gh.push(&world.repo, pr(1), &head)).await;
    log.add("push → answer", answer.1.to_string());
    let mut forged = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(2), sha(), "b2"))
        .signed_headers("not-the-secret");
    forged.retain(|(k, _)| *k != "X-GitHub-Delivery");
    let forged = world
        .post_to(addr.parse().unwrap(), b"{}".to_vec(), forged)
        .await;
    assert_eq!(forged.0, 401, "{}", forged.1);
    log.add("forged delivery → answer", forged.1.to_string());
    world.wait_github_state(&head, "success", T).await;

    // The agent's loop: a Kubernetes identity, then the preview's own token.
    let kube_token = account(&world, "hygiene-agent", &[ALL]).await;
    let preview = "/api/v1/previews/hygiene-pr-1";
    for path in [
        "/api/v1/previews".to_owned(),
        preview.to_owned(),
        format!("{preview}/events"),
        format!("{preview}/logs"),
    ] {
        let (status, body) =
            http(&mut log, &addr, "GET", &path, Some(&kube_token), None, true).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, minted) = http(
        &mut log,
        &addr,
        "POST",
        &format!("{preview}/token"),
        Some(&kube_token),
        Some(json!({})),
        false,
    )
    .await;
    assert!(status == 200 || status == 201, "{minted}");
    let preview_token = minted["token"].as_str().expect("a token").to_owned();
    for path in [preview.to_owned(), format!("{preview}/logs")] {
        let (status, body) = http(
            &mut log,
            &addr,
            "GET",
            &path,
            Some(&preview_token),
            None,
            true,
        )
        .await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, _) = http(
        &mut log,
        &addr,
        "POST",
        &format!("{preview}/token"),
        Some(&preview_token),
        Some(json!({})),
        true,
    )
    .await;
    assert_eq!(status, 403, "a preview token mints no tokens");

    // A person's pages, the health and the metrics.
    for path in [
        "/",
        "/previews/hygiene-pr-1",
        "/metrics",
        "/readyz",
        "/healthz",
    ] {
        let (status, _) = http(&mut log, &addr, "GET", path, None, None, true).await;
        assert!(status < 500, "{path}: {status}");
    }
    kube_objects(&world, Some(&world.namespace_of("hygiene-pr-1")), &mut log).await;

    // Closed: the preview goes.
    let answer = deliver(world.gh.close(&world.repo, pr(1), true)).await;
    log.add("closed → answer", answer.1.to_string());
    let ns = world.namespace_of("hygiene-pr-1");
    eventually("the namespace is gone", T, || async {
        if world.namespace_exists(&ns).await {
            Err("still there".to_owned())
        } else {
            Ok(())
        }
    })
    .await;
    kube_objects(&world, None, &mut log).await;

    // What Sandcastle sent GitHub.
    for call in world.gh.calls() {
        if let Some(body) = &call.body {
            log.add(
                format!("to GitHub: {} {}", call.method, call.path),
                body.to_string(),
            );
        }
        log.add("to GitHub: query", format!("{:?}", call.query));
    }
    for c in world.gh.comments(&world.repo, pr(1)) {
        log.add("PR comment", c.body.clone());
    }
    for d in world.gh.deployments(&world.repo) {
        for st in &d.statuses {
            log.add("deployment status", format!("{st:?}"));
        }
    }

    // Its logs, to the end.
    let (stdout, stderr) = serve.stop().await;
    let lines = stderr.lines().chain(stdout.lines()).count();
    assert!(
        stderr.contains("\"level\":\"DEBUG\""),
        "the process logged at debug level"
    );
    for (i, line) in stderr.lines().chain(stdout.lines()).enumerate() {
        log.add(format!("log line {i}"), line);
    }

    let b64 = base64::engine::general_purpose::STANDARD;
    let mut secrets = vec![
        ("webhook secret".to_owned(), webhook_secret.clone()),
        ("OAuth client secret".to_owned(), client_secret.clone()),
        ("Kubernetes token".to_owned(), kube_token.clone()),
        ("preview token".to_owned(), preview_token.clone()),
        ("blueprint Secret value".to_owned(), password.clone()),
        (
            "blueprint Secret value, base64".to_owned(),
            b64.encode(&password),
        ),
    ];
    // The App key: each line of its body (64 base64 characters) is unmistakable.
    for (i, line) in TEST_APP_PRIVATE_KEY_PEM
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() >= 40)
        .enumerate()
    {
        secrets.push((format!("App private key, line {i}"), line.to_owned()));
    }
    let tokens = world.gh.issued_tokens();
    assert!(!tokens.is_empty(), "GitHub issued installation tokens");
    for (i, t) in tokens.iter().enumerate() {
        secrets.push((format!("installation token {i}"), t.clone()));
    }
    let leaks = log.leaks(&secrets);
    println!(
        "secret hygiene: {} secrets searched in {} places ({lines} log lines)",
        secrets.len(),
        log.0.len()
    );
    assert!(leaks.is_empty(), "secrets appeared: {leaks:#?}");
}
