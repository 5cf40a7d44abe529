//! Blueprints rendered from the pull request's own repository: a real Helm chart
//! (`fixtures/sources/podinfo-chart`) and a real Kustomize overlay, served by the GitHub stand-in
//! as each commit's tarball, rendered by Helm and Kustomize themselves and cloned like any
//! Blueprint. One archive fetch per commit; a push that changes the chart rolls out the new
//! render and removes what it dropped; a chart that does not render fails the preview in Helm's
//! words, fenced on the pull request; a fork's commit is rendered only once approved; a
//! repository over the archive limit is refused, naming the limit.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use sandcastle::crd::{Phase, PreviewEnvironment};
use sandcastle::domain::{RepoName, Sha};
use sandcastle_fake_github::{PrSpec, Role};
use serde_json::{Value, json};

use crate::conversation::{MAINTAINER, comment};
use crate::support::eventually;
use crate::support::world::{Source, World, pr, sha};

const T: Duration = Duration::from_secs(90);
const SOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/sources");

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(SOURCES).join(name)
}

/// The chart as published, with `values.yaml` edited by `edit`, at `deploy/chart` of `at`.
fn put_chart(world: &World, at: &Sha, edit: impl Fn(String) -> String) {
    let chart = fixture("podinfo-chart");
    world
        .gh
        .put_tree(&world.repo, at.as_str(), "deploy/chart", &chart);
    let values = std::fs::read_to_string(chart.join("values.yaml")).unwrap();
    world.gh.put_file(
        &world.repo,
        at.as_str(),
        "deploy/chart/values.yaml",
        &edit(values),
    );
}

/// Requests for the tarball of `sha`.
fn archive_fetches(world: &World, sha: &Sha) -> usize {
    let path = format!("/repos/{}/tarball/{sha}", world.repo);
    world
        .gh
        .calls()
        .iter()
        .filter(|c| c.method == "GET" && c.path == path)
        .count()
}

fn chart_source() -> Value {
    json!({"helm": {
        "path": "deploy/chart",
        "values": {
            "image": {"tag": "{{shortSha}}"},
            "ui": {"message": "preview of #{{pr}} at {{shortSha}}"},
        },
    }})
}

async fn open(world: &World, n: u64, head: &Sha) {
    let d = world.gh.open_pull_request(
        &world.repo,
        PrSpec::new(pr(n), head.clone(), &format!("b{n}")),
    );
    let (status, body) = world.deliver(&d).await;
    assert_eq!(status, 200, "{body}");
}

async fn wait_deployed(world: &World, name: &str, at: &Sha) -> PreviewEnvironment {
    let api = world.previews();
    eventually(&format!("{name} Ready at {}", at.short()), T, || {
        let api = api.clone();
        async move {
            let pe = api.get_opt(name).await.map_err(|e| e.to_string())?;
            let st = pe
                .as_ref()
                .and_then(|p| p.status.clone())
                .unwrap_or_default();
            if st.phase == Some(Phase::Ready) && st.deployed_sha.as_deref() == Some(at.as_str()) {
                Ok(pe.unwrap())
            } else {
                Err(format!("{:?}: {:?}", st.phase, st.message))
            }
        }
    })
    .await
}

fn image_of(d: &Deployment) -> String {
    d.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_chart_is_rendered_at_each_commit_and_what_a_push_drops_is_removed() {
    let world = World::with_source("shop", Source::Rendered(chart_source()), json!({})).await;
    let first = sha();
    // At the first commit the chart's values turn its Redis on.
    put_chart(&world, &first, |v| {
        v.replacen("redis:\n  enabled: false", "redis:\n  enabled: true", 1)
    });
    open(&world, 1, &first).await;
    let pe = wait_deployed(&world, "shop-pr-1", &first).await;
    let ns = world.namespace_of("shop-pr-1");
    let deployments: Api<Deployment> = Api::namespaced(world.client.clone(), &ns);
    let app = deployments.get("shop-pr-1-podinfo").await.unwrap();
    assert_eq!(
        image_of(&app),
        format!("ghcr.io/stefanprodan/podinfo:{}", first.short())
    );
    assert!(
        deployments
            .get_opt("shop-pr-1-podinfo-redis")
            .await
            .unwrap()
            .is_some()
    );
    let status = pe.status.unwrap();
    assert!(
        status.history.iter().any(|h| h
            .result
            .as_deref()
            .is_some_and(|r| r.contains("Helm chart deploy/chart"))),
        "{:#?}",
        status.history
    );
    assert_eq!(
        archive_fetches(&world, &first),
        1,
        "one fetch for the commit"
    );

    // The second commit turns Redis off again: its Deployment and Service go.
    let second = sha();
    put_chart(&world, &second, |v| v);
    let (code, body) = world
        .deliver(&world.gh.push(&world.repo, pr(1), &second))
        .await;
    assert_eq!(code, 200, "{body}");
    let pe = wait_deployed(&world, "shop-pr-1", &second).await;
    assert!(
        deployments
            .get_opt("shop-pr-1-podinfo-redis")
            .await
            .unwrap()
            .is_none()
    );
    let app = deployments.get("shop-pr-1-podinfo").await.unwrap();
    assert_eq!(
        image_of(&app),
        format!("ghcr.io/stefanprodan/podinfo:{}", second.short())
    );
    let history = pe.status.unwrap().history;
    let pruned = history
        .iter()
        .find(|h| h.action == "Pruned")
        .unwrap_or_else(|| panic!("{history:#?}"));
    let note = pruned.result.clone().unwrap_or_default();
    for gone in [
        "Deployment shop-pr-1-podinfo-redis",
        "Service shop-pr-1-podinfo-redis",
    ] {
        assert!(note.contains(gone), "{note}");
    }
    assert!(!note.contains("Deployment shop-pr-1-podinfo,"), "{note}");
    assert_eq!(
        archive_fetches(&world, &second),
        1,
        "one fetch for the commit"
    );
}

#[tokio::test]
async fn a_chart_that_does_not_render_fails_the_preview_in_helms_words() {
    let world = World::with_source("shop", Source::Rendered(chart_source()), json!({})).await;
    let broken = sha();
    put_chart(&world, &broken, |v| v);
    let text = std::fs::read_to_string(fixture("podinfo-chart/templates/service.yaml")).unwrap();
    world.gh.put_file(
        &world.repo,
        broken.as_str(),
        "deploy/chart/templates/service.yaml",
        &format!("{{{{ .Values.nope.deeper }}}}\n{text}"),
    );
    open(&world, 2, &broken).await;
    let pe = world.wait_phase("shop-pr-2", Phase::Failed, T).await;
    let message = pe.status.unwrap().message.unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "blueprint shop: Helm chart deploy/chart at {}: helm template failed:\n",
            broken.short()
        )),
        "{message}"
    );
    assert!(
        message.contains("podinfo/templates/service.yaml:1:"),
        "{message}"
    );
    // The pull request reads Helm's words, fenced.
    eventually("the sticky comment shows Helm's error", T, || {
        let bodies: Vec<String> = world
            .gh
            .comments(&world.repo, pr(2))
            .into_iter()
            .filter(|c| c.by_app)
            .map(|c| c.body)
            .collect();
        let found = bodies
            .iter()
            .find(|b| {
                b.contains("❌ Failed") && b.contains("```text\npodinfo/templates/service.yaml:1:")
            })
            .cloned();
        async move { found.ok_or_else(|| format!("{bodies:#?}")) }
    })
    .await;

    // A fixed commit renders and deploys.
    let fixed = sha();
    put_chart(&world, &fixed, |v| v);
    let (code, body) = world
        .deliver(&world.gh.push(&world.repo, pr(2), &fixed))
        .await;
    assert_eq!(code, 200, "{body}");
    wait_deployed(&world, "shop-pr-2", &fixed).await;
}

