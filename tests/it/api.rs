//! The REST API end to end, against the real control plane: bearer tokens checked by real
//! TokenReview and access decided by real SubjectAccessReview (allowed, forbidden, invalid,
//! expired); a sandbox's whole life (create, idempotent retry, wait, reset re-seeding, a pull
//! request taking it over, delete); a preview's own token, scoped to it and refused as soon as
//! its preview is torn down; validation errors that name the field; and every write audited
//! three ways that agree.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use sandcastle::crd::{Phase, PreviewEnvironment, TeardownReason};
use sandcastle_fake_github::PrSpec;
use serde_json::{Value, json};

use crate::support::api::{ALL, account, call, call_with, expired_token};
use crate::support::world::{World, pr, sha};
use crate::support::{audit, eventually, wait_for};

const T: Duration = Duration::from_secs(90);

/// A web app, its data claim and the Job that seeds it.
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
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: seed
  annotations: {sandcastle.dev/hook: seed}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: seed, image: ghcr.io/acme/seed:1.0}]
";

async fn world(name: &str) -> World {
    World::new(name, APP, json!({"maxTtl": "48h"})).await
}

fn sandbox(world: &World, branch: &str) -> Value {
    json!({"blueprint": world.repo.name(), "repository": world.repo.as_str(), "branch": branch})
}

#[tokio::test]
async fn tokens_are_checked_and_rbac_decides() {
    let world = world("apiauth").await;
    let none = call(&world, "GET", "/api/v1/previews", None, None).await;
    assert_eq!(none.status, 401, "{:?}", none.body);
    assert_eq!(none.body["error"]["code"], "unauthenticated");
    let challenge = none.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.starts_with("Bearer realm=\"Sandcastle takes a Kubernetes bearer token"),
        "{challenge}"
    );

    let invalid = call(&world, "GET", "/api/v1/previews", Some("not-a-token"), None).await;
    assert_eq!(
        (invalid.status, invalid.body["error"]["code"].as_str()),
        (401, Some("unauthenticated"))
    );

    let nobody = account(&world, "nobody", &[]).await;
    let forbidden = call(&world, "GET", "/api/v1/previews", Some(&nobody), None).await;
    assert_eq!(forbidden.status, 403, "{:?}", forbidden.body);
    assert_eq!(forbidden.body["error"]["code"], "forbidden");
    let message = forbidden.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("may not list previewenvironments"),
        "{message}"
    );

    let reader = account(
        &world,
        "reader",
        &[(&["previewenvironments"], &["get", "list"])],
    )
    .await;
    let listed = call(&world, "GET", "/api/v1/previews", Some(&reader), None).await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(listed.body["items"], json!([]));
    let create = call(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&reader),
        Some(sandbox(&world, "main")),
    )
    .await;
    assert_eq!(
        (create.status, create.body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    let missing = call(&world, "GET", "/api/v1/previews/nope", Some(&reader), None).await;
    assert_eq!(
        (missing.status, missing.body["error"]["code"].as_str()),
        (404, Some("preview_not_found"))
    );

    let expired = expired_token(&world.client, &world.home.name, "reader").await;
    let old = call(&world, "GET", "/api/v1/previews", Some(&expired), None).await;
    assert_eq!(old.status, 401, "{:?}", old.body);
    let why = old.body["error"]["message"].as_str().unwrap();
    assert!(why.contains("not valid"), "{why}");
}

#[tokio::test]
async fn bad_requests_are_answered_naming_the_field() {
    let world = world("apibad").await;
    let admin = account(&world, "admin", &[ALL]).await;
    let post = |body: Value| {
        let (w, t) = (&world, admin.clone());
        async move { call(w, "POST", "/api/v1/previews", Some(&t), Some(body)).await }
    };
    let mut body = sandbox(&world, "main");
    body["ttl"] = json!("a while");
    let a = post(body.clone()).await;
    assert_eq!(
        (
            a.status,
            a.body["error"]["code"].as_str(),
            a.body["error"]["field"].as_str()
        ),
        (422, Some("invalid_duration"), Some("ttl"))
    );
    body["ttl"] = json!("100h");
    let a = post(body.clone()).await;
    assert_eq!(
        (a.status, a.body["error"]["code"].as_str()),
        (422, Some("ttl_too_long")),
        "{:?}",
        a.body
    );
    let a = post(json!({"blueprint": "nope", "repository": world.repo.as_str(), "branch": "main"}))
        .await;
    assert_eq!(
        (
            a.status,
            a.body["error"]["code"].as_str(),
            a.body["error"]["field"].as_str()
        ),
        (422, Some("unknown_blueprint"), Some("blueprint"))
    );
    let a = post(
        json!({"blueprint": world.repo.name(), "repository": "mallory/other", "branch": "main"}),
    )
    .await;
    assert_eq!(
        (a.status, a.body["error"]["code"].as_str()),
        (422, Some("repository_not_allowed"))
    );
    let a = post(json!({"blueprint": world.repo.name(), "repository": world.repo.as_str()})).await;
    assert_eq!(
        (a.status, a.body["error"]["code"].as_str()),
        (422, Some("missing_ref"))
    );
    let a = post(json!({"blueprint": world.repo.name(), "repository": world.repo.as_str(), "branch": "no-such-branch"})).await;
    assert_eq!(
        (a.status, a.body["error"]["code"].as_str()),
        (422, Some("unknown_branch")),
        "{:?}",
        a.body
    );
    // An empty branch beside a commit once reached the API server (and answered 503).
    for branch in ["", "a..b", "feature/x.lock"] {
        let a = post(
            json!({"blueprint": world.repo.name(), "repository": world.repo.as_str(),
            "commit": sha().as_str(), "branch": branch, "name": "o"}),
        )
        .await;
        assert_eq!(
            (
                a.status,
                a.body["error"]["code"].as_str(),
                a.body["error"]["field"].as_str()
            ),
            (422, Some("invalid_branch"), Some("branch")),
            "{branch:?}: {:?}",
            a.body
        );
    }
    let a = post(json!({"blueprint": world.repo.name(), "extra": 1})).await;
    assert_eq!(
        (a.status, a.body["error"]["code"].as_str()),
        (422, Some("invalid_field")),
        "{:?}",
        a.body
    );
    let raw = crate::support::api::client()
        .post(format!("http://{}/api/v1/previews", world.addr()))
        .bearer_auth(&admin)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status().as_u16(), 400);
    let body: Value = raw.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_body");
    // A body that is optional may be left out, but whitespace alone is not JSON: refused, and
    // no token is minted (schemathesis once got a 201 for a lone `\r`).
    for blank in ["\r", " ", "\n\t "] {
        let raw = crate::support::api::client()
            .post(format!(
                "http://{}/api/v1/previews/{}/token",
                world.addr(),
                world.repo.name()
            ))
            .bearer_auth(&admin)
            .header("content-type", "application/json")
            .body(blank)
            .send()
            .await
            .unwrap();
        assert_eq!(raw.status().as_u16(), 400, "{blank:?}");
        let body: Value = raw.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_body", "{blank:?}");
    }
    let unknown = call(&world, "GET", "/api/v1/nothing-here", Some(&admin), None).await;
    assert_eq!(
        (unknown.status, unknown.body["error"]["code"].as_str()),
        (404, Some("no_such_route"))
    );
    let served = call(&world, "GET", "/api/v1/openapi.json", None, None).await;
    assert_eq!(
        served.body,
        serde_json::to_value(sandcastle::http::api::openapi()).unwrap()
    );
}

