//! Why a preview failed, read from the real kernel and runtime: a container over its memory limit
//! is OOM-killed, an image that does not exist cannot be pulled, an entrypoint that exits crash
//! loops — each said in one sentence naming the workload and the container, as on kwok.

use sandcastle::crd::{Diagnosis, DiagnosisReason, Phase};
use serde_json::json;

use crate::support::world::{World, sha};
use crate::tier::{self, T, open_at};

/// Deployment `api` (container `api`) running `image` with `env`, limited to `memory`.
fn api(image: &str, env: &str, memory: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: api}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: api}}}}
  template:
    metadata: {{labels: {{app: api}}}}
    spec:
      securityContext: {{runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {{type: RuntimeDefault}}}}
      containers:
        - name: api
          image: {image}
          env: {env}
          readinessProbe: {{httpGet: {{path: /healthz, port: 8080}}, periodSeconds: 1}}
          securityContext: {{allowPrivilegeEscalation: false, capabilities: {{drop: [ALL]}}}}
          resources: {{requests: {{cpu: 10m, memory: {memory}}}, limits: {{cpu: 500m, memory: {memory}}}}}
"#
    )
}

async fn diagnosis_of(name: &str, yaml: &str) -> Diagnosis {
    let tier = tier::tier();
    let mut world = World::unstarted(name, yaml, json!({"readinessTimeout": "40s"})).await;
    world.probe_via = Some(tier.probe_via());
    world.start().await;
    open_at(&world, 1, &sha()).await;
    let pe = world
        .wait_phase(&format!("{name}-pr-1"), Phase::Failed, T)
        .await;
    pe.status.unwrap().diagnosis.expect("a diagnosis")
}

#[tokio::test]
async fn a_container_over_its_memory_limit_is_oomkilled() {
    let yaml = api(
        "sandcastle.test/app:c1",
        r#"[{name: APP_ALLOCATE_MB, value: "64"}]"#,
        "16Mi",
    );
    let d = diagnosis_of("oom", &yaml).await;
    assert_eq!(d.reason, DiagnosisReason::CrashLoop, "{d:?}");
    assert!(
        d.summary
            .starts_with("deployment/api: container api keeps crashing (OOMKilled, exit 137"),
        "{}",
        d.summary
    );
    assert_eq!(
        (d.workload.as_deref(), d.container.as_deref()),
        (Some("deployment/api"), Some("api"))
    );
}

#[tokio::test]
async fn an_image_that_does_not_exist_is_an_image_pull_failure() {
    let yaml = api("sandcastle.test/missing:1", "[]", "32Mi");
    let d = diagnosis_of("nopull", &yaml).await;
    assert_eq!(d.reason, DiagnosisReason::ImagePull, "{d:?}");
    assert!(d.summary.starts_with("deployment/api: "), "{}", d.summary);
    assert!(
        d.summary.contains("sandcastle.test/missing:1"),
        "{}",
        d.summary
    );
    assert_eq!(d.container.as_deref(), Some("api"), "{d:?}");
}

#[tokio::test]
async fn an_entrypoint_that_exits_crash_loops_with_its_exit_code_and_log_tail() {
    let yaml = api(
        "sandcastle.test/app:c1",
        r#"[{name: APP_EXIT_AT_START, value: "3"}]"#,
        "32Mi",
    );
    let d = diagnosis_of("crash", &yaml).await;
    assert_eq!(d.reason, DiagnosisReason::CrashLoop, "{d:?}");
    assert!(
        d.summary
            .starts_with("deployment/api: container api keeps crashing (Error, exit 3"),
        "{}",
        d.summary
    );
    assert!(!d.log_tail.is_empty(), "the crashed run's lines: {d:?}");
}
