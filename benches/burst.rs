//! A burst of pull requests, as agent fleets make them: N opened at once (run with
//! `scripts/bench-burst`), timed until every preview is Ready, against the control plane's own
//! limit — the same objects (each preview's guardrails and plan, as Sandcastle computes them)
//! server-side applied directly, N namespaces in parallel, until every Deployment is available
//! — and the same again with the least bookkeeping any preview tool that keeps its state in the
//! cluster writes beside each namespace (`support::floor`: the floor under Sandcastle's extra
//! work). All on the same control plane, one after the other, `--runs` times (default 2); prints, for
//! each, when a quarter, half, three quarters and all were Ready, the ratios, the API requests
//! each made (kube-apiserver's `apiserver_request_total`), the webhook's answer times, how many
//! previews had left the line (had a status) along the way, and whether they were Ready in the
//! order they were asked for.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use sandcastle::crd::{self, BlueprintSpec};
use sandcastle::domain::guardrails;
use sandcastle::domain::plan::{self, PreviewContext, parse_manifests};
use sandcastle::domain::{NamespaceName, PrNumber, RepoName};
use sandcastle::k8s::apply::Resolver;
use sandcastle_demo::stage::{ensure_namespace, guestbook_yaml, load};
use sandcastle_fake_github::PrSpec;
use serde_json::{Value, json};
use support::burst::{
    Arrivals, api_requests_by, control_plane_cpu, cpu_between, cpu_seconds, made_between, median,
    profile, quarters, rank_correlation,
};
use support::floor::Bookkeeping;

const SECRET: &str = "bench-burst-webhook-secret";

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
        edge: Default::default(),
        pool_member: None,
        data: Default::default(),
    };
    let planned = plan::plan(source, spec, &ctx).expect("the blueprint plans");
    let mut out = guardrails::guardrail_objects(&ctx, &spec.isolation, "ingress-nginx");
    out.extend(parse_manifests(&planned.to_yaml().unwrap()).unwrap());
    out
}

/// Apply every namespace's objects directly, all namespaces at once (beside each, the least
/// `bookkeeping` a preview needs, when given); wait until all their Deployments are available.
/// When each namespace was Ready.
async fn direct(
    client: &Client,
    batches: Vec<(String, Vec<Value>)>,
    bookkeeping: Option<&Bookkeeping>,
) -> Vec<Duration> {
    let resolver = Resolver::new(client.clone());
    let namespaces: HashSet<String> = batches.iter().map(|(ns, _)| ns.clone()).collect();
    let deployments = batches[0]
        .1
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .count();
    let arrivals = Arrivals::namespaces(client, namespaces.clone(), deployments);
    let n = batches.len();
    futures::stream::iter(batches.into_iter().zip(1..))
        .map(|((ns, objects), n)| {
            let resolver = &resolver;
            async move {
                let pe = match bookkeeping {
                    Some(b) => Some(b.before(n).await),
                    None => None,
                };
                ensure_namespace(resolver.client(), &ns).await.unwrap();
                for obj in &objects {
                    resolver.apply(&ns, obj).await.expect("applied");
                }
                if let (Some(b), Some(pe)) = (bookkeeping, pe) {
                    b.after(&pe).await;
                }
            }
        })
        .buffer_unordered(n.max(1))
        .collect::<Vec<()>>()
        .await;
    arrivals.all_ready(&namespaces).await;
    let ready = arrivals.ready.lock().unwrap();
    ready.values().copied().collect()
}

/// One path's figures in one run.
struct Figures {
    label: String,
    ready: Vec<Duration>,
    requests: f64,
    /// The requests by verb and resource, most first.
    by: Vec<(String, f64)>,
    /// CPU seconds the control plane used meanwhile, and by component.
    control_plane_cpu: f64,
    cpu_by: String,
    run: Option<Run>,
}

