//! A burst of pull requests, as agent fleets make them: N opened at once (run with
//! `scripts/bench-burst`), timed until every preview is Ready, against the control plane's own
//! limit — the same objects (each preview's guardrails and plan, as Sandcastle computes them)
//! server-side applied directly, N namespaces in parallel, until every Deployment is available.
//! Both on the same control plane, one after the other; prints both, the ratio, and the API
//! requests each made (kube-apiserver's `apiserver_request_total`).

mod support;

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use sandcastle::crd::{self, BlueprintSpec, PreviewEnvironment};
use sandcastle::domain::guardrails;
use sandcastle::domain::plan::{self, PreviewContext, parse_manifests};
use sandcastle::domain::{NamespaceName, PrNumber, RepoName};
use sandcastle::k8s::apply::Resolver;
use sandcastle_demo::stage::{ensure_namespace, guestbook_yaml, load};
use sandcastle_fake_github::PrSpec;
use serde_json::{Value, json};

const SECRET: &str = "bench-burst-webhook-secret";

/// kube-apiserver's request counts so far, by verb and resource (every code).
async fn api_requests_by(client: &Client) -> BTreeMap<String, f64> {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.expect("apiserver metrics");
    let mut by = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix("=\""))
                .map_or("", |v| v.trim_end_matches('"'))
        };
        let sub = label("subresource");
        let key = format!(
            "{} {}{}{}",
            label("verb"),
            label("resource"),
            if sub.is_empty() { "" } else { "/" },
            sub
        );
        *by.entry(key).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    by
}

/// kube-apiserver's request count so far (every verb, resource and code).
async fn api_requests(client: &Client) -> f64 {
    api_requests_by(client).await.values().sum()
}

