//! The preview path on the real tier, side by side (run with `scripts/bench-real`):
//!
//! - a pull request `opened` → its URL, fetched through Traefik with its host, serves the
//!   commit; against the same objects (the test app, Redis, the seed Job, the Ingress) applied
//!   directly by server-side apply into a fresh namespace and waited on the same way, and
//!   applied directly in Sandcastle's order (data tier ready, then the seed Job complete, then
//!   the app: what the staged order costs by itself); and a pull request of a second repository
//!   whose Blueprint says `order: together` (everything applied at once, as the direct applies
//!   are). Rounds alternate the four, one at a time, so all see the same node
//!   (`SANDCASTLE_BENCH_PRS`, 10).
//! - a visit to a stopped preview's host → the app answers (real pods started again).
//!
//! Each path's milestones (its PreviewEnvironment on Sandcastle's paths, its namespace, Ingress,
//! app pod, that pod's address in the Service's EndpointSlice and the pod Ready, as watched) are
//! reported as medians beside the time to a served page: where the time goes.

mod support;

use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use sandcastle::crd::{Phase, PreviewEnvironment};
use sandcastle::domain::{PrNumber, RepoName, Sha};
use sandcastle_demo::real::{RealTier, TESTAPP_YAML};
use sandcastle_demo::stage::{Stage, ensure_namespace};
use sandcastle_fake_github::PrSpec;
use serde_json::{Value, json};
use support::timeline::{self, Timeline};

const DEADLINE: Duration = Duration::from_secs(300);

fn sha() -> Sha {
    Sha::new(&hex::encode(rand::random::<[u8; 20]>())).unwrap()
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        eprintln!("{name} is not set: run this benchmark through scripts/bench-real");
        std::process::exit(2);
    })
}

