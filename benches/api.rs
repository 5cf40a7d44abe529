//! The agent API on the local control plane (run with `scripts/bench-api`): how long an agent
//! waits from `POST /previews` to Ready (through the API's own `wait`) side by side with a pull
//! request's `opened` → Ready for the same guestbook Blueprint, and what reads cost with 5 and
//! with 500 live previews — `get`, a page of `list`, the whole list, a filtered list — with the
//! authorization cache warm, the dashboard's pages (`/` with every preview, one preview's page),
//! and a first call with a new token (TokenReview and
//! SubjectAccessReview). Sandcastle runs in this process, as in `sandcastle demo`, with its
//! GitHub stand-in.

mod support;

use support::agent::{Caller, admin, mint};

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use sandcastle::crd::{self, Phase, PreviewEnvironment};
use sandcastle::domain::PrNumber;
use sandcastle_demo::stage::{Stage, ensure_namespace, load};
use sandcastle_fake_github::PrSpec;
use serde_json::{Value, json};

fn apply() -> PatchParams {
    PatchParams::apply("bench").force()
}

/// A pull request's `opened` → Ready (watched), for the guestbook Blueprint.
async fn pr_to_ready(stage: &Stage, api: &Api<PreviewEnvironment>, n: u64) -> Duration {
    let name = format!("guestbook-pr-{n}");
    let mut events = watcher(
        api.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .applied_objects()
    .boxed();
    let d = stage.gh.open_pull_request(
        &stage.repo,
        PrSpec::new(PrNumber::new(n).unwrap(), support::random_sha(), "b"),
    );
    let t = Instant::now();
    let (status, _) = stage.deliver(&d).await.unwrap();
    assert_eq!(status, 202, "opened recorded");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    while let Ok(Some(Ok(pe))) = tokio::time::timeout_at(deadline, events.next()).await {
        if pe.status.and_then(|s| s.phase) == Some(Phase::Ready) {
            return t.elapsed();
        }
    }
    panic!("{name} not Ready within 5 minutes");
}

/// `POST /previews` → Ready as an agent sees it: the create, then the API's `wait`.
async fn api_to_ready(caller: &Caller, name: &str) -> (Duration, Duration) {
    let t = Instant::now();
    let posted = caller.create("guestbook", name).await;
    let (status, answer, _) = caller
        .call(
            reqwest::Method::GET,
            &format!("/api/v1/previews/{name}/wait?timeout=5m"),
            None,
        )
        .await;
    assert_eq!(status, 200, "wait {name}: {answer}");
    assert_eq!(answer["outcome"], "ready", "{name}: {answer}");
    (posted, t.elapsed())
}

/// Read costs with the previews live now: `rounds` of each read.
async fn reads(caller: &Caller, names: &[String], rounds: usize) -> Vec<(String, Vec<Duration>)> {
    let mut out = Vec::new();
    let mut get = Vec::new();
    for name in names.iter().cycle().take(rounds) {
        get.push(caller.get(&format!("/api/v1/previews/{name}")).await);
    }
    out.push(("get one".to_owned(), get));
    let mut page = Vec::new();
    for name in names.iter().cycle().take(rounds) {
        page.push(caller.get(&format!("/previews/{name}")).await);
    }
    out.push(("dashboard: one preview's page (HTML)".to_owned(), page));
    for (label, path) in [
        ("dashboard: / every preview (HTML)", "/".to_owned()),
        ("list, first page (50)", "/api/v1/previews".to_owned()),
        (
            "list, all (limit 500)",
            "/api/v1/previews?limit=500".to_owned(),
        ),
        (
            "list, filtered to one",
            format!(
                "/api/v1/previews?blueprint=tiny&phase=Ready&branch=nothing-{}",
                1
            ),
        ),
    ] {
        let mut took = Vec::new();
        for _ in 0..rounds {
            took.push(caller.get(&path).await);
        }
        out.push((label.to_owned(), took));
    }
    out
}

/// An MCP session on `/mcp` (Streamable HTTP, protocol 2025-11-25), spoken by hand: the
/// official SDKs are Python and TypeScript, whose own overhead this would measure instead.
struct McpSession<'a> {
    caller: &'a Caller,
    session: String,
    next: u64,
}

