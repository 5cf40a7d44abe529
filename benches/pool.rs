//! Warm pools, side by side (run with `scripts/bench-pool`, or `scripts/bench-pool --real`): how
//! long until a new preview is Ready when it takes a running pool's preview over, and when it is
//! cloned fresh — the same source as a second Blueprint of another repository, without a pool —
//! for the two ways previews are asked for: a pull request `opened` at a new commit (its image
//! rolls), and an agent's sandbox of the default branch through the API (`POST /previews`), where
//! an agent's task starts. Rounds alternate, each claim finding the pool full again. On the fast
//! tier (kwok, the guestbook Blueprint) Ready is the preview's phase; on the real tier (the test
//! app, Redis and a seed Job behind Traefik) it is the URL serving the preview's commit.

mod support;

use support::agent::Caller;

use std::time::{Duration, Instant};

use kube::api::{Api, ListParams, Patch, PatchParams};
use sandcastle::crd::{Blueprint, Phase, PreviewEnvironment};
use sandcastle::domain::{PrNumber, RepoName, Sha};
use sandcastle_demo::real::RealTier;
use sandcastle_demo::stage::Stage;
use sandcastle_fake_github::PrSpec;
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(300);

fn sha() -> Sha {
    Sha::new(&hex::encode(rand::random::<[u8; 20]>())).unwrap()
}

/// The stage's Blueprint with a pool of `size` (each preview's host its name), and a second Blueprint without one, of repository
/// `acme/fresh`, cloning the same source.
async fn blueprints(client: &kube::Client, home: &str, stage: &Stage, size: u32) -> RepoName {
    let api: Api<Blueprint> = Api::namespaced(client.clone(), home);
    let mut spec = serde_json::to_value(&api.get(&stage.blueprint).await.unwrap().spec).unwrap();
    spec["host"] = json!("{{preview}}.preview.localhost");
    let fresh_repo = RepoName::new("acme/fresh").unwrap();
    stage.gh.add_repo(1, &fresh_repo);
    let mut fresh = spec.clone();
    fresh["repositories"] = json!([fresh_repo.as_str()]);
    spec["pool"] = json!({"size": size});
    for (name, spec) in [(stage.blueprint.as_str(), spec), ("fresh", fresh)] {
        let bp = json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
            "metadata": {"name": name}, "spec": spec});
        api.patch(
            name,
            &PatchParams::apply("bench-pool").force(),
            &Patch::Apply(&bp),
        )
        .await
        .unwrap();
    }
    fresh_repo
}

