//! A Blueprint's tests on real pods: once the preview is Ready its test Job runs in the preview's
//! namespace, reaches the app through its Service, finds the pull request's commit served and the
//! preview's token mounted, and its check run is `success` with the Job's own log tail; a test
//! run on request by `/preview test` that fails is `failure` with its exit code, the token it
//! printed masked in the check run.

use serde_json::{Value, json};

use crate::support::eventually;
use crate::support::world::{World, pr, sha};
use crate::tier::{self, T, open_at};
use sandcastle_fake_github::{CheckRunRecord, Role};

/// A test `name` run on `run_on`: `script` in the real tier's busybox image, shaped to the
/// preview's Pod Security (restricted) and LimitRange.
fn test(name: &str, run_on: &str, script: &str) -> Value {
    json!({"name": name, "runOn": run_on, "timeout": "2m", "template": {
        "backoffLimit": 0,
        "template": {"spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": name,
                "image": "sandcastle.test/busybox:1",
                "command": ["sh", "-c", script],
                "securityContext": {"allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}},
                "resources": {"requests": {"cpu": "10m", "memory": "8Mi"},
                    "limits": {"cpu": "200m", "memory": "32Mi"}},
            }],
        }},
    }})
}

/// The check run `Sandcastle / <test>` on `sha`, once completed.
async fn completed(world: &World, sha: &sandcastle::domain::Sha, test: &str) -> CheckRunRecord {
    let name = format!("Sandcastle / {test}");
    eventually(&format!("check run {name} completed"), T, || async {
        let runs = world.gh.check_runs(&world.repo, sha);
        runs.iter()
            .rfind(|r| r.name == name && r.status == "completed")
            .cloned()
            .ok_or_else(|| format!("{runs:#?}"))
    })
    .await
}

#[tokio::test]
async fn a_test_job_reaches_the_preview_and_reports_its_check_runs() {
    let tier = tier::tier();
    // The smoke test asks the app (by its Service) which commit it serves, and says so.
    let smoke = "set -e; test -s \"$SANDCASTLE_TOKEN_FILE\"; \
        got=$(wget -qO- http://app/api/info); echo \"the app says $got\"; \
        echo \"$got\" | grep -q \"$SANDCASTLE_SHA\"; echo \"serves $SANDCASTLE_SHA\"";
    // The failing one prints the token it was given, then fails.
    let leaky =
        "echo \"token $(cat \"$SANDCASTLE_TOKEN_FILE\")\"; echo 'FAIL: checkout broke'; exit 3";
    let world = tier::world(
        &tier,
        "rtests",
        json!({"tests": [test("smoke", "ready", smoke), test("leaky", "request", leaky)]}),
    )
    .await;
    world.gh.allow("/repos/*/*/**");
    world.gh.set_role(&world.repo, "maria", Role::Write);
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_github_state(&head, "success", T).await;

    let run = completed(&world, &head, "smoke").await;
    assert_eq!(run.conclusion.as_deref(), Some("success"), "{run:#?}");
    let text = run
        .output
        .as_ref()
        .and_then(|o| o.text.clone())
        .unwrap_or_default();
    assert!(text.contains(&format!("serves {head}")), "{text}");

    let d = world
        .gh
        .comment(&world.repo, pr(1), "maria", "/preview test leaky");
    let (status, _) = world.deliver(&d).await;
    assert_eq!(status, 202);
    let run = completed(&world, &head, "leaky").await;
    assert_eq!(run.conclusion.as_deref(), Some("failure"), "{run:#?}");
    let output = run.output.unwrap();
    assert!(
        output.summary.contains("| **Exit** | 3 |"),
        "{}",
        output.summary
    );
    let text = output.text.unwrap_or_default();
    assert!(text.contains("FAIL: checkout broke"), "{text}");
    assert!(
        text.contains("token [redacted]"),
        "the token is masked: {text}"
    );
    assert!(!text.contains("eyJ"), "no token shape is left: {text}");
}
