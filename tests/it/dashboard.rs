//! The dashboard over HTTP, as a browser without JavaScript uses it: private by default; signing
//! in with the stand-in's OAuth shows exactly the previews of the repositories the person can
//! read; a reader gets no action buttons and a forged or unauthorized POST is refused; a writer
//! extends and stops a preview and the page, the status and the sticky comment agree; public
//! pages and the API's bearer token. (The real browser drives the same pages in `browser.rs`.)

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use sandcastle::crd::{Blueprint, Phase};
use sandcastle::domain::RepoName;
use sandcastle_fake_github::{PrSpec, Role};
use serde_json::json;

use crate::support::api::{ALL, account};
use crate::support::eventually;
use crate::support::fixtures::TINY_APP;
use crate::support::world::{INSTALLATION, World, pr, sha};

const T: Duration = Duration::from_secs(90);

/// A client that keeps cookies and does not follow redirects, to see each step.
pub struct Visitor {
    http: reqwest::Client,
    base: String,
    cookies: BTreeMap<String, String>,
}

/// One answer: status, `Location`, body.
#[derive(Debug)]
pub struct Seen {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
}

impl Visitor {
    pub fn new(world: &World) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: format!("http://{}", world.addr()),
            cookies: BTreeMap::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Seen {
        let req = if self.cookies.is_empty() {
            req
        } else {
            req.header("cookie", self.cookie_header())
        };
        let resp = req.send().await.expect("the server answers");
        for set in resp.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let (pair, attrs) = set.split_once(';').unwrap_or((set, ""));
            let (k, v) = pair.split_once('=').unwrap();
            if attrs.contains("Max-Age=0") {
                self.cookies.remove(k);
            } else {
                self.cookies.insert(k.to_owned(), v.to_owned());
            }
        }
        Seen {
            status: resp.status().as_u16(),
            location: resp
                .headers()
                .get("location")
                .map(|l| l.to_str().unwrap().to_owned()),
            body: resp.text().await.unwrap_or_default(),
        }
    }

    /// GET a path of Sandcastle's, or a full URL.
    pub async fn get(&mut self, path: &str) -> Seen {
        let url = if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}", self.base)
        };
        let req = self.http.get(url);
        self.send(req).await
    }

    pub async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Seen {
        let body = serde_urlencoded::to_string(form).unwrap();
        let req = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.send(req).await
    }

    /// Sign in as whoever the stand-in's browser is signed in as, following each redirect.
    pub async fn sign_in(&mut self) {
        let start = self.get("/login").await;
        assert_eq!(start.status, 303, "{start:?}");
        let authorize = self.get(start.location.as_deref().unwrap()).await;
        assert_eq!(authorize.status, 200, "{authorize:?}");
        let field = |name: &str| {
            let at = authorize
                .body
                .find(&format!("name=\"{name}\" value=\""))
                .unwrap();
            let rest = &authorize.body[at + name.len() + 15..];
            rest[..rest.find('"').unwrap()].to_owned()
        };
        let to = format!(
            "/oauth/callback?code={}&state={}",
            field("code"),
            field("state")
        );
        let back = self.get(&to).await;
        assert_eq!(
            (back.status, back.location.as_deref()),
            (303, Some("/")),
            "{back:?}"
        );
        assert!(self.cookies.contains_key("sandcastle_session"));
    }
}

/// The CSRF token in a page's forms.
pub fn csrf_of(html: &str) -> String {
    let at = html
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token");
    let rest = &html[at + 19..];
    rest[..rest.find('"').unwrap()].to_owned()
}

