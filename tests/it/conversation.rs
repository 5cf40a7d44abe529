//! The pull request conversation end to end, through the real HTTP endpoint, the control plane
//! and the GitHub stand-in: `/preview` commands and their reactions and replies, who may run
//! them, fork pull requests, drafts, the `no-preview` label, waiting for check runs, the
//! repository's `.github/sandcastle.yml`, and the one sticky comment per preview — which stays
//! one whatever happens to it.

use std::time::Duration;

use futures::future::join_all;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use sandcastle::crd::{Blueprint, Phase, PreviewEnvironment, TeardownReason};
use sandcastle::domain::{RepoName, Sha};
use sandcastle::github::text::parse_marker;
use sandcastle_fake_github::{CommentRecord, Fault, PrSpec, Role};
use serde_json::{Value, json};

use crate::support::eventually;
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);
pub(crate) const MAINTAINER: &str = "maria";
const CONFIG: &str = ".github/sandcastle.yml";

/// A small stack: one web Deployment behind a Service and an Ingress (so a preview has a URL).
const SHOP: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: ghcr.io/acme/web:staging
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  rules:
  - host: shop.staging.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              number: 80
";

async fn world(extra: Value) -> World {
    let world = World::new("shop", SHOP, extra).await;
    world.gh.set_role(&world.repo, MAINTAINER, Role::Write);
    world
}

/// `user` comments `body` on PR `n`; returns the answer and the comment's id. A command the
/// webhook recorded (`202 accepted`) is waited on until the controller has carried it out, and
/// the answer is then what it came to: status `accepted` (done, 🚀) or `refused` (😕), the
/// command, and the previews written with what each write did.
pub(crate) async fn comment(world: &World, n: u64, user: &str, body: &str) -> (u16, Value, u64) {
    let d = world.gh.comment(&world.repo, pr(n), user, body);
    let id = d.json()["comment"]["id"].as_u64().unwrap();
    let (status, answer) = world.deliver(&d).await;
    if status != 202 || answer["status"] != "accepted" {
        return (status, answer, id);
    }
    let record = answer["record"]
        .as_str()
        .expect("the record's name")
        .to_owned();
    (200, world.command_outcome(&record).await, id)
}

/// The reactions Sandcastle left on comment `id`, in order.
fn reactions(world: &World, n: u64, id: u64) -> Vec<String> {
    world
        .gh
        .comments(&world.repo, pr(n))
        .into_iter()
        .find(|c| c.id == id)
        .map(|c| c.reactions.into_iter().map(|r| r.content).collect())
        .unwrap_or_default()
}

fn is_sticky_of(c: &CommentRecord, preview: &str) -> bool {
    c.by_app && parse_marker(&c.body).is_some_and(|m| m.preview == preview)
}

/// Sandcastle's comments on PR `n` that are not sticky comments (replies, notes), in order.
pub(crate) fn replies(world: &World, n: u64) -> Vec<String> {
    world
        .gh
        .comments(&world.repo, pr(n))
        .into_iter()
        .filter(|c| c.by_app && parse_marker(&c.body).is_none())
        .map(|c| c.body)
        .collect()
}

fn last_reply(world: &World, n: u64) -> String {
    replies(world, n).pop().unwrap_or_default()
}

/// Wait until PR `n` has exactly one sticky comment for `preview` and it satisfies `ok`.
async fn sticky(
    world: &World,
    n: u64,
    preview: &str,
    what: &str,
    ok: impl Fn(&str) -> bool,
) -> CommentRecord {
    eventually(
        &format!("the sticky comment of {preview}: {what}"),
        T,
        || {
            let all: Vec<CommentRecord> = world
                .gh
                .comments(&world.repo, pr(n))
                .into_iter()
                .filter(|c| is_sticky_of(c, preview))
                .collect();
            let found = match &all[..] {
                [one] if ok(&one.body) => Ok(one.clone()),
                [one] => Err(format!("it says:\n{}", one.body)),
                many => Err(format!("{} sticky comments: {many:#?}", many.len())),
            };
            async move { found }
        },
    )
    .await
}

async fn preview(world: &World, name: &str) -> PreviewEnvironment {
    world.previews().get(name).await.unwrap()
}

