//! The dashboard in a real browser: Debian's headless Chromium driven through chromedriver
//! (WebDriver, with fantoccini). Signing in through the stand-in's OAuth pages, the list shows
//! exactly the previews of readable repositories; a writer extends and stops a preview by its
//! buttons and the page, the status and the sticky comment agree; a failed preview's page shows
//! the diagnosis; a deploying preview's page updates itself without a reload; a visitor to a
//! stopped preview's host is taken from the waking page into the woken app. Each page is saved
//! as a screenshot under `target/screenshots/`. Needs `chromedriver` and `chromium`
//! (`SANDCASTLE_CHROMEDRIVER`, `SANDCASTLE_CHROMIUM`, else on PATH; `scripts/test` installs them).

use std::time::Duration;

use fantoccini::Locator;
use sandcastle::crd::Phase;
use serde_json::json;

use crate::dashboard::two_repositories;
use crate::support::browser::Browser;
use crate::support::eventually;
use crate::support::world::{World, pr};

const T: Duration = Duration::from_secs(90);

fn url(world: &World, path: &str) -> String {
    format!("http://{}{path}", world.addr())
}

#[tokio::test]
async fn sign_in_see_your_previews_extend_and_stop() {
    let world = two_repositories("web").await;
    world.gh.sign_in_to_github("alice");
    let b = Browser::start().await;
    b.client.goto(&url(&world, "/")).await.unwrap();
    b.wait_text("Sign in with GitHub").await;
    b.screenshot("sign-in").await;
    b.click("main a.button").await;
    b.wait_text("Authorize").await;
    b.screenshot("github-authorize").await;
    b.click("#authorize").await;

    let list = b.wait_text("Signed in as @alice").await;
    assert!(list.contains("web-pr-1"), "{list}");
    assert!(
        !list.contains("secret-pr-2"),
        "a repository alice cannot read: {list}"
    );
    b.screenshot("list").await;

    b.click("a[href='/previews/web-pr-1']").await;
    b.wait_text("Preview web-pr-1").await;
    b.screenshot("preview").await;
    let before = world
        .previews()
        .get("web-pr-1")
        .await
        .unwrap()
        .spec
        .expires_at;
    let by = b.client.find(Locator::Id("by")).await.unwrap();
    by.clear().await.unwrap();
    by.send_keys("8h").await.unwrap();
    b.click("form[action='/previews/web-pr-1/extend'] button")
        .await;
    b.wait_text("Done: extend.").await;
    let after = world
        .previews()
        .get("web-pr-1")
        .await
        .unwrap()
        .spec
        .expires_at;
    assert!(after.unwrap().0 > before.unwrap().0, "the expiry moved");

    b.click("form[action='/previews/web-pr-1/stop'] button")
        .await;
    b.wait_text("Done: stop.").await;
    world.wait_phase("web-pr-1", Phase::Stopped, T).await;
    b.client.refresh().await.unwrap();
    b.wait_css("td.Stopped").await;
    let page = b.text().await;
    assert!(page.contains("Wake"), "{page}");
    b.screenshot("preview-stopped").await;
    eventually("the sticky comment agrees", T, || async {
        let comments = world.gh.comments(&world.repo, pr(1));
        comments
            .iter()
            .find(|c| c.body.contains("⏸️ Stopped"))
            .map(drop)
            .ok_or_else(|| format!("{comments:#?}"))
    })
    .await;

    // Sign out; bob, who may only read the repository, signs in: no buttons, and a POST made
    // without the page's token (as another site would make it) is refused.
    b.click("header form[action='/logout'] button").await;
    b.wait_text("Sign in with GitHub").await;
    world.gh.sign_in_to_github("bob");
    b.click("main a.button").await;
    b.click("#authorize").await;
    b.wait_text("Signed in as @bob").await;
    b.client
        .goto(&url(&world, "/previews/web-pr-1"))
        .await
        .unwrap();
    let page = b.wait_text("Preview web-pr-1").await;
    assert!(
        !page.contains("Wake") && !page.contains("Destroy"),
        "{page}"
    );
    b.screenshot("preview-read-only").await;
    let status = b
        .client
        .execute(
            "return fetch('/previews/web-pr-1/wake', {method: 'POST', \
             headers: {'content-type': 'application/x-www-form-urlencoded'}, body: 'csrf=forged'}) \
             .then(r => r.status)",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403));
    assert_eq!(
        world
            .previews()
            .get("web-pr-1")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase,
        Some(Phase::Stopped)
    );

    // Readable on a phone.
    b.client.set_window_size(390, 844).await.unwrap();
    b.client.goto(&url(&world, "/")).await.unwrap();
    b.wait_text("web-pr-1").await;
    b.screenshot("list-phone").await;
    b.client.close().await.unwrap();
}