/// Poll `host` through Traefik until it answers 200 with `X-Commit: commit`; how long it took.
async fn until_served(tier: &RealTier, host: &str, commit: &str, since: Instant) -> Duration {
    while since.elapsed() < DEADLINE {
        if let Ok(page) = tier.get(host, "/healthz").await
            && page.status == 200
            && page.commit.as_deref() == Some(commit)
        {
            return since.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{host} did not serve {commit} within {DEADLINE:?}");
}

/// The test app's objects as they would be applied by hand for `commit` at `host`.
fn direct_objects(commit: &Sha, host: &str) -> Vec<Value> {
    let mut objects = sandcastle::domain::plan::parse_manifests(TESTAPP_YAML).unwrap();
    for o in &mut objects {
        if o["kind"] == "Deployment" {
            o["spec"]["template"]["spec"]["containers"][0]["image"] =
                json!(format!("sandcastle.test/app:{commit}"));
        }
        if o["kind"] == "Ingress" {
            o["spec"]["rules"][0]["host"] = json!(host);
        }
    }
    objects
}

/// Sandcastle's apply order (docs/cloning.md §7): a phase of the objects.
fn phase_of(o: &Value) -> u8 {
    match o["kind"].as_str() {
        Some("StatefulSet") => 1,
        Some("Job") => 2,
        Some("Deployment" | "ReplicaSet" | "CronJob") => 3,
        Some("Ingress") => 4,
        _ => 0,
    }
}

/// Apply `objects` directly but in Sandcastle's order, as a careful script would: the data tier
/// ready before the seed Job, the seed Job complete before the app — judged by Sandcastle's own
/// readiness rules.
async fn apply_in_order(client: &kube::Client, ns: &str, objects: &[Value]) {
    use k8s_openapi::api::batch::v1::Job;
    use sandcastle::k8s::readiness::{job_state, statefulset_state};
    for phase in 0..=4 {
        let these: Vec<Value> = objects
            .iter()
            .filter(|o| phase_of(o) == phase)
            .cloned()
            .collect();
        apply_directly(client, ns, &these).await;
        for o in &these {
            let name = o["metadata"]["name"].as_str().unwrap();
            match phase {
                1 => until_ready(client, ns, name, statefulset_state).await,
                2 => until_ready::<Job>(client, ns, name, job_state).await,
                _ => {}
            }
        }
    }
}

/// Poll `name` until Sandcastle's readiness rule `state` says it is ready.
async fn until_ready<K>(
    client: &kube::Client,
    ns: &str,
    name: &str,
    state: fn(&K) -> sandcastle::k8s::readiness::WorkloadState,
) where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    use sandcastle::k8s::readiness::Health;
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let t = Instant::now();
    while t.elapsed() < DEADLINE {
        if let Ok(obj) = api.get(name).await
            && state(&obj).health == Health::Ready
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{ns}/{name} not ready within {DEADLINE:?}");
}

/// The same objects applied directly into a fresh namespace (all at once, or in Sandcastle's
/// order); how long until the page serves `commit`.
async fn direct_round(
    client: &kube::Client,
    tier: &RealTier,
    commit: &Sha,
    in_order: bool,
    timeline: &Timeline,
) -> Round {
    let ns = support::unique(if in_order {
        "bench-ordered"
    } else {
        "bench-direct"
    });
    let host = format!("{ns}.direct.localhost");
    let objects = direct_objects(commit, &host);
    let t = Instant::now();
    ensure_namespace(client, &ns).await.unwrap();
    if in_order {
        apply_in_order(client, &ns, &objects).await;
    } else {
        apply_directly(client, &ns, &objects).await;
    }
    let served = until_served(tier, &host, commit.as_str(), t).await;
    Round {
        served,
        marks: timeline.marks(&ns).after(t),
    }
}

/// One round of one path: how long until the page served the commit, and its milestones.
struct Round {
    served: Duration,
    marks: [Option<Duration>; 6],
}

/// One path's rounds.
#[derive(Default)]
struct Path {
    served: Vec<Duration>,
    marks: Vec<[Option<Duration>; 6]>,
}

impl Path {
    fn push(&mut self, round: Round) -> f64 {
        self.served.push(round.served);
        self.marks.push(round.marks);
        round.served.as_secs_f64()
    }

    fn report(&mut self, name: &str) {
        println!(
            "opened → serving the commit, {name}: {}",
            support::summary(&mut self.served)
        );
        println!(
            "  medians from the start: {}",
            timeline::medians(&self.marks)
        );
    }
}

async fn apply_directly(client: &kube::Client, ns: &str, objects: &[Value]) {
    let resolver = sandcastle::k8s::apply::Resolver::new(client.clone());
    for doc in objects {
        let mut doc = doc.clone();
        doc["metadata"]["namespace"] = json!(ns);
        let api = resolver.api_for(ns, &doc).await.unwrap();
        let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
        api.patch(
            &name,
            &PatchParams::apply("bench-direct").force(),
            &Patch::Apply(&doc),
        )
        .await
        .unwrap();
    }
}

#[tokio::main]
async fn main() {
    let rounds: u64 = std::env::var("SANDCASTLE_BENCH_PRS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10);
    let tier = RealTier {
        ingress: env("SANDCASTLE_INGRESS_HTTP"),
        harness_dir: env("SANDCASTLE_HARNESS_DIR"),
    };
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let client = support::client().await;
    let home = support::unique("bench-home");
    let staging = support::unique("bench-staging");
    let stage = Stage::prepare_real(client.clone(), &home, &staging, 0, tier.clone())
        .await
        .expect("the real stage");
    let previews: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);

    let quick = together_blueprint(&client, &home, &stage).await;
    let timeline = Timeline::watch(&client);
    let watched = (&timeline, &previews);

    let (mut via_sandcastle, mut direct, mut ordered) =
        (Path::default(), Path::default(), Path::default());
    let mut together = Path::default();
    for n in 1..=rounds {
        let commit = sha();
        tier.image_for(&root, &commit).unwrap();
        let s = via_sandcastle
            .push(opened_round(&stage, &stage.repo, &tier, n, &commit, watched).await);
        let t = together.push(opened_round(&stage, &quick, &tier, n, &commit, watched).await);
        let d = direct.push(direct_round(&client, &tier, &commit, false, &timeline).await);
        let o = ordered.push(direct_round(&client, &tier, &commit, true, &timeline).await);
        println!(
            "round {n}: Sandcastle {s:.1} s, with order: together {t:.1} s, direct {d:.1} s, \
             direct in Sandcastle's order {o:.1} s"
        );
    }
    let ratio = |q: f64, path: &Path, base: &Path| pick(&path.served, q) / pick(&base.served, q);
    let (p50, p95) = (
        ratio(0.5, &via_sandcastle, &direct),
        ratio(0.95, &via_sandcastle, &direct),
    );
    let (o50, o95) = (
        ratio(0.5, &via_sandcastle, &ordered),
        ratio(0.95, &via_sandcastle, &ordered),
    );
    let (t50, t95) = (
        ratio(0.5, &together, &direct),
        ratio(0.95, &together, &direct),
    );
    via_sandcastle.report("Sandcastle");
    together.report("Sandcastle with order: together");
    direct.report("direct");
    ordered.report("direct in Sandcastle's order");
    println!("ratio to direct p50 {p50:.2}×, p95 {p95:.2}×");
    println!("ratio to direct in Sandcastle's order p50 {o50:.2}×, p95 {o95:.2}×");
    println!("ratio of order: together to direct p50 {t50:.2}×, p95 {t95:.2}×");

    // Wake on visit needs Sandcastle's wake listener, which this stage does not run: stop each
    // preview by its desired state and start it again, timing until the app answers.
    let mut woken = Vec::new();
    for n in 1..=rounds.min(5) {
        let name = format!("shop-pr-{n}");
        let host = format!("{n}-shop.preview.localhost");
        set_stopped(&previews, &name, true).await;
        wait_phase(&previews, &name, Phase::Stopped).await;
        // Stopped is said once the workloads are scaled to zero; the pods take a moment more.
        let ns = previews
            .get(&name)
            .await
            .unwrap()
            .status
            .unwrap()
            .namespace
            .unwrap();
        until_no_pods(&client, &ns).await;
        let commit = previews
            .get(&name)
            .await
            .unwrap()
            .status
            .unwrap()
            .deployed_sha
            .unwrap();
        let t = Instant::now();
        set_stopped(&previews, &name, false).await;
        woken.push(until_served(&tier, &host, &commit, t).await);
    }
    println!(
        "stopped → woken → serving (real pods):   {}",
        support::summary(&mut woken)
    );
    stage.running.shutdown().await;
}

/// Open pull request `n` of `repo` at `commit` (its image is there); how long until its URL
/// serves the commit.
async fn opened_round(
    stage: &Stage,
    repo: &RepoName,
    tier: &RealTier,
    n: u64,
    commit: &Sha,
    (timeline, previews): (&Timeline, &Api<PreviewEnvironment>),
) -> Round {
    let pr = PrSpec::new(PrNumber::new(n).unwrap(), commit.clone(), &format!("b{n}"));
    let t = Instant::now();
    let (status, _) = stage
        .deliver(&stage.gh.open_pull_request(repo, pr))
        .await
        .unwrap();
    assert!(status < 300, "the webhook answered {status}");
    let host = format!("{n}-{}.preview.localhost", repo.name());
    let served = until_served(tier, &host, commit.as_str(), t).await;
    Round {
        served,
        marks: preview_marks(timeline, previews, repo, n).await.after(t),
    }
}

/// What was seen of pull request `n` of `repo`'s preview.
async fn preview_marks(
    timeline: &Timeline,
    previews: &Api<PreviewEnvironment>,
    repo: &RepoName,
    n: u64,
) -> timeline::Marks {
    let all = previews.list(&Default::default()).await.unwrap();
    let pe = all
        .items
        .iter()
        .find(|pe| pe.spec.repository == repo.as_str() && pe.spec.pull_request == Some(n));
    let pe = pe.expect("a served preview exists");
    let ns = pe.status.as_ref().and_then(|s| s.namespace.as_deref());
    timeline.preview_marks(
        &pe.name_any(),
        ns.expect("a served preview has a namespace"),
    )
}

/// A second repository whose Blueprint is the stage's with `order: together`.
async fn together_blueprint(client: &kube::Client, home: &str, stage: &Stage) -> RepoName {
    use sandcastle::crd::Blueprint;
    let repo = RepoName::new("acme/quick").unwrap();
    stage.gh.add_repo(1, &repo);
    let blueprints: Api<Blueprint> = Api::namespaced(client.clone(), home);
    let mut spec =
        serde_json::to_value(&blueprints.get(&stage.blueprint).await.unwrap().spec).unwrap();
    spec["repositories"] = json!([repo.as_str()]);
    spec["order"] = json!("together");
    let quick = json!({
        "apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
        "metadata": {"name": "quick"}, "spec": spec,
    });
    blueprints
        .patch(
            "quick",
            &PatchParams::apply("bench-real").force(),
            &Patch::Apply(&quick),
        )
        .await
        .unwrap();
    repo
}

/// Wait until namespace `ns` has no pod left but the finished seed Job's. A stopped pod's phase
/// turns terminal as soon as its containers end, while its sandbox and endpoint are still being
/// torn down: only the pod's removal says it is gone.
async fn until_no_pods(client: &kube::Client, ns: &str) {
    use k8s_openapi::api::core::v1::Pod;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let t = Instant::now();
    while t.elapsed() < DEADLINE {
        if pods.list(&Default::default()).await.is_ok_and(|l| {
            l.items.iter().all(|p| {
                p.labels().contains_key("batch.kubernetes.io/job-name")
                    && p.metadata.deletion_timestamp.is_none()
            })
        }) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{ns} still has pods after {DEADLINE:?}");
}

fn pick(samples: &[Duration], q: f64) -> f64 {
    let mut s = samples.to_vec();
    s.sort();
    s[((s.len() as f64 - 1.0) * q).round() as usize].as_secs_f64()
}

async fn set_stopped(previews: &Api<PreviewEnvironment>, name: &str, stopped: bool) {
    previews
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"stopped": stopped}})),
        )
        .await
        .unwrap();
}

async fn wait_phase(previews: &Api<PreviewEnvironment>, name: &str, phase: Phase) {
    let t = Instant::now();
    while t.elapsed() < DEADLINE {
        let pe = previews.get(name).await.unwrap();
        if pe.status.and_then(|s| s.phase) == Some(phase) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} never {phase:?}");
}