#[tokio::main]
async fn main() {
    let total = support::arg("--previews", 100);
    let runs = support::arg("--runs", 2);
    let senders = support::arg("--senders", 16) as usize;
    let client = support::client().await;
    let home = support::unique("burst-home");
    let staging = support::unique("burst-staging");
    sandcastle::k8s::crd_install::install(&client, Duration::from_secs(30))
        .await
        .unwrap();
    let baseline = std::env::var_os("SANDCASTLE_BASELINE");
    // Guestbook runs 6 pods a preview, for every path of every run (their namespaces stay).
    let paths = if baseline.is_some() { 4 } else { 3 };
    support::ensure_nodes(&client, total * 6 * paths * runs + 10).await;
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
    let per_preview = objects_for(&source, &spec, &staging, &home, 1).len();
    println!(
        "burst of {total} pull requests, guestbook ({per_preview} objects per preview with its guardrails), \
         deliveries sent {senders} at a time, release build, {runs} runs"
    );
    let mut all = Vec::new();
    for r in 1..=runs {
        // The control plane's own limit: the same objects, applied directly.
        let mut figures = Vec::new();
        // The direct applies alone; then beside each namespace the least bookkeeping any
        // preview tool that keeps its state in the cluster writes (`support::floor`).
        for (side, floor) in [
            ("direct", None),
            ("floor", Some(Bookkeeping::new(&client).await)),
        ] {
            let batches: Vec<(String, Vec<Value>)> = (1..=total)
                .map(|n| {
                    let ns = format!("{home}-r{r}-{side}-{n}");
                    let objects = objects_for(&source, &spec, &staging, &ns, n);
                    (ns, objects)
                })
                .collect();
            let before = api_requests_by(&client).await;
            let cpu = control_plane_cpu();
            let profiling = profile(&client, &format!("run{r}-{side}"));
            let ready = direct(&client, batches, floor.as_ref()).await;
            let (control_plane_cpu, cpu_by) = cpu_between(&cpu, &control_plane_cpu());
            if let Some(p) = profiling {
                p.await.unwrap();
            }
            let by = made_between(&before, &api_requests_by(&client).await);
            figures.push(Figures {
                label: match floor {
                    None => format!("run {r}: direct server-side applies"),
                    Some(_) => format!("run {r}: direct, with the least bookkeeping beside"),
                },
                ready,
                requests: by.iter().map(|(_, n)| n).sum(),
                by,
                control_plane_cpu,
                cpu_by,
                run: None,
            });
        }
        let mut bins = Vec::new();
        if let Some(b) = &baseline {
            bins.push((
                "baseline (SANDCASTLE_BASELINE)",
                std::path::PathBuf::from(b),
            ));
        }
        bins.push(("Sandcastle", support::sandcastle_bin()));
        for (label, bin) in bins {
            let profiling = format!("run{r}-{}", label.split(' ').next().unwrap_or(label));
            support::install_crds_of(&client, &bin).await;
            let run = sandcastle(&client, &bin, &spec_json, total, senders, &profiling).await;
            figures.push(Figures {
                label: format!("run {r}: {label}"),
                ready: run.ready.clone(),
                requests: run.requests,
                by: run.by.clone(),
                control_plane_cpu: run.control_plane_cpu,
                cpu_by: run.cpu_by.clone(),
                run: Some(run),
            });
        }
        report_run(&figures, total);
        all.push(figures);
    }
    report_spread(&all);
}

