//! A signed-in-only preview through Traefik's forwardAuth, on real pods: GitHub hears `success`
//! (the readiness probe passes the gate with the preview's header secret); in Chromium a person
//! who can read the repository signs in through the stand-in's OAuth and lands on the preview's
//! page, someone who cannot is refused with a page saying why, and a share link opens the
//! preview in a browser without GitHub until it expires; an agent's token opens it with `curl`,
//! a token of another preview and no token at all do not. Screenshots go to
//! `target/screenshots/gate-*.png`.

use std::time::Duration;

use fantoccini::Locator;
use sandcastle::crd::Phase;
use sandcastle_fake_github::Role;
use serde_json::{Value, json};

use crate::support::api::{ALL, account, call};
use crate::support::browser::Browser;
use crate::support::eventually;
use crate::support::world::{World, sha};
use crate::tier::{self, RealTier, T, host_of, open_at};

/// A started world on the real tier whose Blueprint is `access: signedIn`, with sign-in and the
/// gate on its edge listener; alice may read the repository, carol may not.
async fn gated(tier: &RealTier, name: &str) -> World {
    let mut world = World::unstarted(
        name,
        tier::REAL_APP,
        tier::blueprint(json!({"access": "signedIn"})),
    )
    .await;
    world.probe_via = Some(tier.probe_via());
    world.sign_in = true;
    world.listen_on_a_port_of_its_own();
    world.gate_on_the_edge_listener();
    world.gh.set_role(&world.repo, "alice", Role::Read);
    world.start().await;
    world
}

