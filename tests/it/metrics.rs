//! `GET /metrics` through the real router: deliveries counted by event and result (the words of
//! the JSON answers), GitHub calls by method and status, reconciles, and previews by phase from
//! the controller's cache — left out by a replica that does not run the controller.

use std::collections::BTreeMap;
use std::time::Duration;

use sandcastle::crd::Phase;
use sandcastle_fake_github::PrSpec;
use serde_json::json;

use crate::support::eventually;
use crate::support::world::{World, pr, sha};

const GUESTBOOK: &str = "fixtures/blueprints/k8s-guestbook/guestbook-all-in-one.yaml";
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

async fn world() -> World {
    World::new(
        "guestbook",
        &std::fs::read_to_string(GUESTBOOK).unwrap(),
        json!({}),
    )
    .await
}

/// Each sample of a text exposition: `name{labels}` as written, to its value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("sample {l:?}"));
            let value = value.parse().unwrap_or_else(|_| panic!("value of {l:?}"));
            (series.to_owned(), value)
        })
        .collect()
}

/// The samples of `name` (every label set).
pub(crate) fn family<'a>(all: &'a BTreeMap<String, f64>, name: &str) -> BTreeMap<&'a str, f64> {
    all.iter()
        .filter(|(series, _)| {
            series
                .strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('{'))
        })
        .map(|(series, v)| (series.as_str(), *v))
        .collect()
}

pub(crate) async fn scrape(world: &World) -> BTreeMap<String, f64> {
    let (status, content_type, text) = world.get_text("/metrics", Vec::new()).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    samples(&text)
}

#[tokio::test]
async fn deliveries_github_calls_reconciles_and_previews_are_counted() {
    let world = world().await;
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(1), sha(), "feature"));

    let (status, body) = world
        .post(opened.body.clone(), opened.signed_headers("another secret"))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("signature_mismatch")),
        "{body}"
    );
    let (status, body) = world.deliver(&opened).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("accepted")));

    let m = scrape(&world).await;
    // Counted by the word of the webhook's own answer: the event was recorded.
    assert_eq!(
        family(&m, "sandcastle_webhook_deliveries_total"),
        BTreeMap::from([
            (
                r#"sandcastle_webhook_deliveries_total{event="pull_request",result="recorded"}"#,
                1.0
            ),
            (
                r#"sandcastle_webhook_deliveries_total{event="pull_request",result="signature_mismatch"}"#,
                1.0
            ),
        ])
    );
    assert_eq!(m["sandcastle_webhook_duration_seconds_count"], 2.0);
    assert_eq!(
        m[r#"sandcastle_webhook_duration_seconds_bucket{le="+Inf"}"#],
        2.0
    );
    // The opened delivery read the repository's `.github/sandcastle.yml` (absent here).
    assert!(
        m.get(r#"sandcastle_github_requests_total{method="GET",status="404"}"#)
            .is_some_and(|n| *n >= 1.0),
        "{m:#?}"
    );

    let name = body["previews"][0]["preview"].as_str().unwrap().to_owned();
    world
        .wait_phase(&name, Phase::Ready, Duration::from_secs(60))
        .await;
    // The controller's cache follows the API a moment later.
    eventually(
        "previews{phase} shows the Ready preview",
        Duration::from_secs(10),
        || async {
            let m = scrape(&world).await;
            let previews = family(&m, "sandcastle_previews");
            let ready = previews.get(r#"sandcastle_previews{phase="Ready"}"#);
            let total: f64 = previews.values().sum();
            if ready == Some(&1.0) && total == 1.0 && previews.len() == 7 {
                Ok(())
            } else {
                Err(format!("{previews:#?}"))
            }
        },
    )
    .await;

    let m = scrape(&world).await;
    assert!(
        m[r#"sandcastle_reconciles_total{result="ok"}"#] >= 1.0,
        "{m:#?}"
    );
    assert!(m["sandcastle_reconcile_duration_seconds_count"] >= 1.0);
    // The deployment Sandcastle reports to GitHub was created.
    assert!(
        m.get(r#"sandcastle_github_requests_total{method="POST",status="201"}"#)
            .is_some_and(|n| *n >= 1.0),
        "{m:#?}"
    );
    assert_eq!(m["sandcastle_github_rate_limit_waits_total"], 0.0);
    // Scrapes are not deliveries.
    assert_eq!(m["sandcastle_webhook_duration_seconds_count"], 2.0);

    // Prometheus asks for OpenMetrics, and gets it.
    let (status, content_type, text) = world
        .get_text(
            "/metrics",
            vec![(
                "accept",
                "application/openmetrics-text;version=1.0.0;q=0.6,text/plain;version=0.0.4;q=0.3"
                    .to_owned(),
            )],
        )
        .await;
    assert_eq!((status, content_type.as_str()), (200, OPENMETRICS));
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(
        text.contains("# UNIT sandcastle_webhook_duration_seconds seconds"),
        "{text}"
    );
}

#[tokio::test]
async fn a_replica_without_the_controller_leaves_previews_out() {
    let mut world = World::unstarted(
        "guestbook",
        &std::fs::read_to_string(GUESTBOOK).unwrap(),
        json!({}),
    )
    .await;
    world.configure = Some(|parts| parts.controller = false);
    world.start().await;
    let opened = world
        .gh
        .open_pull_request(&world.repo, PrSpec::new(pr(2), sha(), "feature"));
    // Recorded; no controller runs here to carry it out.
    let (status, body) = world.post_delivery(&opened).await;
    assert_eq!((status, body["status"].as_str()), (202, Some("recorded")));

    let m = scrape(&world).await;
    assert_eq!(
        m[r#"sandcastle_webhook_deliveries_total{event="pull_request",result="recorded"}"#],
        1.0
    );
    assert_eq!(family(&m, "sandcastle_previews"), BTreeMap::new(), "{m:#?}");
    assert_eq!(family(&m, "sandcastle_reconciles_total"), BTreeMap::new());
}
