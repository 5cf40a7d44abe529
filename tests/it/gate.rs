//! The gate of a `signedIn` preview, asked as Traefik's forwardAuth asks it (the edge listener's
//! `/.sandcastle/gate/{preview}` with the request's headers and `X-Forwarded-Host`, `-Uri`,
//! `-Proto`): the Middleware and the Ingress's annotation in the preview; a program without
//! credentials refused with the reason, a browser sent to sign in; the preview's own token and
//! its header secret let in (and not passed on to the app), another preview's token refused;
//! signing in with GitHub (the stand-in's OAuth) gives a one-time ticket, then a cookie for that
//! host, and a person who cannot read the repository a page saying why; share links minted,
//! listed without the link, opened, revoked and expired. Every grant is audited. (Through a real
//! Traefik and in Chromium: `tests/real/gate.rs`.)

use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use sandcastle::crd::Phase;
use sandcastle::domain::clock::Clock;
use sandcastle_fake_github::Role;
use serde_json::{Value, json};

use crate::dashboard::Visitor;
use crate::support::api::{account, call};
use crate::support::audit;
use crate::support::fixtures::WEB_APP;
use crate::support::traefik::ensure_traefik;
use crate::support::world::World;

const T: Duration = Duration::from_secs(90);

/// What may make links, mint tokens and hand out header secrets.
const SHARER: (&[&str], &[&str]) = (
    &[
        "previewenvironments",
        "previewenvironments/token",
        "previewenvironments/share",
    ],
    &["get", "list", "create", "delete"],
);

/// A world whose Blueprint is `access: signedIn`, with sign-in, a wake (edge) listener and the
/// gate there; alice may write to the repository, bob read it, carol nothing. Pull request 1 is
/// Ready.
async fn gated(name: &str, clock: Clock) -> World {
    let mut world = World::unstarted(name, WEB_APP, json!({"access": "signedIn"})).await;
    world.clock = clock;
    ensure_traefik(&world.client).await;
    world.sign_in = true;
    world.listen_on_a_port_of_its_own();
    world.gate_on_the_edge_listener();
    world.gh.set_role(&world.repo, "alice", Role::Write);
    world.gh.set_role(&world.repo, "bob", Role::Read);
    world.start().await;
    world.open(1).await;
    world
        .wait_phase(&format!("{name}-pr-1"), Phase::Ready, T)
        .await;
    world
}

/// The gate's answer: status, headers, body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// Ask the gate of `preview` about a request to `host` and `uri`, as Traefik does.
async fn knock(
    world: &World,
    preview: &str,
    host: &str,
    uri: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let edge = world.sandcastle.as_ref().unwrap().wake_addr.unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut req = client
        .get(format!("http://{edge}/.sandcastle/gate/{preview}"))
        .header("x-forwarded-host", host)
        .header("x-forwarded-uri", uri)
        .header("x-forwarded-proto", "http")
        .header("x-forwarded-method", "GET");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("the gate answers");
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.text().await.unwrap_or_default(),
    }
}

/// The audit lines of grants to enter `preview`.
fn entries(preview: &str) -> Vec<audit::Line> {
    audit::lines()
        .into_iter()
        .filter(|l| l.get("action").is_some_and(|a| a == "enter"))
        .filter(|l| l.get("preview").is_some_and(|p| p == preview))
        .collect()
}

fn host_of(url: &str) -> String {
    url.split("://")
        .nth(1)
        .unwrap()
        .trim_end_matches('/')
        .to_owned()
}

async fn url_of(world: &World, preview: &str) -> String {
    let pe = world.previews().get(preview).await.unwrap();
    pe.status.unwrap().url.expect("a URL")
}

/// A token of `preview`'s own, minted through the API.
async fn preview_token(world: &World, minter: &str, preview: &str) -> String {
    let minted = call(
        world,
        "POST",
        &format!("/api/v1/previews/{preview}/token"),
        Some(minter),
        None,
    )
    .await;
    assert_eq!(minted.status, 201, "{minted:?}");
    minted.body["token"].as_str().unwrap().to_owned()
}

/// The cookie value a `Set-Cookie` of the gate holds.
fn gate_cookie(answer: &Answer) -> String {
    let set = answer.header("set-cookie").expect("a cookie is set");
    assert!(set.starts_with("sandcastle_preview="), "{set}");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Lax"),
        "{set}"
    );
    assert!(!set.contains("Domain="), "host-only: {set}");
    let value = set.split(';').next().unwrap();
    value.to_owned()
}

