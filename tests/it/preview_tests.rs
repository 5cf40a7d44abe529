//! A Blueprint's tests run inside each preview, reported as GitHub check runs: a passing test
//! after a rollout is Ready (`success` with its summary), a failing one (`failure` with the
//! redacted tail of its logs), one past its timeout (`timed_out`), a push cancelling the older
//! commit's run (`cancelled`, its Job deleted), a `runOn: request` test run by `/preview test`
//! and by the API and waited for, a template naming a Secret the preview lacks refused, and an
//! installation that has not granted `checks: write`. kwok completes the Jobs' pods (a pod
//! annotated `test.sandcastle.dev/fate: fail` fails, `image-pull-backoff` never starts) and
//! serves their logs (`support::logs`); the check runs are read from the GitHub stand-in.
//! The loop from a push to its check run's result is measured and printed.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams};
use sandcastle::crd::{Phase, PreviewEnvironment};
use sandcastle_fake_github::{CheckRunRecord, Role};
use serde_json::{Value, json};

use crate::support::api::{ALL, account, call};
use crate::support::logs::{pod_logs, read_logs};
use crate::support::mcp_clients::{python, run_client};
use crate::support::world::{INSTALLATION, World, pr, sha};
use crate::support::{eventually, wait_for};

const T: Duration = Duration::from_secs(90);
const SECRET_VALUE: &str = "s3cret-hunter2-horse";
const MAINTAINER: &str = "maria";

const APP: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: ghcr.io/acme/web:1.0}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  rules:
  - host: web.staging.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: v1
kind: Secret
metadata: {name: db}
stringData: {password: s3cret-hunter2-horse}
";

