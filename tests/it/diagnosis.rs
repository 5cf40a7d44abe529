//! Why a preview failed, classified and said where people look: a crash loop ending in
//! OOMKilled (with the previous run's log tail, a Secret's value redacted), an image that cannot
//! be pulled, pods the scheduler cannot place, pods a quota refuses. Each gives one sentence in
//! the status, the GitHub failure description and the sticky comment, and its diagnosis in the
//! API. kwok plays the containers (tests/kwok-stages) and serves their logs; the scheduler and
//! the quota are the control plane's own. The readiness timeout is crossed on a manual clock.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams};
use sandcastle::crd::{DiagnosisReason, Phase, PreviewEnvironment};
use sandcastle::github::text::statuses::fit_description;
use sandcastle_fake_github::PrSpec;
use serde_json::{Value, json};

use crate::support::api::{account, call};
use crate::support::logs::{ContainerLogs, read_logs, set_pod_logs};
use crate::support::world::{World, pr, sha};
use crate::support::{eventually, wait_for};

const T: Duration = Duration::from_secs(90);
const SECRET_VALUE: &str = "hunter2-correct-horse";

/// One Deployment `api`, its pods shaped by `template` (pod template `metadata` and `spec`
/// extras), beside a Secret whose value its logs print.
fn app(annotations: Value, spec: Value) -> String {
    let mut pod_spec = json!({"containers": [{"name": "api", "image": "ghcr.io/acme/api:1.0"}]});
    if let (Value::Object(s), Value::Object(extra)) = (&mut pod_spec, spec) {
        s.extend(extra);
    }
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "api"}},
            "template": {"metadata": {"labels": {"app": "api"}, "annotations": annotations},
                "spec": pod_spec}}});
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
        "stringData": {"password": SECRET_VALUE}});
    format!(
        "{}\n---\n{}",
        serde_json::to_string(&secret).unwrap(),
        serde_json::to_string(&deployment).unwrap()
    )
}

/// What the pods log while deploying, once the preview namespace exists.
type Logs = Option<(&'static [&'static str], &'static [&'static str])>;