#[tokio::test]
async fn a_failed_preview_shows_its_diagnosis_and_a_deploying_one_updates_itself() {
    let mut failing = World::unstarted(
        "broken",
        crate::support::fixtures::NEVER_READY_APP,
        json!({"readinessTimeout": "2s"}),
    )
    .await;
    failing.configure = Some(|parts| parts.settings.public_pages = true);
    failing.start().await;
    failing.open(1).await;
    failing.wait_phase("broken-pr-1", Phase::Failed, T).await;

    let b = Browser::start().await;
    b.client
        .goto(&url(&failing, "/previews/broken-pr-1"))
        .await
        .unwrap();
    let page = b.wait_text("Diagnosis").await;
    assert!(
        page.contains("deployment/web: container web runs but is not ready (readiness probe)"),
        "{page}"
    );
    b.screenshot("preview-failed").await;

    let mut slow =
        World::unstarted("slow", &crate::support::fixtures::slow_app("6s"), json!({})).await;
    slow.configure = Some(|parts| parts.settings.public_pages = true);
    slow.start().await;
    slow.open(1).await;
    slow.wait_phase("slow-pr-1", Phase::Deploying, T).await;
    b.client
        .goto(&url(&slow, "/previews/slow-pr-1"))
        .await
        .unwrap();
    b.wait_text("Deploying").await;
    b.screenshot("preview-deploying").await;
    // No reload from here: the page refreshes itself until the preview is Ready.
    b.wait_css("td.Ready").await;
    b.screenshot("preview-ready").await;
    b.client.goto(&url(&slow, "/")).await.unwrap();
    b.wait_text("Capacity").await;
    b.screenshot("list-public").await;
    b.client.close().await.unwrap();
}

