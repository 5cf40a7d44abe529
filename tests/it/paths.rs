//! A Blueprint's `paths` and `ignorePaths` against the files GitHub says a pull request and a
//! push change: docs-only changes get no preview and leave one where it is, a change to code
//! deploys, and a list GitHub cut short deploys.

use std::time::Duration;

use sandcastle::crd::Phase;
use sandcastle::github::changed_files::ONLY_IGNORED;
use sandcastle_fake_github::PrSpec;
use serde_json::json;

use crate::support::fixtures::TINY_APP;
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);

#[tokio::test]
async fn docs_only_changes_get_no_preview_and_a_change_to_code_deploys() {
    let world = World::new(
        "paths",
        TINY_APP,
        json!({"ignorePaths": ["docs/**", "**/*.md"]}),
    )
    .await;
    let previews = world.previews();

    // Only docs: no preview, and the answer says why.
    let mut spec = PrSpec::new(pr(1), sha(), "docs");
    spec.files = vec!["docs/intro.md".into(), "README.md".into()];
    let (status, body) = world
        .deliver(&world.gh.open_pull_request(&world.repo, spec))
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["reason"], format!("paths: {ONLY_IGNORED}"), "{body}");
    let docs_push = world
        .gh
        .push_files(&world.repo, pr(1), &sha(), &["docs/more.md"]);
    let (status, body) = world.deliver(&docs_push).await;
    assert_eq!(status, 202, "a push of more docs: {body}");
    assert!(previews.get_opt("paths-pr-1").await.unwrap().is_none());

    // A push touching code deploys, at that commit.
    let code = sha();
    let push = world
        .gh
        .push_files(&world.repo, pr(1), &code, &["src/app.rs", "docs/x.md"]);
    let (status, body) = world.deliver(&push).await;
    assert_eq!(status, 200, "{body}");
    let pe = world.wait_phase("paths-pr-1", Phase::Ready, T).await;
    assert_eq!(
        pe.status.unwrap().deployed_sha.as_deref(),
        Some(code.as_str())
    );

    // Running, it stays where it is for a docs-only push.
    let push = world
        .gh
        .push_files(&world.repo, pr(1), &sha(), &["docs/y.md"]);
    let (status, body) = world.deliver(&push).await;
    assert_eq!(status, 202, "{body}");
    let pe = previews.get("paths-pr-1").await.unwrap();
    assert_eq!(
        pe.spec.sha,
        code.as_str(),
        "kept at the last commit that concerned it"
    );

    // GitHub lists 3,000 files of a pull request at most: one cut short deploys.
    let mut spec = PrSpec::new(pr(2), sha(), "many-docs");
    spec.files = (0..3001).map(|i| format!("docs/page-{i}.md")).collect();
    let (status, body) = world
        .deliver(&world.gh.open_pull_request(&world.repo, spec))
        .await;
    assert_eq!(status, 200, "{body}");
    world.wait_phase("paths-pr-2", Phase::Ready, T).await;
}
