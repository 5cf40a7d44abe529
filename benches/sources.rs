//! Blueprints rendered from the repository, measured (run with `scripts/bench-sources`): a real
//! chart of 30 objects (bitnami's mongodb-sharded with 8 shards, its `common` dependency
//! vendored) rendered by Helm, then
//!
//! - render time per commit: cold (the tarball fetched from the GitHub stand-in, unpacked,
//!   rendered) and with the archive already fetched (another preview of the same commit);
//! - PR `opened` → Ready for the chart Blueprint beside the same objects as a namespace
//!   Blueprint, alternating, one preview at a time, in one run;
//! - GitHub calls per preview, and archive fetches per commit.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use sandcastle::crd::{self, HelmSource, Phase, PreviewEnvironment};
use sandcastle::domain::plan::parse_manifests;
use sandcastle::domain::{PrNumber, RepoName, Sha};
use sandcastle::k8s::apply::Resolver;
use sandcastle::render::{Renderer, Source, Variables};
use sandcastle_demo::stage::ensure_namespace;
use sandcastle_fake_github::{FakeGitHub, PrSpec};
use serde_json::{Value, json};

const SECRET: &str = "bench-sources-webhook-secret";
const CHART: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/sources/bitnami-mongodb-sharded"
);

fn values() -> Value {
    json!({
        "shards": 8,
        "shardsvr": {"persistence": {"enabled": false}},
        "configsvr": {"persistence": {"enabled": false}},
        "auth": {"rootPassword": "bench-root-password", "replicaSetKey": "bench-replica-key"},
    })
}

fn helm_source() -> HelmSource {
    HelmSource {
        path: "deploy/chart".into(),
        release_name: Some("shop".into()),
        values_files: vec![],
        values: Some(values()),
    }
}

fn renderer() -> Renderer {
    let tool = |var: &str| {
        std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: run scripts/bench-sources"))
    };
    Renderer {
        helm: tool("SANDCASTLE_HELM_BINARY").into(),
        kustomize: tool("SANDCASTLE_KUSTOMIZE_BINARY").into(),
        limits: sandcastle::render::Limits::default(),
    }
}

fn vars(namespace: &str, sha: &Sha) -> Variables {
    Variables {
        sha: sha.as_str().into(),
        short_sha: sha.short().into(),
        pr: Some(1),
        branch: "b".into(),
        preview: "chart-pr-1".into(),
        repo: "chart".into(),
        owner: "acme".into(),
        namespace: namespace.into(),
    }
}

async fn blueprint(client: &kube::Client, home: &str, name: &str, spec: Value) {
    let bp = json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
        "metadata": {"name": name}, "spec": spec});
    Api::<crd::Blueprint>::namespaced(client.clone(), home)
        .patch(
            name,
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&bp),
        )
        .await
        .unwrap();
}

/// Deliver `opened` for PR `n` of `repo` at `sha`; the time until preview `name` is Ready.
async fn open_until_ready(
    http: &support::Http,
    gh: &FakeGitHub,
    api: &Api<PreviewEnvironment>,
    port: u16,
    repo: &RepoName,
    n: u64,
    sha: &Sha,
) -> Duration {
    let name = format!("{}-pr-{n}", repo.name());
    let mut events = watcher(
        api.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .applied_objects()
    .boxed();
    let d = gh.open_pull_request(
        repo,
        PrSpec::new(PrNumber::new(n).unwrap(), sha.clone(), "b"),
    );
    let t = Instant::now();
    let status = support::post_delivery(http, port, &d, SECRET).await;
    assert_eq!(status, 202, "opened recorded");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    loop {
        let Ok(pe) = tokio::time::timeout_at(deadline, events.next()).await else {
            let st = api.get(&name).await.ok().and_then(|p| p.status);
            panic!("{name} not Ready after 5 min: {st:#?}");
        };
        let Some(Ok(pe)) = pe else { continue };
        let st = pe.status.unwrap_or_default();
        if st.phase == Some(Phase::Ready) {
            return t.elapsed();
        }
        assert_ne!(st.phase, Some(Phase::Failed), "{name}: {:?}", st.message);
    }
}

fn p50(samples: &mut [Duration]) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64()
}

