//! What the gate costs a request (run with `scripts/bench-gate`): on the real tier, one
//! signed-in-only preview of the test app, and beside its gated Ingress a plain one to the same
//! Service (the app alone through Traefik). wrk loads each way in turn, rounds alternating, on the
//! same pod through the same Traefik: the app alone; through the gate with the preview's header
//! secret, with the preview's token (a TokenReview answer reused), and with the cookie a share
//! link gives (a sealed pass opened and the link looked up in the watch cache). Each run reports
//! requests per second and wrk's p50 and p99; the gate's added latency is the difference to the
//! app alone in the same round. No request after sign-in asks GitHub: the stand-in counts the
//! calls made during the runs.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use sandcastle::agent::GateKeys;
use sandcastle::crd::{Phase, PreviewEnvironment, ShareLink};
use sandcastle::domain::{PrNumber, Secret, Sha};
use sandcastle_demo::real::RealTier;
use sandcastle_demo::stage::{SECRET, Stage};
use sandcastle_fake_github::PrSpec;
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(300);

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        eprintln!("{name} is not set: run this benchmark through scripts/bench-gate");
        std::process::exit(2);
    })
}

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One wrk run's figures, with the CPU Sandcastle (this process) and Traefik spent per request.
#[derive(Debug, Clone, Copy)]
struct Run {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: u64,
    sandcastle_us: f64,
    traefik_us: f64,
}

/// CPU seconds (user + system) process `pid` has used, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of stat (utime, stime), counted from the state (field 3) here.
    (ticks(11) + ticks(12)) / 100.0
}

/// The pid of the real tier's Traefik (a process named `traefik`).
fn traefik_pid() -> String {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|p| p.chars().all(|c| c.is_ascii_digit()))
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "traefik")
        })
        .expect("the real tier's Traefik runs")
}

/// A wrk duration (`1.23ms`, `850.00us`, `1.2s`) in milliseconds.
fn millis(text: &str) -> f64 {
    let (number, unit) = text.split_at(
        text.find(|c: char| c.is_ascii_alphabetic())
            .unwrap_or(text.len()),
    );
    let n: f64 = number.parse().unwrap_or(f64::NAN);
    match unit {
        "us" => n / 1000.0,
        "ms" => n,
        "s" => n * 1000.0,
        "m" => n * 60_000.0,
        _ => f64::NAN,
    }
}

/// Load `host`'s `/healthz` through Traefik with wrk (`--latency`), sending `headers`.
fn wrk(tier: &RealTier, host: &str, headers: &[String], connections: u64, seconds: u64) -> Run {
    let mut cmd = Command::new("wrk");
    cmd.args([
        "-t1",
        &format!("-c{connections}"),
        &format!("-d{seconds}s"),
        "--latency",
    ])
    .args(["-H", &format!("Host: {host}")]);
    for h in headers {
        cmd.args(["-H", h]);
    }
    let traefik = traefik_pid();
    let (own0, traefik0) = (cpu_seconds("self"), cpu_seconds(&traefik));
    let out = cmd
        .arg(format!("http://{}/healthz", tier.ingress))
        .output()
        .expect("wrk runs (scripts/bench-gate installs it)");
    let (own, traefik) = (cpu_seconds("self") - own0, cpu_seconds(&traefik) - traefik0);
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix))
            .map(|r| r.split_whitespace().next().unwrap_or_default().to_owned())
            .unwrap_or_else(|| panic!("no {prefix:?} in wrk's output:\n{text}"))
    };
    let errors = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Non-2xx or 3xx responses:"))
        .map_or(0, |n| n.trim().parse().unwrap_or(0));
    let rps: f64 = field("Requests/sec:").parse().unwrap_or(0.0);
    let requests = rps * seconds as f64;
    Run {
        rps,
        p50_ms: millis(&field("50%")),
        p99_ms: millis(&field("99%")),
        errors,
        sandcastle_us: own * 1e6 / requests,
        traefik_us: traefik * 1e6 / requests,
    }
}

