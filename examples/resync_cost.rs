//! What one catch-up resync costs: GitHub API calls and wall time for 50 repositories with 500
//! open pull requests, on the GitHub stand-in and a real control plane.
//!
//! Run (with a control plane, e.g. `eval "$(scripts/kube-harness start)"`):
//! `cargo run --example resync_cost [-- --repos 50 --prs 500]`
//!
//! Rounds measured: the start-up round that finds every preview missing and creates it; a
//! steady round at start-up (every preview Ready on GitHub, every status checked, five of them
//! showing something else on GitHub); a steady
//! periodic round (a sixth of the statuses checked); and a round after 50 pull requests closed
//! while their deliveries were lost.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use sandcastle::controller::{Context, Settings, resync};
use sandcastle::crd::{Blueprint, PreviewEnvironment};
use sandcastle::domain::Secret;
use sandcastle::domain::clock::Clock;
use sandcastle::domain::{PrNumber, RepoName, Sha};
use sandcastle::github::client::{
    ClientSettings, DeploymentState, GitHubApp, NewDeployment, NewStatus,
};
use sandcastle_fake_github::{FakeConfig, FakeGitHub, PrSpec, TEST_APP_PRIVATE_KEY_PEM};
use serde_json::json;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sha(i: usize) -> Sha {
    Sha::new(&format!("{i:040x}")).unwrap()
}

async fn round(ctx: &Context, gh: &FakeGitHub, n: u64, label: &str) {
    gh.take_calls();
    let started = Instant::now();
    let report = resync::run(ctx, n).await.expect("resync runs");
    let elapsed = started.elapsed();
    let calls = gh.take_calls();
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    for c in &calls {
        let path = c.path.split('?').next().unwrap_or_default();
        let kind = if path.starts_with("/app/installations/") {
            "POST access_tokens".to_owned()
        } else if path.ends_with("/statuses") {
            format!("{} deployment statuses", c.method)
        } else if path.contains("/pulls/") {
            format!("{} one pull request", c.method)
        } else if path.ends_with("/pulls") {
            format!("{} open pull requests (pages)", c.method)
        } else {
            format!("{} {path}", c.method)
        };
        *by_kind.entry(kind).or_default() += 1;
    }
    println!(
        "\n{label}: {} GitHub calls, {:.2} s",
        calls.len(),
        elapsed.as_secs_f64()
    );
    for (k, v) in by_kind {
        println!("  {v:>5}  {k}");
    }
    println!(
        "  report: created {} moved {} torn down {} stale {} statuses checked {} fixed {} ({} repos, {} open PRs)",
        report.created,
        report.moved,
        report.torn_down,
        report.stale,
        report.statuses_checked,
        report.statuses_fixed,
        report.repos,
        report.open_pulls
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let repos = arg("--repos", 50);
    let prs = arg("--prs", 500);
    let config = kube::Config::infer().await?;
    let client = Client::try_from(config)?;
    sandcastle::k8s::crd_install::install(&client, Duration::from_secs(30)).await?;
    let home = format!("bench-resync-{:06}", rand::random::<u32>() % 1_000_000);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": home}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;

    let mut fake = FakeConfig::test_app();
    fake.rate_limit = 1_000_000;
    let gh = FakeGitHub::start(fake).await?;
    let installation = 4242;
    let names: Vec<RepoName> = (0..repos)
        .map(|i| RepoName::new(&format!("acme/svc{i:02}")).unwrap())
        .collect();
    for r in &names {
        gh.add_repo(installation, r);
    }
    for i in 0..prs {
        let repo = &names[i % repos];
        let n = PrNumber::new(u64::try_from(i / repos + 1)?)?;
        let _ = gh.open_pull_request(repo, PrSpec::new(n, sha(i + 1), &format!("agent/{i}")));
    }
    let bp = json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
        "metadata": {"name": "svc"},
        "spec": {"source": {"namespace": "svc-staging"}, "repositories": ["acme/*"]}});
    Api::<Blueprint>::namespaced(client.clone(), &home)
        .patch(
            "svc",
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&bp),
        )
        .await?;

    let github = GitHubApp::new(
        gh.app_id(),
        &Secret::new(TEST_APP_PRIVATE_KEY_PEM),
        gh.url(),
        ClientSettings::default(),
    )?;
    let mut settings = Settings::for_namespace(&home);
    settings.resync = true;
    let ctx = Context::new(client.clone(), github.clone(), settings, Clock::system());
    println!("{repos} repositories, {prs} open pull requests, one installation");

    round(&ctx, &gh, 1, "start-up round, every preview missing").await;

    // Every preview deployed and reported, as the controller would leave them.
    let api: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);
    let inst = github.installation(installation);
    for pe in api.list(&ListParams::default()).await? {
        let repo = RepoName::new(&pe.spec.repository)?;
        let d = inst
            .create_deployment(
                &repo,
                &NewDeployment {
                    ref_: pe.spec.sha.clone(),
                    environment: format!("preview/{}", pe.name_any()),
                    description: None,
                    payload: json!({}),
                    transient_environment: true,
                    production_environment: false,
                    auto_merge: false,
                    required_contexts: Vec::new(),
                },
            )
            .await?;
        inst.create_deployment_status(&repo, d.id, &NewStatus::new(DeploymentState::Success))
            .await?;
        let status = json!({"status": {"phase": "Ready", "githubDeploymentId": d.id,
            "githubDeploymentSha": pe.spec.sha, "githubReported": "success"}});
        api.patch_status(
            &pe.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await?;
    }

    // Five deployments show something else than the preview is (posted by someone else).
    for pe in api.list(&ListParams::default()).await?.items.iter().take(5) {
        let repo = RepoName::new(&pe.spec.repository)?;
        let id = pe
            .status
            .as_ref()
            .and_then(|s| s.github_deployment_id)
            .unwrap_or(0);
        inst.create_deployment_status(&repo, id, &NewStatus::new(DeploymentState::Failure))
            .await?;
    }

    round(
        &ctx,
        &gh,
        0,
        "steady, at start-up (all statuses checked, 5 disagree)",
    )
    .await;
    round(
        &ctx,
        &gh,
        1,
        "steady, periodic (a sixth of statuses checked)",
    )
    .await;
    for i in 0..50.min(prs) {
        let repo = &names[i % repos];
        let n = PrNumber::new(u64::try_from(i / repos + 1)?)?;
        let _ = gh.close(repo, n, i % 2 == 0);
    }
    round(
        &ctx,
        &gh,
        2,
        "periodic, after 50 pull requests closed unseen",
    )
    .await;

    namespaces
        .delete(&home, &DeleteParams::background())
        .await?;
    Ok(())
}