/// A test `name` whose pod is shaped by `fate` (a kwok stage, or none: it passes), run on
/// `run_on`, within `timeout`.
fn test(name: &str, fate: Option<&str>, run_on: &str, timeout: &str) -> Value {
    let annotations = fate.map_or_else(|| json!({}), |f| json!({"test.sandcastle.dev/fate": f}));
    json!({"name": name, "runOn": run_on, "timeout": timeout, "template": {
    "template": {"metadata": {"annotations": annotations}, "spec": {"containers": [{
        "name": name, "image": "ghcr.io/acme/tests:1.0",
        "env": [{"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
    }]}}}})
}

/// The check run `Sandcastle / <test>` on `sha` once `done` holds for it.
async fn check_run(
    world: &World,
    sha: &sandcastle::domain::Sha,
    test: &str,
    what: &str,
    done: impl Fn(&CheckRunRecord) -> bool,
) -> CheckRunRecord {
    let name = format!("Sandcastle / {test}");
    eventually(&format!("check run {name} {what}"), T, || async {
        let runs = world.gh.check_runs(&world.repo, sha);
        runs.iter()
            .rfind(|r| r.name == name)
            .filter(|r| done(r))
            .cloned()
            .ok_or_else(|| format!("{runs:#?}"))
    })
    .await
}

fn completed(conclusion: &'static str) -> impl Fn(&CheckRunRecord) -> bool {
    move |r| r.status == "completed" && r.conclusion.as_deref() == Some(conclusion)
}

async fn ready(world: &World, preview: &str) -> PreviewEnvironment {
    world.wait_phase(preview, Phase::Ready, T).await
}

#[tokio::test]
async fn a_passing_test_after_each_rollout_is_a_successful_check_run_with_its_summary() {
    let world = World::new(
        "tpass",
        APP,
        json!({"tests": [test("smoke", None, "ready", "5m")]}),
    )
    .await;
    world.gh.allow("/repos/*/*/**");
    let head = world.open(1).await;
    let pe = ready(&world, "tpass-pr-1").await;
    let readied = Instant::now();
    let run = check_run(&world, &head, "smoke", "succeeds", completed("success")).await;
    println!(
        "Ready → check run success: {} ms",
        readied.elapsed().as_millis()
    );
    assert!(run.by_app);
    assert_eq!(
        run.steps.first().map(String::as_str),
        Some("queued"),
        "{run:?}"
    );
    assert_eq!(
        run.steps.last().map(String::as_str),
        Some("completed/success")
    );
    assert!(
        run.steps.len() <= 3 && run.steps.iter().filter(|s| *s == "queued").count() == 1,
        "each step once: {:?}",
        run.steps
    );
    assert_eq!(run.external_id.as_deref(), Some("tpass-pr-1/smoke/1"));
    assert!(
        run.details_url
            .as_deref()
            .is_some_and(|u| u.ends_with("/previews/tpass-pr-1"))
    );
    let output = run.output.clone().unwrap();
    println!("the check run's summary:\n{}", output.summary);
    assert!(output.title.starts_with("Passed in "), "{output:?}");
    for want in [
        "| **Test** | `smoke` (Job `test-smoke-1`) |",
        "`tpass-pr-1`",
        &format!("| **Commit** | `{}` |", head.short()),
        "| **Exit** | 0 |",
        "| **Duration** |",
    ] {
        assert!(
            output.summary.contains(want),
            "{want} in {}",
            output.summary
        );
    }

    // The Job ran in the preview as its preview-agent, with the preview's URL and its token.
    let ns = world.namespace_of("tpass-pr-1");
    let job = Api::<Job>::namespaced(world.client.clone(), &ns)
        .get("test-smoke-1")
        .await
        .unwrap();
    let pod = job.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("preview-agent"));
    assert_eq!(pod.automount_service_account_token, Some(true));
    let env = pod.containers[0].env.clone().unwrap_or_default();
    let var = |n: &str| {
        env.iter()
            .find(|e| e.name == n)
            .and_then(|e| e.value.clone())
    };
    assert_eq!(
        var("SANDCASTLE_URL"),
        pe.status.as_ref().unwrap().url.clone()
    );
    assert_eq!(
        var("SANDCASTLE_TOKEN_FILE").as_deref(),
        Some("/var/run/secrets/kubernetes.io/serviceaccount/token")
    );

    // The preview says so: its status, the API, the sticky comment.
    let admin = account(&world, "admin", &[ALL]).await;
    let got = call(
        &world,
        "GET",
        "/api/v1/previews/tpass-pr-1",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(got.body["tests"][0]["name"], "smoke", "{}", got.body);
    assert_eq!(got.body["tests"][0]["conclusion"], "success");
    assert_eq!(got.body["tests"][0]["checkRun"], "Sandcastle / smoke");
    eventually("the sticky comment shows the test", T, || async {
        let comments = world.gh.comments(&world.repo, pr(1));
        comments
            .iter()
            .find(|c| c.body.contains("- ✅ `smoke` passed in"))
            .map(|_| ())
            .ok_or_else(|| format!("{comments:#?}"))
    })
    .await;

    // A push: the new commit's rollout runs it again. The loop, push to result, measured.
    let newer = sha();
    let pushed = Instant::now();
    let (status, body) = world
        .deliver(&world.gh.push(&world.repo, pr(1), &newer))
        .await;
    assert_eq!(status, 200, "{body}");
    let again = check_run(&world, &newer, "smoke", "succeeds", completed("success")).await;
    println!(
        "loop: push → check run `Sandcastle / smoke` success on the new commit: {} ms",
        pushed.elapsed().as_millis()
    );
    assert_eq!(again.external_id.as_deref(), Some("tpass-pr-1/smoke/2"));
    let first = world.gh.check_runs(&world.repo, &head);
    assert_eq!(first.len(), 1, "the first commit's run stays as it ended");
}

#[tokio::test]
async fn a_failing_test_run_by_command_reports_failure_with_its_redacted_log_tail() {
    let world = World::new(
        "tfail",
        APP,
        json!({"tests": [test("e2e", Some("fail"), "request", "5m")]}),
    )
    .await;
    world.gh.allow("/repos/*/*/**");
    world.gh.set_role(&world.repo, MAINTAINER, Role::Write);
    let head = world.open(1).await;
    ready(&world, "tfail-pr-1").await;
    assert!(
        world.gh.check_runs(&world.repo, &head).is_empty(),
        "a runOn: request test waits to be asked"
    );
    // What the test's pod logs (a Secret's value and a token among it), served before it runs.
    let ns = world.namespace_of("tfail-pr-1");
    let lines = [
        "connecting to the preview",
        "login with password s3cret-hunter2-horse",
        "GET / with ghp_abcdefghijklmnopqrstuvwxyz0123456789 → 500",
        "FAIL: expected 200",
    ];
    pod_logs(&world.client, &ns, &lines).await;
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), &ns);
    let web = pods.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    read_logs(&pods, &web, &LogParams::default()).await;

    // Unknown tests are refused with the ones there are.
    let d = world
        .gh
        .comment(&world.repo, pr(1), MAINTAINER, "/preview test nope");
    let (_, answer) = world.deliver(&d).await;
    let refused = world
        .command_outcome(answer["record"].as_str().unwrap())
        .await;
    assert_eq!(refused["status"], "refused", "{refused}");
    eventually("the reply names the tests", T, || async {
        let comments = world.gh.comments(&world.repo, pr(1));
        comments
            .iter()
            .find(|c| c.body.contains("has no test `nope`: its tests are `e2e`"))
            .map(|_| ())
            .ok_or_else(|| format!("{comments:#?}"))
    })
    .await;

    let d = world
        .gh
        .comment(&world.repo, pr(1), MAINTAINER, "/preview test e2e");
    let (status, answer) = world.deliver(&d).await;
    assert_eq!(
        (status, answer["command"].as_str()),
        (202, Some("test")),
        "{answer}"
    );
    let done = world
        .command_outcome(answer["record"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "accepted", "{done}");
    let run = check_run(&world, &head, "e2e", "fails", completed("failure")).await;
    let output = run.output.unwrap();
    println!(
        "the failed check run:\n{}\n{}",
        output.summary,
        output.text.clone().unwrap_or_default()
    );
    assert!(
        output.title.starts_with("Failed (exit 1) after "),
        "{output:?}"
    );
    assert!(
        output.summary.contains("| **Exit** | 1 |"),
        "{}",
        output.summary
    );
    let text = output.text.unwrap();
    assert!(text.contains("FAIL: expected 200"), "{text}");
    assert!(text.contains("login with password [redacted]"), "{text}");
    assert!(
        !text.contains(SECRET_VALUE),
        "the Secret's value is masked: {text}"
    );
    assert!(
        !text.contains("ghp_abcdefghij"),
        "the token is masked: {text}"
    );
    let pe = world.previews().get("tfail-pr-1").await.unwrap();
    let history = &pe.status.unwrap().history;
    assert!(
        history.iter().any(|h| h.action == "TestFailed"),
        "{history:?}"
    );
}

#[tokio::test]
async fn a_test_past_its_timeout_is_timed_out_and_its_job_goes() {
    let world = World::new(
        "ttime",
        APP,
        json!({"tests": [test("slow", Some("image-pull-backoff"), "ready", "3s")]}),
    )
    .await;
    world.gh.allow("/repos/*/*/**");
    let head = world.open(1).await;
    ready(&world, "ttime-pr-1").await;
    check_run(&world, &head, "slow", "is queued", |r| r.status == "queued").await;
    let run = check_run(&world, &head, "slow", "times out", completed("timed_out")).await;
    assert_eq!(
        run.steps,
        ["queued", "completed/timed_out"],
        "its pod never started"
    );
    assert!(run.output.unwrap().title.starts_with("Timed out after"));
    let ns = world.namespace_of("ttime-pr-1");
    let jobs: Api<Job> = Api::namespaced(world.client.clone(), &ns);
    eventually("the timed-out Job is deleted", T, || async {
        match jobs
            .get_opt("test-slow-1")
            .await
            .map_err(|e| e.to_string())?
        {
            None => Ok(()),
            Some(j) if j.metadata.deletion_timestamp.is_some() => Ok(()),
            Some(_) => Err("still there".to_owned()),
        }
    })
    .await;
}

#[tokio::test]
async fn a_push_cancels_the_older_commits_run_and_deletes_its_job() {
    let world = World::new(
        "tpush",
        APP,
        json!({"tests": [test("long", Some("image-pull-backoff"), "ready", "30m")]}),
    )
    .await;
    world.gh.allow("/repos/*/*/**");
    let head = world.open(1).await;
    ready(&world, "tpush-pr-1").await;
    check_run(&world, &head, "long", "is queued", |r| r.status == "queued").await;
    let ns = world.namespace_of("tpush-pr-1");
    let jobs: Api<Job> = Api::namespaced(world.client.clone(), &ns);
    assert!(jobs.get_opt("test-long-1").await.unwrap().is_some());

    let newer = sha();
    let (status, body) = world
        .deliver(&world.gh.push(&world.repo, pr(1), &newer))
        .await;
    assert_eq!(status, 200, "{body}");
    let old = check_run(
        &world,
        &head,
        "long",
        "is cancelled",
        completed("cancelled"),
    )
    .await;
    let output = old.output.unwrap();
    assert_eq!(
        output.title,
        format!("Cancelled: superseded by {}", newer.short())
    );
    eventually("the older run's Job is deleted", T, || async {
        match jobs
            .get_opt("test-long-1")
            .await
            .map_err(|e| e.to_string())?
        {
            Some(j) if j.metadata.deletion_timestamp.is_none() => Err("still there".to_owned()),
            _ => Ok(()),
        }
    })
    .await;
    check_run(&world, &newer, "long", "is queued on the new commit", |r| {
        r.status == "queued" && r.external_id.as_deref() == Some("tpush-pr-1/long/2")
    })
    .await;
}

#[tokio::test]
async fn the_api_runs_a_test_on_request_and_waits_for_its_result() {
    let world = World::new(
        "tapi",
        APP,
        json!({"tests": [test("e2e", None, "request", "5m")]}),
    )
    .await;
    world.gh.allow("/repos/*/*/**");
    let admin = account(&world, "admin", &[ALL]).await;
    let reader = account(
        &world,
        "reader",
        &[(&["previewenvironments"], &["get", "list"])],
    )
    .await;
    let head = world.open(1).await;
    ready(&world, "tapi-pr-1").await;
    let path = "/api/v1/previews/tapi-pr-1/tests/e2e";
    let refused = call(&world, "POST", path, Some(&reader), None).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("create") && m.contains("tests")),
        "{}",
        refused.body
    );
    let unknown = call(
        &world,
        "POST",
        "/api/v1/previews/tapi-pr-1/tests/nope",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(
        (unknown.status, unknown.body["error"]["code"].as_str()),
        (404, Some("unknown_test")),
        "{}",
        unknown.body
    );
    let asked = call(&world, "POST", path, Some(&admin), None).await;
    assert_eq!(asked.status, 202, "{}", asked.body);
    let wait = "/api/v1/previews/tapi-pr-1/wait?for=test&test=e2e&timeout=60s";
    let waited = call(&world, "GET", wait, Some(&admin), None).await;
    assert_eq!(waited.body["outcome"], "passed", "{}", waited.body);
    assert_eq!(waited.body["test"]["run"], 1);
    assert_eq!(waited.body["test"]["conclusion"], "success");
    check_run(&world, &head, "e2e", "succeeds", completed("success")).await;
    // Asked again: a wait right after answers on the new run, never the last one.
    let asked = call(&world, "POST", path, Some(&admin), None).await;
    assert_eq!(asked.status, 202, "{}", asked.body);
    let waited = call(&world, "GET", wait, Some(&admin), None).await;
    assert_eq!(waited.body["outcome"], "passed", "{}", waited.body);
    assert_eq!(waited.body["test"]["run"], 2, "{}", waited.body);
    // Without a test named: every test of the Blueprint (here, e2e), on the same runs.
    let every = call(
        &world,
        "GET",
        "/api/v1/previews/tapi-pr-1/wait?for=test&timeout=60s",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(every.body["outcome"], "passed", "{}", every.body);
    // A test named without `for`: waiting for that test.
    let named = call(
        &world,
        "GET",
        "/api/v1/previews/tapi-pr-1/wait?test=e2e&timeout=60s",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(named.body["outcome"], "passed", "{}", named.body);
    assert_eq!(named.body["test"]["run"], 2, "{}", named.body);
}

#[tokio::test]
async fn a_template_naming_a_secret_the_preview_lacks_is_refused_and_says_why() {
    let mut bad = test("leaky", None, "ready", "5m");
    bad["template"]["template"]["spec"]["volumes"] =
        json!([{"name": "cert", "secret": {"secretName": "sandcastle-tls"}}]);
    let world = World::new("tleak", APP, json!({"tests": [bad]})).await;
    world.gh.allow("/repos/*/*/**");
    let head = world.open(1).await;
    ready(&world, "tleak-pr-1").await;
    let run = check_run(&world, &head, "leaky", "is refused", completed("failure")).await;
    let output = run.output.unwrap();
    assert!(output.title.starts_with("Failed: refused:"), "{output:?}");
    assert!(
        output
            .summary
            .contains("\"sandcastle-tls\", which the preview does not have (it copied: db)"),
        "{}",
        output.summary
    );
    let ns = world.namespace_of("tleak-pr-1");
    let jobs: Api<Job> = Api::namespaced(world.client.clone(), &ns);
    assert!(
        jobs.get_opt("test-leaky-1").await.unwrap().is_none(),
        "never run"
    );
}

#[tokio::test]
async fn without_checks_write_the_preview_says_so_and_stays_ready() {
    let world = World::new(
        "tperm",
        APP,
        json!({"tests": [test("smoke", None, "ready", "5m")]}),
    )
    .await;
    world.gh.allow("/repos/*/*/**");
    world.gh.grant_checks(INSTALLATION, false);
    let head = world.open(1).await;
    ready(&world, "tperm-pr-1").await;
    let pe = wait_for(
        &world.previews(),
        "tperm-pr-1",
        "the refusal said",
        T,
        |pe: Option<&PreviewEnvironment>| {
            pe.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "ChecksReported"
                        && c.message.contains("Resource not accessible by integration")
                })
            })
        },
    )
    .await
    .unwrap();
    assert_eq!(pe.status.unwrap().phase, Some(Phase::Ready));
    assert!(world.gh.check_runs(&world.repo, &head).is_empty());
    let refused = world.gh.check("POST /repos/*/*/check-runs");
    assert!(refused.iter().all(|c| c.status == 403), "{refused:?}");
}