#[tokio::test]
async fn setup_makes_a_working_app_from_nothing() {
    // A world with no Sandcastle of its own running: the process under test does everything.
    let mut world = World::unstarted("setup", crate::support::fixtures::TINY_APP, json!({})).await;
    let addr = world.listen_on_a_port_of_its_own();
    world.gh.sign_in_to_github("octocat");
    let kubeconfig = std::env::var("SANDCASTLE_TEST_KUBECONFIG")
        .or_else(|_| std::env::var("KUBECONFIG"))
        .unwrap();
    let _serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_sandcastle-dev"))
        .arg("serve")
        .env_clear()
        .env("KUBECONFIG", kubeconfig)
        .env("SANDCASTLE_LISTEN", addr.to_string())
        // The wake listener on a free port of its own (replicas run side by side).
        .env("SANDCASTLE_WAKE_LISTEN", "127.0.0.1:0")
        .env("SANDCASTLE_PUBLIC_URL", format!("http://{addr}"))
        .env("SANDCASTLE_NAMESPACE", &world.home.name)
        .env("SANDCASTLE_NAMESPACE_PREFIX", &world.prefix)
        .env("SANDCASTLE_GITHUB_API_URL", world.gh.url())
        .env("SANDCASTLE_GITHUB_URL", world.gh.url())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("sandcastle serve starts");
    eventually("the setup pages answer", T, || async {
        reqwest::get(format!("http://{addr}/healthz"))
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await;
    // Without an App, a delivery is refused (and nothing is lost: GitHub retries a 503).
    let d = world.gh.open_pull_request(
        &world.repo,
        sandcastle_fake_github::PrSpec::new(pr(1), crate::support::world::sha(), "b"),
    );
    let (status, body) = world
        .post_to(addr, d.body.clone(), d.signed_headers("anything"))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("not_configured"))
    );

    let b = Browser::start().await;
    b.client.goto(&format!("http://{addr}/")).await.unwrap();
    b.wait_text("Set up Sandcastle").await;
    b.screenshot("setup").await;
    b.click("#continue").await;
    b.wait_text("Create the GitHub App").await;
    b.screenshot("setup-manifest").await;
    b.click("#create").await;
    b.wait_text("Create GitHub App Sandcastle for octocat")
        .await;
    b.click("#create-app").await;
    let done = b.wait_text("GitHub App created").await;
    assert!(done.contains("Install it on your repositories"), "{done}");
    b.screenshot("setup-done").await;
    let install = b
        .client
        .find(Locator::Id("install"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap();
    assert_eq!(
        install.as_deref(),
        Some("https://github.com/apps/sandcastle/installations/new")
    );

    // The same process now is that App: a delivery signed with the new webhook secret is
    // handled, and the preview is deployed.
    let secret = world.gh.created_webhook_secret().expect("the App was made");
    eventually("the new App takes deliveries", T, || async {
        let (status, body) = world
            .post_to(addr, d.body.clone(), d.signed_headers(&secret))
            .await;
        if status == 200 {
            Ok(())
        } else {
            Err(format!("{status} {body}"))
        }
    })
    .await;
    world.wait_phase("setup-pr-1", Phase::Ready, T).await;
    let (status, _) = world
        .post_to(
            addr,
            d.body.clone(),
            d.signed_headers("the old or a wrong secret"),
        )
        .await;
    assert_eq!(status, 401, "only the new secret is accepted");

    // A second setup is refused.
    b.client
        .goto(&format!("http://{addr}/setup"))
        .await
        .unwrap();
    let again = b.wait_text("Already set up").await;
    assert!(again.contains("sandcastle setup --force"), "{again}");
    b.client.close().await.unwrap();
}

#[tokio::test]
async fn a_visitor_is_taken_from_the_waking_page_into_the_woken_app() {
    use crate::support::ingress::IngressController;
    use crate::wake::{host_of, parked, waking_world};

    let world = waking_world("wakeb").await;
    // Chromium reaches every preview host through the ingress controller, as its HTTP proxy.
    let ingress = IngressController::start(world.client.clone(), &world.prefix).await;
    let b = Browser::start_with(&[format!("--proxy-server=http://{}", ingress.addr)]).await;
    world.open(1).await;
    world.wait_phase("wakeb-pr-1", Phase::Ready, T).await;
    let host = host_of(&world, "wakeb-pr-1").await;
    world.clock.advance(Duration::from_secs(61 * 60));
    world.wait_phase("wakeb-pr-1", Phase::Stopped, T).await;
    parked(&world, &world.namespace_of("wakeb-pr-1")).await;

    b.client
        .goto(&format!("http://{host}/orders"))
        .await
        .unwrap();
    let text = b.text().await;
    assert!(
        text.contains("Waking up this preview") || text.contains("Starting this preview"),
        "{text}"
    );
    b.screenshot("wake-waking").await;
    // Nobody touches the page: it reloads itself into the app once the preview is Ready.
    b.wait_text("app web in").await;
    assert_eq!(
        b.client.current_url().await.unwrap().as_str(),
        format!("http://{host}/orders"),
        "the visitor stays on the page they asked for"
    );
    b.screenshot("wake-woken").await;
    let pe = world.previews().get("wakeb-pr-1").await.unwrap();
    assert_eq!(pe.status.unwrap().phase, Some(Phase::Ready));
}
