//! Sandcastle with many live previews: the `sandcastle serve` process's memory, and what one
//! event costs, with 5 and then with 500 previews Ready (run with `scripts/bench-scale`). The
//! process is the real binary (its own RSS, nothing of the benchmark in it) talking to the local
//! control plane and to a GitHub stand-in in this process. One event = a `synchronize` delivery:
//! the webhook's answer, and the time until the preview is Ready at the new commit (watched).

mod support;

use std::collections::HashSet;
use std::process::Child;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use sandcastle::crd::{self, Phase, PreviewEnvironment};
use sandcastle::domain::{PrNumber, RepoName};
use sandcastle_demo::stage::{ensure_namespace, load};
use sandcastle_fake_github::{Delivery, FakeGitHub, PrSpec};
use serde_json::json;

const SECRET: &str = "bench-scale-secret";

/// Resident and peak memory of process `pid`, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

struct Sandcastle {
    child: Child,
    addr: String,
    http: HttpClient<HttpConnector, Full<Bytes>>,
}

impl Drop for Sandcastle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sandcastle {
    async fn deliver(&self, d: &Delivery) -> (u16, Duration) {
        let mut req = http::Request::post(format!("http://{}/github/webhook", self.addr));
        for (k, v) in d.signed_headers(SECRET) {
            req = req.header(k, v);
        }
        let t = Instant::now();
        let resp = self
            .http
            .request(req.body(Full::new(Bytes::from(d.body.clone()))).unwrap())
            .await
            .expect("webhook answers");
        let status = resp.status().as_u16();
        let _ = resp.into_body().collect().await;
        (status, t.elapsed())
    }

    async fn ready(&self) -> bool {
        let req = http::Request::get(format!("http://{}/readyz", self.addr))
            .body(Full::new(Bytes::new()))
            .unwrap();
        matches!(self.http.request(req).await, Ok(r) if r.status() == 200)
    }
}

/// `rounds` synchronize deliveries, one at a time, over the first five pull requests: the
/// webhook's answer time and the time to Ready at the new commit.
async fn event_cost(
    sc: &Sandcastle,
    gh: &FakeGitHub,
    repo: &RepoName,
    api: &Api<PreviewEnvironment>,
    rounds: u64,
) -> (Vec<Duration>, Vec<Duration>) {
    let (mut answer, mut ready) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        let n = i % 5 + 1;
        let name = format!("scale-pr-{n}");
        let sha = support::random_sha();
        let mut events = watcher(
            api.clone(),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
        )
        .applied_objects()
        .boxed();
        let d = gh.push(repo, PrNumber::new(n).unwrap(), &sha);
        let t = Instant::now();
        let (status, took) = sc.deliver(&d).await;
        assert_eq!(status, 202, "synchronize recorded");
        answer.push(took);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let pe = match tokio::time::timeout_at(deadline, events.next()).await {
                Ok(Some(Ok(pe))) => pe,
                other => panic!("{name} not Ready at {sha} in time: {other:?}"),
            };
            let st = pe.status.unwrap_or_default();
            if st.phase == Some(Phase::Ready) && st.deployed_sha.as_deref() == Some(sha.as_str()) {
                ready.push(t.elapsed());
                break;
            }
        }
    }
    (answer, ready)
}

