//! Webhook latency: verify + parse + durable write of `pull_request opened` deliveries, measured
//! over real HTTP against the local control plane (run with `scripts/bench-webhook`). Reports
//! p50/p90/p99 one at a time and paced at 200 deliveries/s, and the cost of verify + parse alone.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use sandcastle::domain::Secret;
use sandcastle::domain::{PrNumber, Sha};
use sandcastle_demo::stage::{SECRET, Stage};
use sandcastle_fake_github::PrSpec;

const DELIVERIES: u64 = 200;

fn sha() -> Sha {
    Sha::new(&hex::encode(rand::random::<[u8; 20]>())).unwrap()
}

#[tokio::main]
async fn main() {
    let client = support::client().await;
    let home = support::unique("bench-home");
    let staging = support::unique("bench-staging");
    // The controller is off: this measures the webhook's own path, up to the durable write.
    let stage = Arc::new(
        Stage::prepare(client, &home, &staging, 0, false)
            .await
            .expect("stage"),
    );

    // Verify + parse alone, in-process, on the real captured `opened` delivery (the payload
    // scripts/bench-webhook also gives @octokit/webhooks, when Node.js is there).
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/github/pull_request.opened.json"
    ))
    .unwrap();
    let secrets = [Secret::new(SECRET)];
    let header = sandcastle::github::verify::sign(&secrets[0], &body);
    let rounds = 20_000;
    let t = Instant::now();
    for _ in 0..rounds {
        sandcastle::github::verify::verify_signature(&secrets, Some(&header), &body).unwrap();
        std::hint::black_box(sandcastle::github::event::parse("pull_request", &body).unwrap());
    }
    let per = t.elapsed() / rounds;
    println!(
        "verify + parse ({} byte payload): {:.1} µs per delivery",
        body.len(),
        per.as_secs_f64() * 1e6
    );
    let t = Instant::now();
    for _ in 0..rounds {
        sandcastle::github::verify::verify_signature(&secrets, Some(&header), &body).unwrap();
    }
    println!(
        "  of which verify:  {:.1} µs",
        (t.elapsed() / rounds).as_secs_f64() * 1e6
    );

    let make = |from: u64| {
        (from..from + DELIVERIES)
            .map(|n| {
                stage.gh.open_pull_request(
                    &stage.repo,
                    PrSpec::new(PrNumber::new(n).unwrap(), sha(), "b"),
                )
            })
            .collect::<Vec<_>>()
    };

    // Warm up connections and caches.
    for d in make(10_000).iter().take(20) {
        stage.deliver(d).await.unwrap();
    }

    let mut one_at_a_time = Vec::new();
    for d in &make(1) {
        let t = Instant::now();
        let (status, _) = stage.deliver(d).await.unwrap();
        one_at_a_time.push(t.elapsed());
        assert_eq!(status, 202);
    }
    println!(
        "one at a time:        {}",
        support::summary(&mut one_at_a_time)
    );

    let deliveries = make(1_000);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (i, d) in deliveries.into_iter().enumerate() {
        let stage = stage.clone();
        let at = start + Duration::from_millis(5 * i as u64);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            let t = Instant::now();
            let (status, _) = stage.deliver(&d).await.unwrap();
            assert_eq!(status, 202);
            t.elapsed()
        }));
    }
    let mut paced = Vec::new();
    for t in tasks {
        paced.push(t.await.unwrap());
    }
    let wall = start.elapsed();
    println!(
        "paced at 200/s:       {}  ({} deliveries in {:.2} s)",
        support::summary(&mut paced),
        DELIVERIES,
        wall.as_secs_f64()
    );
}