/// A world whose Sandcastle signs people in, with previews of two repositories: the world's
/// own and `acme/secret` (Blueprint `secret`), which the people below cannot read.
pub async fn two_repositories(name: &str) -> World {
    let mut world = World::unstarted(name, TINY_APP, json!({})).await;
    world.sign_in = true;
    world.listen_on_a_port_of_its_own();
    let secret = RepoName::new("acme/secret").unwrap();
    world.gh.add_repo(INSTALLATION, &secret);
    let bp = json!({"apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
        "metadata": {"name": "secret"},
        "spec": {"source": {"namespace": world.staging.name}, "repositories": ["acme/secret"],
            "host": "{{pr}}-{{repo}}.preview.example.com"}});
    Api::<Blueprint>::namespaced(world.client.clone(), &world.home.name)
        .patch(
            "secret",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&bp),
        )
        .await
        .unwrap();
    world.gh.set_role(&world.repo, "alice", Role::Write);
    world.gh.set_role(&world.repo, "bob", Role::Read);
    world.start().await;
    world.open(1).await;
    let d = world
        .gh
        .open_pull_request(&secret, PrSpec::new(pr(2), sha(), "s"));
    assert_eq!(world.deliver(&d).await.0, 200);
    world
        .wait_phase(&format!("{name}-pr-1"), Phase::Ready, T)
        .await;
    world.wait_phase("secret-pr-2", Phase::Ready, T).await;
    world
}

#[tokio::test]
async fn pages_are_private_until_someone_signs_in() {
    let world = two_repositories("dash").await;
    let mut v = Visitor::new(&world);
    for path in ["/", "/previews/dash-pr-1"] {
        let seen = v.get(path).await;
        assert_eq!(seen.status, 401, "{path}: {seen:?}");
        assert!(seen.body.contains("Sign in with GitHub"), "{}", seen.body);
        assert!(!seen.body.contains("dash-pr-1"));
    }

    world.gh.sign_in_to_github("alice");
    v.sign_in().await;
    let list = v.get("/").await;
    assert_eq!(list.status, 200);
    assert!(
        list.body.contains("Signed in as <strong>@alice</strong>"),
        "{}",
        list.body
    );
    assert!(
        list.body.contains("href=\"/previews/dash-pr-1\""),
        "{}",
        list.body
    );
    assert!(
        !list.body.contains("secret-pr-2"),
        "a repository alice cannot read"
    );
    let hidden = v.get("/previews/secret-pr-2").await;
    assert_eq!(hidden.status, 404, "its preview does not exist for her");

    // A state that was not handed out here is refused.
    let forged = v.get("/oauth/callback?code=x&state=forged").await;
    assert_eq!(forged.status, 400);

    // Signing out ends the session.
    let page = v.get("/").await;
    let out = v.post("/logout", &[("csrf", &csrf_of(&page.body))]).await;
    assert_eq!(out.status, 303);
    assert_eq!(v.get("/").await.status, 401);
}

#[tokio::test]
async fn a_reader_sees_no_buttons_and_cannot_act() {
    let world = two_repositories("ro").await;
    world.gh.sign_in_to_github("bob");
    let mut v = Visitor::new(&world);
    v.sign_in().await;
    let page = v.get("/previews/ro-pr-1").await;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        !page.body.contains("<button type=\"submit\">Stop"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("/previews/ro-pr-1/stop"));
    // A forged POST (no token) and an honest one from a reader are both refused.
    let forged = v.post("/previews/ro-pr-1/stop", &[("csrf", "nope")]).await;
    assert_eq!(forged.status, 403, "{forged:?}");
    let csrf = csrf_of(&page.body);
    let refused = v.post("/previews/ro-pr-1/stop", &[("csrf", &csrf)]).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused.body.contains("needs write access"),
        "{}",
        refused.body
    );
    let pe = world.previews().get("ro-pr-1").await.unwrap();
    assert!(!pe.spec.stopped);
}