/// Wait until `check` holds for preview `name`.
async fn wait_until(
    world: &World,
    name: &str,
    what: &str,
    check: impl Fn(&PreviewEnvironment) -> bool,
) -> PreviewEnvironment {
    let api = world.previews();
    eventually(&format!("{name}: {what}"), T, || {
        let api = api.clone();
        let check = &check;
        async move {
            match api.get_opt(name).await {
                Ok(Some(pe)) if check(&pe) => Ok(pe),
                Ok(other) => Err(format!("{other:#?}")),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await
}

fn deployed(pe: &PreviewEnvironment, sha: &Sha) -> bool {
    pe.status.as_ref().is_some_and(|s| {
        s.phase == Some(Phase::Ready) && s.deployed_sha.as_deref() == Some(sha.as_str())
    })
}

async fn preview_names(world: &World) -> Vec<String> {
    let mut names: Vec<String> = world
        .previews()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn every_command_does_what_it_says_and_answers() {
    let world = world(json!({"trigger": "comment"})).await;
    let repo = world.repo.clone();
    let head = sha();
    let (status, body) = world
        .deliver(
            &world
                .gh
                .open_pull_request(&repo, PrSpec::new(pr(1), head.clone(), "feature")),
        )
        .await;
    assert_eq!(status, 202, "trigger: comment waits for /preview: {body}");

    // A comment without a command gets no reaction at all.
    let (status, body, id) = comment(&world, 1, MAINTAINER, "LGTM, will /preview later").await;
    assert_eq!((status, body["status"].as_str()), (202, Some("ignored")));
    assert!(reactions(&world, 1, id).is_empty());

    // `/preview`: 👀 then 🚀, the preview deploys the head commit.
    let (status, body, id) = comment(&world, 1, MAINTAINER, "/preview").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("accepted")),
        "{body}"
    );
    assert_eq!(body["previews"][0]["result"], "created");
    assert_eq!(reactions(&world, 1, id), ["eyes", "rocket"]);
    let pe = wait_until(&world, "shop-pr-1", "Ready at the head", |p| {
        deployed(p, &head)
    })
    .await;
    assert_eq!(pe.spec.requested_by.name, MAINTAINER);
    assert!(!pe.spec.pinned, "not a fork");
    sticky(&world, 1, "shop-pr-1", "Ready", |b| {
        b.contains("✅ Ready")
            && b.contains(head.short())
            && b.contains("http://1-shop.preview.example.com")
    })
    .await;
    assert!(replies(&world, 1).is_empty(), "success needs no reply");

    // stop and wake: the desired state, then the preview follows it.
    let (status, _, id) = comment(&world, 1, MAINTAINER, "/preview stop").await;
    assert_eq!(status, 200);
    assert!(preview(&world, "shop-pr-1").await.spec.stopped);
    assert_eq!(reactions(&world, 1, id), ["eyes", "rocket"]);
    wait_until(&world, "shop-pr-1", "Stopped", |p| {
        p.status.as_ref().and_then(|s| s.phase) == Some(Phase::Stopped)
    })
    .await;
    let (status, _, _) = comment(&world, 1, MAINTAINER, "/PREVIEW   Wake").await;
    assert_eq!(status, 200);
    assert!(!preview(&world, "shop-pr-1").await.spec.stopped);
    wait_until(&world, "shop-pr-1", "Ready again", |p| deployed(p, &head)).await;
    // `kubectl describe` says who asked and what followed.
    let events = world
        .wait_event_reasons("shop-pr-1", &["CommandStop", "Stopped", "CommandWake"])
        .await;
    let stop = events.iter().find(|(r, _)| r == "CommandStop").unwrap();
    assert_eq!(
        stop.1,
        format!("/preview stop on #1 (commit {}); by @maria", head.short()),
        "{events:?}"
    );

    // extend: later expiry, said in the reply; bounded by creation + maxTtl (168h by default).
    let pe = preview(&world, "shop-pr-1").await;
    let before = pe.spec.expires_at.clone().unwrap().0;
    let created = pe.creation_timestamp().unwrap().0;
    let (_, _, id) = comment(&world, 1, MAINTAINER, "/preview extend 2d").await;
    let after = preview(&world, "shop-pr-1")
        .await
        .spec
        .expires_at
        .unwrap()
        .0;
    assert_eq!(after.duration_since(before).as_secs(), 2 * 86_400);
    assert_eq!(reactions(&world, 1, id), ["eyes", "rocket"]);
    let until = after
        .to_zoned(jiff::tz::TimeZone::UTC)
        .strftime("%a %-d %b %H:%M UTC")
        .to_string();
    assert!(
        last_reply(&world, 1).starts_with("The preview now expires in ")
            && last_reply(&world, 1).ends_with(&format!(" ({until}).")),
        "{}",
        last_reply(&world, 1)
    );
    comment(&world, 1, MAINTAINER, "/preview extend 30d").await;
    let capped = preview(&world, "shop-pr-1")
        .await
        .spec
        .expires_at
        .unwrap()
        .0;
    assert_eq!(capped.duration_since(created).as_secs(), 168 * 3600);
    assert!(
        last_reply(&world, 1).ends_with("That is as long as it can live: 7d after it was created.")
    );
    let (_, body, id) = comment(&world, 1, MAINTAINER, "/preview extend 1h").await;
    assert_eq!(body["status"], "refused");
    assert_eq!(reactions(&world, 1, id), ["eyes", "confused"]);
    assert!(
        last_reply(&world, 1).starts_with(
            "A preview lives at most 7d after it was created, so this one cannot be extended past"
        ),
        "{}",
        last_reply(&world, 1)
    );
    assert_eq!(
        preview(&world, "shop-pr-1")
            .await
            .spec
            .expires_at
            .unwrap()
            .0,
        capped
    );
    // The absolute time, not the relative one: "in 7 d" or "in 6 d 23 h" depends on whether a
    // second has passed since the preview was created.
    let shown = capped
        .to_zoned(jiff::tz::TimeZone::UTC)
        .strftime("%a %-d %b %H:%M UTC")
        .to_string();
    sticky(&world, 1, "shop-pr-1", "the new expiry", |b| {
        b.contains(&shown)
    })
    .await;

    // status: a one-line answer, and the sticky comment refreshed.
    let (_, _, id) = comment(&world, 1, MAINTAINER, "/preview status").await;
    assert_eq!(reactions(&world, 1, id), ["eyes", "rocket"]);
    let answer = last_reply(&world, 1);
    assert!(
        answer.starts_with(&format!("- ✅ Ready: `shop-pr-1` at `{}`", head.short())),
        "{answer}"
    );
    wait_until(&world, "shop-pr-1", "the refresh served", |p| {
        let asked = p.annotations().get("sandcastle.dev/sticky-refresh");
        asked.is_some()
            && p.status
                .as_ref()
                .and_then(|s| s.sticky.as_ref())
                .and_then(|s| s.refreshed.as_ref())
                == asked
    })
    .await;

    // help, and a command that is not one.
    comment(&world, 1, MAINTAINER, "/preview help").await;
    assert!(last_reply(&world, 1).starts_with("**Sandcastle commands.**"));
    let (_, body, id) = comment(&world, 1, MAINTAINER, "/preview frobnicate").await;
    assert_eq!(body["status"], "refused");
    assert_eq!(reactions(&world, 1, id), ["eyes", "confused"]);
    let answer = last_reply(&world, 1);
    assert!(
        answer.starts_with("`/preview frobnicate` is not a command I know."),
        "{answer}"
    );
    assert!(
        answer.contains("**Sandcastle commands.**"),
        "the help follows: {answer}"
    );

    // destroy: removed, and the sticky comment says by whom.
    let (_, _, id) = comment(&world, 1, MAINTAINER, "/preview destroy").await;
    assert_eq!(reactions(&world, 1, id), ["eyes", "rocket"]);
    let pe = world.wait_phase("shop-pr-1", Phase::Removed, T).await;
    assert_eq!(pe.spec.teardown.unwrap().reason, TeardownReason::Destroyed);
    assert!(
        !world
            .namespace_exists(&world.namespace_of("shop-pr-1"))
            .await
    );
    sticky(&world, 1, "shop-pr-1", "destroyed", |b| {
        b.contains("🧹 Removed") && b.contains("destroyed by @maria with `/preview destroy`")
    })
    .await;

    // A push does not bring a destroyed preview back; `/preview` does, at the new head.
    let second = sha();
    let (status, body) = world.deliver(&world.gh.push(&repo, pr(1), &second)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["previews"][0]["result"], "destroyed", "{body}");
    let (_, body, _) = comment(&world, 1, MAINTAINER, "/preview").await;
    assert_eq!(body["previews"][0]["result"], "updated", "{body}");
    wait_until(&world, "shop-pr-1", "back at the new head", |p| {
        deployed(p, &second)
    })
    .await;
    sticky(&world, 1, "shop-pr-1", "Ready again", |b| {
        b.contains("✅ Ready") && b.contains(second.short())
    })
    .await;
}

#[tokio::test]
async fn only_people_with_write_access_may_run_commands() {
    let world = world(json!({})).await;
    let repo = world.repo.clone();
    world.gh.set_role(&repo, "rob", Role::Read);
    world.gh.set_role(&repo, "tina", Role::Triage);
    world.gh.set_role(&repo, "max", Role::Maintain);
    let (status, _) = world
        .deliver(
            &world
                .gh
                .open_pull_request(&repo, PrSpec::new(pr(2), sha(), "feature")),
        )
        .await;
    assert_eq!(status, 200);
    let before = preview(&world, "shop-pr-2").await.spec;

    for (user, has) in [
        ("rob", "read"),
        ("tina", "triage"),
        ("olga", "no access"),
        ("renovate[bot]", "no access"),
    ] {
        let (status, body, id) = comment(&world, 2, user, "/preview destroy").await;
        assert_eq!(
            (status, body["status"].as_str()),
            (200, Some("refused")),
            "{user}: {body}"
        );
        assert_eq!(reactions(&world, 2, id), ["eyes", "confused"], "{user}");
        assert_eq!(
            last_reply(&world, 2),
            format!(
                "Only people with write access to acme/shop can run `/preview` (you have {has})."
            )
        );
    }
    assert_eq!(
        preview(&world, "shop-pr-2").await.spec,
        before,
        "nothing changed"
    );

    // The answer is remembered briefly: one permission call per person.
    comment(&world, 2, "rob", "/preview stop").await;
    assert_eq!(
        world
            .gh
            .check("GET /repos/acme/shop/collaborators/rob/permission")
            .len(),
        1
    );
    assert!(!preview(&world, "shop-pr-2").await.spec.stopped);

    // Maintain is enough; and reactions failing on GitHub's side change nothing about the command.
    world.gh.fail_next(
        "POST /repos/*/*/issues/comments/*/reactions",
        20,
        Fault::ServerError(502),
    );
    let (status, body, id) = comment(&world, 2, "max", "/preview stop").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("accepted")),
        "{body}"
    );
    assert!(preview(&world, "shop-pr-2").await.spec.stopped);
    assert!(reactions(&world, 2, id).is_empty());

    // Edited comments are not commands.
    let (status, body) = world
        .deliver(&world.gh.edit_comment(&repo, id, "max", "/preview destroy"))
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (202, Some("ignored")),
        "{body}"
    );
    assert!(preview(&world, "shop-pr-2").await.spec.teardown.is_none());
}

