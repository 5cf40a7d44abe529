//! Cloning fidelity against the real control plane. Each copyable blueprint fixture is loaded
//! into a staging namespace as a user would (server-side apply of each document; the API server
//! and controllers add the rest), previewed through a real `opened` delivery, and checked: every
//! planned object accepted, every workload Ready, seed Jobs complete before any app starts,
//! Services with cluster IPs of their own, nothing in the preview naming the staging namespace,
//! and the staging namespace untouched. Then the ways a clone must fail — refused blueprints
//! (nothing applied), a failing seed Job, a readiness timeout — with the cluster's reason; the
//! guardrails as the API server enforces them; and pre-delete hooks at teardown.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    LimitRange, Namespace, PersistentVolumeClaim, Pod, ResourceQuota, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::{Discovery, Scope, verbs};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use sandcastle::crd::labels;
use sandcastle::crd::{Blueprint, Phase, PreviewEnvironment};
use sandcastle::domain::plan::{self, Plan, PreviewContext};
use sandcastle::domain::{NamespaceName, RepoName, Sha};
use sandcastle::k8s::apply::Resolver;
use sandcastle::k8s::readiness::{self, Health};
use sandcastle::k8s::source;
use sandcastle_fake_github::PrSpec;
use serde_json::{Value, json};

use crate::support::fixtures::{self, Fixture};
use crate::support::world::{Source, World, pr, sha};
use crate::support::{eventually, wait_for};

/// Generous: the machine running the tests is shared.
const T: Duration = Duration::from_secs(180);

// ---------------------------------------------------------------------------------------------
// One fixture, previewed.

/// When things happened after the `opened` delivery was sent.
#[derive(Debug, Clone, Copy)]
pub struct Timeline {
    pub applied: Duration,
    pub ready: Duration,
}

/// A fixture loaded into staging and previewed.
pub struct Previewed {
    pub world: World,
    pub preview: String,
    pub ns: String,
    pub sha: Sha,
    /// The source objects as Sandcastle read them from staging.
    pub source_objects: usize,
    /// The plan, computed here as the controller computes it.
    pub plan: Plan,
    pub guardrails: usize,
    pub timeline: Timeline,
    staging_before: Fingerprints,
}

/// Watch preview `name` until it is Ready (or Failed: the test fails); the instant it became
/// Ready. `established` hears when the watch is in place.
async fn ready_at(
    api: Api<PreviewEnvironment>,
    name: String,
    established: tokio::sync::oneshot::Sender<()>,
) -> Instant {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api, config).boxed();
    let mut established = Some(established);
    while let Some(event) = events.try_next().await.expect("watching the preview") {
        let pe = match event {
            watcher::Event::InitDone => {
                established.take().map(|tx| tx.send(()));
                continue;
            }
            watcher::Event::Apply(pe) | watcher::Event::InitApply(pe) => pe,
            _ => continue,
        };
        let Some(st) = pe.status else { continue };
        match st.phase {
            Some(Phase::Ready) => return Instant::now(),
            Some(Phase::Failed) => panic!("preview {name} failed: {:?}", st.message),
            _ => {}
        }
    }
    panic!("the watch on {name} ended")
}

/// Watch namespace `ns` until every object of `last` (the plan's last step) exists; the instant
/// the last one appeared, which is when every object of the plan had been applied.
/// `established` hears when the watches are in place.
async fn applied_at(
    client: Client,
    ns: String,
    last: Vec<Value>,
    established: tokio::sync::oneshot::Sender<()>,
) -> Instant {
    let resolver = Resolver::new(client.clone());
    let mut waiting: std::collections::BTreeSet<(String, String)> = BTreeSet::new();
    let mut kinds = BTreeMap::new();
    for obj in &last {
        let (api_version, kind, name) = sandcastle::k8s::apply::identity(obj).unwrap();
        waiting.insert((kind.to_owned(), name.to_owned()));
        let ar = resolver.resolve(api_version, kind, name).await.unwrap();
        kinds.insert(kind.to_owned(), ar);
    }
    let mut streams = futures::stream::select_all(kinds.into_values().map(|ar| {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        watcher(api, watcher::Config::default())
            .map_ok(move |e| (ar.kind.clone(), e))
            .boxed()
    }));
    let mut pending_init = last
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let mut established = Some(established);
    while let Some((kind, event)) = streams.try_next().await.expect("watching the preview") {
        match event {
            watcher::Event::InitDone => {
                pending_init -= 1;
                if pending_init == 0 {
                    established.take().map(|tx| tx.send(()));
                }
            }
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                waiting.remove(&(kind, o.name_any()));
                if waiting.is_empty() && established.is_none() {
                    return Instant::now();
                }
            }
            _ => {}
        }
    }
    panic!("the watches on {ns} ended")
}

fn preview_context(world: &World, preview: &str, sha: &Sha, branch: &str) -> PreviewContext {
    let settings = world.settings();
    PreviewContext {
        preview: NamespaceName::new(preview).unwrap(),
        namespace: NamespaceName::new(&world.namespace_of(preview)).unwrap(),
        source_namespace: Some(world.staging.name.clone()),
        blueprint: world.repo.name().to_owned(),
        repo: world.repo.clone(),
        pr: Some(pr(1)),
        sha: sha.clone(),
        branch: branch.to_owned(),
        default_host: settings.default_host,
        edge: Default::default(),
        pool_member: None,
        data: Default::default(),
    }
}

