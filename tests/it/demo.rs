//! `sandcastle demo`'s story, told on the local control plane as the demo tells it (its stage,
//! the GitHub stand-in, the real webhook): the pull request's comment it shows once the preview
//! is Ready reads Ready, the pull request's author is someone with write access, and the
//! comment's lag behind GitHub's `success` is measured; the dashboard it prints signs its viewer
//! in (the stand-in's OAuth, as the author) and shows the preview, in Chromium; after a push and
//! a merge it tells the states the event led to, not the one before.

use std::sync::{Arc, Mutex};

use sandcastle_demo::stage::Stage;
use sandcastle_demo::story;

use crate::support::TestNamespace;
use crate::support::browser::Browser;
use crate::support::cluster::{client, unique};

#[tokio::test]
async fn the_demo_shows_the_comment_as_the_ready_pull_request_reads() {
    let client = client().await;
    let home = TestNamespace::new(&client, "it-demo").await;
    let staging = TestNamespace::new(&client, "it-demo-staging").await;
    let stage = Stage::prepare_with_prefix(
        client.clone(),
        &home.name,
        &staging.name,
        0,
        true,
        &unique("d"),
    )
    .await
    .expect("the stage is set");
    let said = Arc::new(Mutex::new(Vec::new()));
    let lines = said.clone();
    let mut say = move |line: String| lines.lock().unwrap().push(line);
    // While the preview is up, a newcomer opens the dashboard the story printed.
    let told = said.clone();
    let dashboard = async {
        let printed = told
            .lock()
            .unwrap()
            .iter()
            .find_map(|l| l.trim().strip_prefix("Dashboard: "))
            .and_then(|l| l.split_whitespace().next())
            .map(str::to_owned)
            .expect("the story prints the dashboard's URL");
        assert_eq!(printed, format!("{}/", stage.public_url()));
        let b = Browser::start().await;
        b.client.goto(&printed).await.unwrap();
        b.wait_text("Sign in with GitHub").await;
        b.click("main a.button").await;
        b.click("#authorize").await;
        let list = b.wait_text("Signed in as @maria").await;
        assert!(list.contains("guestbook-pr-42"), "{list}");
        assert!(list.contains("Environment-hours"), "{list}");
        b.click("a[href='/previews/guestbook-pr-42']").await;
        let page = b.wait_text("Preview guestbook-pr-42").await;
        assert!(page.contains("History"), "{page}");
        b.screenshot("demo-dashboard").await;
    };
    let figures = story::play(&mut say, &client, &stage, &home.name, async {}, dashboard)
        .await
        .expect("the story is told");
    stage.running.shutdown().await;
    let text = said.lock().unwrap().join("\n");

    let opened = text
        .split("\n1. ")
        .nth(1)
        .and_then(|s| s.split("\n2. ").next())
        .unwrap_or_else(|| panic!("no step 1:\n{text}"));
    assert!(
        opened.starts_with("Pull request #42 opened by @maria (write access) at commit "),
        "{opened}"
    );
    let comment: Vec<&str> = opened
        .lines()
        .filter_map(|l| l.strip_prefix("   │ "))
        .collect();
    assert_eq!(
        comment.first().copied(),
        Some("### 🏖️ Preview `guestbook-pr-42` — ✅ Ready"),
        "{opened}"
    );
    assert!(
        comment
            .iter()
            .any(|l| l.starts_with("| **Rule** | members (authors.members)")),
        "{opened}"
    );
    assert!(
        comment
            .iter()
            .any(|l| l.starts_with("| **URL** | http://42-guestbook.preview.localhost")),
        "{opened}"
    );
    assert!(
        opened.contains("   The comment said Ready "),
        "the lag is told: {opened}"
    );
    assert_eq!(figures.comment_lag_ms.len(), 2, "{figures:?}");

    // After the push and the merge, the first state told is the one the event led to, never
    // the Ready from before it.
    for (step, next) in [("\n2. ", Some("\n3. ")), ("\n3. ", None)] {
        let told = text
            .split(step)
            .nth(1)
            .unwrap_or_else(|| panic!("no {step}:\n{text}"));
        let told = next.map_or(told, |n| told.split(n).next().unwrap_or(told));
        let first = told
            .lines()
            .find(|l| {
                l.split_whitespace().next().is_some_and(|w| {
                    w.ends_with('s') && w.trim_end_matches('s').parse::<f64>().is_ok()
                })
            })
            .unwrap_or_else(|| panic!("no state told after{step}:\n{told}"));
        let phase = first.split_whitespace().nth(1).unwrap_or_default();
        assert_ne!(
            phase, "Ready",
            "the state from before the event was told first:\n{told}"
        );
    }
}