#[tokio::test]
async fn fork_pull_requests_deploy_only_the_commit_a_maintainer_approved() {
    let world = world(json!({})).await;
    let repo = world.repo.clone();
    let first = sha();
    let mut spec = PrSpec::new(pr(3), first.clone(), "patch-1");
    spec.from_fork = Some(RepoName::new("mallory/shop").unwrap());
    spec.author = "mallory".to_owned();
    let (status, body) = world
        .deliver(&world.gh.open_pull_request(&repo, spec))
        .await;
    assert_eq!(status, 200, "{body}");

    // Opened: nothing deployed; the sticky comment explains.
    let pe = world.wait_phase("shop-pr-3", Phase::Pending, T).await;
    assert!(pe.spec.awaiting_approval);
    sticky(&world, 3, "shop-pr-3", "waiting for approval", |b| {
        b.contains("🔒 Waiting for approval")
            && b.contains(&format!(
                "a maintainer can comment `/preview` to deploy `{}`",
                first.short()
            ))
    })
    .await;
    // The fork pushes: still nothing deployed, the note follows the head.
    let second = sha();
    assert_eq!(
        world.deliver(&world.gh.push(&repo, pr(3), &second)).await.0,
        200
    );
    sticky(&world, 3, "shop-pr-3", "the new head", |b| {
        b.contains(&format!("to deploy `{}`", second.short()))
    })
    .await;
    // The fork's author cannot approve it.
    let (_, body, _) = comment(&world, 3, "mallory", "/preview").await;
    assert_eq!(body["status"], "refused");
    assert!(
        !world
            .namespace_exists(&world.namespace_of("shop-pr-3"))
            .await
    );
    assert!(world.gh.deployments(&repo).is_empty(), "nothing deployed");

    // A maintainer's /preview deploys the head of that moment, pinned.
    let (_, body, _) = comment(&world, 3, MAINTAINER, "/preview").await;
    assert_eq!(body["status"], "accepted", "{body}");
    let pe = wait_until(&world, "shop-pr-3", "Ready at the approved commit", |p| {
        deployed(p, &second)
    })
    .await;
    assert!(pe.spec.pinned && !pe.spec.awaiting_approval);
    sticky(&world, 3, "shop-pr-3", "pinned", |b| {
        b.contains("✅ Ready")
            && b.contains(&format!("the preview stays on `{}`", second.short()))
            && b.contains("later pushes need a maintainer's new `/preview`")
    })
    .await;

    // The fork pushes again: still the approved commit.
    let third = sha();
    let (status, body) = world.deliver(&world.gh.push(&repo, pr(3), &third)).await;
    assert_eq!(status, 200, "{body}");
    let pe = preview(&world, "shop-pr-3").await;
    assert_eq!(pe.spec.sha, second.as_str());
    assert!(deployed(&pe, &second));
    assert!(
        world.gh.deployments(&repo).iter().all(|d| d.sha != third),
        "the new fork commit was never deployed"
    );
    // Until a maintainer asks again.
    comment(&world, 3, MAINTAINER, "/preview").await;
    wait_until(
        &world,
        "shop-pr-3",
        "Ready at the newly approved commit",
        |p| deployed(p, &third),
    )
    .await;
}