/// The requests made between two counts, most first.
fn made_between(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> Vec<(String, f64)> {
    let mut made: Vec<(String, f64)> = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect();
    made.sort_by(|a, b| b.1.total_cmp(&a.1));
    made
}

/// The objects Sandcastle applies for preview `n`: namespace labels aside, its guardrails then
/// its plan, in order.
fn objects_for(
    source: &[Value],
    spec: &BlueprintSpec,
    staging: &str,
    ns: &str,
    n: u64,
) -> Vec<Value> {
    let ctx = PreviewContext {
        preview: NamespaceName::new(&format!("burst-pr-{n}")).unwrap(),
        namespace: NamespaceName::new(ns).unwrap(),
        source_namespace: Some(staging.to_owned()),
        blueprint: "burst".to_owned(),
        repo: RepoName::new("acme/burst").unwrap(),
        pr: Some(PrNumber::new(n).unwrap()),
        sha: support::random_sha(),
        branch: "feature".to_owned(),
        default_host: "{{preview}}.preview.example.com".to_owned(),
    };
    let planned = plan::plan(source, spec, &ctx).expect("the blueprint plans");
    let mut out = guardrails::guardrail_objects(&ctx, &spec.isolation, "ingress-nginx");
    out.extend(parse_manifests(&planned.to_yaml().unwrap()).unwrap());
    out
}

/// Apply every namespace's objects directly, all namespaces at once; wait until all their
/// Deployments are available.
async fn direct(client: &Client, batches: Vec<(String, Vec<Value>)>) -> Duration {
    let t = Instant::now();
    let resolver = Resolver::new(client.clone());
    let namespaces: HashSet<String> = batches.iter().map(|(ns, _)| ns.clone()).collect();
    let n = batches.len();
    futures::stream::iter(batches)
        .map(|(ns, objects)| {
            let resolver = &resolver;
            async move {
                ensure_namespace(resolver.client(), &ns).await.unwrap();
                for obj in &objects {
                    resolver.apply(&ns, obj).await.expect("applied");
                }
            }
        })
        .buffer_unordered(n.max(1))
        .collect::<Vec<()>>()
        .await;
    let all: Api<Deployment> = Api::all(client.clone());
    loop {
        let list = all.list(&ListParams::default()).await.unwrap();
        let waiting = list
            .items
            .iter()
            .filter(|d| {
                d.metadata
                    .namespace
                    .as_ref()
                    .is_some_and(|ns| namespaces.contains(ns))
            })
            .filter(|d| {
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                d.status
                    .as_ref()
                    .and_then(|s| s.available_replicas)
                    .unwrap_or(0)
                    < want
            })
            .count();
        let present = list
            .items
            .iter()
            .filter(|d| {
                d.metadata
                    .namespace
                    .as_ref()
                    .is_some_and(|ns| namespaces.contains(ns))
            })
            .count();
        if waiting == 0 && present > 0 {
            return t.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::main]
async fn main() {
    let total = support::arg("--previews", 100);
    let client = support::client().await;
    let home = support::unique("burst-home");
    let staging = support::unique("burst-staging");
    sandcastle::k8s::crd_install::install(&client, Duration::from_secs(30))
        .await
        .unwrap();
    // Guestbook runs 6 pods a preview, for every run (their namespaces stay).
    let runs = if std::env::var_os("SANDCASTLE_BASELINE").is_some() {
        3
    } else {
        2
    };
    support::ensure_nodes(&client, total * 6 * runs + 10).await;
    ensure_namespace(&client, &home).await.unwrap();
    ensure_namespace(&client, &staging).await.unwrap();
    load(&client, &staging, &guestbook_yaml().unwrap())
        .await
        .unwrap();
    let spec_json = json!({
        "source": {"namespace": staging},
        "repositories": ["acme/burst"],
        "images": [{"repository": "gcr.io/google-samples/gb-frontend", "tag": "{{sha}}"}],
        "primaryService": "frontend",
        "maxPreviews": total + 10,
    });
    let spec: BlueprintSpec = serde_json::from_value(spec_json.clone()).unwrap();
    let source = sandcastle::k8s::source::read(&Resolver::new(client.clone()), &home, &spec)
        .await
        .unwrap();

    // The control plane's own limit: the same objects, applied directly.
    let batches: Vec<(String, Vec<Value>)> = (1..=total)
        .map(|n| {
            let ns = format!("{home}-direct-{n}");
            let objects = objects_for(&source, &spec, &staging, &ns, n);
            (ns, objects)
        })
        .collect();
    let per_preview = batches[0].1.len();
    let before = api_requests(&client).await;
    let direct_took = direct(&client, batches).await;
    let direct_requests = api_requests(&client).await - before;

    println!(
        "burst of {total} pull requests, guestbook ({per_preview} objects per preview with its guardrails), release build"
    );
    let mut runs = Vec::new();
    if let Some(baseline) = std::env::var_os("SANDCASTLE_BASELINE") {
        let run = sandcastle(&client, baseline.as_ref(), &spec_json, total).await;
        runs.push(("baseline (SANDCASTLE_BASELINE)", run));
    }
    let run = sandcastle(&client, &support::sandcastle_bin(), &spec_json, total).await;
    runs.push(("Sandcastle", run));

    println!(
        "| | all Ready | ratio | API requests | ratio | GitHub calls |\n|---|---|---|---|---|---|"
    );
    println!(
        "| direct server-side applies | {:.1} s | | {direct_requests:.0} | | |",
        direct_took.as_secs_f64()
    );
    for (label, run) in &runs {
        println!(
            "| {label} (deliveries answered in {:.1} s) | {:.1} s | {:.2}x | {:.0} | {:.2}x | {} |",
            run.answered.as_secs_f64(),
            run.took.as_secs_f64(),
            run.took.as_secs_f64() / direct_took.as_secs_f64(),
            run.requests,
            run.requests / direct_requests,
            run.calls
        );
    }
    for (label, run) in &runs {
        println!("{label}: API requests by verb and resource (the 12 most):");
        for (what, n) in run.by.iter().take(12) {
            println!("  {n:>7.0}  {what}  ({:.1} a preview)", n / total as f64);
        }
    }
}

/// What one Sandcastle run took.
struct Run {
    answered: Duration,
    took: Duration,
    requests: f64,
    by: Vec<(String, f64)>,
    calls: usize,
}

/// `bin` serving a Blueprint of `spec_json` in a home namespace of its own: N opened deliveries
/// at once, until every preview is Ready.
async fn sandcastle(client: &Client, bin: &std::path::Path, spec_json: &Value, total: u64) -> Run {
    let home = support::unique("burst-home");
    ensure_namespace(client, &home).await.unwrap();
    let blueprint = json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
        "metadata": {"name": "burst"}, "spec": spec_json});
    Api::<crd::Blueprint>::namespaced(client.clone(), &home)
        .patch(
            "burst",
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&blueprint),
        )
        .await
        .unwrap();
    let repo = RepoName::new("acme/burst").unwrap();
    let (gh, child, port, key) = support::serve_with_stand_in(bin, &home, &repo, SECRET).await;
    let serve = support::Serve(child);
    let http: support::Http = HttpClient::builder(TokioExecutor::new()).build_http();
    support::wait_serving(&http, port).await;
    let deliveries: Vec<_> = (1..=total)
        .map(|n| {
            gh.open_pull_request(
                &repo,
                PrSpec::new(PrNumber::new(n).unwrap(), support::random_sha(), "feature"),
            )
        })
        .collect();
    gh.take_calls();
    let before = api_requests_by(client).await;
    let t = Instant::now();
    let names: HashSet<String> = futures::stream::iter(deliveries)
        .map(|d| {
            let http = &http;
            async move {
                let status = support::post_delivery(http, port, &d, SECRET).await;
                assert_eq!(status, 202, "opened recorded");
                format!("burst-pr-{}", d.json()["number"])
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let answered = t.elapsed();
    let api: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);
    support::all_ready(&api, &names).await;
    let took = t.elapsed();
    let after = api_requests_by(client).await;
    let calls = gh.take_calls().len();
    // Stopped before the next run; its namespaces stay (as the direct ones do).
    drop(serve);
    let _ = std::fs::remove_file(key);
    let by = made_between(&before, &after);
    Run {
        answered,
        took,
        requests: by.iter().map(|(_, n)| n).sum(),
        by,
        calls,
    }
}
