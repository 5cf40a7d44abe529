//! How long the webhook takes to answer when GitHub is slow: every GitHub call the delivery's
//! handling makes answers after 3 s (GitHub gives up on a delivery after 10 s). Measures a
//! pull request `opened` (reads `.github/sandcastle.yml`, bounded at 4 s), a `/preview` comment
//! on a pull request without a preview and a `/preview stop` on one with a preview (recorded,
//! carried out by the controller, which is off here), through real HTTP against the local
//! control plane (run with `scripts/bench-slow-github`).

mod support;

use std::time::{Duration, Instant};

use sandcastle::domain::{PrNumber, Sha};
use sandcastle_demo::stage::Stage;
use sandcastle_fake_github::{Fault, PrSpec, Role};

const SLOW: Duration = Duration::from_secs(3);

fn sha() -> Sha {
    Sha::new(&hex::encode(rand::random::<[u8; 20]>())).unwrap()
}

fn pr(n: u64) -> PrNumber {
    PrNumber::new(n).unwrap()
}

#[tokio::main]
async fn main() {
    let client = support::client().await;
    let home = support::unique("bench-home");
    let staging = support::unique("bench-staging");
    // The controller is off: only the webhook's own calls reach GitHub.
    let stage = Stage::prepare(client, &home, &staging, 0, false)
        .await
        .expect("stage");
    stage.gh.set_role(&stage.repo, "maria", Role::Write);
    // PR 2 has a preview already (delivered while GitHub is fast).
    let opened = stage
        .gh
        .open_pull_request(&stage.repo, PrSpec::new(pr(2), sha(), "b"));
    assert_eq!(stage.deliver(&opened).await.unwrap().0, 202);
    let mut draft = PrSpec::new(pr(3), sha(), "c");
    draft.draft = true;
    let draft_opened = stage.gh.open_pull_request(&stage.repo, draft);
    assert_eq!(stage.deliver(&draft_opened).await.unwrap().0, 202);

    stage.gh.fail_next("/**", 10_000, Fault::Slow(SLOW));
    let cases = [
        (
            "pull_request opened",
            stage
                .gh
                .open_pull_request(&stage.repo, PrSpec::new(pr(1), sha(), "a")),
        ),
        (
            "/preview on a PR without preview",
            stage.gh.comment(&stage.repo, pr(3), "maria", "/preview"),
        ),
        (
            "/preview stop",
            stage
                .gh
                .comment(&stage.repo, pr(2), "maria", "/preview stop"),
        ),
    ];
    println!("GitHub answering every call after {} s:", SLOW.as_secs());
    for (name, delivery) in cases {
        let calls_before = stage.gh.calls().len();
        let t = Instant::now();
        let (status, body) = stage.deliver(&delivery).await.unwrap();
        let took = t.elapsed();
        let calls = stage.gh.calls().len() - calls_before;
        println!(
            "  {name:<36} answered {status} after {:>8.1} ms ({calls} GitHub calls before the answer); {}",
            took.as_secs_f64() * 1000.0,
            body["status"].as_str().unwrap_or_default()
        );
    }
}