#[tokio::test]
async fn mcp_runs_a_test_and_waits_for_it_through_the_official_python_sdk() {
    let py = python();
    let mut world = World::unstarted(
        "tmcp",
        APP,
        json!({"tests": [test("e2e", None, "request", "5m")]}),
    )
    .await;
    world.configure = Some(|parts| parts.settings.mcp_write = true);
    world.start().await;
    world.gh.allow("/repos/*/*/**");
    let admin = account(&world, "admin", &[ALL]).await;
    let head = world.open(1).await;
    ready(&world, "tmcp-pr-1").await;
    let url = format!("http://{}/mcp", world.addr());
    let case = json!({"url": url, "token": admin, "tool": "run_tests",
        "arguments": {"name": "tmcp-pr-1", "test": "e2e"}});
    let asked = run_client(&py, "client.py", "call", &case).await;
    assert_eq!(asked["isError"], false, "{asked}");
    assert_eq!(asked["structured"]["name"], "tmcp-pr-1", "{asked}");
    let case = json!({"url": url, "token": admin, "tool": "wait_for_preview",
        "arguments": {"name": "tmcp-pr-1", "for": "test", "test": "e2e", "timeout": "50s"}});
    let waited = run_client(&py, "client.py", "call", &case).await;
    assert_eq!(waited["isError"], false, "{waited}");
    assert_eq!(waited["structured"]["outcome"], "passed", "{waited}");
    assert_eq!(waited["structured"]["test"]["checkRun"], "Sandcastle / e2e");
    check_run(&world, &head, "e2e", "succeeds", completed("success")).await;
    let case = json!({"url": url, "token": admin, "tool": "run_tests",
        "arguments": {"name": "tmcp-pr-1", "test": "nope"}});
    let refused = run_client(&py, "client.py", "call", &case).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("unknown_test: ")),
        "{refused}"
    );
}

