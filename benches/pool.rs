//! Warm pools, side by side (run with `scripts/bench-pool`, or `scripts/bench-pool --real`): a
//! pull request `opened` → its preview Ready, when it takes a running pool's preview over, and
//! when it is cloned fresh — the same source as a second Blueprint of another repository,
//! without a pool — rounds alternating, each claim finding the pool full again. On the fast tier
//! (kwok, the guestbook Blueprint) Ready is the preview's phase; on the real tier (the test app,
//! Redis and a seed Job behind Traefik) it is the URL serving the pull request's commit.

mod support;

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

/// The stage's Blueprint with a pool of `size` (its host rendered from the branch, as a pool's
/// previews have no pull request), and a second Blueprint without one, of repository
/// `acme/fresh`, cloning the same source.
async fn blueprints(client: &kube::Client, home: &str, stage: &Stage, size: u32) -> RepoName {
    let api: Api<Blueprint> = Api::namespaced(client.clone(), home);
    let mut spec = serde_json::to_value(&api.get(&stage.blueprint).await.unwrap().spec).unwrap();
    spec["host"] = json!("{{branch}}-{{repo}}.preview.localhost");
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

/// Open pull request `n` of `repo` at `commit`; how long until it is Ready (its page serves the
/// commit, on the real tier), and whether it took a pool preview over.
async fn opened(
    stage: &Stage,
    previews: &Api<PreviewEnvironment>,
    repo: &RepoName,
    n: u64,
    commit: &Sha,
) -> (Duration, bool) {
    let branch = format!("b{n}");
    let pr = PrSpec::new(PrNumber::new(n).unwrap(), commit.clone(), &branch);
    let t = Instant::now();
    let (status, _) = stage
        .deliver(&stage.gh.open_pull_request(repo, pr))
        .await
        .unwrap();
    assert!(status < 300, "the webhook answered {status}");
    let host = format!("{branch}-{}.preview.localhost", repo.name());
    loop {
        let all = previews.list(&ListParams::default()).await.unwrap().items;
        let mine = all
            .iter()
            .find(|p| p.spec.pull_request == Some(n) && p.spec.repository == repo.as_str());
        if let Some(pe) = mine
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
        assert!(
            t.elapsed() < DEADLINE,
            "pull request {n} of {repo} was not Ready"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn pick(samples: &[Duration], q: f64) -> f64 {
    let mut s: Vec<f64> = samples.iter().map(Duration::as_secs_f64).collect();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * q).round() as usize]
}

#[tokio::main]
async fn main() {
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
        "{tier_name}: pull request opened → Ready, pool of {size} vs a fresh clone, {rounds} rounds"
    );
    let (mut claimed, mut cloned) = (Vec::new(), Vec::new());
    for n in 1..=rounds {
        pool_full(&previews, &stage.blueprint, size as usize).await;
        let commit = sha();
        if let Some(tier) = &real {
            tier.image_for(&root, &commit).unwrap();
        }
        let (c, took) = opened(&stage, &previews, &stage.repo, n, &commit).await;
        assert!(
            took,
            "round {n}: the pull request did not take a pool preview over"
        );
        let (f, _) = opened(&stage, &previews, &fresh, n, &commit).await;
        println!(
            "round {n}: claimed {:.2} s, fresh clone {:.2} s",
            c.as_secs_f64(),
            f.as_secs_f64()
        );
        claimed.push(c);
        cloned.push(f);
    }
    for (q, name) in [(0.5, "p50"), (0.9, "p90")] {
        let (c, f) = (pick(&claimed, q), pick(&cloned, q));
        println!(
            "{name}: claimed {c:.2} s, fresh clone {f:.2} s: {:.1}× faster",
            f / c
        );
    }
    stage.running.shutdown().await;
}
