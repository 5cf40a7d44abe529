//! Pod logs are real in the local control plane: the apiserver's `pods/log` reaches kwok, which
//! plays the kubelet of every fake node, and a test decides what the pods of its namespace log
//! (`support::logs`), container by container, with `tailLines`, `sinceSeconds`, `limitBytes` and
//! `previous` applied as a kubelet does.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams, PostParams};
use kube::runtime::wait::conditions;
use serde_json::json;

use crate::support::fixtures;
use crate::support::logs::{ContainerLogs, pod_logs, read_logs, set_one_pod_logs, set_pod_logs};
use crate::support::{TestNamespace, client, eventually, wait_for};

const T: Duration = Duration::from_secs(60);

const WEB_LINES: &[&str] = &[
    "starting web 1.4.2",
    "loaded 12 routes",
    "MARKER-7f3a listening on :8080",
    "GET /healthz 200",
];

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))
    .unwrap()
}

fn pod(name: &str, containers: &[&str]) -> Pod {
    let containers: Vec<_> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "registry.k8s.io/pause:3.10"}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": containers},
    }))
    .unwrap()
}

async fn running_pod(pods: &Api<Pod>, p: &Pod) -> String {
    let name = p.metadata.name.clone().unwrap();
    pods.create(&PostParams::default(), p).await.unwrap();
    wait_for(
        pods,
        &name,
        &format!("pod {name} running"),
        T,
        conditions::is_pod_running(),
    )
    .await;
    name
}