async fn job_uid(client: &Client, ns: &str) -> Option<String> {
    Api::<Job>::namespaced(client.clone(), ns)
        .get_opt("seed")
        .await
        .unwrap()
        .and_then(|j| j.metadata.uid)
}

async fn claim_uid(client: &Client, ns: &str) -> Option<String> {
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .get_opt("data")
        .await
        .unwrap()
        .and_then(|c| c.metadata.uid)
}

#[tokio::test]
async fn a_sandboxs_whole_life_through_the_api() {
    let world = world("sbx").await;
    let admin = account(&world, "admin", &[ALL]).await;
    let head = sha();
    world.gh.set_branch(&world.repo, "feature/login", &head);
    let body = sandbox(&world, "feature/login");
    let key = [("idempotency-key", "agent-run-17")];

    // Create; a retry with the same key and body is the same preview; another body conflicts.
    let created = call_with(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(body.clone()),
        &key,
    )
    .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let name = created.body["name"].as_str().unwrap().to_owned();
    assert_eq!(created.body["commit"]["desired"], head.as_str());
    assert_eq!(created.body["sandbox"], true);
    assert_eq!(created.body["pullRequest"], Value::Null);
    let again = call_with(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(body.clone()),
        &key,
    )
    .await;
    assert_eq!(
        (again.status, again.body["name"].as_str()),
        (200, Some(name.as_str()))
    );
    let mut other = body.clone();
    other["ttl"] = json!("2h");
    let conflict = call_with(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(other),
        &key,
    )
    .await;
    assert_eq!(
        (conflict.status, conflict.body["error"]["code"].as_str()),
        (409, Some("idempotency_key_reused"))
    );

    // Wait for it, without polling.
    let waited = call(
        &world,
        "GET",
        &format!("/api/v1/previews/{name}/wait?for=ready&timeout=90s"),
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(waited.status, 200, "{:?}", waited.body);
    assert_eq!(waited.body["outcome"], "ready", "{:?}", waited.body);
    assert_eq!(waited.body["preview"]["phase"], "Ready");
    let ns = waited.body["preview"]["namespace"]
        .as_str()
        .unwrap()
        .to_owned();
    let (first_job, first_claim) = (
        job_uid(&world.client, &ns).await,
        claim_uid(&world.client, &ns).await,
    );
    assert!(first_job.is_some() && first_claim.is_some());

    // Reset: the data is thrown away and the seed Job runs again.
    let reset = call(
        &world,
        "POST",
        &format!("/api/v1/previews/{name}/reset"),
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(reset.status, 202, "{:?}", reset.body);
    eventually("the seed ran again on a new claim", T, || async {
        let pe = world
            .previews()
            .get(&name)
            .await
            .map_err(|e| e.to_string())?;
        let st = pe.status.clone().unwrap_or_default();
        let (job, claim) = (
            job_uid(&world.client, &ns).await,
            claim_uid(&world.client, &ns).await,
        );
        let done = st.reset_done.is_some() && st.phase == Some(Phase::Ready);
        if done && job.is_some() && job != first_job && claim.is_some() && claim != first_claim {
            Ok(())
        } else {
            Err(format!(
                "phase {:?} ({:?}), job {job:?}, claim {claim:?}",
                st.phase, st.message
            ))
        }
    })
    .await;
    let reseeded = Api::<Job>::namespaced(world.client.clone(), &ns)
        .get("seed")
        .await
        .unwrap();
    assert!(
        reseeded.status.unwrap().succeeded.unwrap_or(0) >= 1,
        "the new seed Job completed"
    );

    // A pull request opened for the branch takes the sandbox over: same namespace, no clone.
    let namespaces_before = sandcastle_namespaces(&world).await;
    let opened = world.gh.open_pull_request(
        &world.repo,
        PrSpec::new(pr(4), head.clone(), "feature/login"),
    );
    assert_eq!(world.deliver(&opened).await.0, 200);
    let pr_preview = "sbx-pr-4".to_owned();
    let adopted = world.wait_phase(&pr_preview, Phase::Ready, T).await;
    assert_eq!(
        adopted.status.unwrap().namespace.as_deref(),
        Some(ns.as_str())
    );
    let gone = world.wait_phase(&name, Phase::Removed, T).await;
    assert_eq!(gone.spec.teardown.unwrap().reason, TeardownReason::Adopted);
    assert_eq!(
        sandcastle_namespaces(&world).await,
        namespaces_before,
        "no second namespace"
    );
    let namespace = Api::<Namespace>::all(world.client.clone())
        .get(&ns)
        .await
        .unwrap();
    assert_eq!(namespace.labels()["sandcastle.dev/preview"], pr_preview);

    // Delete: the namespace goes.
    let deleted = call(
        &world,
        "DELETE",
        &format!("/api/v1/previews/{pr_preview}"),
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(deleted.status, 202, "{:?}", deleted.body);
    world.wait_phase(&pr_preview, Phase::Removed, T).await;
    assert!(!world.namespace_exists(&ns).await);
}

async fn sandcastle_namespaces(world: &World) -> Vec<String> {
    let mut names: Vec<String> = Api::<Namespace>::all(world.client.clone())
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=sandcastle"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.name_any())
        .filter(|n| n.starts_with(&world.prefix))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_preview_token_reads_its_preview_and_nothing_else() {
    let world = world("scoped").await;
    let admin = account(&world, "admin", &[ALL]).await;
    let mk = |branch: &str| {
        let body = json!({"blueprint": "scoped", "repository": world.repo.as_str(), "commit": sha().as_str(), "branch": branch, "name": format!("scoped-{branch}")});
        let (w, t) = (&world, admin.clone());
        async move { call(w, "POST", "/api/v1/previews", Some(&t), Some(body)).await }
    };
    assert_eq!(mk("a").await.status, 201);
    assert_eq!(mk("b").await.status, 201);
    for name in ["scoped-a", "scoped-b"] {
        world.wait_phase(name, Phase::Ready, T).await;
    }
    let minted = call(
        &world,
        "POST",
        "/api/v1/previews/scoped-a/token",
        Some(&admin),
        Some(json!({"expirationSeconds": 900})),
    )
    .await;
    assert_eq!(minted.status, 201, "{:?}", minted.body);
    let token = minted.body["token"].as_str().unwrap().to_owned();
    let ns_a = minted.body["namespace"].as_str().unwrap().to_owned();
    assert_eq!(minted.body["serviceAccount"], "preview-agent");
    let expires: jiff::Timestamp = minted.body["expiresAt"].as_str().unwrap().parse().unwrap();
    let left = expires.duration_since(jiff::Timestamp::now()).as_secs();
    assert!((800..=900).contains(&left), "asked for 900 s, got {left} s");

    // Through Sandcastle: its own preview, nothing else, and no further tokens.
    let own = call(
        &world,
        "GET",
        "/api/v1/previews/scoped-a",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(own.status, 200, "{:?}", own.body);
    let other = call(
        &world,
        "GET",
        "/api/v1/previews/scoped-b",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(
        (other.status, other.body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    let listed = call(&world, "GET", "/api/v1/previews", Some(&token), None).await;
    let names: Vec<&str> = listed.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["scoped-a"]);
    let stop = call(
        &world,
        "POST",
        "/api/v1/previews/scoped-a/stop",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(
        stop.status, 202,
        "it may operate its own preview: {:?}",
        stop.body
    );
    let more = call(
        &world,
        "POST",
        "/api/v1/previews/scoped-a/token",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(more.status, 403);

    // Through Kubernetes: that namespace's pods and logs, nothing outside it, no Secrets.
    let kube = scoped_client(&token).await;
    let pods = Api::<Pod>::namespaced(kube.clone(), &ns_a)
        .list(&ListParams::default())
        .await;
    assert!(pods.is_ok(), "{pods:?}");
    let ns_b = world
        .previews()
        .get("scoped-b")
        .await
        .unwrap()
        .status
        .unwrap()
        .namespace
        .unwrap();
    let theirs = Api::<Pod>::namespaced(kube.clone(), &ns_b)
        .list(&ListParams::default())
        .await;
    assert!(
        matches!(theirs, Err(kube::Error::Api(ref r)) if r.code == 403),
        "{theirs:?}"
    );
    let secrets = Api::<Secret>::namespaced(kube.clone(), &ns_a)
        .list(&ListParams::default())
        .await;
    assert!(
        matches!(secrets, Err(kube::Error::Api(ref r)) if r.code == 403),
        "{secrets:?}"
    );

    // The preview deleted, its namespace gone: the token stops working.
    let deleted = call(
        &world,
        "DELETE",
        "/api/v1/previews/scoped-a",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(deleted.status, 202);
    world.wait_phase("scoped-a", Phase::Removed, T).await;
    eventually("the token is void in Kubernetes", T, || async {
        match Api::<Pod>::namespaced(kube.clone(), &ns_a)
            .list(&ListParams::default())
            .await
        {
            Err(kube::Error::Api(r)) if r.code == 401 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    eventually("the token is void in Sandcastle", T, || async {
        let answer = call(
            &world,
            "GET",
            "/api/v1/previews/scoped-a",
            Some(&token),
            None,
        )
        .await;
        if answer.status == 401 {
            Ok(())
        } else {
            Err(format!("{} {:?}", answer.status, answer.body))
        }
    })
    .await;
}

/// A client that talks to the control plane as `token` (and trusts its CA).
async fn scoped_client(token: &str) -> Client {
    let mut config = crate::support::cluster::config().await;
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_owned().into()),
        ..kube::config::AuthInfo::default()
    };
    Client::try_from(config).unwrap()
}

#[tokio::test]
async fn every_write_is_audited_three_ways_that_agree() {
    let world = world("audited").await;
    world
        .gh
        .set_role(&world.repo, "maria", sandcastle_fake_github::Role::Write);
    let admin = account(&world, "auditor", &[ALL]).await;
    let head = sha();
    // Through the webhook, a command, the API.
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(9), head.clone(), "b"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    world.wait_phase("audited-pr-9", Phase::Ready, T).await;
    let d = world
        .gh
        .comment(&world.repo, pr(9), "maria", "/preview stop");
    let (status, answer) = world.deliver(&d).await;
    assert_eq!(status, 202, "{answer}");
    world
        .command_outcome(answer["record"].as_str().unwrap())
        .await;
    world.wait_phase("audited-pr-9", Phase::Stopped, T).await;
    let woke = call(
        &world,
        "POST",
        "/api/v1/previews/audited-pr-9/wake",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(woke.status, 202, "{:?}", woke.body);
    let user = format!("system:serviceaccount:{}:auditor", world.home.name);

    // History: one entry per request, with who and which commit.
    let pe = wait_for(
        &world.previews(),
        "audited-pr-9",
        "every request in the history",
        T,
        |p: Option<&PreviewEnvironment>| {
            let history = p
                .and_then(|p| p.status.as_ref())
                .map(|s| s.history.clone())
                .unwrap_or_default();
            ["pull-request-opened", "command-stop", "api-wake"]
                .iter()
                .all(|a| history.iter().any(|h| h.action == *a))
        },
    )
    .await
    .unwrap();
    let history = pe.status.unwrap().history;
    let entry = |action: &str| history.iter().find(|h| h.action == action).unwrap().clone();
    assert_eq!(entry("pull-request-opened").actor, "@octocat");
    assert_eq!(entry("command-stop").actor, "@maria");
    assert_eq!(entry("api-wake").actor, user);
    assert!(
        ["pull-request-opened", "command-stop", "api-wake"]
            .iter()
            .all(|a| entry(a).sha.as_deref() == Some(head.as_str()))
    );

    // Events: the same, as `kubectl describe` shows them.
    let events = world
        .wait_event_reasons(
            "audited-pr-9",
            &["PullRequestOpened", "CommandStop", "ApiWake"],
        )
        .await;
    let note = |reason: &str| events.iter().find(|(r, _)| r == reason).unwrap().1.clone();
    assert!(
        note("ApiWake").ends_with(&format!("; by {user}")),
        "{}",
        note("ApiWake")
    );
    assert!(
        note("CommandStop").starts_with("/preview stop on #9"),
        "{}",
        note("CommandStop")
    );

    // Audit lines: the same writes, the same actors.
    let lines = audit::lines();
    let line = |actor: &str, action: &str| {
        lines.iter().any(|l| {
            l.get("actor").map(String::as_str) == Some(actor)
                && l.get("action").map(String::as_str) == Some(action)
                && [l.get("preview"), l.get("previews")]
                    .iter()
                    .flatten()
                    .any(|p| p.contains("audited-pr-9"))
        })
    };
    assert!(
        line("octocat", "opened"),
        "pull request event audit line: {lines:#?}"
    );
    assert!(line("maria", "stop"), "command audit line");
    assert!(line(&user, "wake"), "API audit line");
}

#[tokio::test]
async fn a_torn_down_previews_token_is_refused_at_once() {
    let world = world("revoked").await;
    let admin = account(&world, "admin", &[ALL]).await;
    let made = call(
        &world,
        "POST",
        "/api/v1/previews",
        Some(&admin),
        Some(
            json!({"blueprint": "revoked", "repository": world.repo.as_str(),
            "commit": sha().as_str(), "branch": "feature", "name": "revoked-a"}),
        ),
    )
    .await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    world.wait_phase("revoked-a", Phase::Ready, T).await;
    let mint = |name: &str| {
        let (w, t, path) = (
            &world,
            admin.clone(),
            format!("/api/v1/previews/{name}/token"),
        );
        async move {
            let minted = call(w, "POST", &path, Some(&t), None).await;
            assert_eq!(minted.status, 201, "{:?}", minted.body);
            minted.body["token"].as_str().unwrap().to_owned()
        }
    };
    let get = |name: &str, token: &str| {
        let (w, t, path) = (&world, token.to_owned(), format!("/api/v1/previews/{name}"));
        async move { call(w, "GET", &path, Some(&t), None).await }
    };

    // Deleted through the API: the very next call with its token is refused.
    let token = mint("revoked-a").await;
    assert_eq!(get("revoked-a", &token).await.status, 200);
    let deleted = call(
        &world,
        "DELETE",
        "/api/v1/previews/revoked-a",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(deleted.status, 202, "{:?}", deleted.body);
    let after = get("revoked-a", &token).await;
    assert_eq!(
        (after.status, after.body["error"]["code"].as_str()),
        (401, Some("unauthenticated")),
        "{:?}",
        after.body
    );

    // Torn down another way (its pull request closed): refused as soon as Sandcastle sees it,
    // well within the 30 s a review's answer is remembered.
    world.open(5).await;
    world.wait_phase("revoked-pr-5", Phase::Ready, T).await;
    let token = mint("revoked-pr-5").await;
    assert_eq!(get("revoked-pr-5", &token).await.status, 200);
    let closed = world.gh.close(&world.repo, pr(5), false);
    assert_eq!(world.deliver(&closed).await.0, 200);
    eventually(
        "the closed pull request's preview token is refused",
        Duration::from_secs(10),
        || async {
            let answer = get("revoked-pr-5", &token).await;
            (answer.status == 401)
                .then_some(())
                .ok_or(format!("{} {:?}", answer.status, answer.body))
        },
    )
    .await;
}
