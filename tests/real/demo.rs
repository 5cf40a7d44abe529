//! `sandcastle demo --real`'s story on the real tier, looked at in Chromium as a person would:
//! after the pull request is opened the URL it prints shows the commit, after the push the same
//! URL shows the new one. Screenshots go to `target/screenshots/demo-real-*.png`.

use fantoccini::Locator;
use kube::api::Api;
use sandcastle::crd::PreviewEnvironment;
use sandcastle_demo::real::RealTier;
use sandcastle_demo::stage::Stage;
use sandcastle_demo::story;

use crate::support::browser::Browser;
use crate::support::{TestNamespace, client};
use crate::tier;

/// Open `url` in `browser` and read the commit the page shows; saves a screenshot as `name`.
async fn commit_shown(browser: &Browser, url: &str, name: &str) -> String {
    browser.client.goto(url).await.unwrap();
    let found = browser.client.find(Locator::Id("commit")).await;
    let element = match found {
        Ok(e) => e,
        Err(e) => panic!("{url} has no commit: {e}: {}", browser.text().await),
    };
    let shown = element.text().await.unwrap();
    let png = browser.screenshot(name).await;
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    shown
}

/// The commit preview `name` runs now.
async fn deployed(previews: &Api<PreviewEnvironment>, name: &str) -> String {
    let pe = previews.get(name).await.unwrap();
    pe.status.unwrap().deployed_sha.unwrap()
}

#[tokio::test]
async fn the_demos_url_shows_the_commit_in_a_browser_and_the_push_changes_it() {
    let real = tier::tier();
    let client = client().await;
    let home = TestNamespace::new(&client, "demo-home").await;
    let staging = TestNamespace::new(&client, "demo-staging").await;
    let tier = RealTier {
        ingress: real.ingress.clone(),
        harness_dir: real.harness_dir().to_owned(),
    };
    let url = tier.browser_url("42-shop.preview.localhost");
    let stage = Stage::prepare_real(client.clone(), &home.name, &staging.name, 0, tier)
        .await
        .expect("the real stage");
    let browser = Browser::start().await;
    let previews: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home.name);

    let mut lines = Vec::new();
    let mut say = |l: String| lines.push(l);
    // (deployed, shown) after the pull request is opened, then after the push.
    let seen = std::sync::Mutex::new(Vec::new());
    let look = |shot: &'static str| {
        let (previews, browser, url, seen) = (&previews, &browser, &url, &seen);
        async move {
            let sha = deployed(previews, "shop-pr-42").await;
            let shown = commit_shown(browser, url, shot).await;
            seen.lock().unwrap().push((sha, shown));
        }
    };
    story::play(
        &mut say,
        &client,
        &stage,
        &home.name,
        look("demo-real-opened"),
        look("demo-real-pushed"),
    )
    .await
    .expect("the story plays");
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (sha, shown) in &seen {
        assert_eq!(shown, sha, "the page shows the commit deployed");
    }
    assert_ne!(seen[0].0, seen[1].0, "the push changed the commit shown");
    let told = lines.join("\n");
    assert!(told.contains(&format!("Open {url} in a browser")), "{told}");
    stage.running.shutdown().await;
}