#[tokio::test]
async fn a_writer_extends_and_stops_and_everything_agrees() {
    let world = two_repositories("rw").await;
    world.gh.sign_in_to_github("alice");
    let mut v = Visitor::new(&world);
    v.sign_in().await;
    let page = v.get("/previews/rw-pr-1").await;
    assert!(
        page.body.contains("/previews/rw-pr-1/extend"),
        "{}",
        page.body
    );
    let csrf = csrf_of(&page.body);
    let before = world
        .previews()
        .get("rw-pr-1")
        .await
        .unwrap()
        .spec
        .expires_at;

    let extended = v
        .post(
            "/previews/rw-pr-1/extend",
            &[("csrf", &csrf), ("duration", "6h")],
        )
        .await;
    assert_eq!(
        (extended.status, extended.location.as_deref()),
        (303, Some("/previews/rw-pr-1?done=extend")),
        "{extended:?}"
    );
    let after = world
        .previews()
        .get("rw-pr-1")
        .await
        .unwrap()
        .spec
        .expires_at;
    assert!(after.as_ref().unwrap().0 > before.as_ref().unwrap().0);

    let stopped = v.post("/previews/rw-pr-1/stop", &[("csrf", &csrf)]).await;
    assert_eq!(stopped.status, 303, "{stopped:?}");
    let pe = world.wait_phase("rw-pr-1", Phase::Stopped, T).await;
    let history = pe.status.unwrap().history;
    assert!(
        history
            .iter()
            .any(|h| h.actor == "github:alice" && h.action == "dashboard-stop"),
        "{history:#?}"
    );
    let page = v.get("/previews/rw-pr-1?done=stop").await;
    assert!(page.body.contains("Done: stop."));
    assert!(page.body.contains("class=\"Stopped\""), "{}", page.body);
    assert!(page.body.contains("Wake"), "a stopped preview offers wake");
    eventually("the sticky comment says stopped", T, || async {
        let comments = world.gh.comments(&world.repo, pr(1));
        comments
            .iter()
            .find(|c| c.body.contains("⏸️ Stopped"))
            .map(|_| ())
            .ok_or_else(|| format!("{comments:#?}"))
    })
    .await;

    // Destroy asks to confirm.
    let unconfirmed = v
        .post("/previews/rw-pr-1/destroy", &[("csrf", &csrf)])
        .await;
    assert_eq!(unconfirmed.status, 422, "{unconfirmed:?}");
    let pe = world.previews().get("rw-pr-1").await.unwrap();
    assert!(
        pe.spec.teardown.is_none(),
        "nothing is destroyed unconfirmed"
    );
}

#[tokio::test]
async fn public_pages_and_bearer_tokens() {
    let mut world = World::unstarted("pub", TINY_APP, json!({})).await;
    world.configure = Some(|parts| parts.settings.public_pages = true);
    world.start().await;
    world.open(1).await;
    world.wait_phase("pub-pr-1", Phase::Ready, T).await;
    let mut v = Visitor::new(&world);
    let list = v.get("/").await;
    assert_eq!(list.status, 200);
    assert!(list.body.contains("pub-pr-1"));
    let page = v.get("/previews/pub-pr-1").await;
    assert_eq!(page.status, 200);
    assert!(!page.body.contains("name=\"csrf\""), "read-only: no forms");
    assert_eq!(v.post("/previews/pub-pr-1/stop", &[]).await.status, 401);

    // The API's bearer token reads the pages too, as RBAC allows.
    let token = account(&world, "viewer", &[ALL]).await;
    let http = reqwest::Client::new();
    let resp = http
        .get(format!("http://{}/previews/pub-pr-1", world.addr()))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("Token of"));
}

#[tokio::test]
async fn setup_on_a_configured_sandcastle_shows_the_command_to_replace_it_as_code() {
    let world = World::new("setup", TINY_APP, json!({})).await;
    let (status, content_type, html) = world.get_text("/setup", vec![]).await;
    assert_eq!(status, 409, "{html}");
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(html.contains("Already set up"), "{html}");
    assert!(
        html.contains("<code>sandcastle setup --force</code>"),
        "{html}"
    );
    assert!(
        !html.contains("`sandcastle") && !html.contains("  "),
        "no Markdown backticks nor runs of spaces printed raw: {html}"
    );
}