#[tokio::test]
async fn tokens_and_header_secrets_open_a_signed_in_preview_and_go_no_further() {
    let world = gated("gate", Clock::system()).await;
    let preview = "gate-pr-1";
    let ns = world.namespace_of(preview);

    // The preview carries the gate: its Middleware, named first by its Ingress.
    let mw = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "traefik.io",
        "v1alpha1",
        "Middleware",
    ));
    let mw = Api::<DynamicObject>::namespaced_with(world.client.clone(), &ns, &mw)
        .get("sandcastle-gate")
        .await
        .expect("the gate's Middleware");
    let edge = world.sandcastle.as_ref().unwrap().wake_addr.unwrap();
    assert_eq!(
        mw.data["spec"]["forwardAuth"]["address"],
        format!(
            "http://127.0.0.1:{}/.sandcastle/gate/{preview}",
            edge.port()
        )
    );
    let ing = Api::<Ingress>::namespaced(world.client.clone(), &ns)
        .get("web")
        .await
        .unwrap();
    assert_eq!(
        ing.metadata.annotations.unwrap()["traefik.ingress.kubernetes.io/router.middlewares"],
        format!("{ns}-sandcastle-gate@kubernetescrd")
    );

    let host = host_of(&url_of(&world, preview).await);
    // Nobody: a program hears how to get in, a browser is sent to sign in.
    let nobody = knock(
        &world,
        preview,
        &host,
        "/orders?x=1",
        &[("accept", "application/json")],
    )
    .await;
    assert_eq!(nobody.status, 401, "{nobody:?}");
    assert_eq!(nobody.json()["error"]["code"], "sign_in_required");
    assert!(
        nobody.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains(world.repo.as_str())
    );
    let browser = knock(
        &world,
        preview,
        &host,
        "/orders?x=1",
        &[("accept", "text/html")],
    )
    .await;
    assert_eq!(browser.status, 302, "{browser:?}");
    let to = browser.header("location").unwrap();
    assert!(
        to.starts_with(&format!(
            "http://{}/gate/signin?preview={preview}&rd=",
            world.addr()
        )),
        "{to}"
    );
    assert!(to.contains("orders"), "{to}");

    // The preview's own token, as a bearer token or in its own header: in, and not passed on.
    let minter = account(&world, "minter", &[SHARER]).await;
    let token = preview_token(&world, &minter, preview).await;
    let bearer = format!("Bearer {token}");
    for header in [
        ("authorization", bearer.as_str()),
        ("x-sandcastle-token", token.as_str()),
    ] {
        let inside = knock(
            &world,
            preview,
            &host,
            "/",
            &[header, ("cookie", "theme=dark")],
        )
        .await;
        assert_eq!(inside.status, 200, "{header:?}: {inside:?}");
        assert_eq!(
            inside.header("x-sandcastle-user"),
            Some(format!("system:serviceaccount:{ns}:preview-agent").as_str())
        );
        assert_eq!(
            inside.header("authorization"),
            None,
            "the token stops at the gate"
        );
        assert_eq!(
            inside.header("cookie"),
            Some("theme=dark"),
            "the app's own cookies pass"
        );
    }
    let granted = entries(preview);
    assert!(
        granted
            .iter()
            .any(|l| l["via"] == "token" && l["actor"].ends_with(":preview-agent")),
        "{granted:?}"
    );

    // Another preview's token opens only its own.
    world.open(2).await;
    world.wait_phase("gate-pr-2", Phase::Ready, T).await;
    let other = preview_token(&world, &minter, "gate-pr-2").await;
    let refused = knock(
        &world,
        preview,
        &host,
        "/",
        &[
            ("authorization", &format!("Bearer {other}")),
            ("accept", "application/json"),
        ],
    )
    .await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(
        refused.json()["error"]["code"],
        "token_not_for_this_preview"
    );

    // The header secret: handed to whoever may mint tokens, not to a preview's own token.
    let secret = call(
        &world,
        "POST",
        &format!("/api/v1/previews/{preview}/header-secret"),
        Some(&minter),
        None,
    )
    .await;
    assert_eq!(secret.status, 200, "{secret:?}");
    assert_eq!(secret.body["header"], "x-sandcastle-preview-secret");
    let value = secret.body["value"].as_str().unwrap();
    let inside = knock(
        &world,
        preview,
        &host,
        "/healthz",
        &[("x-sandcastle-preview-secret", value)],
    )
    .await;
    assert_eq!(inside.status, 200, "{inside:?}");
    assert_eq!(inside.header("x-sandcastle-user"), Some("preview-secret"));
    let of_two = call(
        &world,
        "POST",
        "/api/v1/previews/gate-pr-2/header-secret",
        Some(&minter),
        None,
    )
    .await;
    let wrong = of_two.body["value"].as_str().unwrap();
    assert_ne!(wrong, value);
    let refused = knock(
        &world,
        preview,
        &host,
        "/",
        &[("x-sandcastle-preview-secret", wrong)],
    )
    .await;
    assert_eq!(refused.status, 401, "{refused:?}");
    let own = call(
        &world,
        "POST",
        &format!("/api/v1/previews/{preview}/header-secret"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(
        own.status, 403,
        "a preview's token hands out nothing that outlives it: {own:?}"
    );
}

#[tokio::test]
async fn people_who_can_read_the_repository_sign_in_and_others_hear_why_not() {
    let world = gated("people", Clock::system()).await;
    let preview = "people-pr-1";
    let host = host_of(&url_of(&world, preview).await);
    let rd = format!("http://{host}/cart?item=1");
    let signin = format!(
        "/gate/signin?{}",
        serde_urlencoded::to_string([("preview", preview), ("rd", rd.as_str())]).unwrap()
    );

    // Not signed in to Sandcastle: sign in first, then back here.
    let mut bob = Visitor::new(&world);
    let first = bob.get(&signin).await;
    assert_eq!(first.status, 303, "{first:?}");
    assert!(
        first
            .location
            .as_deref()
            .unwrap()
            .starts_with("/login?next=%2Fgate%2Fsignin"),
        "{first:?}"
    );

    // bob can read the repository: a one-time ticket to the preview's host.
    world.gh.sign_in_to_github("bob");
    bob.sign_in().await;
    let sent = bob.get(&signin).await;
    assert_eq!(sent.status, 303, "{sent:?}");
    let callback = sent.location.unwrap();
    let prefix = format!("http://{host}/.sandcastle/callback?ticket=");
    assert!(callback.starts_with(&prefix), "{callback}");
    let uri = &callback[format!("http://{host}").len()..];
    let entered = knock(&world, preview, &host, uri, &[("accept", "text/html")]).await;
    assert_eq!(entered.status, 302, "{entered:?}");
    assert_eq!(
        entered.header("location"),
        Some(format!("http://{host}/cart?item=1").as_str()),
        "absolute: the ingress controller resolves a relative one against the gate's address"
    );
    let cookie = gate_cookie(&entered);
    let lines = entries(preview);
    assert!(
        lines
            .iter()
            .any(|l| l["actor"] == "github:bob" && l["via"] == "sign-in"),
        "{lines:?}"
    );

    let inside = knock(&world, preview, &host, "/cart", &[("cookie", &cookie)]).await;
    assert_eq!(inside.status, 200, "{inside:?}");
    assert_eq!(inside.header("x-sandcastle-user"), Some("github:bob"));
    assert_eq!(
        inside.header("cookie"),
        None,
        "the gate's cookie stops at the gate"
    );
    // Once only; and only on the host it was given for.
    let again = knock(
        &world,
        preview,
        &host,
        uri,
        &[("accept", "application/json")],
    )
    .await;
    assert_eq!(again.json()["error"]["code"], "ticket_invalid", "{again:?}");
    let elsewhere = knock(
        &world,
        preview,
        "admin-1-people.preview.example.com",
        "/",
        &[("cookie", &cookie), ("accept", "application/json")],
    )
    .await;
    assert_eq!(elsewhere.status, 401, "{elsewhere:?}");
    // Not a way to another site.
    let evil = format!(
        "/gate/signin?{}",
        serde_urlencoded::to_string([("preview", preview), ("rd", "http://evil.example.com/")])
            .unwrap()
    );
    assert_eq!(bob.get(&evil).await.status, 400);

    // carol cannot read the repository: a page that says so, and no ticket.
    let mut carol = Visitor::new(&world);
    world.gh.sign_in_to_github("carol");
    carol.sign_in().await;
    let refused = carol.get(&signin).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused.body.contains("@carol")
            && refused.body.contains(world.repo.as_str())
            && refused.body.contains("share link"),
        "{}",
        refused.body
    );
    assert!(refused.location.is_none());
}