/// Load fixture `name` into a staging namespace, wait until it works there, and preview it as
/// pull request 1.
pub async fn preview_fixture(name: &str) -> Previewed {
    let fixture = Fixture::load(name);
    let client = crate::support::client().await;
    if fixture.name == "k8s-zookeeper" {
        // Its pods keep apart by hostname: one node per replica.
        fixtures::ensure_nodes(&client, 3).await;
    }
    if fixture.spec["allowKinds"]
        .as_array()
        .is_some_and(|k| k.iter().any(|k| k["kind"] == "Certificate"))
    {
        fixtures::ensure_certificate_crd(&client).await;
    }
    let world = World::with_source(name, Source::Staging(&[]), fixture.spec.clone()).await;
    let staging = world.staging.name.clone();
    crate::support::world::load_objects(&client, &staging, &fixture.as_user_wrote(&staging)).await;
    wait_namespace_ready(&client, &staging, "staging").await;
    let staging_before = fingerprints(&client, &staging).await;

    let blueprint = Api::<Blueprint>::namespaced(client.clone(), &world.home.name)
        .get(name)
        .await
        .unwrap();
    let resolver = Resolver::new(client.clone());
    let objects = source::read(&resolver, &world.home.name, &blueprint.spec)
        .await
        .expect("staging reads");
    let head = sha();
    let preview = format!("{name}-pr-1");
    let ctx = preview_context(&world, &preview, &head, "feature/fidelity");
    let plan = plan::plan(&objects, &blueprint.spec, &ctx).expect("the fixture plans");
    let guardrails = sandcastle::domain::guardrails::guardrail_objects(
        &ctx,
        &blueprint.spec.isolation,
        &world.settings().ingress_namespace,
    )
    .len();

    let ns = world.namespace_of(&preview);
    let (tx, ready_watch) = tokio::sync::oneshot::channel();
    let ready = tokio::spawn(ready_at(world.previews(), preview.clone(), tx));
    let (tx, applied_watch) = tokio::sync::oneshot::channel();
    let last = plan.steps.last().unwrap().objects.clone();
    let applied = tokio::spawn(applied_at(client.clone(), ns.clone(), last, tx));
    ready_watch.await.expect("the preview is watched");
    applied_watch
        .await
        .expect("the preview namespace is watched");
    let opened = world.gh.open_pull_request(
        &world.repo,
        PrSpec::new(pr(1), head.clone(), "feature/fidelity"),
    );
    let start = Instant::now();
    let (status, body) = world.deliver(&opened).await;
    assert_eq!(status, 200, "{body}");
    let ready = tokio::time::timeout(T, ready)
        .await
        .unwrap_or_else(|_| panic!("preview {preview} not Ready after {T:?}"))
        .expect("watch task");
    let applied = tokio::time::timeout(T, applied)
        .await
        .unwrap_or_else(|_| panic!("preview {preview} not applied after {T:?}"))
        .expect("watch task");
    let timeline = Timeline {
        applied: applied.duration_since(start),
        ready: ready.duration_since(start),
    };
    Previewed {
        world,
        preview,
        ns,
        sha: head,
        source_objects: objects.len(),
        plan,
        guardrails,
        timeline,
        staging_before,
    }
}

impl Previewed {
    fn client(&self) -> &Client {
        &self.world.client
    }

    /// Everything the issue asks of a faithful copy.
    async fn assert_faithful(&self) {
        self.assert_faithful_but_for(&[]).await;
    }

    /// [`Self::assert_faithful`], where free text at `prose` may still mention the staging
    /// namespace.
    async fn assert_faithful_but_for(&self, prose: &[(&str, &str)]) {
        self.assert_every_object_applied().await;
        wait_namespace_ready(self.client(), &self.ns, "preview").await;
        self.assert_seeded_before_apps().await;
        self.assert_new_cluster_ips().await;
        self.assert_staging_never_named(prose).await;
        self.assert_staging_untouched().await;
        self.world
            .wait_github_state(&self.sha, "success", Duration::from_secs(60))
            .await;
    }

    async fn assert_every_object_applied(&self) {
        let resolver = Resolver::new(self.client().clone());
        for obj in self.plan.objects().chain(&self.plan.pre_delete) {
            let name = obj["metadata"]["name"].as_str().unwrap();
            let api = resolver.api_for(&self.ns, obj).await.unwrap();
            let live = api
                .get_opt(name)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{} {name} was not applied", obj["kind"]));
            assert_eq!(
                live.labels().get(labels::SHA).map(String::as_str),
                Some(self.sha.as_str()),
                "{} {name} carries the commit",
                obj["kind"]
            );
        }
        let pe = self.world.previews().get(&self.preview).await.unwrap();
        let st = pe.status.unwrap();
        assert_eq!(st.phase, Some(Phase::Ready));
        assert!(
            st.services.iter().all(|s| s.ready == s.desired),
            "{:?}",
            st.services
        );
    }