#[tokio::test]
async fn drafts_wait_for_review_and_no_preview_is_honoured() {
    let world = world(json!({})).await;
    let repo = world.repo.clone();
    let mut draft = PrSpec::new(pr(4), sha(), "draft");
    draft.draft = true;
    let (status, body) = world
        .deliver(&world.gh.open_pull_request(&repo, draft))
        .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (202, Some("shop: draft pull request")),
        "{body}"
    );
    assert!(preview_names(&world).await.is_empty());
    let (status, body) = world
        .deliver(&world.gh.ready_for_review(&repo, pr(4)))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["previews"][0]["result"], "created");
    world.wait_phase("shop-pr-4", Phase::Ready, T).await;

    let head = sha();
    let mut labelled = PrSpec::new(pr(5), head.clone(), "quiet");
    labelled.labels = vec!["no-preview".to_owned()];
    let (status, body) = world
        .deliver(&world.gh.open_pull_request(&repo, labelled))
        .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (202, Some("shop: labelled no-preview")),
        "{body}"
    );
    assert_eq!(preview_names(&world).await, ["shop-pr-4"]);
    // Removing the label deploys; adding it again takes the preview down.
    let (status, body) = world
        .deliver(&world.gh.unlabel(&repo, pr(5), "no-preview"))
        .await;
    assert_eq!(
        (status, body["previews"][0]["result"].as_str()),
        (200, Some("created")),
        "{body}"
    );
    world.wait_phase("shop-pr-5", Phase::Ready, T).await;
    let (status, body) = world
        .deliver(&world.gh.label(&repo, pr(5), "no-preview"))
        .await;
    assert_eq!(status, 200, "{body}");
    world.wait_phase("shop-pr-5", Phase::Removed, T).await;
    sticky(&world, 5, "shop-pr-5", "removed by the label", |b| {
        b.contains("🧹 Removed") && b.contains("labelled `no-preview` by @acme")
    })
    .await;
    // A push while labelled does not bring it back.
    let (status, body) = world.deliver(&world.gh.push(&repo, pr(5), &sha())).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        world
            .previews()
            .get("shop-pr-5")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase,
        Some(Phase::Removed)
    );
}

