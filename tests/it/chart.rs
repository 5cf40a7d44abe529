//! Sandcastle's Helm chart, rendered by Helm and installed on the real control plane: it is
//! accepted under the `restricted` Pod Security level, and Sandcastle runs a whole preview with
//! nothing but the access the chart grants.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use sandcastle::controller::leader::LeaderElection;
use sandcastle::crd::Phase;
use sandcastle::domain::plan::parse_manifests;
use sandcastle::k8s::apply::identity;
use sandcastle_fake_github::PrSpec;

use crate::support::cluster::{clean_up_after_test, config, unique};
use crate::support::eventually;
use crate::support::fixtures::{self, Fixture};
use crate::support::world::{Source, World, load_objects, pr, sha};

const T: Duration = Duration::from_secs(90);

fn object<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("a valid object")
}

/// The Helm binary `scripts/test` provides (`scripts/helm path`).
fn helm() -> String {
    std::env::var("SANDCASTLE_HELM").unwrap_or_else(|_| {
        panic!("SANDCASTLE_HELM is not set: run the tests with scripts/test, or export SANDCASTLE_HELM=$(scripts/helm path)")
    })
}

/// `helm template` of Sandcastle's chart as release `release` in `namespace`, with `copy_roles`
/// for `rbac.copyRoles`.
pub(crate) fn render(
    release: &str,
    namespace: &str,
    extra_rules: &Value,
    copy_roles: bool,
) -> Vec<Value> {
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/sandcastle");
    let out = Command::new(helm())
        .args(["template", release, chart, "--namespace", namespace])
        .args(["--set", "image.repository=registry.example/sandcastle"])
        .args(["--set", &format!("rbac.copyRoles={copy_roles}")])
        .args(["--set-json", &format!("rbac.extraRules={extra_rules}")])
        .output()
        .expect("helm runs");
    assert!(
        out.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_manifests(&String::from_utf8(out.stdout).unwrap()).expect("the chart renders YAML")
}

/// Apply rendered objects as `helm install` would (server-side, cluster-scoped ones cluster-wide).
pub(crate) async fn install(admin: &Client, namespace: &str, objects: &[Value]) {
    for obj in objects {
        let (api_version, kind, name) = identity(obj).unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = pinned_kind(admin, &gvk).await.unwrap();
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Cluster => Api::all_with(admin.clone(), &ar),
            Scope::Namespaced => Api::namespaced_with(admin.clone(), namespace, &ar),
        };
        api.patch(
            name,
            &PatchParams::apply("helm").force(),
            &Patch::Apply(obj),
        )
        .await
        .unwrap_or_else(|e| panic!("the API server refuses {kind} {name} of the chart: {e}"));
    }
}

/// Cluster-scoped RBAC objects of one release, removed when the test ends however it ends.
pub(crate) struct ClusterGrant {
    pub(crate) name: String,
}

impl Drop for ClusterGrant {
    fn drop(&mut self) {
        let name = self.name.clone();
        clean_up_after_test(move |client| async move {
            let dp = DeleteParams::default();
            let _ = Api::<ClusterRoleBinding>::all(client.clone())
                .delete(&name, &dp)
                .await;
            let _ = Api::<ClusterRole>::all(client.clone())
                .delete(&name, &dp)
                .await;
            // The fence (rbac.fence): its policy and binding.
            let fence = format!("{name}-fence");
            let _ = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
                .delete(&fence, &dp)
                .await;
            let _ = Api::<ValidatingAdmissionPolicy>::all(client)
                .delete(&fence, &dp)
                .await;
        });
    }
}

/// A client acting as ServiceAccount `name` in `namespace`.
pub(crate) async fn acting_as(namespace: &str, name: &str) -> Client {
    let mut cfg = config().await;
    cfg.auth_info.impersonate = Some(format!("system:serviceaccount:{namespace}:{name}"));
    cfg.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".into(),
    ]);
    Client::try_from(cfg).expect("impersonating client")
}