    /// Seed Jobs completed before any object of the apps phase was created.
    async fn assert_seeded_before_apps(&self) {
        let jobs: Api<Job> = Api::namespaced(self.client().clone(), &self.ns);
        let jobs = jobs.list(&ListParams::default()).await.unwrap().items;
        let seeds: Vec<&Job> = jobs
            .iter()
            .filter(|j| j.annotations().get(labels::HOOK).map(String::as_str) == Some("seed"))
            .collect();
        let Some(last_seed) = seeds
            .iter()
            .map(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.completion_time.clone())
                    .unwrap_or_else(|| panic!("seed job {} did not complete", j.name_any()))
                    .0
            })
            .max()
        else {
            return;
        };
        let resolver = Resolver::new(self.client().clone());
        let apps = self
            .plan
            .steps
            .iter()
            .filter(|s| s.stage >= plan::Stage::Apps)
            .flat_map(|s| &s.objects);
        for obj in apps {
            let name = obj["metadata"]["name"].as_str().unwrap();
            let live = resolver
                .api_for(&self.ns, obj)
                .await
                .unwrap()
                .get(name)
                .await
                .unwrap();
            let created = live.metadata.creation_timestamp.unwrap().0;
            assert!(
                created >= last_seed,
                "{} {name} was created at {created}, before the seed finished at {last_seed}",
                obj["kind"]
            );
        }
    }

    async fn assert_new_cluster_ips(&self) {
        let staging: Api<Service> =
            Api::namespaced(self.client().clone(), &self.world.staging.name);
        let preview: Api<Service> = Api::namespaced(self.client().clone(), &self.ns);
        for svc in preview.list(&ListParams::default()).await.unwrap() {
            let name = svc.name_any();
            let Some(original) = staging.get_opt(&name).await.unwrap() else {
                continue;
            };
            let (a, b) = (original.spec.unwrap(), svc.spec.unwrap());
            if a.cluster_ip.as_deref() == Some("None") {
                assert_eq!(
                    b.cluster_ip.as_deref(),
                    Some("None"),
                    "{name} stays headless"
                );
                continue;
            }
            assert!(b.cluster_ip.is_some(), "{name} has a cluster IP");
            assert_ne!(
                a.cluster_ip, b.cluster_ip,
                "{name} got a cluster IP of its own"
            );
            let ports = |s: &k8s_openapi::api::core::v1::ServiceSpec| -> Vec<i32> {
                s.ports
                    .iter()
                    .flatten()
                    .filter_map(|p| p.node_port)
                    .collect()
            };
            for port in ports(&b) {
                assert!(
                    !ports(&a).contains(&port),
                    "{name} got node port {port} of its own"
                );
            }
        }
    }

    /// No object in the preview (of any kind, Secret data decoded) names the staging namespace,
    /// apart from `prose`: (kind name, JSON pointer) of free text that mentions it, which
    /// cloning leaves alone by design (docs/cloning.md §5: only DNS names are references).
    async fn assert_staging_never_named(&self, prose: &[(&str, &str)]) {
        let staging = &self.world.staging.name;
        let mut found = Vec::new();
        for (kind, obj) in everything_in(self.client(), &self.ns).await {
            let name = format!(
                "{kind} {}",
                obj["metadata"]["name"].as_str().unwrap_or_default()
            );
            let mut paths = Vec::new();
            mentions(&obj, staging, String::new(), &mut paths);
            if kind == "Secret" {
                for (key, v) in obj["data"].as_object().into_iter().flatten() {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(v.as_str().unwrap_or_default())
                        .unwrap_or_default();
                    if String::from_utf8_lossy(&decoded).contains(staging.as_str()) {
                        paths.push(format!("/data/{key} (decoded)"));
                    }
                }
            }
            found.extend(paths.into_iter().map(|p| (name.clone(), p)));
        }
        let unexpected: Vec<_> = found
            .iter()
            .filter(|(name, path)| !prose.contains(&(name.as_str(), path.as_str())))
            .collect();
        assert!(
            unexpected.is_empty(),
            "objects of the preview name the staging namespace {staging}: {unexpected:?}"
        );
        for (name, path) in prose {
            assert!(
                found.iter().any(|(n, p)| n == name && p == path),
                "{name} {path} was expected to keep its mention of {staging}"
            );
        }
    }

    async fn assert_staging_untouched(&self) {
        let after = fingerprints(self.client(), &self.world.staging.name).await;
        for (key, before) in &self.staging_before {
            let now = after
                .get(key)
                .unwrap_or_else(|| panic!("{key} disappeared from staging"));
            assert_eq!(
                before.generation, now.generation,
                "{key} changed in staging"
            );
            if before.stable {
                assert_eq!(
                    before.resource_version, now.resource_version,
                    "{key} was written in staging"
                );
            }
        }
        for (key, now) in &after {
            assert!(
                !now.managers.iter().any(|m| m.starts_with("sandcastle")),
                "Sandcastle wrote to {key} in staging: {:?}",
                now.managers
            );
        }
    }
}

/// JSON pointers of the strings in `v` that contain `needle`.
fn mentions(v: &Value, needle: &str, path: String, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.contains(needle) => out.push(path),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                mentions(item, needle, format!("{path}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                mentions(item, needle, format!("{path}/{k}"), out);
            }
        }
        _ => {}
    }
}

/// Every object of every namespaced kind that can be listed, with its kind.
async fn everything_in(client: &Client, ns: &str) -> Vec<(String, Value)> {
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let mut out = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if caps.scope != Scope::Namespaced || !caps.supports_operation(verbs::LIST) {
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
            let Ok(list) = api.list(&ListParams::default()).await else {
                continue;
            };
            out.extend(
                list.items
                    .into_iter()
                    .map(|o| (ar.kind.clone(), serde_json::to_value(o).unwrap())),
            );
        }
    }
    out
}

/// What tells whether an object was changed.
#[derive(Debug, Clone, PartialEq)]
struct Fingerprint {
    resource_version: Option<String>,
    generation: Option<i64>,
    managers: Vec<String>,
    /// Whether nothing but a user writes this object, so that its resourceVersion must not move.
    /// Workloads, claims and autoscalers get status updates from controllers: for them only the
    /// generation (their spec) counts.
    stable: bool,
}

type Fingerprints = BTreeMap<String, Fingerprint>;