#[tokio::test]
async fn wait_for_checks_deploys_only_after_the_check_runs_pass() {
    let world = world(json!({"waitForChecks": ["build", "images"]})).await;
    let repo = world.repo.clone();
    let head = sha();
    let (status, _) = world
        .deliver(
            &world
                .gh
                .open_pull_request(&repo, PrSpec::new(pr(6), head.clone(), "feature")),
        )
        .await;
    assert_eq!(status, 200);
    let waiting = |names: &'static [&'static str]| {
        move |p: &PreviewEnvironment| {
            p.status
                .as_ref()
                .is_some_and(|s| s.phase == Some(Phase::Pending) && s.waiting_for_checks == names)
        }
    };
    wait_until(
        &world,
        "shop-pr-6",
        "waiting for both checks",
        waiting(&["build", "images"]),
    )
    .await;
    sticky(&world, 6, "shop-pr-6", "waiting for checks", |b| {
        b.contains("🚦 Waiting for checks") && b.contains("waiting for `build`, `images` to pass")
    })
    .await;
    assert!(
        !world
            .namespace_exists(&world.namespace_of("shop-pr-6"))
            .await
    );
    assert!(world.gh.deployments(&repo).is_empty());

    let (status, body) = world
        .deliver(
            &world
                .gh
                .complete_check_run(&repo, &head, "build", "success"),
        )
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("accepted")),
        "{body}"
    );
    wait_until(
        &world,
        "shop-pr-6",
        "waiting for images",
        waiting(&["images"]),
    )
    .await;
    world
        .deliver(
            &world
                .gh
                .complete_check_run(&repo, &head, "images", "failure"),
        )
        .await;
    wait_until(&world, "shop-pr-6", "the failure said", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.message.as_deref())
            .is_some_and(|m| m.ends_with("images (failed)"))
    })
    .await;
    assert!(world.gh.deployments(&repo).is_empty());
    // A check on another commit changes nothing.
    let (status, _) = world
        .deliver(
            &world
                .gh
                .complete_check_run(&repo, &sha(), "images", "success"),
        )
        .await;
    assert_eq!(status, 202);
    // The re-run passes: deployed.
    world
        .deliver(
            &world
                .gh
                .complete_check_run(&repo, &head, "images", "success"),
        )
        .await;
    wait_until(&world, "shop-pr-6", "Ready", |p| deployed(p, &head)).await;
    sticky(&world, 6, "shop-pr-6", "Ready", |b| b.contains("✅ Ready")).await;
    // GitHub was asked when the preview began waiting and after each of the three nudges, not
    // on every reconcile Sandcastle's own writes caused.
    let asked = world
        .gh
        .check("GET /repos/acme/shop/commits/*/check-runs")
        .len();
    assert!(
        (1..=4).contains(&asked),
        "asked for check runs {asked} times"
    );
}

