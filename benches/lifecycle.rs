//! From an `opened` delivery to each step of the plan applied, to all objects applied and to
//! Ready, for the guestbook blueprint on the local control plane (run with
//! `scripts/bench-lifecycle`). Times are taken from a watch on the PreviewEnvironment, so they do
//! not depend on a polling interval. Steps are applied in order (guardrails, config, apps,
//! ingress), each once the one before is ready, so the last step lands just before Ready.

mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use sandcastle::crd::{Phase, PreviewEnvironment};
use sandcastle::domain::{PrNumber, Sha};
use sandcastle_demo::stage::Stage;
use sandcastle_fake_github::PrSpec;

const PREVIEWS: u64 = 10;

#[tokio::main]
async fn main() {
    let client = support::client().await;
    let home = support::unique("bench-home");
    let staging = support::unique("bench-staging");
    let stage = Stage::prepare(client.clone(), &home, &staging, 0, true)
        .await
        .expect("stage");
    let api: Api<PreviewEnvironment> = Api::namespaced(client, &home);

    let mut applied = Vec::new();
    let mut ready = Vec::new();
    let mut objects = 0;
    // Time at which each number of applied steps was first seen, per preview.
    let mut steps: std::collections::BTreeMap<u32, Vec<Duration>> =
        std::collections::BTreeMap::new();
    for n in 1..=PREVIEWS {
        let name = format!("guestbook-pr-{n}");
        let mut events = watcher(
            api.clone(),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
        )
        .applied_objects()
        .boxed();
        let sha = Sha::new(&hex::encode(rand::random::<[u8; 20]>())).unwrap();
        let d = stage.gh.open_pull_request(
            &stage.repo,
            PrSpec::new(PrNumber::new(n).unwrap(), sha, "b"),
        );
        let t = Instant::now();
        let (status, _) = stage.deliver(&d).await.unwrap();
        assert_eq!(status, 202, "opened recorded");
        let mut applied_at = None;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while let Ok(Some(Ok(pe))) = tokio::time::timeout_at(deadline, events.next()).await {
            let st = pe.status.unwrap_or_default();
            if let Some(r) = &st.rollout {
                let seen = steps.entry(r.applied_steps).or_default();
                if seen.len() < usize::try_from(n).unwrap() {
                    seen.push(t.elapsed());
                }
            }
            if let Some(r) = &st.rollout
                && r.applied_steps == r.total_steps
                && applied_at.is_none()
            {
                applied_at = Some(t.elapsed());
                objects = r.objects;
            }
            if st.phase == Some(Phase::Ready) {
                ready.push(t.elapsed());
                applied.push(applied_at.expect("applied before Ready"));
                break;
            }
        }
    }
    println!(
        "guestbook blueprint: {objects} objects (guardrails included), {PREVIEWS} previews one after another"
    );
    for (n, times) in &mut steps {
        println!("opened → {n} steps applied: {}", support::summary(times));
    }
    println!("opened → all applied: {}", support::summary(&mut applied));
    println!("opened → Ready:       {}", support::summary(&mut ready));
    stage.running.shutdown().await;
}