#[tokio::test]
async fn the_api_server_refuses_a_test_name_twice_a_long_name_or_a_timeout_past_an_hour() {
    use kube::api::{Patch, PatchParams};
    let world = World::unstarted("tcrd", APP, json!({})).await;
    let api: Api<sandcastle::crd::Blueprint> =
        Api::namespaced(world.client.clone(), &world.home.name);
    let apply = |tests: Value| {
        let api = api.clone();
        let repo = world.repo.as_str().to_owned();
        let staging = world.staging.name.clone();
        async move {
            let bp = json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
                "metadata": {"name": "tcrd-bad"},
                "spec": {"source": {"namespace": staging}, "repositories": [repo], "tests": tests}});
            api.patch(
                "tcrd-bad",
                &PatchParams::apply("test").force(),
                &Patch::Apply(&bp),
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
        }
    };
    let twice = apply(json!([
        test("smoke", None, "ready", "5m"),
        test("smoke", None, "request", "5m")
    ]))
    .await;
    // Server-side apply refuses it before validation ("duplicate entries for key"), an update
    // in validation ("Duplicate value").
    assert!(
        twice
            .as_ref()
            .is_err_and(|e| e.to_lowercase().contains("duplicate")),
        "{twice:?}"
    );
    let long = apply(json!([test("smoke", None, "ready", "2h")])).await;
    assert!(
        long.as_ref()
            .is_err_and(|e| e.contains("timeout must be between 1s and 1h")),
        "{long:?}"
    );
    let name = apply(json!([test(&"a".repeat(41), None, "ready", "5m")])).await;
    assert!(
        name.as_ref()
            .is_err_and(|e| e.contains("spec.tests[0].name")),
        "{name:?}"
    );
    let fine = apply(json!([test("smoke", None, "ready", "1h")])).await;
    assert!(fine.is_ok(), "{fine:?}");
}
