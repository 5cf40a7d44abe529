//! `sandcastle previews` as a shell runs it: the built binary against a running Sandcastle on
//! the real control plane, with a real ServiceAccount token — tables and `-o json|yaml`, logs,
//! Events, a preview token, and the exit codes scripts branch on (wait: 0 Ready, 1 Failed,
//! 2 timed out; 1 with the API's code for a refusal).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::api::{ALL, account};
use crate::support::eventually;
use crate::support::logs::{ContainerLogs, set_pod_logs};
use crate::support::world::{World, sha};

const T: Duration = Duration::from_secs(90);

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
";

/// A seed Job that fails: the preview ends Failed.
const FAILING_SEED: &str = r"
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
apiVersion: batch/v1
kind: Job
metadata:
  name: seed
  annotations: {sandcastle.dev/hook: seed}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {test.sandcastle.dev/fate: fail}
    spec:
      restartPolicy: Never
      containers: [{name: seed, image: ghcr.io/acme/seed:1.0}]
";

/// What a run of the binary did.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `sandcastle previews ARGS` against `server`, with `token` in the environment (nothing else
/// of this process's environment reaches it).
async fn previews(server: &str, token: Option<&str>, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_sandcastle-dev"));
    cmd.env_clear()
        .arg("previews")
        .args(["--server", server])
        .args(args)
        .kill_on_drop(true);
    if let Some(t) = token {
        cmd.env("SANDCASTLE_TOKEN", t);
    }
    let out = tokio::time::timeout(Duration::from_secs(150), cmd.output())
        .await
        .expect("the CLI ends")
        .expect("the CLI runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn json_of(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"))
}

