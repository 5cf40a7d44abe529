//! Watching a preview through the REST API, against the real control plane: the logs of its
//! pods (served by kwok through the API server, as `kubectl logs` reads them) bounded, chosen by
//! workload and container, with the namespace's Secret values and token-shaped strings
//! redacted; its Events, Sandcastle's and its namespace's; and a wait that times out.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::api::{ALL, account, call};
use crate::support::eventually;
use crate::support::logs::{ContainerLogs, set_pod_logs};
use crate::support::world::{World, sha};

const T: Duration = Duration::from_secs(90);

/// A web app with a sidecar, a worker, and the database password they are given.
const APP: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - {name: web, image: ghcr.io/acme/web:1.0}
        - {name: proxy, image: ghcr.io/acme/proxy:1.0}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: worker}
spec:
  selector: {matchLabels: {app: worker}}
  template:
    metadata: {labels: {app: worker}}
    spec:
      containers: [{name: worker, image: ghcr.io/acme/worker:1.0}]
---
apiVersion: v1
kind: Secret
metadata: {name: db}
stringData: {password: hunter2-but-longer}
";

/// A JSON Web Token's shape (not a valid one).
const JWT: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg";

fn lines_of(body: &Value, pod_prefix: &str, container: &str) -> Vec<String> {
    body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["pod"].as_str().unwrap().starts_with(pod_prefix) && e["container"] == container
        })
        .flat_map(|e| e["lines"].as_array().unwrap().clone())
        .map(|l| l.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn logs_are_bounded_chosen_and_redacted() {
    let world = World::new("watched", APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let body = json!({"blueprint": "watched", "repository": world.repo.as_str(),
        "commit": sha().as_str(), "branch": "logs", "name": "watched-logs"});
    let created = call(&world, "POST", "/api/v1/previews", Some(&admin), Some(body)).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let waited = call(
        &world,
        "GET",
        "/api/v1/previews/watched-logs/wait?for=ready&timeout=90s",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(waited.body["outcome"], "ready", "{:?}", waited.body);
    let ns = waited.body["preview"]["namespace"]
        .as_str()
        .unwrap()
        .to_owned();

    let web = [
        "listening on :8080",
        "connecting to postgres://app:hunter2-but-longer@db:5432/app",
        &format!("calling the API with Authorization: Bearer {JWT}"),
        "GET /healthz 200",
    ];
    let web: Vec<&str> = web.iter().map(|s| &**s).collect();
    set_pod_logs(
        &world.client,
        &ns,
        &[
            ContainerLogs {
                containers: &["web"],
                lines: &web,
                ..Default::default()
            },
            ContainerLogs {
                containers: &["proxy"],
                lines: &["proxy up", "upstream web:8080 healthy"],
                ..Default::default()
            },
            ContainerLogs {
                containers: &["worker"],
                lines: &["worker waiting for jobs"],
                ..Default::default()
            },
        ],
    )
    .await;
    let logs = |query: &'static str| {
        let (w, t) = (&world, admin.clone());
        async move {
            call(
                w,
                "GET",
                &format!("/api/v1/previews/watched-logs/logs{query}"),
                Some(&t),
                None,
            )
            .await
        }
    };

    // Every container of every pod, once kwok serves the new lines; secrets masked.
    let all = eventually("the pods log the test's lines", T, || async {
        let a = logs("").await;
        if a.status == 200 && lines_of(&a.body, "worker-", "worker").len() == 1 {
            Ok(a)
        } else {
            Err(format!("{} {}", a.status, a.body))
        }
    })
    .await;
    let text = all.body.to_string();
    assert!(
        !text.contains("hunter2-but-longer"),
        "Secret value leaked: {text}"
    );
    assert!(!text.contains(JWT), "token leaked: {text}");
    assert_eq!(all.body["redacted"], 2, "{}", all.body);
    assert_eq!(all.body["truncated"], false);
    assert_eq!(
        lines_of(&all.body, "web-", "web"),
        [
            "listening on :8080",
            "connecting to postgres://app:[redacted]@db:5432/app",
            "calling the API with Authorization: Bearer [redacted]",
            "GET /healthz 200",
        ]
    );
    assert_eq!(
        lines_of(&all.body, "web-", "proxy"),
        ["proxy up", "upstream web:8080 healthy"]
    );

    // One workload, one container, the last lines.
    let chosen = logs("?workload=web&container=web&tailLines=2").await;
    assert_eq!(chosen.status, 200, "{:?}", chosen.body);
    let entries = chosen.body["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(
        lines_of(&chosen.body, "web-", "web"),
        [
            "calling the API with Authorization: Bearer [redacted]",
            "GET /healthz 200"
        ]
    );
    let worker = logs("?workload=worker").await;
    assert_eq!(
        lines_of(&worker.body, "worker-", "worker"),
        ["worker waiting for jobs"]
    );
    assert!(lines_of(&worker.body, "web-", "web").is_empty());

    // What cannot be read says which field is at fault: a workload the preview does not have
    // is not found (404), a value that cannot be used is refused (422).
    for (query, status, code, field) in [
        ("?workload=nope", 404, "unknown_workload", "workload"),
        ("?since=soon", 422, "invalid_duration", "since"),
        // Kubernetes refuses `sinceSeconds=0`: said as the caller's field, not as a 503.
        ("?since=0", 422, "invalid_duration", "since"),
        ("?since=0m", 422, "invalid_duration", "since"),
        ("?tailLines=many", 422, "invalid_query", "tailLines"),
    ] {
        let a = logs(query).await;
        assert_eq!(
            (
                a.status,
                a.body["error"]["code"].as_str(),
                a.body["error"]["field"].as_str()
            ),
            (status, Some(code), Some(field)),
            "{query}: {:?}",
            a.body
        );
    }
}

#[tokio::test]
async fn events_and_a_wait_that_times_out() {
    let mut world = World::unstarted("told", APP, json!({})).await;
    // Waits are bounded at 3 s here, so that one asking longer is seen cut short.
    world.configure = Some(|parts| parts.settings.api_max_wait = Duration::from_secs(3));
    world.start().await;
    let admin = account(&world, "admin", &[ALL]).await;
    let body = json!({"blueprint": "told", "repository": world.repo.as_str(),
        "commit": sha().as_str(), "branch": "events", "name": "told-events"});
    let created = call(&world, "POST", "/api/v1/previews", Some(&admin), Some(body)).await;
    assert_eq!(created.status, 201, "{:?}", created.body);

    // Waiting for a state that does not come ends at the timeout, saying so.
    let waited = call(
        &world,
        "GET",
        "/api/v1/previews/told-events/wait?for=stopped&timeout=2s",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(waited.status, 200, "{:?}", waited.body);
    assert_eq!(waited.body["outcome"], "timeout");
    assert_eq!(waited.body["preview"]["name"], "told-events");
    // Longer than the server waits: cut to its bound, then `timeout`.
    let asked = std::time::Instant::now();
    let too_long = call(
        &world,
        "GET",
        "/api/v1/previews/told-events/wait?for=stopped&timeout=2h",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(
        (too_long.status, too_long.body["outcome"].as_str()),
        (200, Some("timeout")),
        "{:?}",
        too_long.body
    );
    assert!(
        asked.elapsed() < Duration::from_secs(60),
        "the wait was cut to the server's bound"
    );

    // Sandcastle's Events on the preview (who created it, what followed) and the namespace's own
    // (the scheduler placing its pods).
    let user = format!("system:serviceaccount:{}:admin", world.home.name);
    let events = eventually("the Events of the preview and its namespace", T, || async {
        let a = call(
            &world,
            "GET",
            "/api/v1/previews/told-events/events",
            Some(&admin),
            None,
        )
        .await;
        let reasons = |list: &str| -> Vec<String> {
            a.body[list]
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|e| e["reason"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let (own, theirs) = (reasons("preview"), reasons("namespace"));
        if own.iter().any(|r| r == "ApiCreate")
            && own.iter().any(|r| r == "Ready")
            && theirs.iter().any(|r| r == "Scheduled")
        {
            Ok(a)
        } else {
            Err(format!("preview {own:?}, namespace {theirs:?}"))
        }
    })
    .await;
    let own = events.body["preview"].as_array().unwrap();
    let create = own.iter().find(|e| e["reason"] == "ApiCreate").unwrap();
    assert_eq!(create["object"], "PreviewEnvironment/told-events");
    assert!(
        create["note"]
            .as_str()
            .unwrap()
            .ends_with(&format!("; by {user}")),
        "{create}"
    );
    let scheduled = events.body["namespace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["reason"] == "Scheduled")
        .unwrap();
    assert!(
        scheduled["object"].as_str().unwrap().starts_with("Pod/"),
        "{scheduled}"
    );
}

#[tokio::test]
async fn a_node_that_gives_no_logs_costs_only_its_own_containers() {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

    let world = World::new("nodeless", APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    let body = json!({"blueprint": "nodeless", "repository": world.repo.as_str(),
        "commit": sha().as_str(), "branch": "logs", "name": "nodeless-logs"});
    let created = call(&world, "POST", "/api/v1/previews", Some(&admin), Some(body)).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let waited = call(
        &world,
        "GET",
        "/api/v1/previews/nodeless-logs/wait?for=ready&timeout=90s",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(waited.body["outcome"], "ready", "{:?}", waited.body);
    let ns = waited.body["preview"]["namespace"]
        .as_str()
        .unwrap()
        .to_owned();
    set_pod_logs(
        &world.client,
        &ns,
        &[ContainerLogs {
            containers: &["worker"],
            lines: &["worker waiting for jobs"],
            ..Default::default()
        }],
    )
    .await;

    // A node no kubelet serves (kwok manages only nodes it is told to): its address answers
    // nothing, as a node whose kubelet is down.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let node = crate::support::cluster::unique("ghost");
    let nodes: Api<Node> = Api::all(world.client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": node}})).unwrap(),
        )
        .await
        .unwrap();
    nodes
        .patch_status(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": closed}},
            }})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), &ns);
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "stranded"}, "spec": {
            "nodeName": node, "containers": [{"name": "stranded", "image": "ghcr.io/acme/worker:1.0"}]}}))
        .unwrap(),
    )
    .await
    .unwrap();

    let logs = eventually(
        "the worker's lines beside the stranded pod's refusal",
        T,
        || async {
            let a = call(
                &world,
                "GET",
                "/api/v1/previews/nodeless-logs/logs",
                Some(&admin),
                None,
            )
            .await;
            if a.status != 200 {
                return Err(format!("{} {}", a.status, a.body));
            }
            if lines_of(&a.body, "worker", "worker").is_empty() {
                return Err(format!("no worker lines yet: {}", a.body));
            }
            Ok(a.body)
        },
    )
    .await;
    let stranded = logs["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["pod"] == "stranded")
        .unwrap_or_else(|| panic!("no entry for the stranded pod: {logs}"));
    let why = stranded["unavailable"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("the node did not give these logs (5"),
        "{stranded}"
    );
    assert_eq!(stranded["lines"], json!([]));
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
}