/// A token for the preview's `preview-agent` ServiceAccount, as the API mints one.
async fn preview_token(client: &kube::Client, ns: &str) -> String {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    sas.create_token_request("preview-agent", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .and_then(|s| s.token)
        .unwrap()
}

/// A share link of `pe` (written into its spec as the API writes it), opened through Traefik:
/// the gate's cookie it gives.
async fn share_cookie(
    previews: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    tier: &RealTier,
    host: &str,
) -> String {
    let name = pe.metadata.name.clone().unwrap();
    let now = jiff::Timestamp::now();
    let expires = now + jiff::SignedDuration::from_hours(2);
    let link = ShareLink {
        id: "00000000000000be".to_owned(),
        label: Some("bench".to_owned()),
        created_by: "bench".to_owned(),
        created_at: Time(now),
        expires_at: Time(expires),
    };
    let patch = json!({"spec": {"shares": [link]}});
    previews
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let pe = previews.get(&name).await.unwrap();
    let keys = GateKeys::new(&Secret::new(SECRET));
    let token = keys.share_token(&pe, &link.id, expires.as_second() as u64);
    let url = format!("http://{}/.sandcastle/share/{token}", tier.ingress);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let start = Instant::now();
    loop {
        let resp = http.get(&url).header("host", host).send().await.unwrap();
        if let Some(set) = resp.headers().get("set-cookie") {
            let set = set.to_str().unwrap();
            return set.split(';').next().unwrap().to_owned();
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the share link gave no cookie: {}",
            resp.status()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The plain Ingress beside the preview's: the app alone through Traefik, no gate.
async fn plain_ingress(client: &kube::Client, ns: &str, host: &str) {
    let ing = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "bench-plain"},
        "spec": {"rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "app", "port": {"number": 80}}}}]}}]}});
    Api::<k8s_openapi::api::networking::v1::Ingress>::namespaced(client.clone(), ns)
        .patch(
            "bench-plain",
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&ing),
        )
        .await
        .unwrap();
}

/// Wait until `host` answers 200 through Traefik with `headers` (routes are rebuilt every 2 s).
async fn until_open(tier: &RealTier, host: &str, headers: &[(String, String)]) {
    let http = reqwest::Client::new();
    let start = Instant::now();
    loop {
        let mut req = http
            .get(format!("http://{}/healthz", tier.ingress))
            .header("host", host);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        if req.send().await.is_ok_and(|r| r.status() == 200) {
            return;
        }
        assert!(start.elapsed() < DEADLINE, "{host} never answered 200");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn split(h: &str) -> (String, String) {
    let (k, v) = h.split_once(": ").unwrap();
    (k.to_owned(), v.to_owned())
}

#[tokio::main]
async fn main() {
    let rounds = knob("SANDCASTLE_BENCH_ROUNDS", 2);
    let seconds = knob("SANDCASTLE_BENCH_SECONDS", 8);
    let connections: Vec<u64> = std::env::var("SANDCASTLE_BENCH_CONNECTIONS")
        .unwrap_or_else(|_| "1,4,16".to_owned())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    let tier = RealTier {
        ingress: env("SANDCASTLE_INGRESS_HTTP"),
        harness_dir: env("SANDCASTLE_HARNESS_DIR"),
    };
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let client = support::client().await;
    let home = support::unique("bench-home");
    let staging = support::unique("bench-staging");
    let stage = Stage::prepare_real_gated(client.clone(), &home, &staging, 0, tier.clone())
        .await
        .expect("the real stage");
    let previews: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);

    let commit = Sha::new(&hex::encode(rand::random::<[u8; 20]>())).unwrap();
    tier.image_for(&root, &commit).unwrap();
    let pr = PrSpec::new(PrNumber::new(1).unwrap(), commit.clone(), "b1");
    let (status, _) = stage
        .deliver(&stage.gh.open_pull_request(&stage.repo, pr))
        .await
        .unwrap();
    assert!(status < 300, "the webhook answered {status}");
    let name = format!("{}-pr-1", stage.blueprint);
    let start = Instant::now();
    let pe = loop {
        let ready =
            |p: &PreviewEnvironment| p.status.as_ref().and_then(|s| s.phase) == Some(Phase::Ready);
        if let Some(pe) = previews.get_opt(&name).await.unwrap().filter(ready) {
            break pe;
        }
        assert!(start.elapsed() < DEADLINE, "{name} was not Ready");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let ns = pe
        .status
        .as_ref()
        .and_then(|s| s.namespace.clone())
        .unwrap();
    let host = format!("1-{}.preview.localhost", stage.repo.name());
    let plain = format!("plain-1-{}.preview.localhost", stage.repo.name());
    plain_ingress(&client, &ns, &plain).await;

    let keys = GateKeys::new(&Secret::new(SECRET));
    let secret = format!(
        "X-Sandcastle-Preview-Secret: {}",
        keys.header_secret(&pe).expose()
    );
    let token = format!(
        "Authorization: Bearer {}",
        preview_token(&client, &ns).await
    );
    let cookie = format!(
        "Cookie: {}",
        share_cookie(&previews, &pe, &tier, &host).await
    );
    until_open(&tier, &plain, &[]).await;
    for h in [&secret, &token, &cookie] {
        until_open(&tier, &host, &[split(h)]).await;
    }
    let ways: [(&str, &str, Vec<String>); 4] = [
        ("the app alone", plain.as_str(), Vec::new()),
        ("gate: header secret", host.as_str(), vec![secret.clone()]),
        ("gate: preview token", host.as_str(), vec![token.clone()]),
        (
            "gate: share-link cookie",
            host.as_str(),
            vec![cookie.clone()],
        ),
    ];
    let github_before = stage.gh.calls().len();
    println!(
        "wrk -t1 -d{seconds}s --latency, GET /healthz through Traefik; {rounds} rounds, ways alternating"
    );
    for c in &connections {
        for round in 1..=rounds {
            let mut alone: Option<Run> = None;
            for (way, h, headers) in &ways {
                let run = wrk(&tier, h, headers, *c, seconds);
                let base = *alone.get_or_insert(run);
                println!(
                    "c={c} round {round}: {way:<24} {:>6.0} req/s  p50 {:>6.3} ms  p99 {:>6.3} ms  \
                     ({:+.3} / {:+.3} ms)  CPU/request: Sandcastle {:>5.1} µs, Traefik {:>5.1} µs  \
                     non-2xx {}",
                    run.rps,
                    run.p50_ms,
                    run.p99_ms,
                    run.p50_ms - base.p50_ms,
                    run.p99_ms - base.p99_ms,
                    run.sandcastle_us,
                    run.traefik_us,
                    run.errors
                );
            }
        }
    }
    let github_during = stage.gh.calls().len() - github_before;
    println!("GitHub calls during the runs: {github_during}");
    stage.running.shutdown().await;
}