#[tokio::test]
async fn share_links_open_the_preview_until_revoked() {
    let world = gated("share", Clock::system()).await;
    let preview = "share-pr-1";
    let host = host_of(&url_of(&world, preview).await);
    let sharer = account(&world, "sharer", &[SHARER]).await;
    let made = call(
        &world,
        "POST",
        &format!("/api/v1/previews/{preview}/shares"),
        Some(&sharer),
        Some(json!({"expiresIn": "2h", "label": "for the design review"})),
    )
    .await;
    assert_eq!(made.status, 201, "{made:?}");
    let url = made.body["url"].as_str().unwrap();
    let id = made.body["id"].as_str().unwrap().to_owned();
    assert!(
        url.starts_with(&format!("http://{host}/.sandcastle/share/")),
        "{url}"
    );
    assert_eq!(
        made.body["createdBy"],
        "system:serviceaccount:".to_owned() + &world.home.name + ":sharer"
    );

    // Listed on the preview, without the link.
    let got = call(
        &world,
        "GET",
        &format!("/api/v1/previews/{preview}"),
        Some(&sharer),
        None,
    )
    .await;
    let listed = &got.body["shares"][0];
    assert_eq!(listed["id"], id.as_str());
    assert_eq!(listed["label"], "for the design review");
    assert!(
        !got.body
            .to_string()
            .contains(&url[url.rfind('/').unwrap() + 1..]),
        "{got:?}"
    );

    // Opened: a cookie for this host, then in as the link.
    let uri = &url[format!("http://{host}").len()..];
    let opened = knock(&world, preview, &host, uri, &[("accept", "text/html")]).await;
    assert_eq!(opened.status, 302, "{opened:?}");
    assert_eq!(
        opened.header("location"),
        Some(format!("http://{host}/").as_str())
    );
    let cookie = gate_cookie(&opened);
    let lines = entries(preview);
    assert!(
        lines
            .iter()
            .any(|l| l["link"] == id && l["via"] == "share-link"),
        "{lines:?}"
    );
    let inside = knock(&world, preview, &host, "/", &[("cookie", &cookie)]).await;
    assert_eq!(inside.status, 200, "{inside:?}");
    assert_eq!(
        inside.header("x-sandcastle-user"),
        Some(format!("share:{id}").as_str())
    );
    // A link of this preview opens no other.
    world.open(2).await;
    world.wait_phase("share-pr-2", Phase::Ready, T).await;
    let other_host = host_of(&url_of(&world, "share-pr-2").await);
    let other = knock(
        &world,
        "share-pr-2",
        &other_host,
        uri,
        &[("accept", "application/json")],
    )
    .await;
    assert_eq!(
        other.json()["error"]["code"],
        "share_link_invalid",
        "{other:?}"
    );

    // A preview's own token may not hand out links; a tampered link opens nothing.
    let token = preview_token(&world, &sharer, preview).await;
    let refused = call(
        &world,
        "POST",
        &format!("/api/v1/previews/{preview}/shares"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(refused.status, 403, "{refused:?}");
    // Its last character changed (to one it is not: a link may end in `A`).
    let swap = if uri.ends_with('A') { 'B' } else { 'A' };
    let tampered = format!("{}{swap}", &uri[..uri.len() - 1]);
    let bad = knock(
        &world,
        preview,
        &host,
        &tampered,
        &[("accept", "application/json")],
    )
    .await;
    assert_eq!(bad.json()["error"]["code"], "share_link_invalid", "{bad:?}");

    // Revoked: neither the link nor the cookie it gave opens the preview any more.
    let revoked = call(
        &world,
        "DELETE",
        &format!("/api/v1/previews/{preview}/shares/{id}"),
        Some(&sharer),
        None,
    )
    .await;
    assert_eq!(revoked.status, 200, "{revoked:?}");
    assert!(revoked.body.get("shares").is_none(), "{revoked:?}");
    crate::support::eventually("the revoked link opens nothing", T, || async {
        let a = knock(
            &world,
            preview,
            &host,
            "/",
            &[("cookie", &cookie), ("accept", "application/json")],
        )
        .await;
        if a.status == 401 {
            Ok(())
        } else {
            Err(format!("{a:?}"))
        }
    })
    .await;
    let reopened = knock(
        &world,
        preview,
        &host,
        uri,
        &[("accept", "application/json")],
    )
    .await;
    assert_eq!(
        reopened.json()["error"]["code"],
        "share_link_invalid",
        "{reopened:?}"
    );
    let unknown = call(
        &world,
        "DELETE",
        &format!("/api/v1/previews/{preview}/shares/{id}"),
        Some(&sharer),
        None,
    )
    .await;
    assert_eq!(unknown.status, 404, "{unknown:?}");
    assert_eq!(unknown.body["error"]["code"], "unknown_share");
}

#[tokio::test]
async fn a_share_link_expires() {
    let clock = Clock::manual(jiff::Timestamp::now());
    let world = gated("expire", clock.clone()).await;
    let preview = "expire-pr-1";
    let host = host_of(&url_of(&world, preview).await);
    let sharer = account(&world, "sharer", &[SHARER]).await;
    let made = call(
        &world,
        "POST",
        &format!("/api/v1/previews/{preview}/shares"),
        Some(&sharer),
        Some(json!({"expiresIn": "10m"})),
    )
    .await;
    assert_eq!(made.status, 201, "{made:?}");
    let url = made.body["url"].as_str().unwrap();
    let uri = &url[format!("http://{host}").len()..];
    crate::support::eventually("the link is seen", T, || async {
        let opened = knock(&world, preview, &host, uri, &[]).await;
        if opened.status == 302 {
            Ok(opened)
        } else {
            Err(format!("{opened:?}"))
        }
    })
    .await;
    let opened = knock(&world, preview, &host, uri, &[]).await;
    let cookie = gate_cookie(&opened);
    let set = opened.header("set-cookie").unwrap().to_owned();
    assert!(
        set.contains("Max-Age=600"),
        "the cookie ends with the link: {set}"
    );
    clock.advance(Duration::from_secs(11 * 60));
    let late = knock(
        &world,
        preview,
        &host,
        uri,
        &[("accept", "application/json")],
    )
    .await;
    assert_eq!(
        late.json()["error"]["code"],
        "share_link_invalid",
        "{late:?}"
    );
    let late = knock(
        &world,
        preview,
        &host,
        "/",
        &[("cookie", &cookie), ("accept", "application/json")],
    )
    .await;
    assert_eq!(late.status, 401, "{late:?}");
}

#[tokio::test]
async fn writers_share_a_preview_from_its_page_and_revoke_the_link() {
    let world = gated("pagelink", Clock::system()).await;
    let preview = "pagelink-pr-1";
    let page = format!("/previews/{preview}");

    // bob may read: the links are listed to him, without the forms.
    let mut bob = Visitor::new(&world);
    world.gh.sign_in_to_github("bob");
    bob.sign_in().await;
    let seen = bob.get(&page).await;
    assert!(seen.body.contains("Share links"), "{}", seen.body);
    assert!(!seen.body.contains("Make a share link"), "{}", seen.body);

    // alice may write: she makes one, sees it once, and it is listed without the link.
    let mut alice = Visitor::new(&world);
    world.gh.sign_in_to_github("alice");
    alice.sign_in().await;
    let seen = alice.get(&page).await;
    assert!(seen.body.contains("Make a share link"), "{}", seen.body);
    let csrf = crate::dashboard::csrf_of(&seen.body);
    let made = alice
        .post(
            &format!("{page}/share"),
            &[
                ("csrf", &csrf),
                ("duration", "3h"),
                ("label", "for the client"),
            ],
        )
        .await;
    assert_eq!(made.status, 200, "{made:?}");
    let at = made
        .body
        .find("/.sandcastle/share/")
        .expect("the link, once");
    let token: String = made.body[at + 19..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    assert!(token.len() > 40, "{}", made.body);
    let listed = alice.get(&page).await;
    assert!(
        listed.body.contains("for the client") && listed.body.contains("github:alice"),
        "{}",
        listed.body
    );
    assert!(
        !listed.body.contains(&token),
        "the link is shown once: {}",
        listed.body
    );
    let pe = world.previews().get(preview).await.unwrap();
    let id = pe.spec.shares[0].id.clone();
    assert_eq!(pe.spec.shares[0].created_by, "github:alice");

    // Revoked from the page.
    let csrf = crate::dashboard::csrf_of(&listed.body);
    let revoked = alice
        .post(&format!("{page}/unshare"), &[("csrf", &csrf), ("id", &id)])
        .await;
    assert_eq!(revoked.status, 303, "{revoked:?}");
    let pe = world.previews().get(preview).await.unwrap();
    assert!(pe.spec.shares.is_empty(), "{:?}", pe.spec.shares);
    // And bob may not, whatever he sends.
    let csrf = crate::dashboard::csrf_of(&bob.get(&page).await.body);
    let refused = bob
        .post(
            &format!("{page}/share"),
            &[("csrf", &csrf), ("duration", "1h")],
        )
        .await;
    assert_eq!(refused.status, 403, "{refused:?}");
}
