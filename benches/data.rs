//! A preview's data from a volume snapshot against a seed Job, side by side on the real tier (run
//! with `scripts/bench-data`): a database's claim holding `SANDCASTLE_BENCH_DATA_MIB` MiB (1024)
//! — in one Blueprint restored from a snapshot of the staging claim, in the other written by a
//! seed Job (the same bytes: the floor of any import, which also parses and indexes). Each round
//! opens a pull request on each, alternating which goes first, and times opened → Ready; the
//! previews are closed and their volumes gone before the next round. Then snapshot refreshes are
//! timed (asked → the new set ready), and the space the snapshots and volumes take is read off
//! the driver's folders.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use sandcastle::crd::{Blueprint, Phase, PreviewEnvironment};
use sandcastle::domain::{PrNumber, RepoName, Sha};
use sandcastle_demo::real::RealTier;
use sandcastle_demo::stage::{Stage, ensure_namespace, load};
use sandcastle_fake_github::PrSpec;
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(600);

fn sha() -> Sha {
    Sha::new(&hex::encode(rand::random::<[u8; 20]>())).unwrap()
}

const POD_SECURITY: &str = r#"{runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: RuntimeDefault}}"#;
const CONTAINER_SECURITY: &str =
    r#"{allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}"#;

/// Writes `mib` MiB of the same bytes into `/data/blob` (busybox: `yes` cut to size).
fn fill(mib: u64) -> String {
    let bytes = mib * 1024 * 1024;
    format!(
        "yes sandcastle-bench-data | head -c {bytes} > /data/blob.tmp && mv /data/blob.tmp /data/blob && sync"
    )
}

/// The database: a StatefulSet whose claim holds the data, Ready once its container runs.
fn database(gib: u64) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db}}
spec:
  serviceName: db
  replicas: 1
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec:
      terminationGracePeriodSeconds: 1
      securityContext: {POD_SECURITY}
      containers:
        - name: db
          image: sandcastle.test/busybox:1
          command: [sh, -c, "exec sleep 86400"]
          securityContext: {CONTAINER_SECURITY}
          resources: {{requests: {{cpu: 10m, memory: 8Mi}}, limits: {{cpu: 200m, memory: 32Mi}}}}
          volumeMounts: [{{name: data, mountPath: /data}}]
  volumeClaimTemplates:
    - metadata: {{name: data}}
      spec: {{accessModes: [ReadWriteOnce], storageClassName: csi-hostpath, resources: {{requests: {{storage: {gib}Gi}}}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: db}}
spec:
  clusterIP: None
  selector: {{app: db}}
  ports: [{{name: db, port: 5432}}]
"#
    )
}

/// A Job mounting the database's claim and writing the data into it.
fn writer(name: &str, mib: u64, seed: bool) -> String {
    let annotations = if seed {
        "\n  annotations: {sandcastle.dev/hook: seed}"
    } else {
        ""
    };
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}{annotations}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      securityContext: {POD_SECURITY}
      containers:
        - name: fill
          image: sandcastle.test/busybox:1
          command: [sh, -c, "{fill}"]
          securityContext: {CONTAINER_SECURITY}
          resources: {{requests: {{cpu: 10m, memory: 8Mi}}, limits: {{cpu: "1", memory: 64Mi}}}}
          volumeMounts: [{{name: data, mountPath: /data}}]
      volumes: [{{name: data, persistentVolumeClaim: {{claimName: data-db-0}}}}]
"#,
        fill = fill(mib)
    )
}

async fn blueprint(client: &kube::Client, home: &str, name: &str, staging: &str, extra: Value) {
    let mut spec = json!({
        "source": {"namespace": staging},
        "repositories": [format!("acme/{name}")],
        "host": "{{pr}}-{{repo}}.preview.localhost",
    });
    if let (Value::Object(s), Value::Object(e)) = (&mut spec, extra) {
        s.extend(e);
    }
    let bp = json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
        "metadata": {"name": name}, "spec": spec});
    let api: Api<Blueprint> = Api::namespaced(client.clone(), home);
    api.patch(
        name,
        &PatchParams::apply("bench-data").force(),
        &Patch::Apply(&bp),
    )
    .await
    .unwrap();
}