/// `curl` through Traefik to `host`'s `path`, with `headers`: status, `X-Commit`, body. (Run
/// without blocking: the gate answering it is served by this test's own runtime.)
async fn curl(
    tier: &RealTier,
    host: &str,
    path: &str,
    headers: &[String],
) -> (u16, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let (body, head) = (dir.path().join("body"), dir.path().join("headers"));
    let mut cmd = tokio::process::Command::new("curl");
    cmd.args(["--silent", "--show-error", "--max-time", "10"])
        .arg("--output")
        .arg(&body)
        .arg("--dump-header")
        .arg(&head)
        .args(["--write-out", "%{http_code}"])
        .args(["-H", &format!("Host: {host}")]);
    for h in headers {
        cmd.args(["-H", h]);
    }
    let out = cmd
        .arg(format!("http://{}{path}", tier.ingress))
        .output()
        .await
        .expect("curl runs");
    let code = String::from_utf8_lossy(&out.stdout);
    let status = code
        .trim()
        .parse()
        .ok()
        .filter(|s| *s != 0)
        .unwrap_or_else(|| {
            panic!(
                "curl answered no status ({code:?}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let headers = std::fs::read_to_string(&head)
        .unwrap_or_default()
        .to_ascii_lowercase();
    let commit = headers
        .lines()
        .find_map(|l| l.strip_prefix("x-commit:"))
        .map(|c| c.trim().to_owned())
        .unwrap_or_default();
    (
        status,
        commit,
        std::fs::read_to_string(&body).unwrap_or_default(),
    )
}

/// A token of `preview`'s own, minted through the API by `admin`.
async fn preview_token(world: &World, admin: &str, preview: &str) -> String {
    let path = format!("/api/v1/previews/{preview}/token");
    let minted = call(world, "POST", &path, Some(admin), None).await;
    assert_eq!(minted.status, 201, "{minted:?}");
    minted.body["token"].as_str().unwrap().to_owned()
}

/// The commit the app's page shows in `browser` (its `#commit`).
async fn commit_shown(b: &Browser) -> String {
    let found = eventually("the app's page", T, || async {
        match b.client.find(Locator::Id("commit")).await {
            Ok(e) => Ok(e),
            Err(_) => Err(b.text().await),
        }
    })
    .await;
    found.text().await.unwrap()
}

#[tokio::test]
async fn people_agents_and_share_links_get_in_and_nobody_else() {
    let tier = tier::tier();
    let world = gated(&tier, "gated").await;
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    // The probe went through the gate (the preview's header secret) to see the commit.
    world.wait_github_state(&head, "success", T).await;
    let host = host_of(&world, "gated-pr-1").await;
    let url = format!(
        "http://{host}:{}/",
        tier.ingress.rsplit(':').next().unwrap()
    );

    // Nobody: refused with the reason, nothing of the app.
    let (status, commit, body) = curl(&tier, &host, "/api/info", &[]).await;
    assert_eq!(status, 401, "{body}");
    assert!(commit.is_empty(), "the app was not reached");
    let refusal: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(refusal["error"]["code"], "sign_in_required", "{body}");

    // An agent with the preview's own token, and with another preview's.
    let admin = account(&world, "admin", &[ALL]).await;
    let own = preview_token(&world, &admin, "gated-pr-1").await;
    let (status, commit, body) = curl(
        &tier,
        &host,
        "/api/info",
        &[format!("Authorization: Bearer {own}")],
    )
    .await;
    assert_eq!((status, commit.as_str()), (200, head.as_str()), "{body}");
    let second = sha();
    tier.image_for(&second);
    open_at(&world, 2, &second).await;
    world.wait_phase("gated-pr-2", Phase::Ready, T).await;
    let other = preview_token(&world, &admin, "gated-pr-2").await;
    let (status, _, body) = curl(
        &tier,
        &host,
        "/api/info",
        &[format!("Authorization: Bearer {other}")],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("token_not_for_this_preview"), "{body}");

    // alice, who can read the repository, signs in with GitHub and lands on the preview.
    world.gh.sign_in_to_github("alice");
    let b = Browser::start().await;
    b.client.goto(&url).await.unwrap();
    b.wait_text("Authorize").await;
    b.screenshot("gate-github-authorize").await;
    b.click("#authorize").await;
    assert_eq!(commit_shown(&b).await, head.as_str());
    let at = b.client.current_url().await.unwrap();
    assert_eq!(at.host_str(), Some(host.as_str()), "{at}");
    b.screenshot("gate-signed-in").await;

    // carol cannot read it: refused with a page that says why.
    world.gh.sign_in_to_github("carol");
    let c = Browser::start().await;
    c.client.goto(&url).await.unwrap();
    c.wait_text("Authorize").await;
    c.click("#authorize").await;
    let page = c.wait_text("No access to this preview").await;
    assert!(
        page.contains("@carol") && page.contains(world.repo.as_str()),
        "{page}"
    );
    c.screenshot("gate-refused").await;

    // A share link opens it without GitHub, until it expires.
    let made = call(
        &world,
        "POST",
        "/api/v1/previews/gated-pr-1/shares",
        Some(&admin),
        Some(json!({"expiresIn": "1m", "label": "for a reviewer"})),
    )
    .await;
    assert_eq!(made.status, 201, "{made:?}");
    let link = made.body["url"].as_str().unwrap().replacen(
        &host,
        &format!("{host}:{}", tier.ingress.rsplit(':').next().unwrap()),
        1,
    );
    let r = Browser::start().await;
    r.client.goto(&link).await.unwrap();
    assert_eq!(commit_shown(&r).await, head.as_str());
    r.screenshot("gate-share-link").await;
    eventually("the link has expired", Duration::from_secs(150), || async {
        r.client.goto(&link).await.map_err(|e| e.to_string())?;
        let text = r.text().await;
        if text.contains("This link no longer opens the preview") {
            Ok(())
        } else {
            Err(text)
        }
    })
    .await;
    r.client.goto(&url).await.unwrap();
    let text = r.text().await;
    assert!(
        !text.contains(head.as_str()),
        "the expired link's cookie opens nothing: {text}"
    );
    r.screenshot("gate-share-link-expired").await;
}

#[tokio::test]
async fn a_signed_in_only_previews_http_route_passes_the_gate_first() {
    let tier = tier::tier();
    let gateways =
        crate::support::TestNamespace::new(&crate::support::client().await, "gwgate").await;
    crate::gateway::shared_gateway(&gateways.name, &tier.ingress).await;
    let mut world = World::unstarted(
        "gwgated",
        &crate::gateway::routed_app(&gateways.name),
        tier::blueprint(json!({"access": "signedIn"})),
    )
    .await;
    world.probe_via = Some(tier.probe_via());
    world.gate_on_the_edge_listener();
    world.start().await;
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    // The probe passed the gate on the route (the ExtensionRef filter to the Middleware).
    world.wait_github_state(&head, "success", T).await;
    let host = host_of(&world, "gwgated-pr-1").await;

    let (status, commit, body) = curl(&tier, &host, "/api/info", &[]).await;
    assert_eq!(status, 401, "{body}");
    assert!(commit.is_empty(), "the app was not reached: {body}");
    let admin = account(&world, "admin", &[ALL]).await;
    let token = preview_token(&world, &admin, "gwgated-pr-1").await;
    let (status, commit, body) = curl(
        &tier,
        &host,
        "/api/info",
        &[format!("X-Sandcastle-Token: {token}")],
    )
    .await;
    assert_eq!((status, commit.as_str()), (200, head.as_str()), "{body}");
}