pub(crate) fn forbidden<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> bool {
    matches!(r, Err(kube::Error::Api(e)) if e.code == 403)
}

/// The rendered chart installs into a namespace that enforces the `restricted` Pod Security
/// level; its ServiceAccount, bound to nothing but the chart's rules, runs Sandcastle through a
/// preview of the richest fixture (Roles, hooks, StatefulSets, an allowed extra kind), leads
/// through its Lease, and tears it down; nodes and cluster-scoped writes stay out of its reach.
#[tokio::test]
async fn the_chart_installs_and_its_account_runs_a_whole_preview() {
    let fixture = Fixture::load("kitchen-sink");
    let admin = crate::support::client().await;
    fixtures::ensure_certificate_crd(&admin).await;
    let mut world =
        World::unstarted_with_source("chart", Source::Staging(&[]), fixture.spec.clone()).await;
    let home = world.home.name.clone();
    let staging = world.staging.name.clone();
    load_objects(&admin, &staging, &fixture.as_user_wrote(&staging)).await;

    Api::<Namespace>::all(admin.clone())
        .patch(
            &home,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {
                "pod-security.kubernetes.io/enforce": "restricted"}}})),
        )
        .await
        .unwrap();
    Api::<Secret>::namespaced(admin.clone(), &home)
        .create(
            &PostParams::default(),
            &object(
                json!({"metadata": {"name": "sandcastle-github"}, "stringData": {
                "app-id": "1", "private-key.pem": "-", "webhook-secret": "s"}}),
            ),
        )
        .await
        .unwrap();
    // The Certificate kind the Blueprint allows, granted through the chart's values.
    let certificates = json!([{"apiGroups": ["cert-manager.io"], "resources": ["certificates"],
        "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]}]);
    let release = unique("sc");
    let fullname = format!("{release}-sandcastle");
    // The kitchen sink binds ClusterRole `view`, more than Sandcastle holds: copied faithfully
    // only with rbac.copyRoles.
    let objects = render(&release, &home, &certificates, true);
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
    ] {
        assert!(
            kinds.contains(&kind),
            "the chart renders a {kind}: {kinds:?}"
        );
    }
    let _grant = ClusterGrant {
        name: fullname.clone(),
    };
    install(&admin, &home, &objects).await;
    // Pod Security admission is real here: a pod the restricted level refuses never appears.
    eventually("the chart's Deployment is available", T, || async {
        let d = Api::<Deployment>::namespaced(admin.clone(), &home)
            .get(&fullname)
            .await
            .map_err(|e| e.to_string())?;
        let available = d.status.and_then(|s| s.available_replicas).unwrap_or(0);
        if available == 2 {
            Ok(())
        } else {
            Err(format!("{available} of 2 available"))
        }
    })
    .await;

    let client = acting_as(&home, &fullname).await;
    let nodes = eventually("the chart's bindings take effect", T, || async {
        match Api::<Namespace>::all(client.clone())
            .list(&Default::default())
            .await
        {
            Ok(_) => Ok(Api::<Node>::all(client.clone())
                .list(&Default::default())
                .await),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    assert!(forbidden(nodes), "nodes are not Sandcastle's business");
    let clusterrole = Api::<ClusterRole>::all(client.clone())
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": unique("no")}})),
        )
        .await;
    assert!(forbidden(clusterrole), "no cluster-scoped writes");

    world.configure = Some(|parts| {
        parts.settings.leader_election = Some(LeaderElection {
            lease_name: "sandcastle-leader".into(),
            identity: "chart".into(),
            lease_duration: Duration::from_secs(15),
        });
    });
    world.start_as(client).await;
    eventually("ready as the chart's ServiceAccount", T, || async {
        match world.get_from(world.addr(), "/readyz").await {
            (200, _) => Ok(()),
            (status, body) => Err(format!("{status} {body}")),
        }
    })
    .await;

    let head = sha();
    let opened = world.gh.open_pull_request(
        &world.repo,
        PrSpec::new(pr(1), head.clone(), "feature/chart"),
    );
    let (status, body) = world.deliver(&opened).await;
    assert_eq!(status, 200, "{body}");
    let preview = "chart-pr-1";
    let pe = world.wait_phase(preview, Phase::Ready, T).await;
    world
        .wait_event_reasons(preview, &["Deploying", "Ready"])
        .await;
    let ns = pe
        .status
        .as_ref()
        .and_then(|s| s.namespace.clone())
        .expect("a namespace");
    world.wait_github_state(&head, "success", T).await;
    let roles = Api::<Role>::namespaced(admin.clone(), &ns)
        .list(&Default::default())
        .await
        .unwrap();
    let names: Vec<String> = roles.iter().map(ResourceExt::name_any).collect();
    assert!(
        names.iter().any(|n| n == "preview-agent"),
        "agent Role made: {names:?}"
    );
    assert!(
        names.iter().any(|n| n == "config-reader"),
        "the blueprint's Role copied: {names:?}"
    );

    let (status, _) = world
        .deliver(&world.gh.close(&world.repo, pr(1), true))
        .await;
    assert_eq!(status, 200);
    world.wait_phase(preview, Phase::Removed, T).await;
    assert!(!world.namespace_exists(&ns).await, "namespace {ns} deleted");
    world.wait_github_state(&head, "inactive", T).await;
}

/// A RoleBinding to ClusterRole `edit`: more than Sandcastle holds.
const EDIT_BINDING: &str = r"apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dev-edit}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: developers}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
";

/// With the chart's defaults (`rbac.copyRoles` off), what a stolen Sandcastle token is worth
/// shrinks: it cannot bind `cluster-admin`, in `kube-system` or anywhere; and a blueprint binding
/// that grants more than Sandcastle holds fails its preview, naming the binding and the setting.
#[tokio::test]
async fn by_default_the_chart_account_cannot_grant_what_it_does_not_hold() {
    let admin = crate::support::client().await;
    let yaml = format!("{}---\n{EDIT_BINDING}", fixtures::TINY_APP);
    let objects = parse_manifests(&yaml).unwrap();
    let mut world =
        World::unstarted_with_source("strict", Source::Staging(&objects), json!({})).await;
    let home = world.home.name.clone();
    Api::<Secret>::namespaced(admin.clone(), &home)
        .create(
            &PostParams::default(),
            &object(
                json!({"metadata": {"name": "sandcastle-github"}, "stringData": {
                "app-id": "1", "private-key.pem": "-", "webhook-secret": "s"}}),
            ),
        )
        .await
        .unwrap();
    let release = unique("sc");
    let fullname = format!("{release}-sandcastle");
    let _grant = ClusterGrant {
        name: fullname.clone(),
    };
    install(&admin, &home, &render(&release, &home, &json!([]), false)).await;
    let client = acting_as(&home, &fullname).await;
    eventually("the chart's bindings take effect", T, || async {
        Api::<Namespace>::all(client.clone())
            .list(&Default::default())
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await;

    for namespace in ["kube-system", world.staging.name.as_str()] {
        let name = unique("escalate");
        let binding = json!({"metadata": {"name": name},
            "subjects": [{"kind": "ServiceAccount", "name": fullname, "namespace": home}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}});
        let made =
            Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(client.clone(), namespace)
                .create(&PostParams::default(), &object(binding))
                .await;
        if made.is_ok() {
            let _ = Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(
                admin.clone(),
                namespace,
            )
            .delete(&name, &DeleteParams::default())
            .await;
        }
        assert!(
            forbidden(made),
            "the chart's account bound cluster-admin in {namespace}"
        );
    }

    world.start_as(client).await;
    world.open(1).await;
    let pe = world.wait_phase("strict-pr-1", Phase::Failed, T).await;
    let message = pe.status.unwrap().message.unwrap_or_default();
    assert!(
        message.contains("RoleBinding dev-edit: grants more than Sandcastle holds; install the chart with rbac.copyRoles=true to copy it"),
        "{message}"
    );
}
