//! schemathesis (from PyPI) against the OpenAPI document Sandcastle serves, authenticated with a
//! ServiceAccount allowed everything on previews: generated requests for every operation,
//! valid and invalid, and the checks that no answer is a 5xx, every status is one the document
//! lists and every body matches its schema. The control plane, Sandcastle and the stand-in for
//! GitHub are the real ones the other tests use; a few previews exist so that requests reach
//! real ones as well as unknown names.
//!
//! Not run: `use_after_free` (a deleted preview stays readable as a tombstone, by design: it
//! shows why it went), and `positive_data_acceptance` on creating a sandbox alone (schema-valid
//! bodies name Blueprints and repositories that do not exist, which the API rightly refuses with
//! 422): every other request the document allows is accepted.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::support::api::{ALL, account, call};
use crate::support::world::{World, sha};

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

/// The schemathesis command: `SANDCASTLE_SCHEMATHESIS`, or `schemathesis` on the PATH.
fn schemathesis() -> PathBuf {
    let name = std::env::var_os("SANDCASTLE_SCHEMATHESIS").unwrap_or_else(|| "schemathesis".into());
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(&name))
            .find(|p| p.is_file())
    });
    let path = PathBuf::from(&name);
    if path.is_absolute() && path.is_file() {
        return path;
    }
    found.unwrap_or_else(|| {
        panic!(
            "schemathesis is not installed: `pip install schemathesis` (as scripts/test does), or set \
             SANDCASTLE_SCHEMATHESIS to its path"
        )
    })
}

#[tokio::test]
async fn the_served_openapi_document_holds_under_schemathesis() {
    let st = schemathesis();
    let mut world = World::unstarted("fuzzed", APP, json!({})).await;
    // Waits are bounded short, so that generated timeouts keep the run short.
    world.configure = Some(|parts| parts.settings.api_max_wait = Duration::from_secs(2));
    world.start().await;
    let admin = account(&world, "admin", &[ALL]).await;
    for branch in ["one", "two"] {
        let body = json!({"blueprint": "fuzzed", "repository": world.repo.as_str(),
            "commit": sha().as_str(), "branch": branch, "name": format!("fuzzed-{branch}")});
        let made = call(&world, "POST", "/api/v1/previews", Some(&admin), Some(body)).await;
        assert_eq!(made.status, 201, "{:?}", made.body);
    }

    let report = tempdir();
    let base = format!("http://{}", world.addr());
    let config = report.join("schemathesis.toml");
    std::fs::write(
        &config,
        "[checks]\nenabled = true\nuse_after_free.enabled = false\n\n\
         [[operations]]\ninclude-name = \"POST /api/v1/previews\"\n\
         checks.positive_data_acceptance.enabled = false\n",
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(&st);
    cmd.arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(format!("{base}/api/v1/openapi.json"))
        .args(["--url", &base])
        .args(["--header", &format!("Authorization: Bearer {admin}")])
        // One worker: Python 3.11's parser can fail with "AST constructor recursion depth
        // mismatch" when hypothesis reads lambda sources on several threads (CPython #106905).
        .args(["--max-examples", "40", "--workers", "1", "--seed", "1"])
        .args(["--request-timeout", "20", "--max-time", "240"])
        .args(["--phases", "examples,coverage,fuzzing,stateful"])
        .args([
            "--suppress-health-check",
            "all",
            "--output-sanitize",
            "true",
        ])
        .args(["--report", "junit", "--report-junit-path"])
        .arg(report.join("junit.xml"))
        .env("NO_COLOR", "1")
        // Its cache directory lands beside the report, not in the checkout.
        .current_dir(&report)
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(600), cmd.output())
        .await
        .expect("schemathesis ends within 10 minutes")
        .expect("schemathesis runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    let junit = std::fs::read_to_string(report.join("junit.xml")).unwrap_or_default();
    // The failing cases alone, first and short: a long run's full output gets cut in logs.
    assert!(
        out.status.success(),
        "schemathesis found problems (exit {:?}):\n{}",
        out.status.code(),
        failures(&junit)
    );
    assert!(
        !stdout.contains(&admin),
        "the token is not echoed in the report"
    );
    // It really exercised the API: every operation, and many requests.
    assert!(!junit.is_empty(), "schemathesis wrote its report");
    let cases = junit.matches("<testcase ").count();
    assert!(
        cases >= 13,
        "one test case per operation, got {cases}:\n{junit}"
    );
}

/// Each failing operation of a JUnit report with what schemathesis said about it.
fn failures(junit: &str) -> String {
    let mut out = String::new();
    for case in junit.split("<testcase ").skip(1) {
        let Some(at) = case.find("<failure") else {
            continue;
        };
        let name = case.split('"').nth(1).unwrap_or("?");
        let text = case[at..].split("</failure>").next().unwrap_or("");
        let text = text.split_once('>').map_or(text, |(_, t)| t);
        out.push_str(&format!("--- {name}\n{}\n", text.trim()));
    }
    if out.is_empty() {
        out.push_str("(no failing case in the report; see the output above)");
    }
    out
}

fn tempdir() -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("sandcastle-schemathesis-{}", rand::random::<u32>()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_reports_failures_are_picked_out_with_their_operation() {
    let junit = r#"<testsuite><testcase name="GET /api/v1/previews" time="1.0" />
    <testcase name="GET /api/v1/previews/{name}/logs" time="15.3">
      <failure type="failure" message="ST101">1. Test Case ID: 7tGVhY

- ST101 Server error</failure>
    </testcase></testsuite>"#;
    assert_eq!(
        failures(junit),
        "--- GET /api/v1/previews/{name}/logs\n1. Test Case ID: 7tGVhY\n\n- ST101 Server error\n"
    );
    assert!(failures("<testsuite/>").starts_with("(no failing case"));
}