/// Open a pull request on `world`'s Blueprint, wait until the rollout is diagnosed while it
/// deploys, give its pods `logs`, cross the readiness timeout, and return the failed preview.
async fn failed(name: &str, yaml: &str, extra: Value, logs: Logs) -> (World, PreviewEnvironment) {
    let mut world = World::unstarted(name, yaml, extra).await;
    let clock = world.use_manual_clock().await;
    let preview = format!("{name}-pr-1");
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(1), sha(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    let pe = wait_for(
        &world.previews(),
        &preview,
        "diagnosed while deploying",
        T,
        |pe: Option<&PreviewEnvironment>| {
            pe.and_then(|p| p.status.as_ref())
                .is_some_and(|s| s.phase == Some(Phase::Deploying) && s.diagnosis.is_some())
        },
    )
    .await
    .unwrap();
    let diagnosis = pe.status.unwrap().diagnosis.unwrap();
    assert!(
        diagnosis.log_tail.is_empty(),
        "logs are read once, on failure"
    );
    if let Some((lines, previous)) = logs {
        let ns = world.namespace_of(&preview);
        let entry = ContainerLogs {
            lines,
            previous,
            ..Default::default()
        };
        set_pod_logs(&world.client, &ns, &[entry]).await;
        let pods: Api<Pod> = Api::namespaced(world.client.clone(), &ns);
        let pod = pods.list(&ListParams::default()).await.unwrap().items[0]
            .metadata
            .name
            .clone()
            .unwrap();
        let params = LogParams {
            previous: !previous.is_empty(),
            ..LogParams::default()
        };
        read_logs(&pods, &pod, &params).await;
    }
    clock.advance(Duration::from_secs(121));
    let pe = world.wait_phase(&preview, Phase::Failed, T).await;
    (world, pe)
}

/// The failure's sentence is the status message, GitHub's description and the sticky comment's
/// status; returns the comment.
async fn said_everywhere(world: &World, pe: &PreviewEnvironment, want: &str) -> String {
    let message = pe.status.as_ref().unwrap().message.clone().unwrap();
    assert_eq!(message, want);
    let description = eventually("GitHub hears the failure", T, || async {
        let deployments = world.gh.deployments(&world.repo);
        deployments
            .iter()
            .flat_map(|d| d.statuses.clone())
            .find(|s| s.state == "failure")
            .map(|s| s.description)
            .ok_or_else(|| format!("{deployments:?}"))
    })
    .await;
    assert_eq!(description, fit_description(want), "at most 140 characters");
    eventually("the sticky comment says why", T, || async {
        let comments = world.gh.comments(&world.repo, pr(1));
        comments
            .iter()
            .map(|c| c.body.clone())
            .find(|b| b.contains("❌ Failed") && b.contains(want))
            .ok_or_else(|| format!("{comments:#?}"))
    })
    .await
}

#[tokio::test]
async fn a_crash_loop_says_oomkilled_with_the_previous_runs_log_tail_redacted() {
    let yaml = app(json!({"test.sandcastle.dev/fate": "oom"}), json!({}));
    let previous: &[&str] = &[
        "starting api",
        "connecting to postgres with password hunter2-correct-horse",
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 loaded",
        "allocating cache",
    ];
    let (world, pe) = failed(
        "oom",
        &yaml,
        json!({}),
        Some((&["running again"], previous)),
    )
    .await;
    let want = "not Ready after 2m: deployment/api 0/1: container api keeps crashing (OOMKilled, exit 137, 5 restarts)";
    let comment = said_everywhere(&world, &pe, want).await;
    println!("the sticky comment of the failed preview:\n{comment}");

    let d = pe.status.unwrap().diagnosis.unwrap();
    assert_eq!(d.reason, DiagnosisReason::CrashLoop);
    assert_eq!(
        d.summary,
        "deployment/api: container api keeps crashing (OOMKilled, exit 137, 5 restarts)"
    );
    assert!(d.previous, "a crash loop shows the run that crashed");
    assert_eq!(
        d.log_tail,
        [
            "starting api",
            "connecting to postgres with password [redacted]",
            "token [redacted] loaded",
            "allocating cache"
        ]
    );
    assert!(
        comment.contains("<details><summary>Last 4 lines of <code>api</code>"),
        "{comment}"
    );
    assert!(comment.contains("previous run"), "{comment}");
    assert!(
        comment.contains("connecting to postgres with password [redacted]"),
        "{comment}"
    );
    for leak in [SECRET_VALUE, "ghp_abcdefghij"] {
        assert!(!comment.contains(leak), "the comment shows {leak}");
        assert!(!serde_json::to_string(&d).unwrap().contains(leak));
    }

    // The preview's page (GitHub's log_url) shows it too, to a reader.
    let reader = account(&world, "reader", &[(&["previewenvironments"], &["get"])]).await;
    let bearer = vec![("authorization", format!("Bearer {reader}"))];
    let (status, _, html) = world.get_text("/previews/oom-pr-1", bearer).await;
    assert_eq!(status, 200);
    assert!(
        html.contains(
            "deployment/api: container api keeps crashing (OOMKilled, exit 137, 5 restarts)"
        ),
        "{html}"
    );
    assert!(
        html.contains("connecting to postgres with password [redacted]"),
        "{html}"
    );
    assert!(!html.contains(SECRET_VALUE));

    // The API gives the same diagnosis.
    let got = call(
        &world,
        "GET",
        "/api/v1/previews/oom-pr-1",
        Some(&reader),
        None,
    )
    .await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(got.body["diagnosis"]["reason"], "crashLoop");
    assert_eq!(
        got.body["diagnosis"]["logTail"][1],
        "connecting to postgres with password [redacted]"
    );
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_is_named() {
    let yaml = app(
        json!({"test.sandcastle.dev/fate": "image-pull-backoff"}),
        json!({}),
    );
    let (world, pe) = failed("pull", &yaml, json!({}), None).await;
    let want = "not Ready after 2m: deployment/api 0/1: image ghcr.io/acme/api:1.0 cannot be pulled (ImagePullBackOff)";
    said_everywhere(&world, &pe, want).await;
    let d = pe.status.unwrap().diagnosis.unwrap();
    assert_eq!(d.reason, DiagnosisReason::ImagePull);
    assert!(
        d.log_tail.is_empty(),
        "a container that never ran logged nothing"
    );
}

#[tokio::test]
async fn pods_the_scheduler_cannot_place_say_why() {
    let yaml = app(
        json!({}),
        json!({"nodeSelector": {"sandcastle.test/disktype": "holographic"}}),
    );
    let (world, pe) = failed("unplaced", &yaml, json!({}), None).await;
    let message = pe.status.as_ref().unwrap().message.clone().unwrap();
    let prefix = "not Ready after 2m: deployment/api 0/1: pods cannot be scheduled: 0/";
    assert!(message.starts_with(prefix), "{message}");
    assert!(
        message.contains("didn't match Pod's node affinity/selector"),
        "{message}"
    );
    said_everywhere(&world, &pe, &message).await;
    assert_eq!(
        pe.status.unwrap().diagnosis.unwrap().reason,
        DiagnosisReason::Unschedulable
    );
}

#[tokio::test]
async fn pods_a_quota_refuses_say_so() {
    let yaml = app(json!({}), json!({}));
    let quota = json!({"isolation": {"quota": {"pods": 0}}});
    let (world, pe) = failed("quota", &yaml, quota, None).await;
    let message = pe.status.as_ref().unwrap().message.clone().unwrap();
    let prefix = "not Ready after 2m: deployment/api 0/1: pods refused: exceeded quota: ";
    assert!(message.starts_with(prefix), "{message}");
    said_everywhere(&world, &pe, &message).await;
    assert_eq!(
        pe.status.unwrap().diagnosis.unwrap().reason,
        DiagnosisReason::CreateRefused
    );
}

#[tokio::test]
async fn containers_that_run_but_are_never_ready_point_at_their_readiness_probe() {
    let yaml = app(
        json!({"test.sandcastle.dev/fate": "never-ready"}),
        json!({}),
    );
    let (world, pe) = failed(
        "unready",
        &yaml,
        json!({}),
        Some((&["listening on :8080", "GET /ready 503"], &[])),
    )
    .await;
    let want = "not Ready after 2m: deployment/api 0/1: container api runs but is not ready (readiness probe)";
    let comment = said_everywhere(&world, &pe, want).await;
    let d = pe.status.unwrap().diagnosis.unwrap();
    assert_eq!(d.reason, DiagnosisReason::ReadinessProbe);
    assert!(!d.previous);
    assert_eq!(d.log_tail, ["listening on :8080", "GET /ready 503"]);
    assert!(
        comment.contains("<details><summary>Last 2 lines of <code>api</code>"),
        "{comment}"
    );
}

#[tokio::test]
async fn a_failed_seed_job_is_diagnosed() {
    let seed = r"
apiVersion: batch/v1
kind: Job
metadata:
  name: db-seed
  annotations: {sandcastle.dev/hook: seed}
spec:
  backoffLimit: 0
  template:
    metadata: {annotations: {test.sandcastle.dev/fate: fail}}
    spec:
      restartPolicy: Never
      containers: [{name: seed, image: ghcr.io/acme/seed:1.0}]
";
    let world = World::new(
        "seedfail",
        &format!("{}\n---\n{seed}", app(json!({}), json!({}))),
        json!({}),
    )
    .await;
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(1), sha(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    let pe = world.wait_phase("seedfail-pr-1", Phase::Failed, T).await;
    let st = pe.status.unwrap();
    assert_eq!(
        st.message.as_deref(),
        Some("seed job db-seed failed: BackoffLimitExceeded (exit 1)")
    );
    let d = st.diagnosis.unwrap();
    assert_eq!(d.reason, DiagnosisReason::JobFailed);
    assert_eq!(
        d.summary,
        "job/db-seed: failed: BackoffLimitExceeded (exit 1)"
    );
    assert_eq!(d.container.as_deref(), Some("seed"));
}
