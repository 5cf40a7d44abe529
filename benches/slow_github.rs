//! How long the webhook takes to answer, and how long until the preview is Ready, when GitHub is
//! slow: for each latency (0, 3 and 6 s before every GitHub answer; GitHub gives up on a delivery
//! after 10 s) a fresh Sandcastle with its controller, then the first pull request `opened` after
//! start-up, an `opened` with no `paths` filter, an `opened` under a Blueprint with
//! `paths: ["src/**"]`, a `/preview` comment on a pull request without a preview, a completed
//! check run on the first pull request's commit and an App installation — through real HTTP
//! against the local control plane (run with `scripts/bench-slow-github`).
//! The webhook makes no GitHub call, so every answer should be milliseconds; the preview becomes
//! Ready once GitHub has answered the controller's calls.

mod support;

use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use sandcastle::crd::{Blueprint, Phase, PreviewEnvironment};
use sandcastle::domain::{PrNumber, RepoName, Sha};
use sandcastle_demo::stage::Stage;
use sandcastle_fake_github::{Fault, PrSpec, Role};
use serde_json::json;

/// The longest a preview may take to become Ready here before the bench gives up on it.
const READY_DEADLINE: Duration = Duration::from_secs(300);

fn sha() -> Sha {
    Sha::new(&hex::encode(rand::random::<[u8; 20]>())).unwrap()
}

fn pr(n: u64) -> PrNumber {
    PrNumber::new(n).unwrap()
}

#[tokio::main]
async fn main() {
    let latencies: Vec<u64> = std::env::var("SANDCASTLE_BENCH_LATENCIES")
        .unwrap_or_else(|_| "0,3,6".into())
        .split(',')
        .map(|s| s.trim().parse().expect("latencies are whole seconds"))
        .collect();
    println!(
        "{:<8} {:<34} {:>10} {:>7} {:>10} {:>12}",
        "latency", "case", "answer ms", "status", "answer", "Ready after"
    );
    for latency in latencies {
        run(Duration::from_secs(latency)).await;
    }
}

/// One Sandcastle, GitHub answering after `latency`, every case in turn.
async fn run(latency: Duration) {
    let client = support::client().await;
    let home = support::unique("bench-home");
    let staging = support::unique("bench-staging");
    // Blueprint `paths` (for `acme/paths`, `paths: ["src/**"]`) is there before Sandcastle starts.
    sandcastle::k8s::crd_install::install(&client, Duration::from_secs(30))
        .await
        .expect("CRDs");
    sandcastle_demo::stage::ensure_namespace(&client, &home)
        .await
        .expect("home");
    let blueprints: Api<Blueprint> = Api::namespaced(client.clone(), &home);
    blueprints
        .patch(
            "paths",
            &PatchParams::apply("bench-slow-github").force(),
            &Patch::Apply(json!({
                "apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
                "metadata": {"name": "paths"},
                "spec": {
                    "source": {"namespace": staging},
                    "repositories": ["acme/paths"],
                    "paths": ["src/**"],
                    "host": "{{pr}}-{{repo}}.preview.localhost",
                    "primaryService": "frontend",
                }
            })),
        )
        .await
        .expect("Blueprint paths");
    let stage = Stage::prepare(client.clone(), &home, &staging, 0, true)
        .await
        .expect("stage");
    // GitHub's deliveries reach a replica once its readiness probe passes.
    stage
        .until_ready(Duration::from_secs(60))
        .await
        .expect("Sandcastle ready");
    let with_paths = RepoName::new("acme/paths").unwrap();
    stage.gh.add_repo(1, &with_paths);
    stage.gh.set_role(&stage.repo, "maria", Role::Write);
    let mut draft = PrSpec::new(pr(4), sha(), "d");
    draft.draft = true;
    // On GitHub only: its `opened` is not delivered (a draft gets no preview by itself).
    stage.gh.open_pull_request(&stage.repo, draft);
    stage.gh.fail_next("/**", 1_000_000, Fault::Slow(latency));

    let previews: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);
    let open = |repo: &RepoName, n: u64| {
        stage
            .gh
            .open_pull_request(repo, PrSpec::new(pr(n), sha(), &format!("b{n}")))
    };
    let first = open(&stage.repo, 1);
    let first_sha = Sha::new(
        first.json()["pull_request"]["head"]["sha"]
            .as_str()
            .expect("head sha"),
    )
    .unwrap();
    let cases = [
        ("opened, first after start-up", first, "guestbook-pr-1"),
        ("opened, no paths", open(&stage.repo, 2), "guestbook-pr-2"),
        (
            "opened, paths: [src/**]",
            open(&with_paths, 3),
            "paths-pr-3",
        ),
        (
            "/preview",
            stage.gh.comment(&stage.repo, pr(4), "maria", "/preview"),
            "guestbook-pr-4",
        ),
        (
            "check_run completed",
            stage
                .gh
                .complete_check_run(&stage.repo, &first_sha, "ci", "success"),
            "",
        ),
        ("installation created", installation(&stage.repo), ""),
    ];
    for (name, delivery, preview) in cases {
        let t = Instant::now();
        let (status, body) = stage.deliver(&delivery).await.expect("deliver");
        let answered = t.elapsed();
        // A refused delivery records nothing and GitHub does not redeliver it by itself.
        let ready = if preview.is_empty() {
            "-".to_owned()
        } else if status >= 500 {
            "never".to_owned()
        } else {
            wait_ready(&previews, preview, t)
                .await
                .map_or("never".to_owned(), |d| format!("{:.1} s", d.as_secs_f64()))
        };
        println!(
            "{:<8} {name:<34} {:>10.1} {status:>7} {:>10} {ready:>12}",
            format!("{} s", latency.as_secs()),
            answered.as_secs_f64() * 1000.0,
            body["status"].as_str().unwrap_or_default(),
        );
    }
    stage.running.shutdown().await;
}

/// The `installation` / `created` delivery GitHub sends when the App is installed on the
/// account of `repo` (Sandcastle acts on nothing in it; it must still answer at once).
fn installation(repo: &RepoName) -> sandcastle_fake_github::Delivery {
    let owner = repo.as_str().split('/').next().unwrap_or_default();
    let body = json!({
        "action": "created",
        "installation": {
            "id": 1, "app_id": 1, "app_slug": "sandcastle", "target_type": "Organization",
            "account": {"login": owner, "id": 9_000_001, "type": "Organization"},
            "repository_selection": "selected",
            "permissions": {"contents": "read", "pull_requests": "write", "deployments": "write"},
            "events": ["pull_request", "issue_comment", "check_run"]
        },
        "repositories": [{"id": 9_000_002, "name": repo.as_str().split('/').nth(1),
                          "full_name": repo.as_str(), "private": false}],
        "sender": {"login": "maria", "id": 9_000_003, "type": "User"}
    });
    sandcastle_fake_github::Delivery {
        event: "installation".to_owned(),
        id: hex::encode(rand::random::<[u8; 16]>()),
        body: serde_json::to_vec(&body).unwrap(),
        hook_id: 1,
        app_id: 1,
    }
}

/// How long after `since` the preview `name` was Ready, or `None` past the deadline.
async fn wait_ready(
    previews: &Api<PreviewEnvironment>,
    name: &str,
    since: Instant,
) -> Option<Duration> {
    while since.elapsed() < READY_DEADLINE {
        if let Ok(Some(pe)) = previews.get_opt(name).await
            && pe.status.and_then(|s| s.phase) == Some(Phase::Ready)
        {
            return Some(since.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}
