//! The GitHub App client against the GitHub stand-in, over real HTTP: token minting and caching,
//! JWT checks, retries, rate limits, pagination, the typed operations, the deliveries the
//! stand-in sends, and the stand-in's own unexpected-call checker.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use sandcastle::domain::Secret;
use sandcastle::domain::{PrNumber, RepoName, Sha};
use sandcastle::github::client::{
    CheckConclusion, CheckStatus, ClientSettings, DeploymentState, GitHubApp, GitHubError,
    Installation, NewDeployment, NewStatus, Permission, PullState, Reaction,
};
use sandcastle::metrics::Metrics;
use sandcastle_fake_github::{
    CallAuth, FakeConfig, FakeGitHub, Fault, PrSpec, Role, TEST_APP_ID, TEST_APP_PRIVATE_KEY_PEM,
    sign,
};
use serde_json::json;

const INST: u64 = 1;
const OTHER_KEY: &str = include_str!("../fixtures/keys/other-app.pem");
const TOKENS: &str = "POST /app/installations/*/access_tokens";

fn repo() -> RepoName {
    RepoName::new("acme/shop").unwrap()
}

fn pr(n: u64) -> PrNumber {
    PrNumber::new(n).unwrap()
}

fn sha(c: char) -> Sha {
    Sha::new(&c.to_string().repeat(40)).unwrap()
}

fn fast() -> ClientSettings {
    ClientSettings {
        request_timeout: Duration::from_secs(5),
        max_retries: 4,
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(40),
        max_wait: Duration::from_secs(5),
        ..ClientSettings::default()
    }
}

struct Env {
    fake: FakeGitHub,
    app: GitHubApp,
    gh: Installation,
    repo: RepoName,
}

/// acme/shop in installation 1, with PR #7 (`feature` at aaaa…) open.
async fn env_with(config: FakeConfig, settings: ClientSettings) -> Env {
    let fake = FakeGitHub::start(config).await.unwrap();
    fake.add_repo(INST, &repo());
    fake.open_pull_request(&repo(), PrSpec::new(pr(7), sha('a'), "feature"));
    let key = Secret::new(TEST_APP_PRIVATE_KEY_PEM);
    let app = GitHubApp::new(TEST_APP_ID, &key, fake.url(), settings).unwrap();
    let gh = app.installation(INST);
    Env {
        fake,
        app,
        gh,
        repo: repo(),
    }
}

/// Like `env_with`, with token minting allowed (not counted as unexpected).
async fn env() -> Env {
    let e = env_with(FakeConfig::test_app(), fast()).await;
    e.fake.allow(TOKENS);
    e
}

fn statuses(calls: &[sandcastle_fake_github::Call]) -> Vec<u16> {
    calls.iter().map(|c| c.status).collect()
}

fn preview_deployment(ref_: &str) -> NewDeployment {
    NewDeployment {
        ref_: ref_.to_owned(),
        environment: "preview/shop-pr-7".to_owned(),
        description: Some("Preview of #7".to_owned()),
        payload: json!({"pr": 7}),
        transient_environment: true,
        production_environment: false,
        auto_merge: false,
        required_contexts: Vec::new(),
    }
}

// --- authentication ----------------------------------------------------------------------------