#[tokio::main]
async fn main() {
    let total = support::arg("--previews", 500);
    let rounds = support::arg("--rounds", 20);
    let client = support::client().await;
    let home = support::unique("scale-home");
    let staging = support::unique("scale-staging");
    sandcastle::k8s::crd_install::install(&client, Duration::from_secs(30))
        .await
        .unwrap();
    support::ensure_nodes(&client, total + 10).await;
    ensure_namespace(&client, &home).await.unwrap();
    ensure_namespace(&client, &staging).await.unwrap();
    load(&client, &staging, support::SMALL_APP).await.unwrap();
    let blueprint = json!({
        "apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint", "metadata": {"name": "scale"},
        "spec": {
            "source": {"namespace": staging},
            "repositories": ["acme/scale"],
            "images": [{"repository": "registry.example/web", "tag": "{{shortSha}}"}],
            "maxPreviews": total + 10,
        }
    });
    Api::<crd::Blueprint>::namespaced(client.clone(), &home)
        .patch(
            "scale",
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&blueprint),
        )
        .await
        .unwrap();

    let repo = RepoName::new("acme/scale").unwrap();
    let (gh, child, port, key) =
        support::serve_with_stand_in(&support::sandcastle_bin(), &home, &repo, SECRET).await;
    let pid = child.id();
    let sc = Sandcastle {
        child,
        addr: format!("127.0.0.1:{port}"),
        http: HttpClient::builder(TokioExecutor::new()).build_http(),
    };
    let t = Instant::now();
    while !sc.ready().await {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "sandcastle not ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let api: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);
    let (idle, _) = memory(pid);

    let open = |range: std::ops::RangeInclusive<u64>| {
        range
            .map(|n| {
                let d = gh.open_pull_request(
                    &repo,
                    PrSpec::new(PrNumber::new(n).unwrap(), support::random_sha(), "feature"),
                );
                (format!("scale-pr-{n}"), d)
            })
            .collect::<Vec<_>>()
    };
    let deliver_all = |batch: Vec<(String, Delivery)>| {
        let sc = &sc;
        async move {
            futures::stream::iter(batch)
                .map(|(name, d)| async move {
                    let (status, _) = sc.deliver(&d).await;
                    assert_eq!(status, 202, "opened recorded");
                    name
                })
                .buffer_unordered(4)
                .collect::<HashSet<String>>()
                .await
        }
    };

    let few = deliver_all(open(1..=5)).await;
    support::all_ready(&api, &few).await;
    let (rss5, _) = memory(pid);
    let (answer5, ready5) = event_cost(&sc, &gh, &repo, &api, rounds).await;

    gh.take_calls();
    let t = Instant::now();
    let many = deliver_all(open(6..=total)).await;
    let delivered = t.elapsed();
    let took = support::all_ready(&api, &many).await;
    let calls = gh.take_calls().len();
    let (rss_many, _) = memory(pid);
    let (mut answer_many, mut ready_many) = event_cost(&sc, &gh, &repo, &api, rounds).await;
    let (rss_after, peak) = memory(pid);
    let live = api.list(&ListParams::default()).await.unwrap().items.len();

    let (mut answer5, mut ready5) = (answer5, ready5);
    println!("sandcastle serve (release), small blueprint (3 objects + 7 guardrails per preview)");
    println!("memory, idle (0 previews):   {idle:.1} MiB RSS");
    println!("memory, 5 previews Ready:    {rss5:.1} MiB RSS");
    println!(
        "memory, {live} previews Ready: {rss_many:.1} MiB RSS, {rss_after:.1} MiB after {rounds} more events, peak {peak:.1} MiB"
    );
    println!(
        "{} opened deliveries answered in {:.1} s; all Ready {:.1} s later",
        total - 5,
        delivered.as_secs_f64(),
        took.as_secs_f64()
    );
    #[allow(clippy::cast_precision_loss)]
    let per_preview = calls as f64 / (total - 5) as f64;
    println!(
        "GitHub calls while opening them: {calls} ({per_preview:.1} per preview, until Ready)"
    );
    println!(
        "synchronize, webhook answer, 5 live:   {}",
        support::summary(&mut answer5)
    );
    println!(
        "synchronize, webhook answer, {live} live: {}",
        support::summary(&mut answer_many)
    );
    println!(
        "synchronize → Ready, 5 live:   {}",
        support::summary(&mut ready5)
    );
    println!(
        "synchronize → Ready, {live} live: {}",
        support::summary(&mut ready_many)
    );
    let _ = std::fs::remove_file(key);
}
