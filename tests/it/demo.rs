//! `sandcastle demo`'s story, told on the local control plane as the demo tells it (its stage,
//! the GitHub stand-in, the real webhook): the pull request's comment it shows once the preview
//! is Ready reads Ready, the pull request's author is someone with write access, and the
//! comment's lag behind GitHub's `success` is measured.

use std::sync::{Arc, Mutex};

use sandcastle_demo::stage::Stage;
use sandcastle_demo::story;

use crate::support::TestNamespace;
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
    let figures = story::play(&mut say, &client, &stage, &home.name, async {}, async {})
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
}