/// One run's table and each Sandcastle's details.
fn report_run(figures: &[Figures], total: u64) {
    let direct = &figures[0];
    let dq = quarters(&direct.ready);
    println!(
        "\n| | 25% Ready | 50% | 75% | 100% | × direct at 25% / 100% | API requests | × direct | CPU: control plane, Sandcastle |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for f in figures {
        let q = quarters(&f.ready);
        let ratio = if std::ptr::eq(f, direct) {
            String::new()
        } else {
            format!(
                "{:.2}× / {:.2}×",
                q[0].as_secs_f64() / dq[0].as_secs_f64(),
                q[3].as_secs_f64() / dq[3].as_secs_f64()
            )
        };
        let req_ratio = if std::ptr::eq(f, direct) {
            String::new()
        } else {
            format!("{:.2}×", f.requests / direct.requests)
        };
        let own = f
            .run
            .as_ref()
            .map_or(String::new(), |r| format!(", {:.1} s", r.cpu));
        println!(
            "| {} | {:.1} s | {:.1} s | {:.1} s | {:.1} s | {ratio} | {:.0} | {req_ratio} | {:.1} s{own} |",
            f.label,
            q[0].as_secs_f64(),
            q[1].as_secs_f64(),
            q[2].as_secs_f64(),
            q[3].as_secs_f64(),
            f.requests,
            f.control_plane_cpu,
        );
    }
    println!("control plane CPU by component:");
    for f in figures {
        println!("  {}: {}", f.label, f.cpu_by);
    }
    for f in figures {
        let Some(run) = &f.run else { continue };
        println!("{}:", f.label);
        let mut answers = run.answers.clone();
        println!(
            "  webhook answers: {} (all {total} answered in {:.1} s)",
            support::summary(&mut answers),
            run.answered.as_secs_f64()
        );
        let mut alone = run.records_alone.clone();
        println!(
            "  the same records created straight into the API server, as many at a time, after the burst: {}",
            support::summary(&mut alone),
        );
        let marks = [1, 2, 4, 8, 16];
        let left: Vec<String> = marks
            .iter()
            .zip(&run.with_status)
            .map(|(s, n)| format!("{n} at {s} s"))
            .collect();
        println!("  with a status: {}", left.join(", "));
        let in_order = &run.ready_in_order;
        let quarter = in_order.len() / 4;
        println!(
            "  order: rank correlation asked → Ready {:.2}; the first asked Ready at {:.1} s, the {}th at {:.1} s; \
             median Ready of the first {quarter} asked {:.1} s, of the last {quarter} {:.1} s",
            rank_correlation(in_order),
            in_order[0].as_secs_f64(),
            in_order.len() / 2,
            in_order[in_order.len() / 2 - 1].as_secs_f64(),
            median(&in_order[..quarter]).as_secs_f64(),
            median(&in_order[in_order.len() - quarter..]).as_secs_f64(),
        );
        println!("  GitHub calls: {}", run.calls);
        println!("  {}", run.reconciles);
        println!("  API requests beyond the direct applies', by verb and resource (the 16 most):");
        let direct_by: BTreeMap<&str, f64> =
            direct.by.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let mut beyond: Vec<(&str, f64, f64)> = run
            .by
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str(),
                    *v,
                    direct_by.get(k.as_str()).copied().unwrap_or(0.0),
                )
            })
            .collect();
        beyond.sort_by(|a, b| (b.1 - b.2).abs().total_cmp(&(a.1 - a.2).abs()));
        for (what, n, d) in beyond.iter().take(16) {
            let per = |x: f64| x / total as f64;
            println!(
                "    {:>+7.0}  {what}  ({:.1} a preview beside {:.1})",
                n - d,
                per(*n),
                per(*d)
            );
        }
    }
}

/// The ratios of every run side by side, and their spread.
fn report_spread(all: &[Vec<Figures>]) {
    println!("\nratios to direct applies, run by run (25% Ready / 100% Ready / API requests):");
    for path in 1..all[0].len() {
        let cells: Vec<String> = all
            .iter()
            .map(|figures| {
                let d = quarters(&figures[0].ready);
                let s = quarters(&figures[path].ready);
                format!(
                    "{:.2}× / {:.2}× / {:.2}×",
                    s[0].as_secs_f64() / d[0].as_secs_f64(),
                    s[3].as_secs_f64() / d[3].as_secs_f64(),
                    figures[path].requests / figures[0].requests
                )
            })
            .collect();
        let label = all[0][path].label.split_once(": ").map_or("", |l| l.1);
        println!("  {label}: {}", cells.join("  ·  "));
    }
}