/// GitHub does not redeliver a lost webhook: a preview waiting for checks asks GitHub again on
/// its own, so a `check_run` delivery that never arrives delays the deploy by one poll at most.
#[tokio::test]
async fn a_lost_check_run_delivery_delays_the_deploy_by_one_poll_at_most() {
    let mut world = World::unstarted("shop", SHOP, json!({"waitForChecks": ["build"]})).await;
    world.gh.set_role(&world.repo, MAINTAINER, Role::Write);
    world.configure = Some(|parts| parts.settings.checks_poll_interval = Duration::from_secs(1));
    world.start().await;
    let repo = world.repo.clone();
    let head = sha();
    let opened = world
        .gh
        .open_pull_request(&repo, PrSpec::new(pr(9), head.clone(), "feature"));
    assert_eq!(world.deliver(&opened).await.0, 200);
    wait_until(&world, "shop-pr-9", "waiting for build", |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.phase == Some(Phase::Pending) && s.waiting_for_checks == ["build"])
    })
    .await;
    assert!(world.gh.deployments(&repo).is_empty());

    // Sandcastle keeps asking on its own: going Pending costs one ask (its own writes do not ask
    // again); a dozen within 30 s (half the default 60 s poll) can only come from the
    // configured 1 s poll.
    eventually(
        "Sandcastle polls the check runs",
        Duration::from_secs(30),
        || async {
            let asked = world
                .gh
                .check("GET /repos/acme/shop/commits/*/check-runs")
                .len();
            if asked >= 12 {
                Ok(())
            } else {
                Err(format!("asked {asked} times"))
            }
        },
    )
    .await;
    assert!(
        world.gh.deployments(&repo).is_empty(),
        "nothing deployed before the check passes"
    );

    // The check run passes on GitHub; its delivery is lost (never posted to Sandcastle).
    let _lost = world
        .gh
        .complete_check_run(&repo, &head, "build", "success");
    wait_until(&world, "shop-pr-9", "Ready without the delivery", |p| {
        deployed(p, &head)
    })
    .await;
    assert_eq!(world.gh.deployments(&repo).len(), 1);
}