/// Wait until the pool of `blueprint` holds `size` Ready previews.
async fn pool_full(previews: &Api<PreviewEnvironment>, blueprint: &str, size: usize) {
    let selector = format!("sandcastle.dev/pool={blueprint}");
    let t = Instant::now();
    loop {
        let ready = previews
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items
            .iter()
            .filter(|p| p.spec.teardown.is_none())
            .filter(|p| p.status.as_ref().and_then(|s| s.phase) == Some(Phase::Ready))
            .count();
        if ready >= size {
            return;
        }
        assert!(
            t.elapsed() < DEADLINE,
            "the pool of {blueprint} did not fill"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Open pull request `n` of `repo` at `commit`; how long until its preview is Ready, and
/// whether it took a pool preview over.
async fn opened(
    stage: &Stage,
    previews: &Api<PreviewEnvironment>,
    (repo, blueprint): (&RepoName, &str),
    n: u64,
    commit: &Sha,
) -> (Duration, bool) {
    let pr = PrSpec::new(PrNumber::new(n).unwrap(), commit.clone(), &format!("b{n}"));
    let t = Instant::now();
    let (status, _) = stage
        .deliver(&stage.gh.open_pull_request(repo, pr))
        .await
        .unwrap();
    assert!(status < 300, "the webhook answered {status}");
    let name = format!("{blueprint}-pr-{n}");
    until_ready(stage, previews, &name, commit, t).await
}

/// An agent's sandbox `name` of `blueprint` at `commit` (the default branch's head, where an
/// agent's task starts), asked of the API; how long until Ready, and whether it took a pool
/// preview over.
async fn sandbox(
    stage: &Stage,
    (previews, agent): (&Api<PreviewEnvironment>, &Caller),
    (repo, blueprint): (&RepoName, &str),
    name: &str,
    commit: &Sha,
) -> (Duration, bool) {
    let t = Instant::now();
    agent
        .create_with(json!({"blueprint": blueprint, "repository": repo.as_str(),
            "commit": commit.as_str(), "name": name}))
        .await;
    until_ready(stage, previews, name, commit, t).await
}

/// Wait until preview `name` is Ready (its page, fetched through Traefik, serves `commit`, on
/// the real tier); the time since `t`, and whether it took a pool preview over. With
/// `SANDCASTLE_BENCH_TRACE` set, prints each change of its phase on the way.
async fn until_ready(
    stage: &Stage,
    previews: &Api<PreviewEnvironment>,
    name: &str,
    commit: &Sha,
    t: Instant,
) -> (Duration, bool) {
    let host = format!("{name}.preview.localhost");
    let trace = std::env::var_os("SANDCASTLE_BENCH_TRACE").is_some();
    let mut seen = String::new();
    loop {
        let pe = previews.get_opt(name).await.unwrap();
        if trace {
            let now = pe.as_ref().map_or_else(|| "no preview".into(), progress);
            if now != seen {
                println!("  {:>6.3} s {name}: {now}", t.elapsed().as_secs_f64());
                seen = now;
            }
        }
        if let Some(pe) = &pe
            && pe.status.as_ref().and_then(|s| s.phase) == Some(Phase::Ready)
        {
            let served = match &stage.real {
                Some(tier) => tier
                    .get(&host, "/healthz")
                    .await
                    .is_ok_and(|p| p.status == 200 && p.commit.as_deref() == Some(commit.as_str())),
                None => true,
            };
            if served {
                return (t.elapsed(), pe.spec.adopts.is_some());
            }
        }
        assert!(t.elapsed() < DEADLINE, "{name} was not Ready");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A preview's phase, message and rollout steps, for the trace.
fn progress(pe: &PreviewEnvironment) -> String {
    let st = pe.status.clone().unwrap_or_default();
    let r = st.rollout.as_ref();
    format!(
        "{:?} {:?} applied {:?} ready {:?}",
        st.phase,
        st.message,
        r.map(|r| r.applied_steps),
        r.map(|r| r.ready_steps)
    )
}

fn pick(samples: &[Duration], q: f64) -> f64 {
    let mut s: Vec<f64> = samples.iter().map(Duration::as_secs_f64).collect();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * q).round() as usize]
}

#[tokio::main]
async fn main() {
    // What the controller does during a claim, when asked (`RUST_LOG=sandcastle=debug`).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    let rounds: u64 = std::env::var("SANDCASTLE_BENCH_PRS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10);
    let size = 2;
    let client = support::client().await;
    let home = support::unique("bench-home");
    let staging = support::unique("bench-staging");
    let real = std::env::var("SANDCASTLE_INGRESS_HTTP")
        .ok()
        .map(|ingress| RealTier {
            ingress,
            harness_dir: std::env::var("SANDCASTLE_HARNESS_DIR").unwrap_or_default(),
        });
    let stage = match real.clone() {
        Some(tier) => Stage::prepare_real(client.clone(), &home, &staging, 0, tier).await,
        None => Stage::prepare(client.clone(), &home, &staging, 0, true).await,
    }
    .expect("the stage");
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // The pool's previews are made at the default branch: its commit's image must be there.
    let main = sha();
    if let Some(tier) = &real {
        tier.image_for(&root, &main).unwrap();
    }
    stage.gh.set_branch(&stage.repo, "main", &main);
    let fresh = blueprints(&client, &home, &stage, size).await;
    let previews: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);
    let tier_name = if real.is_some() {
        "real tier (Traefik, real pods)"
    } else {
        "fast tier (kwok)"
    };
    println!(
        "{tier_name}: opened/asked → Ready, taking a preview of a pool of {size} over vs a fresh clone, {rounds} rounds"
    );
    let (_, token) = support::agent::admin(&client, &home).await;
    let agent = Caller {
        http: reqwest::Client::new(),
        base: format!("http://{}", stage.addr()),
        token,
    };
    let ours = (&stage.repo, stage.blueprint.as_str());
    let theirs = (&fresh, "fresh");
    let mut figures: [(&str, Vec<Duration>, Vec<Duration>); 2] = [
        (
            "a pull request (its commit's image rolls)",
            Vec::new(),
            Vec::new(),
        ),
        (
            "an agent's sandbox of the default branch",
            Vec::new(),
            Vec::new(),
        ),
    ];
    for n in 1..=rounds {
        pool_full(&previews, &stage.blueprint, size as usize).await;
        let commit = sha();
        if let Some(tier) = &real {
            tier.image_for(&root, &commit).unwrap();
        }
        let (c, took) = opened(&stage, &previews, ours, n, &commit).await;
        assert!(
            took,
            "round {n}: the pull request took no pool preview over"
        );
        let (f, _) = opened(&stage, &previews, theirs, n, &commit).await;
        figures[0].1.push(c);
        figures[0].2.push(f);
        pool_full(&previews, &stage.blueprint, size as usize).await;
        let name = format!("task-{n}");
        let (c, took) = sandbox(&stage, (&previews, &agent), ours, &name, &main).await;
        assert!(took, "round {n}: the sandbox took no pool preview over");
        let (f, _) = sandbox(
            &stage,
            (&previews, &agent),
            theirs,
            &format!("fresh-{name}"),
            &main,
        )
        .await;
        figures[1].1.push(c);
        figures[1].2.push(f);
        println!(
            "round {n}: pull request claimed {:.2} s, fresh {:.2} s; sandbox claimed {:.2} s, fresh {:.2} s",
            figures[0].1[n as usize - 1].as_secs_f64(),
            figures[0].2[n as usize - 1].as_secs_f64(),
            c.as_secs_f64(),
            f.as_secs_f64()
        );
    }
    for (what, claimed, cloned) in &figures {
        for (q, name) in [(0.5, "p50"), (0.9, "p90")] {
            let (c, f) = (pick(claimed, q), pick(cloned, q));
            println!(
                "{what}, {name}: claimed {c:.2} s, fresh clone {f:.2} s: {:.1}× faster",
                f / c
            );
        }
    }
    stage.running.shutdown().await;
}
