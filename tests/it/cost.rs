//! What previews cost, and the rules that bound it: environment-hours in each preview's status,
//! on its sticky comment and in `/metrics` (following the manual clock); the `preview-keep`
//! label and the warning before expiry; and each author class's trigger, cap and rule.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use sandcastle::crd::{AuthorClass, Phase, PreviewEnvironment, RunningTime};
use sandcastle::domain::clock::Clock;
use sandcastle::github::text::parse_marker;
use sandcastle::k8s::previews;
use sandcastle_fake_github::{PrSpec, Role};
use serde_json::json;

use crate::conversation::{MAINTAINER, comment, replies};
use crate::metrics::{family, scrape};
use crate::support::eventually;
use crate::support::fixtures::TINY_APP;
use crate::support::world::{World, pr, sha};

const T: Duration = Duration::from_secs(90);
const MINUTE: Duration = Duration::from_secs(60);

/// A world on a manual clock that starts now.
async fn manual_world(name: &str, extra: serde_json::Value) -> World {
    let mut world = World::unstarted(name, TINY_APP, extra).await;
    world.clock = Clock::manual(Timestamp::from_second(Timestamp::now().as_second()).unwrap());
    // The dashboard's pages without signing in (its sums are checked).
    world.configure = Some(|parts| parts.settings.public_pages = true);
    world.start().await;
    world
}

fn running(pe: &PreviewEnvironment) -> Option<RunningTime> {
    pe.status.as_ref()?.running.clone()
}

/// Wait until PR `n`'s one sticky comment contains `text`.
async fn sticky_says(world: &World, n: u64, text: &str) -> String {
    eventually(&format!("the sticky comment says {text:?}"), T, || {
        let stickies: Vec<String> = world
            .gh
            .comments(&world.repo, pr(n))
            .into_iter()
            .filter(|c| c.by_app && parse_marker(&c.body).is_some())
            .map(|c| c.body)
            .collect();
        let found = match &stickies[..] {
            [one] if one.contains(text) => Ok(one.clone()),
            other => Err(format!("{other:#?}")),
        };
        async move { found }
    })
    .await
}

/// Wait until `/metrics` counts `seconds` of running time for Blueprint `blueprint`.
async fn metrics_count(world: &World, blueprint: &str, seconds: f64) {
    // The stand-in's pull requests come from branches of the repository itself: their authors
    // could push there, so are members.
    let series = format!(
        r#"sandcastle_environment_seconds_total{{blueprint="{blueprint}",author_class="members"}}"#
    );
    eventually(&format!("{series} = {seconds}"), T, || async {
        let m = scrape(world).await;
        let counted = family(&m, "sandcastle_environment_seconds_total");
        match counted.get(series.as_str()) {
            Some(v) if *v == seconds => Ok(()),
            _ => Err(format!("{counted:#?}")),
        }
    })
    .await;
}

#[tokio::test]
async fn environment_hours_in_status_comment_and_metrics_follow_the_clock() {
    let world = manual_world("hours", json!({"stopAfterIdle": "1h", "ttl": "24h"})).await;
    let opened = world.clock.now();
    world.open(1).await;
    let pe = world.wait_phase("hours-pr-1", Phase::Ready, T).await;
    assert_eq!(
        running(&pe),
        Some(RunningTime {
            seconds: 0,
            since: Some(Time(opened)),
        }),
        "running since its namespace was made"
    );
    metrics_count(&world, "hours", 0.0).await;

    // Half an hour on: counted while it runs.
    world.clock.advance(30 * MINUTE);
    metrics_count(&world, "hours", 1800.0).await;

    // Idle for an hour: stopped, and the stretch ends there.
    world.clock.advance(31 * MINUTE);
    let pe = world.wait_phase("hours-pr-1", Phase::Stopped, T).await;
    assert_eq!(
        running(&pe),
        Some(RunningTime {
            seconds: 61 * 60,
            since: None,
        })
    );
    sticky_says(&world, 1, "| **Environment-hours** | 1.0 so far |").await;
    // Stopped time is not running time.
    world.clock.advance(120 * MINUTE);
    metrics_count(&world, "hours", 3660.0).await;
    // The dashboard sums them per Blueprint.
    let (status, _, page) = world.get_text("/", vec![]).await;
    assert_eq!(status, 200, "{page}");
    let row = "<td>hours</td><td>1 / 20</td><td>0</td><td>1.0</td>";
    assert!(page.contains(row), "{page}");

    // Woken, half an hour more, then closed: the total stays on the comment.
    previews::set_stopped(&world.previews(), "hours-pr-1", false, world.clock.now())
        .await
        .unwrap()
        .unwrap();
    world.wait_phase("hours-pr-1", Phase::Ready, T).await;
    world.clock.advance(30 * MINUTE);
    let (status, _) = world
        .deliver(&world.gh.close(&world.repo, pr(1), true))
        .await;
    assert_eq!(status, 200);
    let pe = world.wait_phase("hours-pr-1", Phase::Removed, T).await;
    assert_eq!(
        running(&pe),
        Some(RunningTime {
            seconds: 91 * 60,
            since: None,
        })
    );
    let body = sticky_says(&world, 1, "| **Environment-hours** | 1.5 in total |").await;
    assert!(body.contains("Removed"), "{body}");
    metrics_count(&world, "hours", 5460.0).await;
}