#[tokio::main]
async fn main() {
    let rounds = support::arg("--prs", 10);
    let client = support::client().await;
    // Each preview runs about a dozen pods (8 shards, config servers, a router) asking for
    // several CPUs: a fake node of 32 CPUs for every two previews.
    support::ensure_nodes(&client, rounds * 100 + 100).await;
    sandcastle::k8s::crd_install::install(&client, Duration::from_secs(30))
        .await
        .unwrap();
    let home = support::unique("bench-src");
    let staging = support::unique("bench-src-staging");
    for ns in [&home, &staging] {
        ensure_namespace(&client, ns).await.unwrap();
    }
    let renderer = renderer();
    let helm = helm_source();
    let source = Source::Helm {
        spec: &helm,
        local_values: &[],
        sets: &[],
    };

    // The same objects, rendered into the staging namespace, for the namespace Blueprint (from
    // the fixture itself: its directory stands for the repository's deploy/chart).
    let local = HelmSource {
        path: "bitnami-mongodb-sharded".into(),
        ..helm_source()
    };
    let local = Source::Helm {
        spec: &local,
        local_values: &[],
        sets: &[],
    };
    let fixtures = Path::new(CHART).parent().unwrap();
    let yaml = renderer
        .render_dir(fixtures, local, &vars(&staging, &support::random_sha()))
        .await
        .unwrap();
    let objects = parse_manifests(&yaml).unwrap();
    Resolver::new(client.clone())
        .apply_all(&staging, &objects)
        .await
        .unwrap();

    let chart_repo = RepoName::new("acme/chart").unwrap();
    let ns_repo = RepoName::new("acme/ns").unwrap();
    blueprint(
        &client,
        &home,
        "chart",
        json!({
            "source": {"helm": helm},
            "repositories": [chart_repo.as_str()],
            "maxPreviews": 100,
        }),
    )
    .await;
    blueprint(
        &client,
        &home,
        "ns",
        json!({
            "source": {"namespace": staging},
            "repositories": [ns_repo.as_str()],
            "maxPreviews": 100,
        }),
    )
    .await;
    let bin = support::sandcastle_bin();
    let (gh, child, port, key) =
        support::serve_with_stand_in(&bin, &home, &chart_repo, SECRET).await;
    let serve = support::Serve(child);
    let http: support::Http = HttpClient::builder(TokioExecutor::new()).build_http();
    support::wait_serving(&http, port).await;
    gh.add_repo(1, &ns_repo);
    let api: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);

    // Opened → Ready, alternating.
    let (mut chart_times, mut ns_times) = (Vec::new(), Vec::new());
    let mut commits = Vec::new();
    for n in 1..=rounds {
        let sha = support::random_sha();
        gh.put_tree(&chart_repo, sha.as_str(), "deploy/chart", Path::new(CHART));
        commits.push(sha.clone());
        chart_times.push(open_until_ready(&http, &gh, &api, port, &chart_repo, n, &sha).await);
        let sha = support::random_sha();
        ns_times.push(open_until_ready(&http, &gh, &api, port, &ns_repo, n, &sha).await);
    }
    let calls = gh.calls();
    let of = |repo: &RepoName| {
        let prefix = format!("/repos/{repo}/");
        calls.iter().filter(|c| c.path.starts_with(&prefix)).count()
    };
    let fetches = calls
        .iter()
        .filter(|c| c.path.contains("/tarball/"))
        .count();

    // Render time: cold (fetch, unpack, render) and with the archive at hand.
    let github = sandcastle::github::client::GitHubApp::new(
        sandcastle_fake_github::TEST_APP_ID,
        &sandcastle::domain::Secret::new(sandcastle_fake_github::TEST_APP_PRIVATE_KEY_PEM),
        gh.url(),
        sandcastle::github::client::ClientSettings::default(),
    )
    .unwrap()
    .installation(1);
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for sha in &commits {
        let t = Instant::now();
        let tarball = github.tarball(&chart_repo, sha, 100 << 20).await.unwrap();
        let out = renderer
            .render_archive(tarball.clone(), source, &vars("bench", sha))
            .await
            .unwrap();
        cold.push(t.elapsed());
        let t = Instant::now();
        renderer
            .render_archive(tarball, source, &vars("bench", sha))
            .await
            .unwrap();
        warm.push(t.elapsed());
        assert_eq!(parse_manifests(&out).unwrap().len(), objects.len());
    }
    drop(serve);
    let _ = std::fs::remove_file(key);

    println!(
        "chart: bitnami mongodb-sharded 9.4.14, 8 shards: {} objects rendered; {rounds} previews of each Blueprint, one at a time",
        objects.len()
    );
    println!("| | p50 | max |");
    println!("|---|---|---|");
    let row = |label: &str, s: &mut Vec<Duration>| {
        let max = s.iter().max().copied().unwrap_or_default().as_secs_f64();
        let p = p50(s);
        println!("| {label} | {p:.2} s | {max:.2} s |");
        p
    };
    let c = row("render, cold (fetch + unpack + helm template)", &mut cold);
    let w = row(
        "render, archive at hand (unpack + helm template)",
        &mut warm,
    );
    let a = row("opened → Ready, chart Blueprint", &mut chart_times);
    let b = row("opened → Ready, namespace Blueprint", &mut ns_times);
    println!("render cold / archive at hand: {:.2}×", c / w);
    println!("opened → Ready, chart / namespace: {:.2}× (p50)", a / b);
    println!(
        "GitHub calls per preview: chart {:.1}, namespace {:.1}; archive fetches {fetches} for {} commits",
        of(&chart_repo) as f64 / rounds as f64,
        of(&ns_repo) as f64 / rounds as f64,
        commits.len(),
    );
}
