//! Green means it serves this commit: a Blueprint's HTTP readiness probe holds Ready and
//! GitHub's `success` until the preview answers with an accepted status showing the deployed
//! commit, says what it last saw while it waits, and fails the preview with that past its
//! deadline. The preview's host is served by a small HTTP server on 127.0.0.1, which the probe
//! reaches through `--probe-via connect-to:`, as it would reach an ingress controller.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use sandcastle::crd::Phase;
use sandcastle::probe::ProbeVia;
use sandcastle_fake_github::PrSpec;
use serde_json::{Value, json};

use crate::support::cluster::eventually;
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);

/// What the preview's server answers.
#[derive(Debug, Clone)]
enum Answer {
    Status(u16),
    /// 200 with this commit in `X-Commit`.
    Commit(String),
    /// As an ingress controller balancing over a new pod and an old one it still routes to:
    /// the first commit, then the second, in turn.
    Alternate(String, String),
}

/// The requests it saw: `(Host, path)`.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

#[derive(Clone)]
struct App {
    answer: Arc<Mutex<Answer>>,
    seen: Seen,
}

impl App {
    async fn start(first: Answer) -> (Self, SocketAddr) {
        let app = Self {
            answer: Arc::new(Mutex::new(first)),
            seen: Seen::default(),
        };
        let router = axum::Router::new().fallback(serve).with_state(app.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (app, addr)
    }

    fn answer(&self, a: Answer) {
        *self.answer.lock().unwrap() = a;
    }

    fn seen(&self) -> Vec<(String, String)> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve(State(app): State<App>, headers: HeaderMap, uri: Uri) -> impl IntoResponse {
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let turn = {
        let mut seen = app.seen.lock().unwrap();
        seen.push((host, uri.path().to_owned()));
        seen.len()
    };
    let answer = app.answer.lock().unwrap().clone();
    match answer {
        Answer::Status(code) => (
            StatusCode::from_u16(code).unwrap(),
            [("x-commit", String::new())],
            "no",
        ),
        Answer::Commit(c) => (StatusCode::OK, [("x-commit", c)], "guestbook"),
        Answer::Alternate(new, old) => {
            let c = if turn % 2 == 1 { new } else { old };
            (StatusCode::OK, [("x-commit", c)], "guestbook")
        }
    }
}

fn blueprint(deadline: &str) -> Value {
    json!({
        "images": [{"repository": "gcr.io/google-samples/gb-frontend", "tag": "{{sha}}"}],
        "primaryService": "frontend",
        "readiness": {"http": {"path": "/healthz", "interval": "1s", "deadline": deadline,
            "commit": {"header": "X-Commit"}}},
    })
}

async fn world(addr: SocketAddr, deadline: &str) -> World {
    let guestbook = sandcastle_demo::stage::guestbook_yaml().unwrap();
    let mut world = World::unstarted("guestbook", &guestbook, blueprint(deadline)).await;
    world.probe_via = Some(ProbeVia::ConnectTo(addr.to_string()));
    world.start().await;
    world
}

/// Wait until the preview's status message says `text`; returns the message.
async fn wait_message(world: &World, name: &str, text: &str) -> String {
    let previews = world.previews();
    eventually(&format!("{name} says {text:?}"), T, || {
        let previews = previews.clone();
        async move {
            let pe = previews.get(name).await.map_err(|e| e.to_string())?;
            let msg = pe.status.and_then(|s| s.message).unwrap_or_default();
            if msg.contains(text) {
                Ok(msg)
            } else {
                Err(msg)
            }
        }
    })
    .await
}

fn states(world: &World, commit: &sandcastle::domain::Sha) -> Vec<String> {
    world
        .gh
        .deployments(&world.repo)
        .iter()
        .filter(|d| d.sha == *commit)
        .flat_map(|d| d.statuses.iter().map(|s| s.state.clone()))
        .collect()
}

#[tokio::test]
async fn success_waits_until_the_url_serves_the_commit() {
    let (app, addr) = App::start(Answer::Status(502)).await;
    let world = world(addr, "2m").await;
    let commit = sha();
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(7), commit.clone(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    let name = "guestbook-pr-7";

    let msg = wait_message(&world, name, "GET /healthz → 502").await;
    assert!(msg.contains("tries") || msg.contains("1 try"), "{msg}");
    let comment = eventually("the sticky comment says what the probe saw", T, || {
        let comments = world.gh.comments(&world.repo, pr(7));
        async move {
            comments
                .iter()
                .map(|c| c.body.clone())
                .find(|b| b.contains("GET /healthz → 502"))
                .ok_or_else(|| format!("{comments:?}"))
        }
    })
    .await;
    assert!(comment.contains("Deploying"), "{comment}");
    assert!(!states(&world, &commit).contains(&"success".to_owned()));

    let old = sha();
    app.answer(Answer::Commit(old.short().to_owned()));
    let msg = wait_message(&world, name, "is not").await;
    assert!(
        msg.contains(&format!(
            "X-Commit {} is not {}",
            old.short(),
            commit.short()
        )),
        "{msg}"
    );
    let pe = world.previews().get(name).await.unwrap();
    assert_eq!(pe.status.unwrap().phase, Some(Phase::Deploying));
    assert!(!states(&world, &commit).contains(&"success".to_owned()));

    let healthy = Instant::now();
    app.answer(Answer::Commit(commit.to_string()));
    world.wait_github_state(&commit, "success", T).await;
    println!("server healthy → success posted: {:?}", healthy.elapsed());
    let pe = world.wait_phase(name, Phase::Ready, T).await;
    let st = pe.status.unwrap();
    assert_eq!(st.deployed_sha.as_deref(), Some(commit.as_str()));
    let probe = st.rollout.unwrap().probe.expect("the probe is recorded");
    assert!(probe.passed && probe.tries >= 3, "{probe:?}");
    assert_eq!(
        states(&world, &commit)
            .iter()
            .filter(|s| *s == "success")
            .count(),
        1
    );

    let seen = app.seen();
    assert!(!seen.is_empty());
    for (host, path) in &seen {
        assert_eq!(
            host, "7-guestbook.preview.example.com",
            "the preview's own host"
        );
        assert_eq!(path, "/healthz");
    }
}

#[tokio::test]
async fn one_good_answer_is_not_enough_while_an_old_pod_still_gets_every_other_request() {
    let commit = sha();
    let old = sha();
    let (app, addr) = App::start(Answer::Status(503)).await;
    let world = world(addr, "5m").await;
    app.answer(Answer::Alternate(commit.to_string(), old.to_string()));
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(9), commit.clone(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    let name = "guestbook-pr-9";
    // Every try's first answer shows the commit, the next one the old pod's.
    let msg = wait_message(&world, name, "in a row").await;
    assert!(
        msg.contains(&format!(
            "X-Commit {old} is not {} (answer 2 of 3 in a row)",
            commit.short()
        )),
        "{msg}"
    );
    let pe = world.previews().get(name).await.unwrap();
    assert_eq!(pe.status.unwrap().phase, Some(Phase::Deploying));
    assert!(!states(&world, &commit).contains(&"success".to_owned()));

    // The old pod is gone from the balancer: three answers in a row show the commit.
    app.answer(Answer::Commit(commit.to_string()));
    world.wait_github_state(&commit, "success", T).await;
    world.wait_phase(name, Phase::Ready, T).await;
}

#[tokio::test]
async fn a_probe_that_never_passes_fails_with_its_last_answer() {
    let (_app, addr) = App::start(Answer::Status(503)).await;
    let world = world(addr, "2s").await;
    let commit = sha();
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(8), commit.clone(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    let pe = world.wait_phase("guestbook-pr-8", Phase::Failed, T).await;
    let msg = pe.status.unwrap().message.unwrap_or_default();
    assert!(
        msg.starts_with("HTTP probe did not pass within 2s: GET /healthz → 503"),
        "{msg}"
    );
    world.wait_github_state(&commit, "failure", T).await;
    let failure = world
        .gh
        .deployments(&world.repo)
        .iter()
        .flat_map(|d| d.statuses.clone())
        .find(|s| s.state == "failure")
        .unwrap();
    assert!(
        failure.description.contains("GET /healthz → 503"),
        "{}",
        failure.description
    );
    assert!(!states(&world, &commit).contains(&"success".to_owned()));
}

/// A server answering every request with a redirect to `location`.
async fn redirecting(location: &'static str) -> SocketAddr {
    let router = axum::Router::new().fallback(move |uri: Uri| async move {
        if uri.path() == "/landed" {
            return (StatusCode::OK, [("location", "")], "landed");
        }
        (StatusCode::FOUND, [("location", location)], "")
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

#[tokio::test]
async fn the_probe_follows_redirects_on_its_own_host_only() {
    use sandcastle::probe::{Target, ask};
    let t = Duration::from_secs(5);
    // Elsewhere: the redirect is the answer, and the other host is never asked.
    let (other, other_addr) = App::start(Answer::Status(200)).await;
    let away: &'static str = Box::leak(format!("http://{other_addr}/").into_boxed_str());
    let addr = redirecting(away).await;
    let target = Target::new(&format!("http://{addr}"), "/", &ProbeVia::Url, None).unwrap();
    let answer = ask(&target, t).await.unwrap();
    assert_eq!(answer.status, 302);
    assert!(other.seen().is_empty(), "the other host was asked");

    // The same host: followed.
    let addr = redirecting("/landed").await;
    let target = Target::new(&format!("http://{addr}"), "/", &ProbeVia::Url, None).unwrap();
    let answer = ask(&target, t).await.unwrap();
    assert_eq!(
        (answer.status, answer.body.as_slice()),
        (200, &b"landed"[..])
    );

    // Nobody there: said in a few words.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let target = Target::new(&format!("http://{closed}"), "/", &ProbeVia::Url, None).unwrap();
    assert_eq!(ask(&target, t).await.unwrap_err(), "connection refused");
}