#[tokio::test]
async fn repository_configuration_comes_from_the_base_branch() {
    let mut world = world(json!({})).await;
    let repo = world.repo.clone();
    // A second Blueprint for the same repository.
    let other = json!({
        "apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
        "metadata": {"name": "other"},
        "spec": {"source": {"namespace": world.staging.name}, "repositories": [repo.as_str()]},
    });
    Api::<Blueprint>::namespaced(world.client.clone(), &world.home.name)
        .patch(
            "other",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&other),
        )
        .await
        .unwrap();
    // A fresh start reads both Blueprints (a running Sandcastle's cache may lag a moment).
    world.sandcastle.take().unwrap().shutdown().await;
    world.start().await;
    let open = |n: u64, branch: &str| {
        world
            .gh
            .open_pull_request(&repo, PrSpec::new(pr(n), sha(), branch))
    };

    // Changed in the pull request's head: ignored.
    world.gh.put_file(
        &repo,
        "sneaky",
        CONFIG,
        "blueprint: other\ntrigger: comment\n",
    );
    let (status, body) = world.deliver(&open(7, "sneaky")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        preview_names(&world).await,
        ["other-shop-pr-7", "shop-pr-7"]
    );
    let reads = world
        .gh
        .check("GET /repos/acme/shop/contents/.github/sandcastle.yml");
    assert!(!reads.is_empty());
    assert!(
        reads
            .iter()
            .all(|c| c.query.get("ref").map(String::as_str) == Some("main"))
    );

    // On the base branch: used.
    world.gh.put_file(
        &repo,
        "main",
        CONFIG,
        "blueprint: other\ntrigger: comment\n",
    );
    let (status, body) = world.deliver(&open(8, "b8")).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (202, Some("ignored")),
        "{body}"
    );
    let (_, body, _) = comment(&world, 8, MAINTAINER, "/preview").await;
    assert_eq!(body["previews"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["previews"][0]["preview"], "other-shop-pr-8");
    world.gh.put_file(
        &repo,
        "main",
        CONFIG,
        "# previews for the other stack\nblueprint: other\nttl: 2h\n",
    );
    let (status, body) = world.deliver(&open(9, "b9")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["previews"].as_array().unwrap().len(), 1, "{body}");
    let pe = preview(&world, "other-shop-pr-9").await;
    let ttl = pe
        .spec
        .expires_at
        .as_ref()
        .unwrap()
        .0
        .duration_since(pe.creation_timestamp().unwrap().0);
    assert!((7000..=7300).contains(&ttl.as_secs()), "{ttl:?}");

    // Invalid: a clear comment, once, and the defaults apply.
    world.gh.put_file(
        &repo,
        "main",
        CONFIG,
        "blueprint: other\ntrigger: sometimes\n",
    );
    let (status, body) = world.deliver(&open(10, "b10")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["previews"].as_array().unwrap().len(),
        2,
        "defaults: {body}"
    );
    let note = replies(&world, 10);
    assert_eq!(note.len(), 1, "{note:?}");
    assert!(
        note[0].starts_with(
            "`.github/sandcastle.yml` on `main` cannot be used, so the blueprint defaults \
             apply: line 2, column 10: trigger must be `auto` or `comment`, not `sometimes`."
        ),
        "{}",
        note[0]
    );
    assert_eq!(
        world.deliver(&world.gh.push(&repo, pr(10), &sha())).await.0,
        200
    );
    assert_eq!(replies(&world, 10).len(), 1, "said once");
}