/// Sandcastle's replies on PR `n` that warn of an expiry, in order.
fn warnings(world: &World, n: u64) -> Vec<String> {
    world
        .gh
        .comments(&world.repo, pr(n))
        .into_iter()
        .filter(|c| c.by_app && c.body.starts_with("⏳"))
        .map(|c| c.body)
        .collect()
}

async fn wait_warnings(world: &World, n: u64, count: usize) -> Vec<String> {
    eventually(&format!("{count} expiry warnings"), T, || {
        let found = warnings(world, n);
        async move {
            if found.len() == count {
                Ok(found)
            } else {
                Err(format!("{found:#?}"))
            }
        }
    })
    .await
}

#[tokio::test]
async fn the_keep_label_holds_the_expiry_and_each_expiry_is_warned_of_once() {
    let world = manual_world(
        "keep",
        json!({"ttl": "4h", "maxTtl": "12h", "stopAfterIdle": "0", "expiryWarning": "1h"}),
    )
    .await;
    let created = world.clock.now();
    let hours = |h: i64| created + jiff::SignedDuration::from_hours(h);
    world.open(1).await;
    let pe = world.wait_phase("keep-pr-1", Phase::Ready, T).await;
    assert_eq!(pe.spec.expires_at.as_ref().map(|t| t.0), Some(hours(4)));
    // maxTtl counts from the resource's creation (the API server's time, which may be a second
    // past the manual clock's start).
    let longest = pe.creation_timestamp().unwrap().0 + jiff::SignedDuration::from_hours(12);
    let advance_to = |at: jiff::Timestamp| {
        let by = at.duration_since(world.clock.now());
        world.clock.advance(Duration::try_from(by).unwrap());
    };

    // An hour before it expires: one warning, saying how to keep it.
    world.clock.advance(3 * 60 * MINUTE + MINUTE);
    let said = wait_warnings(&world, 1, 1).await;
    assert!(
        said[0].starts_with("⏳ Preview `keep-pr-1` goes in 59 min (")
            && said[0].contains("add the `preview-keep` label"),
        "{said:#?}"
    );
    // The reply is posted before the pass that posts it writes the status: wait for that write.
    eventually("the warning recorded on the preview", T, || async {
        let pe = world.previews().get("keep-pr-1").await.unwrap();
        let st = pe.status.unwrap_or_default();
        match (st.phase, st.expiry_warned.map(|t| t.0)) {
            (Some(Phase::Ready), Some(at)) if at == hours(4) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // `preview-keep`: held to the longest life, 12 h from creation.
    let (status, _) = world
        .deliver(&world.gh.label(&world.repo, pr(1), "preview-keep"))
        .await;
    assert_eq!(status, 200);
    eventually("the expiry held to maxTtl", T, || async {
        let pe = world.previews().get("keep-pr-1").await.unwrap();
        match pe.spec.expires_at.map(|t| t.0) {
            Some(at) if at == longest => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // Past the first expiry it lives on; an hour before the new one, a second warning.
    advance_to(longest - jiff::SignedDuration::from_mins(59));
    let said = wait_warnings(&world, 1, 2).await;
    assert!(said[1].contains("the longest it may live"), "{said:#?}");

    // On time: removed once the clock reaches the expiry shown.
    advance_to(longest);
    let pe = world.wait_phase("keep-pr-1", Phase::Removed, T).await;
    let teardown = pe.spec.teardown.unwrap();
    assert_eq!(teardown.reason, sandcastle::crd::TeardownReason::Expired);
    assert_eq!(teardown.at.0, longest);
    assert_eq!(warnings(&world, 1).len(), 2, "one warning per expiry");
}

/// Opens PR `n` by `author` (a `[bot]` login is a Bot) from a branch of the repository;
/// returns the webhook's answer.
async fn open_by(world: &World, n: u64, author: &str) -> serde_json::Value {
    open_from(world, n, author, None).await
}

/// [`open_by`], from a branch of `fork` when given.
async fn open_from(world: &World, n: u64, author: &str, fork: Option<&str>) -> serde_json::Value {
    let mut spec = PrSpec::new(pr(n), sha(), &format!("b{n}"));
    spec.author = author.to_owned();
    spec.from_fork = fork.map(|f| sandcastle::domain::RepoName::new(f).unwrap());
    let d = world.gh.open_pull_request(&world.repo, spec);
    let (status, body) = world.deliver(&d).await;
    assert!(status == 200 || status == 202, "{status} {body}");
    body
}

#[tokio::test]
async fn each_author_class_gets_its_own_trigger_cap_and_rule() {
    let world = World::new(
        "cls",
        TINY_APP,
        json!({"maxPreviews": 10, "authors": {
            "dependencyBots": {"trigger": "off"},
            "outsideContributors": {"trigger": "comment"},
            "agents": {"maxPreviews": 1, "stopAfterIdle": "1h"},
            "agentLogins": ["devin-ai-integration"],
        }}),
    )
    .await;
    world.gh.set_role(&world.repo, MAINTAINER, Role::Write);

    // The owner is a member: deployed on opening, and the comment says which rule applied.
    open_by(&world, 1, "acme").await;
    world.wait_phase("cls-pr-1", Phase::Ready, T).await;
    sticky_says(
        &world,
        1,
        "| **Rule** | members (authors.members): the Blueprint's own rules |",
    )
    .await;

    // Dependabot: no preview, and one reply saying why (a redelivery does not repeat it).
    let answer = open_by(&world, 2, "dependabot[bot]").await;
    assert_eq!(answer["status"], "ignored", "{answer}");
    let why = "Pull requests by dependency bots get no preview of `cls`: its rule \
               `authors.dependencyBots.trigger` is `off`.";
    eventually("the reply to dependabot's pull request", T, || {
        let said = replies(&world, 2);
        async move {
            match &said[..] {
                [one] if one.starts_with(why) => Ok(()),
                other => Err(format!("{other:#?}")),
            }
        }
    })
    .await;
    // Not even a maintainer's `/preview` deploys it.
    let (status, outcome, _) = comment(&world, 2, MAINTAINER, "/preview").await;
    assert_eq!(
        (status, outcome["status"].as_str()),
        (200, Some("refused")),
        "{outcome}"
    );
    assert!(
        world
            .previews()
            .get_opt("cls-pr-2")
            .await
            .unwrap()
            .is_none()
    );
    eventually("the note, then the command's answer", T, || {
        let said = replies(&world, 2);
        async move {
            match &said[..] {
                [_, answer] if answer.starts_with(why) => Ok(()),
                other => Err(format!("{other:#?}")),
            }
        }
    })
    .await;

    // An outside contributor (a pull request from a fork) waits for `/preview`.
    let answer = open_from(&world, 3, "eve", Some("eve/cls")).await;
    assert_eq!(answer["previews"][0]["result"], "skipped", "{answer}");
    assert!(
        world
            .previews()
            .get_opt("cls-pr-3")
            .await
            .unwrap()
            .is_none()
    );
    let (status, outcome, _) = comment(&world, 3, MAINTAINER, "/preview").await;
    assert_eq!(
        (status, outcome["status"].as_str()),
        (200, Some("accepted")),
        "{outcome}"
    );
    let pe = world.wait_phase("cls-pr-3", Phase::Ready, T).await;
    assert_eq!(pe.spec.author_class, Some(AuthorClass::OutsideContributor));

    // Coding agents: one at a time; the second queues behind its class, then starts.
    open_by(&world, 4, "devin-ai-integration[bot]").await;
    let first = world.wait_phase("cls-pr-4", Phase::Ready, T).await;
    assert_eq!(first.spec.author_class, Some(AuthorClass::Agent));
    sticky_says(
        &world,
        4,
        "| **Rule** | coding agents (authors.agents): at most 1 at once, stops after 1h idle |",
    )
    .await;
    open_by(&world, 5, "devin-ai-integration[bot]").await;
    eventually(
        "the second agent's preview queued behind its class",
        T,
        || async {
            let pe = world.previews().get_opt("cls-pr-5").await.unwrap();
            let st = pe.and_then(|p| p.status).unwrap_or_default();
            match (st.phase, st.message.as_deref()) {
                (Some(Phase::Pending), Some(m))
                    if m.starts_with("1st in line for coding agents; 1/1") =>
                {
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let (status, _) = world
        .deliver(&world.gh.close(&world.repo, pr(4), true))
        .await;
    assert_eq!(status, 200);
    world.wait_phase("cls-pr-5", Phase::Ready, T).await;
}