async fn fingerprints(client: &Client, ns: &str) -> Fingerprints {
    let mut out = BTreeMap::new();
    for (kind, obj) in everything_in(client, ns).await {
        if matches!(
            kind.as_str(),
            "Pod"
                | "Event"
                | "Endpoints"
                | "EndpointSlice"
                | "ReplicaSet"
                | "ControllerRevision"
                | "Lease"
        ) {
            continue;
        }
        let token = obj["type"] == "kubernetes.io/service-account-token";
        let stable = !token
            && matches!(
                kind.as_str(),
                "ConfigMap"
                    | "Secret"
                    | "Service"
                    | "ServiceAccount"
                    | "Role"
                    | "RoleBinding"
                    | "NetworkPolicy"
                    | "Ingress"
                    | "Certificate"
            );
        let managers = obj["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["manager"].as_str().map(str::to_owned))
            .collect();
        out.insert(
            format!(
                "{kind}/{}",
                obj["metadata"]["name"].as_str().unwrap_or_default()
            ),
            Fingerprint {
                resource_version: obj["metadata"]["resourceVersion"]
                    .as_str()
                    .map(str::to_owned),
                generation: obj["metadata"]["generation"].as_i64(),
                managers,
                stable,
            },
        );
    }
    out
}

/// Wait until every Deployment and StatefulSet of `ns` is ready, every Job that is not
/// suspended has completed and every claim is bound.
async fn wait_namespace_ready(client: &Client, ns: &str, what: &str) {
    let c = client.clone();
    eventually(&format!("{what} namespace {ns} ready"), T, || {
        let c = c.clone();
        async move {
            let deployments: Api<Deployment> = Api::namespaced(c.clone(), ns);
            let sets: Api<StatefulSet> = Api::namespaced(c.clone(), ns);
            let jobs: Api<Job> = Api::namespaced(c.clone(), ns);
            let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.clone(), ns);
            let lp = ListParams::default();
            let e = |e: kube::Error| e.to_string();
            let mut states: Vec<_> = deployments
                .list(&lp)
                .await
                .map_err(e)?
                .iter()
                .map(readiness::deployment_state)
                .collect();
            states.extend(
                sets.list(&lp)
                    .await
                    .map_err(e)?
                    .iter()
                    .map(readiness::statefulset_state),
            );
            states.extend(
                jobs.list(&lp)
                    .await
                    .map_err(e)?
                    .iter()
                    .filter(|j| !readiness::job_suspended(j))
                    .map(readiness::job_state),
            );
            let waiting: Vec<String> = states
                .iter()
                .filter(|s| s.health != Health::Ready)
                .map(|s| {
                    format!(
                        "{} {} {}/{} {:?}",
                        s.kind, s.name, s.ready, s.desired, s.health
                    )
                })
                .collect();
            let unbound: Vec<String> = claims
                .list(&lp)
                .await
                .map_err(e)?
                .iter()
                .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound"))
                .map(ResourceExt::name_any)
                .collect();
            if waiting.is_empty() && unbound.is_empty() {
                Ok(())
            } else {
                Err(format!("waiting: {waiting:?}; unbound claims: {unbound:?}"))
            }
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Every copyable fixture.

/// Free text of a fixture that mentions its namespace without addressing anything in it.
fn prose_of(fixture: &str) -> &'static [(&'static str, &'static str)] {
    match fixture {
        // `NAMESPACE_NOTE: runs in shop-staging`.
        "kitchen-sink" => &[("ConfigMap app-config", "/data/NAMESPACE_NOTE")],
        _ => &[],
    }
}

#[tokio::test]
async fn guestbook_is_cloned_faithfully() {
    let p = preview_fixture("k8s-guestbook").await;
    p.assert_faithful().await;
}

/// `sandcastle render` of a live namespace prints exactly the plan the controller applied.
#[tokio::test]
async fn render_reads_a_live_namespace_as_the_controller_does() {
    let p = preview_fixture("bookinfo").await;
    let blueprint = Api::<Blueprint>::namespaced(p.client().clone(), &p.world.home.name)
        .get("bookinfo")
        .await
        .unwrap();
    let spec_file = std::env::temp_dir().join(format!("{}-spec.json", p.world.prefix));
    std::fs::write(&spec_file, serde_json::to_string(&blueprint.spec).unwrap()).unwrap();
    let kubeconfig = std::env::var("SANDCASTLE_TEST_KUBECONFIG")
        .or_else(|_| std::env::var("KUBECONFIG"))
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sandcastle-dev"))
        .args(["render", "--blueprint", &p.world.staging.name])
        .arg("--spec")
        .arg(&spec_file)
        .args([
            "--blueprint-name",
            "bookinfo",
            "--repo",
            p.world.repo.as_str(),
        ])
        .args([
            "--pr",
            "1",
            "--sha",
            p.sha.as_str(),
            "--branch",
            "feature/fidelity",
        ])
        .args([
            "--namespace-prefix",
            &p.world.prefix,
            "--kubeconfig",
            &kubeconfig,
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&spec_file);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    let rendered = plan::parse_manifests(&yaml).unwrap();
    let planned: Vec<Value> = p
        .plan
        .objects()
        .chain(&p.plan.pre_delete)
        .cloned()
        .collect();
    assert_eq!(rendered, planned);
    for obj in &rendered {
        assert_eq!(obj["metadata"]["namespace"], p.ns.as_str());
    }
}

#[tokio::test]
async fn bookinfo_is_cloned_faithfully() {
    let p = preview_fixture("bookinfo").await;
    p.assert_faithful().await;
    // ServiceAccounts used by name came along.
    let sas: Api<ServiceAccount> = Api::namespaced(p.client().clone(), &p.ns);
    for name in [
        "bookinfo-details",
        "bookinfo-ratings",
        "bookinfo-reviews",
        "bookinfo-productpage",
    ] {
        assert!(sas.get_opt(name).await.unwrap().is_some(), "{name}");
    }
}

#[tokio::test]
async fn zookeeper_is_cloned_faithfully() {
    let p = preview_fixture("k8s-zookeeper").await;
    p.assert_faithful().await;
    // Each replica got a fresh claim from the templates, bound by the cluster's provisioner.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(p.client().clone(), &p.ns);
    let names: Vec<String> = claims
        .list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(names, ["datadir-zk-0", "datadir-zk-1", "datadir-zk-2"]);
}

#[tokio::test]
async fn kitchen_sink_is_cloned_faithfully_and_its_pre_delete_hook_runs() {
    let p = preview_fixture("kitchen-sink").await;
    p.assert_faithful_but_for(prose_of("kitchen-sink")).await;
    assert_eq!(
        p.plan.pre_delete.len(),
        1,
        "the fixture holds one pre-delete hook"
    );
    let jobs: Api<Job> = Api::namespaced(p.client().clone(), &p.ns);
    let dump = jobs.get("db-dump").await.unwrap();
    assert!(
        readiness::job_suspended(&dump),
        "the hook waits for teardown"
    );
    assert_eq!(
        dump.annotations()
            .get(labels::HOOK_TIMEOUT)
            .map(String::as_str),
        Some("2m")
    );
    let seed = jobs.get("db-seed").await.unwrap();
    assert_eq!(readiness::job_state(&seed).health, Health::Ready);

    let (status, _) = p
        .world
        .deliver(&p.world.gh.close(&p.world.repo, pr(1), true))
        .await;
    assert_eq!(status, 200);
    let pe = p.world.wait_phase(&p.preview, Phase::Removed, T).await;
    assert!(!p.world.namespace_exists(&p.ns).await);
    let history = pe.status.unwrap().history;
    let hook = history
        .iter()
        .find(|h| h.action == "pre-delete hook db-dump")
        .unwrap_or_else(|| panic!("no hook in the history: {history:#?}"));
    assert_eq!(hook.result.as_deref(), Some("completed"));
}

#[tokio::test]
async fn allowlist_and_skip_is_cloned_faithfully() {
    let p = preview_fixture("allowlist-and-skip").await;
    p.assert_faithful().await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(p.client().clone(), &p.ns);
    assert!(secrets.get_opt("stripe").await.unwrap().is_some());
    assert!(secrets.get_opt("tls-internal").await.unwrap().is_some());
    assert!(
        secrets.get_opt("smtp").await.unwrap().is_none(),
        "not in the allowlist"
    );
    let deployments: Api<Deployment> = Api::namespaced(p.client().clone(), &p.ns);
    assert!(
        deployments.get_opt("legacy-admin").await.unwrap().is_none(),
        "skipped"
    );
}

// ---------------------------------------------------------------------------------------------
// Refusals: a clear message on the preview and on GitHub, and nothing applied.

/// Open pull request 1 and check that its preview fails with `expected` (the start of its message),
/// GitHub hears `failure` with the first problem, and nothing is applied.
pub(crate) async fn assert_refused(world: &World, expected: &str) {
    let head = sha();
    let (status, _) = world
        .deliver(
            &world
                .gh
                .open_pull_request(&world.repo, PrSpec::new(pr(1), head.clone(), "b")),
        )
        .await;
    assert_eq!(status, 200);
    let preview = format!("{}-pr-1", world.repo.name());
    let pe = world.wait_phase(&preview, Phase::Failed, T).await;
    let message = pe.status.unwrap().message.unwrap_or_default();
    assert!(
        message.starts_with(expected),
        "expected `{expected}…`, got `{message}`"
    );
    world
        .wait_github_state(&head, "failure", Duration::from_secs(60))
        .await;
    let deployment = world.gh.deployments(&world.repo).pop().unwrap();
    let description = &deployment.statuses.last().unwrap().description;
    assert!(description.chars().count() <= 140, "{description}");
    // The first problem, cut to fit when it is long.
    let line = expected.lines().next().unwrap();
    let shown = description.trim_end_matches('…');
    let common = shown.len().min(line.len());
    assert_eq!(
        &shown[..common],
        &line[..common],
        "GitHub hears `{description}`"
    );
    assert!(
        !world.namespace_exists(&world.namespace_of(&preview)).await,
        "nothing is applied for a refused blueprint"
    );
}

async fn refused_fixture(name: &str, live: bool, expected: &str) {
    let fixture = Fixture::load(name);
    let world = if live {
        World::with_source(
            name,
            Source::Staging(&fixture.objects),
            fixture.spec.clone(),
        )
        .await
    } else {
        World::with_source(
            name,
            Source::Manifests(&fixture.yaml()),
            fixture.spec.clone(),
        )
        .await
    };
    assert_refused(&world, expected).await;
}

#[tokio::test]
async fn a_daemonset_in_the_staging_namespace_is_refused() {
    refused_fixture(
        "refused-daemonset",
        true,
        "blueprint refused: DaemonSet node-exporter is not allowed: DaemonSets run on every node",
    )
    .await;
}

#[tokio::test]
async fn a_clusterrole_in_the_manifests_is_refused() {
    refused_fixture(
        "refused-clusterrole",
        false,
        "blueprint refused: ClusterRole shop-operator is not allowed: ClusterRole is cluster-scoped \
         and a preview only owns its namespace\nClusterRoleBinding shop-operator is not allowed",
    )
    .await;
}

#[tokio::test]
async fn a_host_path_under_restricted_is_refused() {
    refused_fixture(
        "refused-hostpath-restricted",
        false,
        "blueprint refused: Deployment log-shipper: spec.template.spec.volumes[0].hostPath: \
         hostPath volumes are forbidden by Pod Security level restricted",
    )
    .await;
}

#[tokio::test]
async fn a_privileged_container_under_baseline_is_refused() {
    refused_fixture(
        "refused-privileged-baseline",
        false,
        "blueprint refused: Deployment builder: spec.template.spec.containers[0].securityContext.\
         privileged: privileged containers are forbidden by Pod Security level baseline",
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// Phases that fail name the cluster's reason.

const FAILING_SEED: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  selector: {app: api}
  ports: [{port: 80}]
---
apiVersion: batch/v1
kind: Job
metadata:
  name: db-seed
  annotations: {sandcastle.dev/hook: seed}
spec:
  # Kept suspended in staging; it runs in previews.
  suspend: true
  backoffLimit: 0
  template:
    metadata:
      annotations: {test.sandcastle.dev/fate: fail}
    spec:
      restartPolicy: Never
      containers:
      - {name: seed, image: ghcr.io/acme/api:1.0, args: [seed]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - {name: api, image: ghcr.io/acme/api:1.0}
"#;

#[tokio::test]
async fn a_failing_seed_job_fails_the_preview_and_no_app_starts() {
    let world = World::new("seedfail", FAILING_SEED, json!({})).await;
    let head = sha();
    let (status, _) = world
        .deliver(
            &world
                .gh
                .open_pull_request(&world.repo, PrSpec::new(pr(1), head.clone(), "b")),
        )
        .await;
    assert_eq!(status, 200);
    let pe = world.wait_phase("seedfail-pr-1", Phase::Failed, T).await;
    let want = "seed job db-seed failed: BackoffLimitExceeded (exit 1)";
    assert_eq!(pe.status.unwrap().message.as_deref(), Some(want));
    world
        .wait_github_state(&head, "failure", Duration::from_secs(60))
        .await;
    let deployment = world.gh.deployments(&world.repo).pop().unwrap();
    assert_eq!(deployment.statuses.last().unwrap().description, want);

    let ns = world.namespace_of("seedfail-pr-1");
    let deployments: Api<Deployment> = Api::namespaced(world.client.clone(), &ns);
    assert!(
        deployments
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "the apps phase never ran"
    );
    // Reconciling the failed preview again does not move on to the apps either.
    let pe = world.previews().get("seedfail-pr-1").await.unwrap();
    let rollout = pe.status.unwrap().rollout.unwrap();
    assert!(rollout.applied_steps < rollout.total_steps, "{rollout:?}");
}

#[tokio::test]
async fn with_order_together_the_apps_start_beside_the_seed_job_whose_failure_still_fails_the_preview()
 {
    let world = World::new("together", FAILING_SEED, json!({"order": "together"})).await;
    world.open(1).await;
    let pe = world.wait_phase("together-pr-1", Phase::Failed, T).await;
    let st = pe.status.unwrap();
    assert_eq!(
        st.message.as_deref(),
        Some("job db-seed failed: BackoffLimitExceeded (exit 1)")
    );
    let rollout = st.rollout.unwrap();
    assert_eq!(rollout.applied_steps, rollout.total_steps, "{rollout:?}");
    let ns = world.namespace_of("together-pr-1");
    let deployments: Api<Deployment> = Api::namespaced(world.client.clone(), &ns);
    let names: Vec<String> = deployments
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|d| d.name_any())
        .collect();
    assert_eq!(names, ["api"], "applied with the seed Job, not after it");
}

const NEVER_READY: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata:
      labels: {app: api}
      annotations: {test.sandcastle.dev/fate: image-pull-backoff}
    spec:
      containers:
      - {name: api, image: ghcr.io/acme/api:1.0}
---
# Requests more than the LimitRange's default limit (1 CPU) and sets no limit of its own.
apiVersion: apps/v1
kind: Deployment
metadata: {name: big}
spec:
  selector: {matchLabels: {app: big}}
  template:
    metadata: {labels: {app: big}}
    spec:
      containers:
      - name: big
        image: ghcr.io/acme/big:1.0
        resources: {requests: {cpu: "2", memory: 2Gi}}
"#;

#[tokio::test]
async fn a_readiness_timeout_names_what_the_pods_are_stuck_on() {
    let mut world = World::new("stuck", NEVER_READY, json!({})).await;
    let clock = world.use_manual_clock().await;
    let head = sha();
    let (status, _) = world
        .deliver(
            &world
                .gh
                .open_pull_request(&world.repo, PrSpec::new(pr(1), head.clone(), "b")),
        )
        .await;
    assert_eq!(status, 200);
    wait_for(
        &world.previews(),
        "stuck-pr-1",
        "waiting on the apps",
        T,
        |pe: Option<&PreviewEnvironment>| {
            pe.and_then(|p| p.status.as_ref())
                .and_then(|s| s.message.as_deref())
                .is_some_and(|m| m.starts_with("starting apps: api 0/2"))
        },
    )
    .await;

    // The container asking for more than the default limit got a limit of its own, so its pod
    // was admitted and runs.
    let ns = world.namespace_of("stuck-pr-1");
    let deployments: Api<Deployment> = Api::namespaced(world.client.clone(), &ns);
    wait_for(
        &deployments,
        "big",
        "deployment big available",
        T,
        kube::runtime::wait::conditions::is_deployment_completed(),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), &ns);
    let pod = pods
        .list(&ListParams::default().labels("app=big"))
        .await
        .unwrap()
        .items
        .pop()
        .unwrap();
    let resources = pod.spec.unwrap().containers[0].resources.clone().unwrap();
    let limits = resources.limits.unwrap();
    assert_eq!(limits["cpu"].0, "2");
    assert_eq!(limits["memory"].0, "2Gi");

    clock.advance(Duration::from_secs(121));
    let pe = world.wait_phase("stuck-pr-1", Phase::Failed, T).await;
    let want = "not Ready after 2m: deployment/api 0/2: image ghcr.io/acme/api:1.0 cannot be pulled (ImagePullBackOff)";
    assert_eq!(pe.status.unwrap().message.as_deref(), Some(want));
    world
        .wait_github_state(&head, "failure", Duration::from_secs(60))
        .await;
    let deployment = world.gh.deployments(&world.repo).pop().unwrap();
    assert_eq!(deployment.statuses.last().unwrap().description, want);
}

// ---------------------------------------------------------------------------------------------
// Guardrails, as the API server enforces them.

const ONE_APP: &str = r"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: nginx:1.27}
";

/// Whether `user` may `verb` the resource `group/resource[/subresource]` (`""` for the core
/// group) in `ns`, as the API server's authorizer answers.
async fn can(client: &Client, user: &str, verb: &str, resource: &str, ns: &str) -> bool {
    let mut parts = resource.splitn(3, '/');
    let group = parts.next().unwrap_or_default();
    let name = parts.next().unwrap_or_default();
    let subresource = parts.next().unwrap_or_default();
    let review: SubjectAccessReview = serde_json::from_value(json!({
        "spec": {"user": user, "resourceAttributes": {
            "namespace": ns, "verb": verb, "group": group, "resource": name,
            "subresource": subresource}}
    }))
    .unwrap();
    Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap()
        .allowed
}

#[tokio::test]
async fn guardrails_hold_in_every_preview_namespace() {
    let world = World::new("walls", ONE_APP, json!({})).await;
    let (status, _) = world
        .deliver(
            &world
                .gh
                .open_pull_request(&world.repo, PrSpec::new(pr(1), sha(), "b")),
        )
        .await;
    assert_eq!(status, 200);
    world.wait_phase("walls-pr-1", Phase::Ready, T).await;
    let ns = world.namespace_of("walls-pr-1");
    let client = &world.client;

    // Pod Security admission is real: the API server itself refuses a privileged pod.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let privileged: Pod = serde_json::from_value(json!({
        "metadata": {"name": "root"},
        "spec": {"containers": [{"name": "root", "image": "busybox",
            "securityContext": {"privileged": true}}]}
    }))
    .unwrap();
    match pods.create(&PostParams::default(), &privileged).await {
        Err(kube::Error::Api(r)) => {
            assert_eq!(r.code, 403);
            assert!(
                r.message
                    .contains("violates PodSecurity \"baseline:latest\""),
                "{}",
                r.message
            );
        }
        other => panic!("a privileged pod was not refused: {other:?}"),
    }
    let namespace = Api::<Namespace>::all(client.clone())
        .get(&ns)
        .await
        .unwrap();
    assert_eq!(
        namespace
            .labels()
            .get(labels::POD_SECURITY_ENFORCE)
            .map(String::as_str),
        Some("baseline")
    );

    let policy = Api::<NetworkPolicy>::namespaced(client.clone(), &ns)
        .get("sandcastle-isolation")
        .await
        .unwrap();
    let spec = serde_json::to_value(policy.spec.unwrap()).unwrap();
    assert_eq!(spec["podSelector"], json!({}));
    assert_eq!(spec["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(spec["ingress"][0], json!({"from": [{"podSelector": {}}]}));
    assert_eq!(
        spec["ingress"][1]["from"][0]["namespaceSelector"]["matchLabels"],
        json!({"kubernetes.io/metadata.name": "ingress-nginx"})
    );
    assert_eq!(spec["egress"][0], json!({"to": [{"podSelector": {}}]}));
    assert_eq!(
        spec["egress"][1]["ports"][0],
        json!({"port": 53, "protocol": "UDP"})
    );
    assert_eq!(spec["egress"][2]["to"][0]["ipBlock"]["cidr"], "0.0.0.0/0");
    assert!(
        spec["egress"][2]["to"][0]["ipBlock"]["except"]
            .as_array()
            .unwrap()
            .contains(&json!("10.0.0.0/8"))
    );

    let quota = Api::<ResourceQuota>::namespaced(client.clone(), &ns)
        .get("sandcastle-quota")
        .await
        .unwrap();
    let hard = quota.spec.unwrap().hard.unwrap();
    let hard: BTreeMap<&str, &str> = hard
        .iter()
        .map(|(k, v)| (k.as_str(), v.0.as_str()))
        .collect();
    assert_eq!(hard["requests.cpu"], "8");
    assert_eq!(hard["requests.memory"], "16Gi");
    assert_eq!(hard["pods"], "50");
    assert_eq!(hard["services.loadbalancers"], "0");
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns);
    eventually("the quota counts the app's pod", T, || {
        let quotas = quotas.clone();
        async move {
            let q = quotas
                .get("sandcastle-quota")
                .await
                .map_err(|e| e.to_string())?;
            let used = q.status.and_then(|s| s.used).unwrap_or_default();
            match used.get("pods") {
                Some(n) if n.0 == "1" => Ok(()),
                other => Err(format!("pods used: {other:?}")),
            }
        }
    })
    .await;

    let range = Api::<LimitRange>::namespaced(client.clone(), &ns)
        .get("sandcastle-limits")
        .await
        .unwrap();
    let item = &range.spec.unwrap().limits[0];
    assert_eq!(item.type_, "Container");
    assert_eq!(item.default.as_ref().unwrap()["cpu"].0, "1");
    assert_eq!(item.default_request.as_ref().unwrap()["memory"].0, "64Mi");
    // The app, which sets no resources, got the defaults.
    let pod = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .pop()
        .unwrap();
    let spec = pod.spec.unwrap();
    let requests = spec.containers[0]
        .resources
        .clone()
        .unwrap()
        .requests
        .unwrap();
    assert_eq!(requests["cpu"].0, "50m");

    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    for name in ["default", "preview-agent"] {
        let sa = sas.get(name).await.unwrap();
        assert_eq!(sa.automount_service_account_token, Some(false), "{name}");
    }
    assert_eq!(spec.automount_service_account_token, None);
    assert!(
        spec.volumes.iter().flatten().all(|v| v.projected.is_none()),
        "no token is mounted into the app"
    );

    let role = Api::<Role>::namespaced(client.clone(), &ns)
        .get("preview-agent")
        .await
        .unwrap();
    let rules = serde_json::to_value(role.rules.unwrap()).unwrap();
    assert!(!rules.to_string().contains("secrets"), "{rules}");
    // The Role works as meant, asked of the API server's authorizer.
    let agent = format!("system:serviceaccount:{ns}:preview-agent");
    for (verb, resource) in [
        ("list", "/pods"),
        ("get", "/pods/log"),
        ("watch", "/events"),
        ("get", "apps/deployments"),
        ("patch", "apps/deployments"),
        ("list", "batch/jobs"),
    ] {
        assert!(
            can(client, &agent, verb, resource, &ns).await,
            "{verb} {resource}"
        );
    }
    for (verb, resource, namespace) in [
        ("get", "/secrets", ns.as_str()),
        ("delete", "/pods", ns.as_str()),
        ("patch", "apps/statefulsets", ns.as_str()),
        ("create", "/pods/exec", ns.as_str()),
        ("list", "/pods", world.staging.name.as_str()),
    ] {
        assert!(
            !can(client, &agent, verb, resource, namespace).await,
            "{verb} {resource} in {namespace}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Pre-delete hooks at teardown.

const HOOKED: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: nginx:1.27}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: dump
  annotations: {sandcastle.dev/hook: pre-delete}
spec:
  suspend: true
  backoffLimit: 0
  template:
    metadata:
      annotations: {test.sandcastle.dev/fate: fail}
    spec:
      restartPolicy: Never
      containers:
      - {name: dump, image: postgres:16.4, args: [pg_dump]}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: hang
  annotations: {sandcastle.dev/hook: pre-delete}
spec:
  suspend: true
  template:
    metadata:
      # Stays Pending: a running Job pod would be completed by kwok.
      annotations: {test.sandcastle.dev/fate: image-pull-backoff}
    spec:
      restartPolicy: Never
      containers:
      - {name: hang, image: busybox, args: [sleep, infinity]}
"#;

async fn wait_message(world: &World, preview: &str, want: &str) {
    let want = want.to_owned();
    wait_for(
        &world.previews(),
        preview,
        &format!("{preview}: {want}"),
        T,
        move |pe: Option<&PreviewEnvironment>| {
            pe.and_then(|p| p.status.as_ref())
                .is_some_and(|s| s.message.as_deref() == Some(want.as_str()))
        },
    )
    .await;
}

#[tokio::test]
async fn pre_delete_hooks_that_fail_or_hang_never_block_teardown() {
    let mut world = World::new("hooked", HOOKED, json!({})).await;
    let clock = world.use_manual_clock().await;
    for n in [1, 2] {
        let (status, _) = world
            .deliver(
                &world
                    .gh
                    .open_pull_request(&world.repo, PrSpec::new(pr(n), sha(), "b")),
            )
            .await;
        assert_eq!(status, 200);
    }
    for n in [1, 2] {
        world
            .wait_phase(&format!("hooked-pr-{n}"), Phase::Ready, T)
            .await;
    }
    let ns1 = world.namespace_of("hooked-pr-1");
    let jobs: Api<Job> = Api::namespaced(world.client.clone(), &ns1);
    for name in ["dump", "hang"] {
        assert!(
            readiness::job_suspended(&jobs.get(name).await.unwrap()),
            "{name} waits"
        );
    }

    // Closed: the hooks run; one fails, one never ends. Teardown waits for the second until its
    // time is up, then goes on; the tombstone's history says what happened.
    let (status, _) = world
        .deliver(&world.gh.close(&world.repo, pr(1), false))
        .await;
    assert_eq!(status, 200);
    wait_message(&world, "hooked-pr-1", "running pre-delete hook hang").await;
    assert!(world.namespace_exists(&ns1).await, "kept while a hook runs");
    clock.advance(Duration::from_secs(121));
    let pe = world.wait_phase("hooked-pr-1", Phase::Removed, T).await;
    assert!(!world.namespace_exists(&ns1).await);
    let history = pe.status.unwrap().history;
    let result = |hook: &str| {
        history
            .iter()
            .find(|h| h.action == format!("pre-delete hook {hook}"))
            .and_then(|h| h.result.clone())
            .unwrap_or_else(|| panic!("{hook} not in the history: {history:#?}"))
    };
    assert_eq!(result("dump"), "failed: BackoffLimitExceeded (exit 1)");
    assert_eq!(
        result("hang"),
        "still running after 2m; teardown went on without it"
    );

    // Deleted outright (the finalizer path): the hooks run too.
    let ns2 = world.namespace_of("hooked-pr-2");
    world
        .previews()
        .delete("hooked-pr-2", &DeleteParams::default())
        .await
        .unwrap();
    wait_message(&world, "hooked-pr-2", "running pre-delete hook hang").await;
    let jobs: Api<Job> = Api::namespaced(world.client.clone(), &ns2);
    assert!(!readiness::job_suspended(&jobs.get("hang").await.unwrap()));
    clock.advance(Duration::from_secs(121));
    wait_for(
        &world.previews(),
        "hooked-pr-2",
        "hooked-pr-2 deleted",
        T,
        |pe: Option<&PreviewEnvironment>| pe.is_none(),
    )
    .await;
    assert!(!world.namespace_exists(&ns2).await);
}

// ---------------------------------------------------------------------------------------------
// Measurements (run by scripts/bench-fixtures; prints a table, asserts no timing).

fn left_out(plan: &Plan) -> String {
    if plan.left_out.is_empty() {
        return "none".into();
    }
    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in &plan.left_out {
        reasons
            .entry(l.reason.clone())
            .or_default()
            .push(format!("{} {}", l.kind, l.name));
    }
    reasons
        .into_iter()
        .map(|(why, what)| format!("{}: {why}", what.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `Deployment api (3)`: the objects of `problems`, each once, with how many problems it has.
fn refused_objects(problems: &[sandcastle::domain::plan::Problem]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for p in problems {
        *counts.entry(format!("{} {}", p.kind, p.name)).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(what, n)| {
            if n == 1 {
                what
            } else {
                format!("{what} ({n})")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::test]
#[ignore = "a measurement, not a test: run scripts/bench-fixtures"]
async fn measure_fixtures() {
    let mut rows = Vec::new();
    for name in [
        "k8s-guestbook",
        "bookinfo",
        "k8s-zookeeper",
        "kitchen-sink",
        "allowlist-and-skip",
    ] {
        let p = preview_fixture(name).await;
        p.assert_faithful_but_for(prose_of(name)).await;
        let planned = p.plan.objects().count() + p.plan.pre_delete.len();
        let sandbox = sandbox_ready(&p, name).await;
        rows.push(format!(
            "| {name} | {} | {} + {} guardrails | left out: {} | {:.2} s | {:.2} s | {:.2} s |",
            p.source_objects,
            planned,
            p.guardrails,
            left_out(&p.plan),
            p.timeline.applied.as_secs_f64(),
            p.timeline.ready.as_secs_f64(),
            sandbox.as_secs_f64(),
        ));
        drop(p);
    }
    for name in [
        "refused-daemonset",
        "refused-clusterrole",
        "refused-hostpath-restricted",
        "refused-privileged-baseline",
        "refused-rolebinding-namespace",
        "refused-many",
    ] {
        let f = Fixture::load(name);
        let repo = RepoName::new("acme/shop").unwrap();
        let mut spec = f.spec.clone();
        let source = match &f.source_namespace {
            Some(ns) => json!({"namespace": ns}),
            None => json!({"manifests": {"configMap": "m"}}),
        };
        spec["source"] = source;
        spec["repositories"] = json!([repo.as_str()]);
        let spec = serde_json::from_value(spec).unwrap();
        let mut ctx = preview_context_for(&repo);
        ctx.source_namespace = f.source_namespace.clone();
        let refused = plan::plan(&f.objects, &spec, &ctx).unwrap_err();
        rows.push(format!(
            "| {name} | {} | 0: refused, nothing applied | {} problem{}: {} | – | – | – |",
            f.objects.len(),
            refused.problems.len(),
            if refused.problems.len() == 1 { "" } else { "s" },
            refused_objects(&refused.problems),
        ));
    }
    println!(
        "\n| blueprint | objects in | objects applied | left out or refused | opened → all applied | opened → Ready | API create → Ready |\n|---|---|---|---|---|---|---|"
    );
    for row in rows {
        println!("{row}");
    }
}

/// The same Blueprint as a sandbox through the API: `POST /previews`, then the API's `wait`,
/// as an agent waits. `{{pr}}` has no value without a pull request, so it gives way to
/// `{{preview}}` in the host and `{{branch}}` in image tags first.
async fn sandbox_ready(p: &Previewed, name: &str) -> Duration {
    let world = &p.world;
    let blueprints = Api::<Blueprint>::namespaced(world.client.clone(), &world.home.name);
    let spec = serde_json::to_value(&blueprints.get(name).await.unwrap().spec).unwrap();
    let without_pr = |v: &Value, by: &str| {
        serde_json::from_str::<Value>(&v.to_string().replace("{{pr}}", by)).unwrap()
    };
    let patch = json!({"spec": {"host": without_pr(&spec["host"], "{{preview}}"),
        "images": without_pr(&spec["images"], "{{branch}}")}});
    blueprints
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let admin = crate::support::api::account(world, "bench", &[crate::support::api::ALL]).await;
    let body = json!({"blueprint": name, "repository": world.repo.as_str(),
        "commit": sha().as_str(), "name": format!("{name}-sandbox")});
    let start = Instant::now();
    let made =
        crate::support::api::call(world, "POST", "/api/v1/previews", Some(&admin), Some(body))
            .await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let path = format!("/api/v1/previews/{name}-sandbox/wait?timeout=5m");
    let waited = crate::support::api::call(world, "GET", &path, Some(&admin), None).await;
    assert_eq!(waited.body["outcome"], "ready", "{:?}", waited.body);
    start.elapsed()
}

fn preview_context_for(repo: &RepoName) -> PreviewContext {
    PreviewContext {
        preview: NamespaceName::new("shop-pr-1").unwrap(),
        namespace: NamespaceName::new("shop-pr-1").unwrap(),
        source_namespace: None,
        blueprint: "shop".into(),
        repo: repo.clone(),
        pr: Some(pr(1)),
        sha: sha(),
        branch: "b".into(),
        default_host: "{{host}}-{{preview}}.preview.localhost".into(),
        edge: Default::default(),
        pool_member: None,
        data: Default::default(),
    }
}