#[tokio::test]
async fn a_busy_pull_request_keeps_exactly_one_sticky_comment() {
    let world = world(json!({})).await;
    let repo = world.repo.clone();
    let (status, _) = world
        .deliver(
            &world
                .gh
                .open_pull_request(&repo, PrSpec::new(pr(11), sha(), "busy")),
        )
        .await;
    assert_eq!(status, 200);
    sticky(&world, 11, "shop-pr-11", "posted", |_| true).await;

    // 20 comments and pushes, delivered in bursts of four at once.
    let mut deliveries = Vec::new();
    let mut last = None;
    for i in 0..20 {
        deliveries.push(if i % 3 == 0 {
            let head = sha();
            last = Some(head.clone());
            world.gh.push(&repo, pr(11), &head)
        } else {
            let body = [
                "/preview status",
                "LGTM",
                "/preview",
                "/preview extend 1h",
                "nit: typo",
            ][i % 5];
            world.gh.comment(&repo, pr(11), MAINTAINER, body)
        });
    }
    for burst in deliveries.chunks(4) {
        for (status, body) in join_all(burst.iter().map(|d| world.deliver(d))).await {
            assert!(status == 200 || status == 202, "{status} {body}");
        }
    }
    let last = last.unwrap();
    wait_until(&world, "shop-pr-11", "Ready at the last push", |p| {
        deployed(p, &last)
    })
    .await;
    let one = sticky(&world, 11, "shop-pr-11", "Ready at the last push", |b| {
        b.contains("✅ Ready") && b.contains(last.short())
    })
    .await;
    // Edited in place (GitHub's times are in whole seconds, and all of this can take less).
    let edits = world
        .gh
        .check(format!("PATCH /repos/acme/shop/issues/comments/{}", one.id).as_str());
    assert!(!edits.is_empty(), "edited in place");
    assert_eq!(
        world
            .gh
            .check("POST /repos/acme/shop/issues/11/comments")
            .len(),
        replies(&world, 11).len() + 1,
        "one sticky comment ever posted; the rest are replies to `/preview status`"
    );
    assert!(
        world
            .gh
            .check("DELETE /repos/*/*/issues/comments/*")
            .is_empty()
    );
}

#[tokio::test]
async fn edited_or_deleted_sticky_comments_never_multiply() {
    let mut world = world(json!({})).await;
    let repo = world.repo.clone();
    let first = sha();
    world
        .deliver(
            &world
                .gh
                .open_pull_request(&repo, PrSpec::new(pr(12), first.clone(), "feature")),
        )
        .await;
    wait_until(&world, "shop-pr-12", "Ready", |p| deployed(p, &first)).await;
    let original = sticky(&world, 12, "shop-pr-12", "Ready", |b| {
        b.contains("✅ Ready")
    })
    .await;

    // Someone edits it, even removing the marker: the next change restores it in place.
    let (status, _) = world
        .deliver(
            &world
                .gh
                .edit_comment(&repo, original.id, MAINTAINER, "my notes"),
        )
        .await;
    assert_eq!(status, 202);
    let second = sha();
    world.deliver(&world.gh.push(&repo, pr(12), &second)).await;
    wait_until(&world, "shop-pr-12", "Ready", |p| deployed(p, &second)).await;
    let restored = sticky(&world, 12, "shop-pr-12", "restored", |b| {
        b.contains("✅ Ready") && b.contains(second.short())
    })
    .await;
    assert_eq!(restored.id, original.id);

    // Someone deletes it: posted again once on the next change, then edited.
    world
        .deliver(&world.gh.delete_comment(&repo, original.id, MAINTAINER))
        .await;
    let third = sha();
    world.deliver(&world.gh.push(&repo, pr(12), &third)).await;
    wait_until(&world, "shop-pr-12", "Ready", |p| deployed(p, &third)).await;
    let again = sticky(&world, 12, "shop-pr-12", "posted again", |b| {
        b.contains("✅ Ready") && b.contains(third.short())
    })
    .await;
    assert_ne!(again.id, original.id);

    // Sandcastle loses its record of the comment (as after a crash between posting and saving)
    // and a new process leads, which cannot know what the last one posted: the marker finds it
    // again.
    world.sandcastle.take().unwrap().shutdown().await;
    world.start().await;
    let api = world.previews();
    api.patch_status(
        "shop-pr-12",
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"sticky": null}})),
    )
    .await
    .unwrap();
    let fourth = sha();
    world.deliver(&world.gh.push(&repo, pr(12), &fourth)).await;
    wait_until(&world, "shop-pr-12", "Ready", |p| deployed(p, &fourth)).await;
    let found = sticky(&world, 12, "shop-pr-12", "found by its marker", |b| {
        b.contains(fourth.short())
    })
    .await;
    assert_eq!(found.id, again.id);

    // Closed: it says so, still one.
    world.deliver(&world.gh.close(&repo, pr(12), false)).await;
    let last = sticky(&world, 12, "shop-pr-12", "removed", |b| {
        b.contains("🧹 Removed") && b.contains("closed by @acme; namespace deleted")
    })
    .await;
    assert_eq!(last.id, again.id);
}