#[tokio::test]
async fn a_forks_commit_is_rendered_only_once_a_maintainer_approves_it() {
    let world = World::with_source("shop", Source::Rendered(chart_source()), json!({})).await;
    world.gh.set_role(&world.repo, MAINTAINER, Role::Write);
    let head = sha();
    put_chart(&world, &head, |v| v);
    let mut spec = PrSpec::new(pr(3), head.clone(), "patch-1");
    spec.from_fork = Some(RepoName::new("mallory/shop").unwrap());
    spec.author = "mallory".to_owned();
    let (code, body) = world
        .deliver(&world.gh.open_pull_request(&world.repo, spec))
        .await;
    assert_eq!(code, 200, "{body}");
    let pe = world.wait_phase("shop-pr-3", Phase::Pending, T).await;
    assert!(pe.spec.awaiting_approval);
    assert_eq!(
        archive_fetches(&world, &head),
        0,
        "nothing of the fork read yet"
    );

    let (_, answer, _) = comment(&world, 3, MAINTAINER, "/preview").await;
    assert_eq!(answer["status"], "accepted", "{answer}");
    wait_deployed(&world, "shop-pr-3", &head).await;
    assert_eq!(archive_fetches(&world, &head), 1);
}

#[tokio::test]
async fn a_repository_over_the_archive_limit_is_refused_naming_the_limit() {
    let mut world =
        World::unstarted_with_source("shop", Source::Rendered(chart_source()), json!({})).await;
    world.configure = Some(|parts| parts.settings.render.limits.download_bytes = 1 << 20);
    world.start().await;
    let head = sha();
    put_chart(&world, &head, |v| v);
    // Three MiB of text that does not compress to under one.
    let noise: String = (0..3 * 1024 * 32)
        .map(|_| format!("{:032x}\n", rand::random::<u128>()))
        .collect();
    world
        .gh
        .put_file(&world.repo, head.as_str(), "assets/big.txt", &noise);
    open(&world, 4, &head).await;
    let pe = world.wait_phase("shop-pr-4", Phase::Failed, T).await;
    let message = pe.status.unwrap().message.unwrap_or_default();
    assert_eq!(
        message,
        format!(
            "blueprint shop: Helm chart deploy/chart at {}: fetching the repository: the repository's archive is larger than 1 MiB",
            head.short()
        )
    );
}

#[tokio::test]
async fn a_kustomize_overlay_is_built_and_the_blueprints_image_rules_apply_after() {
    let source = json!({"kustomize": {"path": "deploy/overlays/preview"}});
    let extra =
        json!({"images": [{"repository": "ghcr.io/stefanprodan/podinfo", "tag": "pr-{{pr}}"}]});
    let world = World::with_source("shop", Source::Rendered(source), extra).await;
    let head = sha();
    world.gh.put_tree(
        &world.repo,
        head.as_str(),
        "deploy",
        &fixture("podinfo-kustomize"),
    );
    open(&world, 5, &head).await;
    wait_deployed(&world, "shop-pr-5", &head).await;
    let ns = world.namespace_of("shop-pr-5");
    let deployments: Api<Deployment> = Api::namespaced(world.client.clone(), &ns);
    let app = deployments.get("preview-podinfo").await.unwrap();
    assert_eq!(image_of(&app), "ghcr.io/stefanprodan/podinfo:pr-5");
    assert_eq!(archive_fetches(&world, &head), 1);
}