/// What one Sandcastle run took.
struct Run {
    answered: Duration,
    answers: Vec<Duration>,
    ready: Vec<Duration>,
    /// Ready times in the order the deliveries were recorded (answered).
    ready_in_order: Vec<Duration>,
    /// Previews with a status 1, 2, 4, 8 and 16 s after the first delivery.
    with_status: Vec<usize>,
    requests: f64,
    by: Vec<(String, f64)>,
    calls: usize,
    /// CPU seconds `sandcastle serve` used from its start to the last Ready, and the control
    /// plane from the first delivery.
    cpu: f64,
    control_plane_cpu: f64,
    cpu_by: String,
    /// Its reconciles: how many, how long.
    reconciles: String,
    /// The same records created straight into the API server, as many at a time, once the
    /// burst is over: what the webhook's one write costs without Sandcastle around it.
    records_alone: Vec<Duration>,
}

/// `bin` serving a Blueprint of `spec_json` in a home namespace of its own: N opened deliveries,
/// `senders` at a time, until every preview is Ready.
async fn sandcastle(
    client: &Client,
    bin: &std::path::Path,
    spec_json: &Value,
    total: u64,
    senders: usize,
    profiling: &str,
) -> Run {
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
    let cpu = control_plane_cpu();
    let profiling = profile(client, profiling);
    let arrivals = Arrivals::previews(client, &home);
    let t = arrivals.start;
    // Names in the order their deliveries were recorded.
    let asked = Arc::new(Mutex::new(Vec::new()));
    let answers: Vec<Duration> = futures::stream::iter(deliveries)
        .map(|d| {
            let (http, asked) = (&http, asked.clone());
            async move {
                let sent = Instant::now();
                let status = support::post_delivery(http, port, &d, SECRET).await;
                let took = sent.elapsed();
                assert_eq!(status, 202, "opened recorded");
                asked
                    .lock()
                    .unwrap()
                    .push(format!("burst-pr-{}", d.json()["number"]));
                took
            }
        })
        .buffer_unordered(senders)
        .collect()
        .await;
    let answered = t.elapsed();
    let asked = asked.lock().unwrap().clone();
    let names: HashSet<String> = asked.iter().cloned().collect();
    arrivals.all_ready(&names).await;
    let (control_plane_cpu, cpu_by) = cpu_between(&cpu, &control_plane_cpu());
    let own_cpu = cpu_seconds(serve.0.id());
    if let Some(p) = profiling {
        p.await.unwrap();
    }
    let reconciles = reconciles(&http, port, total).await;
    let after = api_requests_by(client).await;
    let calls = gh.take_calls().len();
    // Stopped before the next run; its namespaces stay (as the direct ones do).
    drop(serve);
    let _ = std::fs::remove_file(key);
    let records_alone = support::burst::records_alone(client, &home, senders).await;
    let by = made_between(&before, &after);
    let ready = arrivals.ready.lock().unwrap().values().copied().collect();
    Run {
        answered,
        answers,
        ready,
        ready_in_order: arrivals.ready_in_order(&asked),
        with_status: [1, 2, 4, 8, 16]
            .map(|s| arrivals.with_status_by(Duration::from_secs(s)))
            .to_vec(),
        requests: by.iter().map(|(_, n)| n).sum(),
        by,
        calls,
        cpu: own_cpu,
        control_plane_cpu,
        cpu_by,
        reconciles,
        records_alone,
    }
}

/// How many reconciles `sandcastle serve` on `port` ran and how long they took, from its metrics.
async fn reconciles(http: &support::Http, port: u16, total: u64) -> String {
    use http_body_util::BodyExt as _;
    let req = http::Request::get(format!("http://127.0.0.1:{port}/metrics"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let body = http.request(req).await.unwrap().into_body().collect().await;
    let text = String::from_utf8_lossy(&body.unwrap().to_bytes()).into_owned();
    let value = |name: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    let count = value("sandcastle_reconcile_duration_seconds_count");
    let sum = value("sandcastle_reconcile_duration_seconds_sum");
    let errors = value("sandcastle_reconciles_total{result=\"error\"}");
    format!(
        "reconciles: {count:.0} ({:.1} a preview, {errors:.0} failed), {:.0} ms each on average",
        count / total as f64,
        1000.0 * sum / count.max(1.0)
    )
}