#[tokio::test]
async fn a_sandbox_from_the_shell() {
    let world = World::new("shell", APP, json!({})).await;
    let server = format!("http://{}", world.addr());
    let admin = account(&world, "admin", &[ALL]).await;
    let run = |args: &'static [&'static str]| {
        let (s, t) = (server.clone(), admin.clone());
        async move { previews(&s, Some(&t), args).await }
    };
    let commit = sha();
    let repo = world.repo.as_str().to_owned();

    let created = previews(
        &server,
        Some(&admin),
        &[
            "create",
            "--blueprint",
            "shell",
            "--repo",
            &repo,
            "--branch",
            "feat",
            "--commit",
            commit.as_str(),
            "--name",
            "shell-feat",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(created.code, 0, "{created:?}");
    assert_eq!(json_of(&created)["name"], "shell-feat");

    let waited = run(&["wait", "shell-feat", "--timeout", "90s"]).await;
    assert_eq!(waited.code, 0, "{waited:?}");
    assert!(
        waited.stdout.starts_with("shell-feat ready (Ready"),
        "{waited:?}"
    );

    // A table for people: headers, and the sandbox's row.
    let listed = run(&["list"]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    let mut lines = listed.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "PHASE", "READY", "SOURCE", "COMMIT", "URL", "EXPIRES"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        row[..5],
        ["shell-feat", "Ready", "1/1", "sandbox:feat", commit.short()]
    );
    // JSON and YAML for scripts: the API's answer.
    let got = run(&["get", "shell-feat", "-o", "json"]).await;
    assert_eq!(json_of(&got)["phase"], "Ready");
    assert_eq!(json_of(&got)["commit"]["deployed"], commit.as_str());
    let yaml = run(&["get", "shell-feat", "-o", "yaml"]).await;
    assert!(
        yaml.stdout.lines().any(|l| l == "name: shell-feat"),
        "{yaml:?}"
    );
    let page = run(&["get", "shell-feat"]).await;
    assert!(
        page.stdout
            .starts_with("Name:         shell-feat\nPhase:        Ready"),
        "{page:?}"
    );

    // Logs and Events.
    let ns = json_of(&got)["namespace"].as_str().unwrap().to_owned();
    // Written an hour ago, so that `--since 10m` finds none.
    let hour_old = ContainerLogs {
        lines: &["booting", "listening on :8080"],
        age: Duration::from_secs(3600),
        ..Default::default()
    };
    // Before any: the preview's pod is there and has written nothing.
    let silent = run(&["logs", "shell-feat"]).await;
    assert_eq!((silent.code, silent.stdout.as_str()), (0, ""), "{silent:?}");
    assert_eq!(
        silent.stderr, "note: no log lines yet: 1 pod, which has written none\n",
        "not \"no pod\": the pod is there"
    );
    set_pod_logs(&world.client, &ns, &[hour_old]).await;
    let logs = eventually("the CLI prints the pod's last line", T, || async {
        let l = run(&["logs", "shell-feat", "--tail", "1"]).await;
        if l.code == 0 && l.stdout == "listening on :8080\n" {
            Ok(l)
        } else {
            Err(format!("{l:?}"))
        }
    })
    .await;
    assert!(logs.stderr.is_empty(), "{logs:?}");
    let none = run(&["logs", "shell-feat", "--since", "10m"]).await;
    assert_eq!((none.code, none.stdout.as_str()), (0, ""), "{none:?}");
    assert_eq!(
        none.stderr,
        "note: no log lines: 1 container logged nothing (within --tail and --since)\n"
    );
    let events = run(&["events", "shell-feat"]).await;
    assert!(
        events.stdout.lines().next().unwrap().starts_with("WHEN"),
        "{events:?}"
    );
    assert!(events.stdout.contains("ApiCreate"), "{events:?}");

    // Stop: the answer is the preview before the stop, so it says what was asked. Waiting for
    // Ready now times out (2), waiting for Stopped succeeds (0).
    let stop = run(&["stop", "shell-feat"]).await;
    assert_eq!(stop.code, 0, "{stop:?}");
    assert_eq!(
        stop.stdout,
        "Asked to stop shell-feat: under way (it is Ready now).\n\
         Wait for it: sandcastle previews wait shell-feat --for stopped\n"
    );
    // The routes go first; the pods keep running a moment, and it says so.
    eventually("the CLI shows the preview stopping", T, || async {
        let got = json_of(&run(&["get", "shell-feat", "-o", "json"]).await);
        match (got["phase"].as_str(), got["reason"].as_str()) {
            (
                Some("Ready"),
                Some("Stopping on request: routing visitors away before the pods stop"),
            ) => Ok(()),
            _ => Err(format!("{got}")),
        }
    })
    .await;
    let stopped = run(&["wait", "shell-feat", "--for", "stopped", "--timeout", "60s"]).await;
    assert_eq!(stopped.code, 0, "{stopped:?}");
    // A sandbox has no pull request to comment on: it says how it is woken instead.
    let got = run(&["get", "shell-feat", "-o", "json"]).await;
    assert_eq!(
        json_of(&got)["reason"],
        "Stopped on request: run `sandcastle previews wake shell-feat` to start it again"
    );
    let timed_out = run(&["wait", "shell-feat", "--timeout", "2s"]).await;
    assert_eq!(timed_out.code, 2, "{timed_out:?}");
    assert!(timed_out.stdout.contains("timeout"), "{timed_out:?}");
    assert_eq!(run(&["wake", "shell-feat"]).await.code, 0);

    // A preview token: printed alone, and it works with the CLI for its own preview.
    let token = run(&["token", "shell-feat"]).await;
    assert_eq!(token.code, 0, "{token:?}");
    let token = token.stdout.trim_end_matches('\n').to_owned();
    assert!(!token.contains('\n') && token.starts_with("eyJ"));
    let own = previews(&server, Some(&token), &["get", "shell-feat", "-o", "json"]).await;
    assert_eq!(own.code, 0, "{own:?}");
    let seen = previews(&server, Some(&token), &["list", "-o", "json"]).await;
    let seen = json_of(&seen);
    let names: Vec<&str> = seen["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["shell-feat"]);

    // Refusals: exit 1 with the API's code on stderr.
    let missing = run(&["get", "nope"]).await;
    assert_eq!(missing.code, 1);
    assert_eq!(
        missing.stderr,
        "error: preview_not_found: preview nope does not exist\n"
    );
    let extended = run(&["extend", "shell-feat", "1h", "-o", "json"]).await;
    assert_eq!(
        extended.code, 0,
        "the duration as a plain word: {extended:?}"
    );
    assert_eq!(json_of(&extended)["name"], "shell-feat");
    let bad = run(&["extend", "shell-feat", "--by", "forever"]).await;
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.starts_with("error: invalid_duration: "),
        "{bad:?}"
    );
    let nobody = previews(&server, None, &["list"]).await;
    assert_eq!(nobody.code, 1);
    assert!(nobody.stderr.contains("no token"), "{nobody:?}");
    let empty = previews(&server, Some(""), &["list"]).await;
    assert_eq!(empty.code, 1);
    assert!(
        empty
            .stderr
            .starts_with("error: the token is empty (--token or SANDCASTLE_TOKEN): ")
            && empty.stderr.contains("kubectl -n sandcastle create token"),
        "{empty:?}"
    );
    let forged = previews(&server, Some("not-a-token"), &["list"]).await;
    assert_eq!(forged.code, 1);
    assert!(
        forged.stderr.starts_with("error: unauthenticated: "),
        "{forged:?}"
    );
    let nowhere = previews("http://127.0.0.1:9", Some(&admin), &["list"]).await;
    assert_eq!(nowhere.code, 1);
    assert!(
        nowhere
            .stderr
            .contains("could not reach Sandcastle at http://127.0.0.1:9"),
        "{nowhere:?}"
    );
    assert!(
        !nowhere.stderr.contains(&admin),
        "the token is never printed"
    );

    // Delete; the preview is waited out, and shows no expiry once removed.
    let delete = run(&["delete", "shell-feat"]).await;
    assert_eq!(delete.code, 0, "{delete:?}");
    assert!(
        delete
            .stdout
            .starts_with("Asked to delete shell-feat: under way (it is "),
        "{delete:?}"
    );
    let gone = run(&["wait", "shell-feat", "--for", "removed", "--timeout", "60s"]).await;
    assert_eq!(gone.code, 0, "{gone:?}");
    let removed = run(&["get", "shell-feat"]).await;
    assert!(
        removed.stdout.contains("\nExpires:      -\n"),
        "{removed:?}"
    );
    let history = removed.stdout.split("History:").nth(1).unwrap_or_default();
    assert!(
        history.lines().all(|l| !l.trim_start().starts_with("in ")),
        "nothing happened in the future: {removed:?}"
    );
}

#[tokio::test]
async fn wait_exits_1_when_the_preview_fails() {
    let world = World::new("doomed", FAILING_SEED, json!({})).await;
    let server = format!("http://{}", world.addr());
    let admin = account(&world, "admin", &[ALL]).await;
    let repo = world.repo.as_str().to_owned();
    let commit = sha();
    let created = previews(
        &server,
        Some(&admin),
        &[
            "create",
            "--blueprint",
            "doomed",
            "--repo",
            &repo,
            "--commit",
            commit.as_str(),
            "--branch",
            "broken",
            "--name",
            "doomed-broken",
        ],
    )
    .await;
    assert_eq!(created.code, 0, "{created:?}");
    let waited = previews(
        &server,
        Some(&admin),
        &["wait", "doomed-broken", "--timeout", "90s"],
    )
    .await;
    assert_eq!(waited.code, 1, "{waited:?}");
    assert!(
        waited.stdout.starts_with("doomed-broken failed (Failed: "),
        "{waited:?}"
    );
    assert!(
        waited.stdout.contains("seed"),
        "names the failing Job: {waited:?}"
    );
}

/// Run `sandcastle setup` with `args` against the world's stand-in and namespace.
async fn setup(world: &World, args: &[&str]) -> (i32, String, String) {
    let kubeconfig = std::env::var("SANDCASTLE_TEST_KUBECONFIG")
        .or_else(|_| std::env::var("KUBECONFIG"))
        .unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sandcastle-dev"))
        .arg("setup")
        .args(args)
        .env_clear()
        .env("KUBECONFIG", kubeconfig)
        .env("SANDCASTLE_NAMESPACE", &world.home.name)
        .env("SANDCASTLE_PUBLIC_URL", "https://previews.acme.dev")
        .env("SANDCASTLE_GITHUB_URL", world.gh.url())
        .env("SANDCASTLE_GITHUB_API_URL", world.gh.url())
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Post `manifest` to the stand-in's new-App page, as a browser would; the code it hands back.
async fn code_for(world: &World, manifest: &str) -> String {
    let form = serde_urlencoded::to_string([("manifest", manifest)]).unwrap();
    let page = reqwest::Client::new()
        .post(format!("{}/settings/apps/new?state=s", world.gh.url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let at = page.find("name=\"code\" value=\"").expect("a code") + 19;
    page[at..at + page[at..].find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn setup_prints_the_manifest_and_stores_the_app_from_its_code() {
    let world = World::unstarted("setupcli", APP, json!({})).await;
    let (code, manifest, hint) = setup(&world, &[]).await;
    assert_eq!(code, 0, "{hint}");
    let m: Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(
        m["hook_attributes"]["url"],
        "https://previews.acme.dev/github/webhook"
    );
    assert!(hint.contains("/settings/apps/new?state="), "{hint}");

    let first = code_for(&world, &manifest).await;
    let (code, out, err) = setup(&world, &["--code", &first]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Stored GitHub App sandcastle"), "{out}");
    let api: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(world.client.clone(), &world.home.name);
    let stored = api.get("sandcastle-github-app").await.unwrap();
    let creds = sandcastle::k8s::app_secret::credentials(&stored).unwrap();
    assert_eq!(creds.app_id, sandcastle_fake_github::TEST_APP_ID);
    assert_eq!(
        Some(creds.webhook_secret.expose().to_owned()),
        world.gh.created_webhook_secret()
    );
    assert!(
        !out.contains(creds.webhook_secret.expose()),
        "no secret printed"
    );

    // A second App is refused unless forced, before its code is spent; a code is good once.
    let second = code_for(&world, &manifest).await;
    let (code, _, err) = setup(&world, &["--code", &second]).await;
    assert_eq!(code, 1);
    assert!(err.contains("an App is configured already"), "{err}");
    let (code, out, err) = setup(&world, &["--code", &second, "--force"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = setup(&world, &["--code", &second, "--force"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("GitHub refused the code: Not Found"), "{err}");
}