/// Wait for `check` to give a value, polling every 100 ms; panics with `what` at the deadline.
async fn until<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let t = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(t.elapsed() < DEADLINE, "{what}: not after {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Open pull request `n` of `repo` and time it to Ready; then close it and wait until its
/// namespace is gone (its volumes with it).
async fn round(
    stage: &Stage,
    previews: &Api<PreviewEnvironment>,
    client: &kube::Client,
    repo: &str,
    n: u64,
) -> Duration {
    let repo = RepoName::new(&format!("acme/{repo}")).unwrap();
    let number = PrNumber::new(n).unwrap();
    let d = stage
        .gh
        .open_pull_request(&repo, PrSpec::new(number, sha(), &format!("b{n}")));
    let t = Instant::now();
    let (status, body) = stage.deliver(&d).await.unwrap();
    assert!(status == 200 || status == 202, "{status} {body}");
    let name = format!("{}-pr-{n}", repo.name());
    let ready = until(&format!("{name} Ready"), || async {
        let pe = previews.get_opt(&name).await.ok()??;
        let st = pe.status?;
        assert_ne!(
            st.phase,
            Some(Phase::Failed),
            "{name} failed: {:?}",
            st.message
        );
        (st.phase == Some(Phase::Ready)).then(|| t.elapsed())
    })
    .await;
    let ns = previews
        .get(&name)
        .await
        .unwrap()
        .status
        .unwrap()
        .namespace
        .unwrap();
    let closed = stage.gh.close(&repo, number, false);
    stage.deliver(&closed).await.unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    until(&format!("namespace {ns} gone"), || async {
        matches!(namespaces.get_opt(&ns).await, Ok(None)).then_some(())
    })
    .await;
    ready
}

/// The newest ready set of Blueprint `name` other than `not`.
async fn newest_set(blueprints: &Api<Blueprint>, name: &str, not: Option<&str>) -> String {
    until("a ready snapshot set", || async {
        let bp = blueprints.get(name).await.ok()?;
        let set = bp.status?.data?.sets.into_iter().find(|s| s.ready)?;
        (Some(set.id.as_str()) != not).then_some(set.id)
    })
    .await
}

/// Bytes under `dir` (`du -sb`).
fn size_of(dir: &std::path::Path) -> u64 {
    let out = std::process::Command::new("du")
        .arg("-sb")
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn median(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64()
}

#[tokio::main]
async fn main() {
    let rounds: u64 = std::env::var("SANDCASTLE_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let mib: u64 = std::env::var("SANDCASTLE_BENCH_DATA_MIB")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1024);
    let gib = mib.div_ceil(1024) + 1;
    let client = support::client().await;
    let home = support::unique("bench-home");
    let tier = RealTier {
        ingress: std::env::var("SANDCASTLE_INGRESS_HTTP")
            .expect("the real tier (scripts/bench-data starts it)"),
        harness_dir: std::env::var("SANDCASTLE_HARNESS_DIR").unwrap_or_default(),
    };
    let driver = PathBuf::from(&tier.harness_dir).join("node/csi-hostpath");
    let stage = Stage::prepare_real(
        client.clone(),
        &home,
        &support::unique("bench-shop"),
        0,
        tier,
    )
    .await
    .expect("the stage");

    // The staging database, filled once; and the seeded Blueprint's source, empty, with its seed.
    let restored_ns = support::unique("bench-restored");
    let seeded_ns = support::unique("bench-seeded");
    for ns in [&restored_ns, &seeded_ns] {
        ensure_namespace(&client, ns).await.unwrap();
    }
    load(&client, &restored_ns, &database(gib)).await.unwrap();
    let t = Instant::now();
    load(&client, &restored_ns, &writer("fill", mib, false))
        .await
        .unwrap();
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), &restored_ns);
    until("the staging database filled", || async {
        let st = jobs.get("fill").await.ok()?.status?;
        assert_eq!(
            st.failed.unwrap_or(0),
            0,
            "filling the staging database failed"
        );
        (st.succeeded.unwrap_or(0) > 0).then_some(())
    })
    .await;
    println!(
        "staging database filled with {mib} MiB in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    jobs.delete("fill", &kube::api::DeleteParams::foreground())
        .await
        .unwrap();
    until("the fill Job gone", || async {
        matches!(jobs.get_opt("fill").await, Ok(None)).then_some(())
    })
    .await;
    load(
        &client,
        &seeded_ns,
        &format!("{}---\n{}", database(gib), writer("seed", mib, true)),
    )
    .await
    .unwrap();

    for name in ["restored", "seeded"] {
        stage
            .gh
            .add_repo(1, &RepoName::new(&format!("acme/{name}")).unwrap());
    }
    let t = Instant::now();
    blueprint(
        &client,
        &home,
        "restored",
        &restored_ns,
        json!({"data": {"from": "snapshot", "every": "0", "keep": 1}}),
    )
    .await;
    blueprint(&client, &home, "seeded", &seeded_ns, json!({})).await;
    let blueprints: Api<Blueprint> = Api::namespaced(client.clone(), &home);
    let mut set = newest_set(&blueprints, "restored", None).await;
    println!(
        "first snapshot ready {:.1} s after the Blueprint",
        t.elapsed().as_secs_f64()
    );

    let previews: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);
    let (mut restored, mut seeded) = (Vec::new(), Vec::new());
    for n in 1..=rounds {
        let order = if n % 2 == 1 {
            ["restored", "seeded"]
        } else {
            ["seeded", "restored"]
        };
        for which in order {
            let took = round(&stage, &previews, &client, which, n).await;
            println!("round {n}: {which} Ready in {:.2} s", took.as_secs_f64());
            if which == "restored" {
                restored.push(took);
            } else {
                seeded.push(took);
            }
        }
    }
    let (r, s) = (median(&mut restored), median(&mut seeded));
    println!(
        "{mib} MiB, {rounds} rounds, opened → Ready, median: restored from a snapshot {r:.2} s, seed Job {s:.2} s: {:.2}×",
        s / r
    );

    let mut refreshes = Vec::new();
    for i in 1..=2 {
        let ask = json!({"metadata": {"annotations": {"sandcastle.dev/data-refresh": format!("bench-{i}")}}});
        let t = Instant::now();
        blueprints
            .patch("restored", &PatchParams::default(), &Patch::Merge(&ask))
            .await
            .unwrap();
        set = newest_set(&blueprints, "restored", Some(&set)).await;
        refreshes.push(t.elapsed());
        println!(
            "refresh {i}: asked → set {set} ready in {:.2} s",
            t.elapsed().as_secs_f64()
        );
    }
    let snapshots = size_of(&driver.join("snapshots"));
    let volumes = size_of(&driver.join("volumes"));
    let kept = blueprints
        .get("restored")
        .await
        .unwrap()
        .status
        .unwrap()
        .data
        .unwrap()
        .sets
        .len();
    println!(
        "space: {kept} snapshot set(s) kept take {:.2} GiB (this driver copies whole volumes; the staging claim and other volumes {:.2} GiB)",
        snapshots as f64 / f64::from(1 << 30),
        volumes as f64 / f64::from(1 << 30)
    );
    stage.running.shutdown().await;
    for ns in [&restored_ns, &seeded_ns] {
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        let _ = namespaces.delete(ns, &Default::default()).await;
    }
}