fn tail(n: i64) -> LogParams {
    LogParams {
        tail_lines: Some(n),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_deployments_pods_log_what_the_test_says() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "it-logs-deploy").await;
    pod_logs(&client, &ns.name, WEB_LINES).await;
    let deployments: Api<Deployment> = ns.api();
    deployments
        .create(&PostParams::default(), &deployment("web", 2))
        .await
        .unwrap();
    wait_for(
        &deployments,
        "web",
        "deployment web Available",
        T,
        conditions::is_deployment_completed(),
    )
    .await;

    let pods: Api<Pod> = ns.api();
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 2);
    for p in &list.items {
        let name = p.metadata.name.as_deref().unwrap();
        // tailLines bounds them to the last lines.
        let last_two = read_logs(&pods, name, &tail(2)).await;
        assert_eq!(
            lines(&last_two),
            ["MARKER-7f3a listening on :8080", "GET /healthz 200"],
            "pod {name}"
        );
        // Naming the container, as `kubectl logs -c web` does.
        let all = pods
            .logs(
                name,
                &LogParams {
                    container: Some("web".to_owned()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(lines(&all), WEB_LINES, "pod {name}");
        let marked: Vec<_> = lines(&all)
            .into_iter()
            .filter(|l| l.contains("MARKER-7f3a"))
            .collect();
        assert_eq!(marked, ["MARKER-7f3a listening on :8080"]);
    }

    let name = list.items[0].metadata.name.as_deref().unwrap();
    let first_bytes = pods
        .logs(
            name,
            &LogParams {
                container: Some("web".to_owned()),
                limit_bytes: Some(8),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(first_bytes, "starting", "limitBytes");
    let last_hour = pods
        .logs(
            name,
            &LogParams {
                since_seconds: Some(3600),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(lines(&last_hour), WEB_LINES, "sinceSeconds");

    // Saying it again replaces what the pods log, at once.
    pod_logs(&client, &ns.name, &["restarted", "MARKER-9c1d ready"]).await;
    let now = pods.logs(name, &tail(1)).await.unwrap();
    assert_eq!(lines(&now), ["MARKER-9c1d ready"]);
}

#[tokio::test]
async fn containers_and_previous_runs_log_their_own_lines() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "it-logs-containers").await;
    set_pod_logs(
        &client,
        &ns.name,
        &[
            ContainerLogs {
                containers: &["proxy"],
                lines: &["proxy up", "MARKER-proxy upstream 127.0.0.1:8080"],
                age: Duration::from_secs(2 * 3600),
                ..Default::default()
            },
            ContainerLogs {
                lines: &["app booting", "MARKER-app serving"],
                previous: &["app booting", "panic: MARKER-crash out of memory"],
                ..Default::default()
            },
        ],
    )
    .await;
    let pods: Api<Pod> = ns.api();
    let name = running_pod(&pods, &pod("two", &["app", "proxy"])).await;

    let container = |c: &str| LogParams {
        container: Some(c.to_owned()),
        ..Default::default()
    };
    let app = read_logs(&pods, &name, &container("app")).await;
    assert_eq!(lines(&app), ["app booting", "MARKER-app serving"]);
    let proxy = pods.logs(&name, &container("proxy")).await.unwrap();
    assert_eq!(
        lines(&proxy),
        ["proxy up", "MARKER-proxy upstream 127.0.0.1:8080"]
    );

    let previous = pods
        .logs(
            &name,
            &LogParams {
                previous: true,
                ..container("app")
            },
        )
        .await
        .unwrap();
    assert_eq!(
        lines(&previous),
        ["app booting", "panic: MARKER-crash out of memory"]
    );
    let no_previous = pods
        .logs(
            &name,
            &LogParams {
                previous: true,
                ..container("proxy")
            },
        )
        .await;
    assert!(
        no_previous.is_err(),
        "proxy never ran before: {no_previous:?}"
    );

    // The proxy's lines were written two hours ago: the last hour has none of them.
    let recent = |c: &str| LogParams {
        since_seconds: Some(3600),
        ..container(c)
    };
    assert_eq!(pods.logs(&name, &recent("proxy")).await.unwrap(), "");
    assert_eq!(
        lines(&pods.logs(&name, &recent("app")).await.unwrap()),
        lines(&app)
    );
    // Several lines of one container with tailLines: only the last.
    let last = pods
        .logs(
            &name,
            &LogParams {
                tail_lines: Some(1),
                ..container("proxy")
            },
        )
        .await
        .unwrap();
    assert_eq!(lines(&last), ["MARKER-proxy upstream 127.0.0.1:8080"]);
}

#[tokio::test]
async fn each_namespace_and_pod_logs_its_own_lines() {
    let client = client().await;
    let a = TestNamespace::new(&client, "it-logs-a").await;
    let b = TestNamespace::new(&client, "it-logs-b").await;
    pod_logs(&client, &a.name, &["MARKER-a one", "MARKER-a two"]).await;
    pod_logs(&client, &b.name, &["MARKER-b only"]).await;
    let (pods_a, pods_b): (Api<Pod>, Api<Pod>) = (a.api(), b.api());
    let plain = running_pod(&pods_a, &pod("plain", &["app"])).await;
    let special = running_pod(&pods_a, &pod("special", &["app"])).await;
    let other = running_pod(&pods_b, &pod("plain", &["app"])).await;
    set_one_pod_logs(
        &client,
        &a.name,
        &special,
        &[ContainerLogs {
            lines: &["MARKER-special alone"],
            ..Default::default()
        }],
    )
    .await;

    let all = LogParams::default();
    assert_eq!(
        lines(&read_logs(&pods_a, &plain, &all).await),
        ["MARKER-a one", "MARKER-a two"]
    );
    assert_eq!(
        lines(&read_logs(&pods_b, &other, &all).await),
        ["MARKER-b only"]
    );
    // The pod's own Logs object wins over its namespace's; kwok may take a moment to see it.
    eventually("pod special logs its own lines", T, || async {
        let got = pods_a
            .logs(&special, &all)
            .await
            .map_err(|e| e.to_string())?;
        if lines(&got) == ["MARKER-special alone"] {
            Ok(())
        } else {
            Err(format!("logs {got:?}"))
        }
    })
    .await;
    assert_eq!(
        lines(&pods_a.logs(&plain, &all).await.unwrap()),
        ["MARKER-a one", "MARKER-a two"],
        "the other pods keep their namespace's lines"
    );
}

#[tokio::test]
async fn pods_log_on_every_node() {
    // One kwok server plays the kubelet of every fake node; each node's status points the
    // apiserver at it.
    let client = client().await;
    fixtures::ensure_nodes(&client, 3).await;
    let ns = TestNamespace::new(&client, "it-logs-nodes").await;
    pod_logs(&client, &ns.name, &["MARKER-spread hello"]).await;
    let mut d = deployment("spread", 3);
    let spec = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    spec.topology_spread_constraints = Some(vec![
        serde_json::from_value(json!({
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}},
        }))
        .unwrap(),
    ]);
    let deployments: Api<Deployment> = ns.api();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    wait_for(
        &deployments,
        "spread",
        "deployment spread Available",
        T,
        conditions::is_deployment_completed(),
    )
    .await;

    let pods: Api<Pod> = ns.api();
    let list = pods
        .list(&ListParams::default().labels("app=spread"))
        .await
        .unwrap();
    let mut nodes = std::collections::BTreeSet::new();
    for p in &list.items {
        let name = p.metadata.name.as_deref().unwrap();
        nodes.insert(p.spec.as_ref().unwrap().node_name.clone().unwrap());
        let got = read_logs(&pods, name, &LogParams::default()).await;
        assert_eq!(lines(&got), ["MARKER-spread hello"], "pod {name}");
    }
    assert_eq!(nodes.len(), 3, "one replica per node: {nodes:?}");
}