#[tokio::test]
async fn token_is_minted_once_and_reused_across_calls_and_clients() {
    let e = env_with(FakeConfig::test_app(), fast()).await;
    e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    e.gh.list_issue_comments(&e.repo, pr(7)).await.unwrap();
    // a second handle on the same installation shares the token cache
    e.app
        .installation(INST)
        .collaborator_permission(&e.repo, "nobody")
        .await
        .unwrap();

    let mints = e.fake.check(TOKENS);
    assert_eq!(mints.len(), 1);
    assert_eq!(mints[0].auth, CallAuth::Jwt { valid: true });
    assert_eq!(mints[0].status, 201);
    let used: Vec<CallAuth> = e.fake.check("/repos/**").iter().map(|c| c.auth).collect();
    let first = CallAuth::Installation {
        installation: INST,
        token: 1,
    };
    assert_eq!(used, vec![first; 3]);
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn token_is_refreshed_once_within_five_minutes_of_expiry() {
    // Tokens that expire in 4 min 59 s are inside the 5-minute buffer from birth: every call must
    // mint a fresh one. Tokens that live 5 min 30 s are outside it: they are reused.
    let config = FakeConfig {
        token_lifetime: Duration::from_secs(5 * 60 - 1),
        ..FakeConfig::test_app()
    };
    let e = env_with(config, fast()).await;
    e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    e.fake.set_token_lifetime(Duration::from_secs(5 * 60 + 30));
    e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    e.gh.get_pull(&e.repo, pr(7)).await.unwrap();

    assert_eq!(e.fake.check(TOKENS).len(), 3);
    let tokens: Vec<CallAuth> = e
        .fake
        .check("GET /repos/acme/shop/pulls/7")
        .iter()
        .map(|c| c.auth)
        .collect();
    let t = |token| CallAuth::Installation {
        installation: INST,
        token,
    };
    assert_eq!(tokens, vec![t(1), t(2), t(3), t(3)]);
    assert_eq!(e.fake.tokens_issued(), 3);
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn jwt_signed_by_another_key_is_refused() {
    let e = env().await;
    let impostor =
        GitHubApp::new(TEST_APP_ID, &Secret::new(OTHER_KEY), e.fake.url(), fast()).unwrap();

    let err = impostor
        .installation(INST)
        .get_pull(&e.repo, pr(7))
        .await
        .unwrap_err();
    assert!(
        matches!(err, GitHubError::CredentialsRejected(_)),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert!(!format!("{err} {err:?}").contains("PRIVATE KEY"));
    let err = impostor.list_installations().await.unwrap_err();
    assert!(
        matches!(err, GitHubError::CredentialsRejected(_)),
        "{err:?}"
    );

    let mints = e.fake.check(TOKENS);
    assert_eq!(mints.len(), 1);
    assert_eq!(mints[0].auth, CallAuth::Jwt { valid: false });
    assert_eq!(mints[0].status, 401);
    assert_eq!(statuses(&e.fake.check("GET /app/installations")), vec![401]);
    // no repository call was attempted without a token
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn the_app_lists_its_installations_and_their_repositories() {
    let e = env().await;
    e.fake.add_repo(2, &RepoName::new("globex/api").unwrap());
    let installations = e.app.list_installations().await.unwrap();
    let ids: Vec<(u64, String)> = installations
        .iter()
        .map(|i| (i.id, i.account.login.clone()))
        .collect();
    assert_eq!(ids, vec![(1, "acme".to_owned()), (2, "globex".to_owned())]);
    assert_eq!(e.gh.list_installation_repos().await.unwrap(), vec![repo()]);
    // a repository of another installation is invisible
    let err =
        e.gh.get_pull(&RepoName::new("globex/api").unwrap(), pr(1))
            .await
            .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    e.fake.expect_only(&[
        "GET /app/installations",
        "GET /installation/repositories",
        "GET /repos/globex/api/pulls/1",
    ]);
}

// --- retries and rate limits -------------------------------------------------------------------

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let e = env().await;
    e.fake
        .fail_next("GET /repos/acme/shop/pulls/7", 2, Fault::ServerError(500));
    let pull = e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    assert_eq!(pull.head.sha, sha('a'));
    assert_eq!(
        statuses(&e.fake.check("GET /repos/acme/shop/pulls/7")),
        vec![500, 500, 200]
    );
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn retries_stop_after_the_configured_count() {
    let e = env().await;
    e.fake
        .fail_next("GET /repos/acme/shop/pulls/7", 10, Fault::ServerError(502));
    let err = e.gh.get_pull(&e.repo, pr(7)).await.unwrap_err();
    assert!(
        matches!(err, GitHubError::Status { status, .. } if status.as_u16() == 502),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert_eq!(e.fake.check("GET /repos/acme/shop/pulls/7").len(), 5);
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn dropped_connections_and_timeouts_are_retried() {
    let settings = ClientSettings {
        request_timeout: Duration::from_millis(300),
        ..fast()
    };
    let e = env_with(FakeConfig::test_app(), settings).await;
    e.fake.allow(TOKENS);
    e.fake
        .fail_next("GET /repos/acme/shop/pulls/7", 2, Fault::Down);
    e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    assert_eq!(
        statuses(&e.fake.check("GET /repos/acme/shop/pulls/7")),
        vec![0, 0, 200]
    );

    e.fake.fail_next(
        "GET /repos/acme/shop/issues/7/comments",
        1,
        Fault::Slow(Duration::from_secs(3)),
    );
    e.gh.list_issue_comments(&e.repo, pr(7)).await.unwrap();
    assert_eq!(
        e.fake.check("GET /repos/acme/shop/issues/7/comments").len(),
        2
    );
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn a_call_that_always_times_out_fails_with_timeout() {
    let settings = ClientSettings {
        request_timeout: Duration::from_millis(200),
        max_retries: 1,
        ..fast()
    };
    let e = env_with(FakeConfig::test_app(), settings).await;
    e.fake.allow(TOKENS);
    e.fake.fail_next(
        "GET /repos/acme/shop/pulls/7",
        2,
        Fault::Slow(Duration::from_secs(3)),
    );
    let err = e.gh.get_pull(&e.repo, pr(7)).await.unwrap_err();
    assert!(matches!(err, GitHubError::Timeout), "{err:?}");
    assert_eq!(e.fake.check("GET /repos/acme/shop/pulls/7").len(), 2);
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn secondary_rate_limit_retry_after_is_honoured() {
    let e = env().await;
    e.fake.fail_next(
        "GET /repos/acme/shop/pulls/7",
        1,
        Fault::SecondaryRateLimit {
            retry_after_secs: 1,
        },
    );
    e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    let calls = e.fake.check("GET /repos/acme/shop/pulls/7");
    assert_eq!(statuses(&calls), vec![403, 200]);
    let waited = calls[1].at.duration_since(calls[0].at);
    assert!(waited >= Duration::from_secs(1), "waited only {waited:?}");
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn primary_rate_limit_beyond_max_wait_is_handed_back() {
    let e = env().await;
    e.fake.fail_next(
        "GET /repos/acme/shop/pulls/7",
        1,
        Fault::PrimaryRateLimit {
            reset_in_secs: 3600,
        },
    );
    let before = Timestamp::now();
    let err = e.gh.get_pull(&e.repo, pr(7)).await.unwrap_err();
    let GitHubError::RateLimited { retry_at } = err else {
        panic!("expected RateLimited, got {err:?}");
    };
    let ahead = retry_at.duration_since(before);
    assert!(
        ahead >= SignedDuration::from_secs(3590) && ahead <= SignedDuration::from_secs(3610),
        "{ahead:?}"
    );
    // no retry: the caller requeues instead of blocking
    assert_eq!(
        statuses(&e.fake.check("GET /repos/acme/shop/pulls/7")),
        vec![403]
    );
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn requests_and_rate_limit_waits_are_counted() {
    let e = env().await;
    let metrics = Metrics::default();
    let gh = e
        .app
        .clone()
        .with_metrics(metrics.github.clone())
        .installation(INST);
    e.fake.fail_next(
        "GET /repos/acme/shop/pulls/7",
        1,
        Fault::SecondaryRateLimit {
            retry_after_secs: 1,
        },
    );
    e.fake.fail_next(
        "GET /repos/acme/shop/issues/7/comments",
        1,
        Fault::ServerError(500),
    );
    gh.get_pull(&e.repo, pr(7)).await.unwrap();
    gh.list_issue_comments(&e.repo, pr(7)).await.unwrap();
    assert_eq!(
        statuses(&e.fake.check("GET /repos/acme/shop/pulls/7")),
        vec![403, 200]
    );
    assert_eq!(
        statuses(&e.fake.check("GET /repos/acme/shop/issues/7/comments")),
        vec![500, 200]
    );
    e.fake.check(TOKENS);
    e.fake.assert_all_checked();

    let (_, text) = metrics.encode(None).unwrap();
    let mut samples: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("sandcastle_github_"))
        .collect();
    samples.sort_unstable();
    // Minting the installation token succeeded: octocrab's own request is not counted.
    assert_eq!(
        samples,
        [
            "sandcastle_github_rate_limit_waits_total 1",
            r#"sandcastle_github_requests_total{method="GET",status="200"} 2"#,
            r#"sandcastle_github_requests_total{method="GET",status="403"} 1"#,
            r#"sandcastle_github_requests_total{method="GET",status="500"} 1"#,
        ],
        "{text}"
    );
}

#[tokio::test]
async fn the_installation_budget_is_tracked_and_enforced() {
    let e = env().await;
    e.fake.set_rate_limit(INST, 2);
    let first = e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    assert_eq!(e.gh.rate_limit_remaining(), Some(1));
    // Asked again with its ETag: 304, answered from what the client kept, and not counted.
    let again = e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    assert_eq!(again.head.sha, first.head.sha);
    assert_eq!(e.gh.rate_limit_remaining(), Some(1));
    e.gh.list_open_pulls(&e.repo).await.unwrap();
    assert_eq!(e.gh.rate_limit_remaining(), Some(0));
    let err = e.gh.list_open_pulls(&e.repo).await.unwrap_err();
    assert!(matches!(err, GitHubError::RateLimited { .. }), "{err:?}");
    assert_eq!(
        statuses(&e.fake.check("GET /repos/acme/shop/pulls/7")),
        vec![200, 304]
    );
    assert_eq!(
        statuses(&e.fake.check("GET /repos/acme/shop/pulls")),
        vec![200, 403]
    );
    e.fake.assert_all_checked();
}

// --- operations ----------------------------------------------------------------------------------

#[tokio::test]
async fn long_descriptions_are_truncated_so_github_never_answers_422() {
    let e = env().await;
    let d =
        e.gh.create_deployment(&e.repo, &preview_deployment(sha('a').as_str()))
            .await
            .unwrap();
    let long = format!("Build failed: {}", "é".repeat(200));
    let status = NewStatus {
        description: Some(long.clone()),
        ..NewStatus::new(DeploymentState::Failure)
    };
    let s =
        e.gh.create_deployment_status(&e.repo, d.id, &status)
            .await
            .unwrap();
    let sent = s.description.unwrap();
    assert_eq!(sent.chars().count(), 140);
    assert!(sent.ends_with('…'));
    let posted = e.fake.check("POST /repos/acme/shop/deployments/*/statuses");
    assert_eq!(statuses(&posted), vec![201]);
    let body_description = posted[0].body.as_ref().unwrap()["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(body_description, sent);

    // The stand-in does refuse 141 characters, as GitHub does, to a client that does not cut.
    let raw = octocrab::Octocrab::builder()
        .base_uri(e.fake.url())
        .unwrap()
        .app(
            octocrab::models::AppId(TEST_APP_ID),
            octocrab::EncodingKey::from_rsa_pem(TEST_APP_PRIVATE_KEY_PEM.as_bytes()).unwrap(),
        )
        .build()
        .unwrap()
        .installation(octocrab::models::InstallationId(INST))
        .unwrap();
    let resp = raw
        ._post(
            format!("/repos/acme/shop/deployments/{}/statuses", d.id),
            Some(&json!({"state": "failure", "description": "x".repeat(141)})),
        )
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 422);
    assert_eq!(
        statuses(&e.fake.check("POST /repos/acme/shop/deployments/*/statuses")),
        vec![201, 422]
    );
    e.fake.expect_only(&["POST /repos/acme/shop/deployments"]);
}

#[tokio::test]
async fn deployments_follow_githubs_rules() {
    let e = env().await;
    let env_name = "preview/shop-pr-7";
    let d =
        e.gh.create_deployment(&e.repo, &preview_deployment(sha('a').as_str()))
            .await
            .unwrap();
    assert_eq!(
        (d.sha.clone(), d.environment.as_str()),
        (sha('a'), env_name)
    );
    assert!(d.transient_environment && !d.production_environment);

    for state in [DeploymentState::InProgress, DeploymentState::Success] {
        let status = NewStatus {
            environment_url: Some("https://shop-pr-7.preview.example".to_owned()),
            log_url: Some("https://sandcastle.example/previews/shop-pr-7".to_owned()),
            ..NewStatus::new(state)
        };
        e.gh.create_deployment_status(&e.repo, d.id, &status)
            .await
            .unwrap();
    }
    let listed = e.gh.list_deployments(&e.repo, env_name).await.unwrap();
    assert_eq!(listed.iter().map(|d| d.id).collect::<Vec<_>>(), vec![d.id]);
    let states: Vec<DeploymentState> =
        e.gh.list_deployment_statuses(&e.repo, d.id)
            .await
            .unwrap()
            .iter()
            .map(|s| s.state)
            .collect();
    assert_eq!(
        states,
        vec![DeploymentState::Success, DeploymentState::InProgress]
    );

    // auto_merge on a branch behind the default branch: 202 and no deployment
    e.fake.mark_behind(&e.repo, "feature");
    let behind = NewDeployment {
        auto_merge: true,
        ..preview_deployment("feature")
    };
    let err = e.gh.create_deployment(&e.repo, &behind).await.unwrap_err();
    assert!(matches!(err, GitHubError::AutoMerged), "{err:?}");
    // an unknown ref: 422
    e.fake.forget_ref(&e.repo, sha('a').as_str());
    let err =
        e.gh.create_deployment(&e.repo, &preview_deployment(sha('a').as_str()))
            .await
            .unwrap_err();
    assert_eq!(err.status().map(|s| s.as_u16()), Some(422), "{err:?}");
    // a required context that failed: 409
    e.fake
        .complete_check_run(&e.repo, &sha('a'), "ci", "failure");
    let checked = NewDeployment {
        required_contexts: vec!["ci".to_owned()],
        ..preview_deployment("main")
    };
    e.fake.set_branch(&e.repo, "main", &sha('a'));
    let err = e.gh.create_deployment(&e.repo, &checked).await.unwrap_err();
    assert_eq!(err.status().map(|s| s.as_u16()), Some(409), "{err:?}");

    assert_eq!(
        statuses(&e.fake.check("POST /repos/acme/shop/deployments")),
        vec![201, 202, 422, 409]
    );
    assert_eq!(e.fake.deployments(&e.repo).len(), 1);
    e.fake.expect_only(&[
        "POST /repos/acme/shop/deployments/*/statuses",
        "GET /repos/acme/shop/deployments",
        "GET /repos/acme/shop/deployments/*/statuses",
    ]);
}

/// The deployment found for a commit is that commit's, even from a server that ignores the
/// `sha` filter: adopting another commit's deployment would report this commit's state on it.
#[tokio::test]
async fn the_deployment_found_for_a_commit_is_that_commits() {
    let e = env().await;
    let env_name = "preview/shop-pr-7";
    let a =
        e.gh.create_deployment(&e.repo, &preview_deployment(sha('a').as_str()))
            .await
            .unwrap();
    let found =
        e.gh.find_deployment(&e.repo, env_name, sha('a').as_str())
            .await
            .unwrap();
    assert_eq!(found.map(|d| d.id), Some(a.id));
    e.fake.set_branch(&e.repo, "other", &sha('b'));
    e.gh.create_deployment(&e.repo, &preview_deployment(sha('b').as_str()))
        .await
        .unwrap();
    e.fake
        .fail_next("GET /repos/acme/shop/deployments", 1, Fault::IgnoreFilters);
    // The newest deployment (commit b) comes first when the filters are ignored.
    let found =
        e.gh.find_deployment(&e.repo, env_name, sha('a').as_str())
            .await
            .unwrap();
    assert!(found.is_none(), "{found:?}");
    e.fake.check("POST /repos/acme/shop/deployments");
    e.fake.check("GET /repos/acme/shop/deployments");
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn success_inactivates_earlier_non_transient_deployments_only() {
    let e = env().await;
    let staging = |transient| NewDeployment {
        environment: "staging".to_owned(),
        transient_environment: transient,
        ..preview_deployment("main")
    };
    let mut ids = Vec::new();
    for transient in [false, true, false] {
        let d =
            e.gh.create_deployment(&e.repo, &staging(transient))
                .await
                .unwrap();
        e.gh.create_deployment_status(&e.repo, d.id, &NewStatus::new(DeploymentState::Success))
            .await
            .unwrap();
        ids.push(d.id);
    }
    let latest: Vec<Option<String>> = e
        .fake
        .deployments(&e.repo)
        .iter()
        .map(|d| d.latest_state().map(str::to_owned))
        .collect();
    let s = |x: &str| Some(x.to_owned());
    assert_eq!(latest, vec![s("inactive"), s("success"), s("success")]);

    // opting out keeps the earlier one
    let d =
        e.gh.create_deployment(&e.repo, &staging(false))
            .await
            .unwrap();
    let keep = NewStatus {
        auto_inactive: Some(false),
        ..NewStatus::new(DeploymentState::Success)
    };
    e.gh.create_deployment_status(&e.repo, d.id, &keep)
        .await
        .unwrap();
    assert_eq!(
        e.fake.deployments(&e.repo)[2].latest_state(),
        Some("success")
    );
    // teardown: inactive shows the transient deployment as destroyed
    e.gh.create_deployment_status(&e.repo, ids[1], &NewStatus::new(DeploymentState::Inactive))
        .await
        .unwrap();
    assert_eq!(
        e.fake.deployments(&e.repo)[1].latest_state(),
        Some("inactive")
    );
    e.fake.expect_only(&[
        "/repos/acme/shop/deployments/**",
        "/repos/acme/shop/deployments",
    ]);
}

#[tokio::test]
async fn comments_are_the_apps_and_reactions_are_idempotent() {
    let e = env().await;
    let c =
        e.gh.create_issue_comment(&e.repo, pr(7), "<!-- sandcastle -->\nPreview starting")
            .await
            .unwrap();
    assert_eq!(c.user.login, "sandcastle[bot]");
    assert_eq!(c.user.kind, "Bot");
    assert_eq!(
        c.performed_via_github_app.as_ref().map(|a| a.id),
        Some(TEST_APP_ID)
    );

    let edited =
        e.gh.update_issue_comment(&e.repo, c.id, "<!-- sandcastle -->\nPreview ready")
            .await
            .unwrap();
    assert_eq!(edited.id, c.id);
    // GitHub's times have whole seconds: an edit within the second keeps the same one.
    assert!(edited.updated_at >= c.updated_at);
    let listed = e.gh.list_issue_comments(&e.repo, pr(7)).await.unwrap();
    assert_eq!(listed, vec![edited]);

    e.gh.add_comment_reaction(&e.repo, c.id, Reaction::Eyes)
        .await
        .unwrap();
    e.gh.add_comment_reaction(&e.repo, c.id, Reaction::Eyes)
        .await
        .unwrap();
    assert_eq!(
        statuses(
            &e.fake
                .check("POST /repos/acme/shop/issues/comments/*/reactions")
        ),
        vec![201, 200]
    );
    assert_eq!(e.fake.comments(&e.repo, pr(7))[0].reactions.len(), 1);

    e.gh.delete_issue_comment(&e.repo, c.id).await.unwrap();
    e.gh.delete_issue_comment(&e.repo, c.id).await.unwrap();
    assert_eq!(
        statuses(&e.fake.check("DELETE /repos/acme/shop/issues/comments/*")),
        vec![204, 404]
    );
    assert!(e.fake.comments(&e.repo, pr(7)).is_empty());

    let err =
        e.gh.create_issue_comment(&e.repo, pr(99), "hi")
            .await
            .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    e.fake.expect_only(&[
        "POST /repos/acme/shop/issues/*/comments",
        "PATCH /repos/acme/shop/issues/comments/*",
        "GET /repos/acme/shop/issues/7/comments",
    ]);
}

#[tokio::test]
async fn comments_are_listed_across_three_pages() {
    let e = env().await;
    for i in 0..250 {
        e.fake
            .comment(&e.repo, pr(7), "alice", &format!("comment {i}"));
    }
    let comments = e.gh.list_issue_comments(&e.repo, pr(7)).await.unwrap();
    let bodies: Vec<String> = comments.iter().map(|c| c.body.clone()).collect();
    let expected: Vec<String> = (0..250).map(|i| format!("comment {i}")).collect();
    assert_eq!(bodies, expected);
    assert!(comments.iter().all(|c| c.user.kind == "User"));
    let pages: Vec<Option<String>> = e
        .fake
        .check("GET /repos/acme/shop/issues/7/comments")
        .iter()
        .map(|c| c.query.get("page").cloned())
        .collect();
    assert_eq!(
        pages,
        vec![None, Some("2".to_owned()), Some("3".to_owned())]
    );
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn permissions_map_roles_like_github() {
    let e = env().await;
    let cases = [
        ("ada", Some(Role::Admin), Permission::Admin),
        ("max", Some(Role::Maintain), Permission::Maintain),
        ("wes", Some(Role::Write), Permission::Write),
        ("tri", Some(Role::Triage), Permission::Triage),
        ("rea", Some(Role::Read), Permission::Read),
        (
            "dee",
            Some(Role::Custom {
                name: "deployer".to_owned(),
                base: "write".to_owned(),
            }),
            Permission::Write,
        ),
        ("stranger", None, Permission::None),
    ];
    for (user, role, _) in &cases {
        if let Some(role) = role {
            e.fake.set_role(&e.repo, user, role.clone());
        }
    }
    for (user, _, want) in &cases {
        let got = e.gh.collaborator_permission(&e.repo, user).await.unwrap();
        assert_eq!(got, *want, "{user}");
    }
    let answered = statuses(
        &e.fake
            .check("GET /repos/acme/shop/collaborators/*/permission"),
    );
    assert_eq!(answered, vec![200, 200, 200, 200, 200, 200, 404]);
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn file_contents_are_decoded() {
    let e = env().await;
    let text = "# Sandcastle configuration for acme/shop\nblueprint: shop\nttl: 48h\nservices:\n  - web\n  - worker\n";
    e.fake
        .put_file(&e.repo, "main", ".github/sandcastle.yml", text);
    let file =
        e.gh.get_file(&e.repo, ".github/sandcastle.yml", "main")
            .await
            .unwrap()
            .unwrap();
    assert_eq!(file.text, text);
    assert_eq!(file.sha.len(), 40);
    assert_eq!(
        e.gh.get_file(&e.repo, ".github/sandcastle.yml", "feature")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        e.gh.get_file(&e.repo, "missing.yml", "main").await.unwrap(),
        None
    );
    let refs: Vec<Option<String>> = e
        .fake
        .check("GET /repos/acme/shop/contents/**")
        .iter()
        .map(|c| c.query.get("ref").cloned())
        .collect();
    assert_eq!(refs.len(), 3);
    assert!(refs.iter().all(Option::is_some));
    e.fake.assert_all_checked();
}

#[tokio::test]
async fn pull_requests_carry_fork_draft_merge_and_label_facts() {
    let e = env().await;
    e.fake.open_pull_request(
        &e.repo,
        PrSpec {
            draft: true,
            author: "mallory".to_owned(),
            from_fork: Some(RepoName::new("mallory/shop").unwrap()),
            labels: vec!["preview".to_owned()],
            ..PrSpec::new(pr(8), sha('b'), "patch-1")
        },
    );
    e.fake
        .open_pull_request(&e.repo, PrSpec::new(pr(9), sha('c'), "done"));
    e.fake.close(&e.repo, pr(9), true);

    let fork = e.gh.get_pull(&e.repo, pr(8)).await.unwrap();
    assert!(fork.is_from_fork() && fork.draft);
    assert_eq!(fork.head.repo, Some(RepoName::new("mallory/shop").unwrap()));
    assert_eq!(
        (fork.author.as_str(), fork.labels.clone()),
        ("mallory", vec!["preview".to_owned()])
    );
    let merged = e.gh.get_pull(&e.repo, pr(9)).await.unwrap();
    assert!(merged.merged && merged.state == PullState::Closed);
    let own = e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    assert!(!own.is_from_fork());
    assert_eq!(own.base.repo, repo());

    let open: Vec<u64> =
        e.gh.list_open_pulls(&e.repo)
            .await
            .unwrap()
            .iter()
            .map(|p| p.number.get())
            .collect();
    assert_eq!(open, vec![8, 7]);

    e.fake.delete_fork(&e.repo, pr(8));
    let orphan = e.gh.get_pull(&e.repo, pr(8)).await.unwrap();
    assert_eq!(orphan.head.repo, None);
    assert!(orphan.is_from_fork());
    e.fake
        .expect_only(&["GET /repos/acme/shop/pulls/*", "GET /repos/acme/shop/pulls"]);
}

#[tokio::test]
async fn check_runs_are_listed_for_a_commit() {
    let e = env().await;
    e.fake
        .complete_check_run(&e.repo, &sha('a'), "ci", "success");
    e.fake.add_check_run(&e.repo, &sha('a'), "lint");
    e.fake
        .complete_check_run(&e.repo, &sha('d'), "ci", "failure");
    let mut runs = e.gh.list_check_runs(&e.repo, &sha('a')).await.unwrap();
    runs.sort_by(|a, b| a.name.cmp(&b.name));
    let summary: Vec<(String, CheckStatus, Option<CheckConclusion>)> = runs
        .into_iter()
        .map(|r| (r.name, r.status, r.conclusion))
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "ci".to_owned(),
                CheckStatus::Completed,
                Some(CheckConclusion::Success)
            ),
            ("lint".to_owned(), CheckStatus::Queued, None),
        ]
    );
    e.fake
        .expect_only(&["GET /repos/acme/shop/commits/*/check-runs"]);
}

// --- deliveries ------------------------------------------------------------------------------------

#[tokio::test]
async fn deliveries_match_the_state_the_api_serves() {
    let fake = FakeGitHub::start(FakeConfig::test_app()).await.unwrap();
    fake.add_repo(INST, &repo());
    let opened = fake.open_pull_request(&repo(), PrSpec::new(pr(7), sha('a'), "feature"));
    let v = opened.json();
    assert_eq!(
        (opened.event.as_str(), v["action"].as_str()),
        ("pull_request", Some("opened"))
    );
    assert_eq!(v["number"], 7);
    assert_eq!(v["installation"]["id"], INST);
    assert_eq!(v["repository"]["full_name"], "acme/shop");
    assert_eq!(v["pull_request"]["head"]["sha"], sha('a').as_str());
    assert_eq!(
        v["pull_request"]["head"]["repo"]["full_name"],
        v["pull_request"]["base"]["repo"]["full_name"]
    );
    assert_eq!(
        v["pull_request"]["html_url"],
        "https://github.com/acme/shop/pull/7"
    );

    let headers = opened.signed_headers("s3cret");
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        header("x-hub-signature-256"),
        Some(sign(b"s3cret", &opened.body))
    );
    assert_eq!(header("x-github-event").as_deref(), Some("pull_request"));
    assert_eq!(header("x-github-delivery"), Some(opened.id.clone()));
    assert!(
        header("user-agent")
            .unwrap()
            .starts_with("GitHub-Hookshot/")
    );

    let pushed = fake.push(&repo(), pr(7), &sha('b')).json();
    assert_eq!(
        (pushed["before"].as_str(), pushed["after"].as_str()),
        (Some(sha('a').as_str()), Some(sha('b').as_str()))
    );
    assert_eq!(pushed["pull_request"]["head"]["sha"], sha('b').as_str());
    // GitHub's times have whole seconds: a push within the second keeps the same one.
    assert!(
        pushed["pull_request"]["updated_at"].as_str() >= v["pull_request"]["updated_at"].as_str()
    );

    let labeled = fake.label(&repo(), pr(7), "preview").json();
    assert_eq!(labeled["label"]["name"], "preview");

    let comment = fake.comment(&repo(), pr(7), "alice", "/preview");
    let c = comment.json();
    assert_eq!(comment.event, "issue_comment");
    assert!(c["issue"]["pull_request"].is_object());
    assert_eq!(
        (c["issue"]["number"].as_u64(), c["comment"]["body"].as_str()),
        (Some(7), Some("/preview"))
    );
    assert_eq!(c["comment"]["user"]["type"], "User");
    assert_eq!(c["installation"]["id"], INST);

    let check = fake
        .complete_check_run(&repo(), &sha('b'), "ci", "success")
        .json();
    assert_eq!(check["check_run"]["pull_requests"][0]["number"], 7);

    let closed = fake.close(&repo(), pr(7), true).json();
    assert_eq!(closed["pull_request"]["merged"], true);
    assert_eq!(closed["pull_request"]["state"], "closed");

    // the API agrees with the deliveries
    let app = GitHubApp::new(
        TEST_APP_ID,
        &Secret::new(TEST_APP_PRIVATE_KEY_PEM),
        fake.url(),
        fast(),
    )
    .unwrap();
    let gh = app.installation(INST);
    let pull = gh.get_pull(&repo(), pr(7)).await.unwrap();
    assert_eq!(pull.head.sha, sha('b'));
    assert!(pull.merged);
    assert_eq!(pull.labels, vec!["preview".to_owned()]);
    assert!(gh.list_open_pulls(&repo()).await.unwrap().is_empty());
    fake.allow(TOKENS);
    fake.expect_only(&["GET /repos/acme/shop/pulls/7", "GET /repos/acme/shop/pulls"]);
}

#[tokio::test]
async fn a_stopped_stand_in_is_a_transport_error() {
    let e = env().await;
    e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    e.fake.shutdown();
    let err = e.gh.get_pull(&e.repo, pr(7)).await.unwrap_err();
    assert!(matches!(err, GitHubError::Transport(_)), "{err:?}");
    assert!(err.is_retryable());
    e.fake.expect_only(&["GET /repos/acme/shop/pulls/7"]);
}

// --- the checker itself ------------------------------------------------------------------------------

#[tokio::test]
async fn an_unchecked_call_fails_the_test() {
    let e = env().await;
    e.gh.get_pull(&e.repo, pr(7)).await.unwrap();
    e.gh.list_issue_comments(&e.repo, pr(7)).await.unwrap();
    e.fake.check("GET /repos/acme/shop/pulls/7");

    let unchecked = e.fake.verify_all_checked().unwrap_err();
    assert_eq!(unchecked.0.len(), 1);
    let report = unchecked.to_string();
    assert!(
        report.contains("GET /repos/acme/shop/issues/7/comments"),
        "{report}"
    );
    assert!(!report.contains("pulls/7 "), "{report}");
    let outcome = catch_unwind(AssertUnwindSafe(|| e.fake.assert_all_checked()));
    assert!(
        outcome.is_err(),
        "assert_all_checked accepted an unchecked call"
    );

    e.fake.expect_only(&["GET /repos/*/*/issues/*/comments"]);
}

// --- check runs ------------------------------------------------------------------------------------

/// An installation client that sends what it is given, unchecked (octocrab's raw calls).
fn raw_installation(e: &Env) -> octocrab::Octocrab {
    octocrab::Octocrab::builder()
        .base_uri(e.fake.url())
        .unwrap()
        .app(
            octocrab::models::AppId(TEST_APP_ID),
            octocrab::EncodingKey::from_rsa_pem(TEST_APP_PRIVATE_KEY_PEM.as_bytes()).unwrap(),
        )
        .build()
        .unwrap()
        .installation(octocrab::models::InstallationId(INST))
        .unwrap()
}

#[tokio::test]
async fn check_runs_are_created_and_completed_step_by_step_and_found_by_external_id() {
    use sandcastle::github::client::{CheckOutput, CheckRunWrite};
    let e = env().await;
    let mut write = CheckRunWrite::new(CheckStatus::Queued);
    write.name = Some("Sandcastle / smoke".into());
    write.head_sha = Some(sha('a'));
    write.external_id = Some("shop-pr-7/smoke/1".into());
    write.details_url = Some("https://sandcastle.example.com/previews/shop-pr-7".into());
    write.output = Some(CheckOutput {
        title: "Queued".into(),
        summary: "s".repeat(70_000),
        text: None,
    });
    let made = e.gh.create_check_run(&e.repo, &write).await.unwrap();
    assert_eq!(made.status, CheckStatus::Queued);
    let mut running = CheckRunWrite::new(CheckStatus::InProgress);
    running.started_at = Some(Timestamp::from_second(1_700_000_000).unwrap());
    e.gh.update_check_run(&e.repo, made.id, &running)
        .await
        .unwrap();
    let mut done = CheckRunWrite::new(CheckStatus::Completed);
    done.conclusion = Some(CheckConclusion::TimedOut);
    done.output = Some(CheckOutput {
        title: "Timed out after 10m".into(),
        summary: "summary".into(),
        text: Some("the tail".into()),
    });
    let after =
        e.gh.update_check_run(&e.repo, made.id, &done)
            .await
            .unwrap();
    assert_eq!(after.conclusion, Some(CheckConclusion::TimedOut));
    let found =
        e.gh.find_check_run(
            &e.repo,
            &sha('a'),
            "Sandcastle / smoke",
            "shop-pr-7/smoke/1",
        )
        .await
        .unwrap();
    assert_eq!(found.map(|r| r.id), Some(made.id));
    let none =
        e.gh.find_check_run(
            &e.repo,
            &sha('a'),
            "Sandcastle / smoke",
            "shop-pr-7/smoke/2",
        )
        .await
        .unwrap();
    assert!(none.is_none());
    let runs = e.fake.check_runs(&e.repo, &sha('a'));
    assert_eq!(
        runs[0].steps,
        ["queued", "in_progress", "completed/timed_out"]
    );
    assert_eq!(
        runs[0].output.clone().unwrap().text.as_deref(),
        Some("the tail")
    );
    let created = e.fake.check("POST /repos/acme/shop/check-runs");
    let sent = created[0].body.as_ref().unwrap()["output"]["summary"]
        .as_str()
        .unwrap()
        .chars()
        .count();
    assert_eq!(sent, 65_535, "cut to GitHub's limit before sending");
    assert!(runs[0].by_app);
    e.fake.expect_only(&[
        "POST /repos/acme/shop/check-runs",
        "PATCH /repos/acme/shop/check-runs/*",
        "GET /repos/acme/shop/commits/*/check-runs",
    ]);
}

#[tokio::test]
async fn the_stand_in_refuses_check_runs_github_would_refuse() {
    let e = env().await;
    let raw = raw_installation(&e);
    let a = sha('a').to_string();
    let post = |body: serde_json::Value| {
        let raw = raw.clone();
        async move {
            raw._post("/repos/acme/shop/check-runs", Some(&body))
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let cases = [
        (json!({"head_sha": a}), 422, "no name"),
        (json!({"name": "x"}), 422, "no head_sha"),
        (
            json!({"name": "x", "head_sha": "f".repeat(40)}),
            422,
            "a commit the repository lacks",
        ),
        (
            json!({"name": "x", "head_sha": a, "status": "waiting"}),
            422,
            "a status for Actions only",
        ),
        (
            json!({"name": "x", "head_sha": a, "status": "completed"}),
            422,
            "completed without a conclusion",
        ),
        (
            json!({"name": "x", "head_sha": a, "completed_at": "2026-11-29T12:00:00Z"}),
            422,
            "completed_at without a conclusion",
        ),
        (
            json!({"name": "x", "head_sha": a, "status": "queued", "conclusion": "success"}),
            422,
            "a conclusion beside another status",
        ),
        (
            json!({"name": "x", "head_sha": a, "conclusion": "stale"}),
            422,
            "stale, which only GitHub sets",
        ),
        (
            json!({"name": "x", "head_sha": a, "started_at": "yesterday"}),
            422,
            "a time that is no time",
        ),
        (
            json!({"name": "x", "head_sha": a, "details_url": "javascript:alert(1)"}),
            422,
            "a details_url that is no URL",
        ),
        (
            json!({"name": "x", "head_sha": a, "output": {"title": "t"}}),
            422,
            "an output without a summary",
        ),
        (
            json!({"name": "x", "head_sha": a, "output": {"title": "t", "summary": "s".repeat(65_536)}}),
            422,
            "a summary past 65,535 characters",
        ),
        (
            json!({"name": "x", "head_sha": a, "output": {"title": "t", "summary": "s", "text": "t".repeat(65_536)}}),
            422,
            "a text past 65,535 characters",
        ),
        (
            json!({"name": "x", "head_sha": a, "output": {"title": "t", "summary": "s", "annotations": vec![json!({}); 51]}}),
            422,
            "51 annotations",
        ),
        (
            json!({"name": "x", "head_sha": a, "conclusion": "success"}),
            201,
            "a conclusion alone completes",
        ),
        (
            json!({"name": "x", "head_sha": a, "status": "in_progress"}),
            201,
            "in progress",
        ),
    ];
    for (body, want, what) in cases {
        assert_eq!(post(body.clone()).await, want, "{what}: {body}");
    }
    let made = e.fake.check_runs(&e.repo, &sha('a'));
    assert_eq!(made.len(), 2);
    assert_eq!(made[0].status, "completed");
    let id = made[1].id;
    let patch = |id: u64, body: serde_json::Value| {
        let raw = raw.clone();
        async move {
            raw._patch(format!("/repos/acme/shop/check-runs/{id}"), Some(&body))
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(
        patch(
            id + 1000,
            json!({"status": "completed", "conclusion": "success"})
        )
        .await,
        404
    );
    assert_eq!(patch(id, json!({"status": "completed"})).await, 422);
    assert_eq!(patch(id, json!({"conclusion": "nope"})).await, 422);
    assert_eq!(
        patch(
            id,
            json!({"status": "completed", "conclusion": "cancelled"})
        )
        .await,
        200
    );

    // An installation that has not approved `checks: write` writes none.
    e.fake.grant_checks(INST, false);
    assert_eq!(post(json!({"name": "x", "head_sha": a})).await, 403);
    assert_eq!(patch(id, json!({"conclusion": "success"})).await, 403);
    e.fake.take_calls();
}