impl<'a> McpSession<'a> {
    async fn open(caller: &'a Caller) -> Self {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench-api", "version": "1"}}});
        let resp = caller
            .http
            .post(format!("{}/mcp", caller.base))
            .bearer_auth(&caller.token)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .unwrap();
        let session = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let _ = resp.text().await;
        let mut me = Self {
            caller,
            session,
            next: 1,
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let _ = me.post(&note).await;
        me
    }

    async fn post(&mut self, body: &Value) -> String {
        self.caller
            .http
            .post(format!("{}/mcp", self.caller.base))
            .bearer_auth(&self.caller.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", "2025-11-25")
            .json(body)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// One tool call; its time. Panics unless it answered a result that is not an error.
    async fn call(&mut self, tool: &str, arguments: Value) -> Duration {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        let t = Instant::now();
        let text = self.post(&body).await;
        let took = t.elapsed();
        let answer: Value = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .find(|v: &Value| v["id"] == self.next)
            .unwrap_or_else(|| panic!("no answer to {tool}: {text}"));
        assert_eq!(answer["result"]["isError"], false, "{tool}: {answer}");
        took
    }
}

async fn mcp_reads(
    caller: &Caller,
    names: &[String],
    rounds: usize,
) -> Vec<(String, Vec<Duration>)> {
    let mut mcp = McpSession::open(caller).await;
    let mut get = Vec::new();
    for name in names.iter().cycle().take(rounds) {
        get.push(mcp.call("get_preview", json!({"name": name})).await);
    }
    let mut list = Vec::new();
    for _ in 0..rounds {
        list.push(mcp.call("list_previews", json!({})).await);
    }
    vec![
        ("MCP get_preview".to_owned(), get),
        ("MCP list_previews (50)".to_owned(), list),
    ]
}

fn print_reads(live: usize, reads: &mut [(String, Vec<Duration>)]) {
    for (label, took) in reads {
        println!("{live:>3} live, {label:<24} {}", support::summary(took));
    }
}

#[tokio::main]
async fn main() {
    let total = support::arg("--previews", 500);
    let rounds = support::arg("--rounds", 5);
    let reads_each = usize::try_from(support::arg("--reads", 200)).unwrap();
    let client = support::client().await;
    let home = support::unique("api-home");
    let staging = support::unique("api-staging");
    let tiny_staging = support::unique("api-tiny");
    let stage = Stage::prepare(client.clone(), &home, &staging, 0, true)
        .await
        .expect("stage");
    support::ensure_nodes(&client, total + 20).await;
    ensure_namespace(&client, &tiny_staging).await.unwrap();
    load(&client, &tiny_staging, support::SMALL_APP)
        .await
        .unwrap();
    let blueprints: Api<crd::Blueprint> = Api::namespaced(client.clone(), &home);
    let tiny = json!({
        "apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint", "metadata": {"name": "tiny"},
        "spec": {
            "source": {"namespace": tiny_staging},
            "repositories": ["acme/guestbook"],
            "images": [{"repository": "registry.example/web", "tag": "{{shortSha}}"}],
            "maxPreviews": total + 10,
        }
    });
    blueprints
        .patch("tiny", &apply(), &Patch::Apply(&tiny))
        .await
        .unwrap();
    // The demo's guestbook host names the pull request; sandboxes need a host without `{{pr}}`.
    let host = json!({"spec": {"host": "{{preview}}.preview.localhost"}});
    blueprints
        .patch(
            "guestbook",
            &kube::api::PatchParams::default(),
            &Patch::Merge(&host),
        )
        .await
        .unwrap();
    let (sas, token) = admin(&client, &home).await;
    let caller = Caller {
        http: reqwest::Client::new(),
        base: format!("http://{}", stage.addr()),
        token,
    };
    let api: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);

    // Side by side: a pull request's preview, then an agent's sandbox, of the same Blueprint.
    let (mut pr, mut posted, mut sandbox) = (Vec::new(), Vec::new(), Vec::new());
    for n in 1..=rounds {
        pr.push(pr_to_ready(&stage, &api, n).await);
        let (post, ready) = api_to_ready(&caller, &format!("guestbook-api-{n}")).await;
        posted.push(post);
        sandbox.push(ready);
    }

    // Reads with a few sandboxes, then with `total`.
    let names: Vec<String> = (1..=total).map(|i| format!("tiny-{i:04}")).collect();
    let mut creates = Vec::new();
    for name in &names[..5] {
        creates.push(caller.create("tiny", name).await);
    }
    support::all_ready(&api, &names[..5].iter().cloned().collect()).await;
    let live_few = api.list(&Default::default()).await.unwrap().items.len();
    let mut few = reads(&caller, &names[..5], reads_each).await;
    few.extend(mcp_reads(&caller, &names[..5], reads_each).await);

    let t = Instant::now();
    let made: Vec<Duration> = futures::stream::iter(&names[5..])
        .map(|name| caller.create("tiny", name))
        .buffer_unordered(4)
        .collect()
        .await;
    let created_in = t.elapsed();
    creates.extend(made);
    let ready_in = support::all_ready(&api, &names[5..].iter().cloned().collect()).await;
    let live_many = api.list(&Default::default()).await.unwrap().items.len();
    let mut many = reads(&caller, &names, reads_each).await;
    many.extend(mcp_reads(&caller, &names, reads_each).await);

    // A first call with a new token: TokenReview and SubjectAccessReview, not cached.
    let mut cold = Vec::new();
    for name in names.iter().take(20) {
        let fresh = Caller {
            token: mint(&sas).await,
            http: caller.http.clone(),
            base: caller.base.clone(),
        };
        cold.push(fresh.get(&format!("/api/v1/previews/{name}")).await);
    }

    println!("agent API, Sandcastle in process (debug assertions off), local control plane");
    println!(
        "guestbook ({} objects in staging), one after another:",
        stage.objects
    );
    println!(
        "  PR opened → Ready (watched):     {}",
        support::summary(&mut pr)
    );
    println!(
        "  POST /previews answered:         {}",
        support::summary(&mut posted)
    );
    println!(
        "  POST /previews → wait says ready: {}",
        support::summary(&mut sandbox)
    );
    println!(
        "{} tiny sandboxes created through the API (4 at a time) in {:.1} s, all Ready {:.1} s later",
        total - 5,
        created_in.as_secs_f64(),
        ready_in.as_secs_f64()
    );
    println!(
        "  POST /previews answered:         {}",
        support::summary(&mut creates)
    );
    print_reads(live_few, &mut few);
    print_reads(live_many, &mut many);
    println!(
        "{live_many:>3} live, get one, new token       {}",
        support::summary(&mut cold)
    );
}
