//! Sandcastle runs on exactly the RBAC the Helm chart grants (`charts/sandcastle/files/rbac.yaml`):
//! a ServiceAccount bound to those rules clones the richest fixture, leads through its Lease, and
//! tears the preview down; and the same account cannot touch what the rules leave out.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};

use sandcastle::controller::leader::LeaderElection;
use sandcastle::github::standin::PrSpec;
use sandcastle::k8s::crd::Phase;

use crate::support::cluster::{config, unique};
use crate::support::eventually;
use crate::support::fixtures::{self, Fixture};
use crate::support::world::{Source, World, load_objects, pr, sha};

const T: Duration = Duration::from_secs(90);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChartRules {
    cluster: Vec<PolicyRule>,
    copy_roles: Vec<PolicyRule>,
    namespace: Vec<PolicyRule>,
}

fn chart_rules() -> ChartRules {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/charts/sandcastle/files/rbac.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn object<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("a valid object")
}

/// Cluster-scoped RBAC objects of one test, removed when it ends however it ends.
struct ClusterGrant {
    client: Client,
    name: String,
}

impl Drop for ClusterGrant {
    fn drop(&mut self) {
        let (client, name) = (self.client.clone(), self.name.clone());
        tokio::spawn(async move {
            let dp = DeleteParams::default();
            let _ = Api::<ClusterRoleBinding>::all(client.clone())
                .delete(&name, &dp)
                .await;
            let _ = Api::<ClusterRole>::all(client).delete(&name, &dp).await;
        });
    }
}

/// Make ServiceAccount `sandcastle` in `home`, bound to the chart's rules (plus `extra`, as the
/// chart's `rbac.extraRules` would add), and return a client acting as it.
async fn as_chart_service_account(
    admin: &Client,
    home: &str,
    extra: Vec<PolicyRule>,
) -> (Client, ClusterGrant) {
    let rules = chart_rules();
    let name = unique("sandcastle");
    let grant = ClusterGrant {
        client: admin.clone(),
        name: name.clone(),
    };
    let pp = PostParams::default();
    Api::<ServiceAccount>::namespaced(admin.clone(), home)
        .create(&pp, &object(json!({"metadata": {"name": "sandcastle"}})))
        .await
        .unwrap();
    let subject = json!([{"kind": "ServiceAccount", "name": "sandcastle", "namespace": home}]);
    let mut cluster = rules.cluster;
    cluster.extend(rules.copy_roles);
    cluster.extend(extra);
    Api::<ClusterRole>::all(admin.clone())
        .create(
            &pp,
            &ClusterRole {
                metadata: object(json!({"name": name})),
                rules: Some(cluster),
                ..ClusterRole::default()
            },
        )
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&pp, &object(json!({"metadata": {"name": name}, "subjects": subject,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}})))
        .await
        .unwrap();
    Api::<Role>::namespaced(admin.clone(), home)
        .create(
            &pp,
            &Role {
                metadata: object(json!({"name": "sandcastle"})),
                rules: Some(rules.namespace),
            },
        )
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), home)
        .create(&pp, &object(json!({"metadata": {"name": "sandcastle"}, "subjects": subject,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sandcastle"}})))
        .await
        .unwrap();

    let mut cfg = config().await;
    cfg.auth_info.impersonate = Some(format!("system:serviceaccount:{home}:sandcastle"));
    cfg.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{home}"),
        "system:authenticated".into(),
    ]);
    let client = Client::try_from(cfg).expect("impersonating client");
    (client, grant)
}

fn forbidden<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> bool {
    matches!(r, Err(kube::Error::Api(e)) if e.code == 403)
}

#[tokio::test]
async fn the_charts_rbac_is_enough_to_clone_lead_and_tear_down() {
    let fixture = Fixture::load("kitchen-sink");
    let admin = crate::support::client().await;
    fixtures::ensure_certificate_crd(&admin).await;
    let mut world =
        World::unstarted_with_source("rbac", Source::Staging(&[]), fixture.spec.clone()).await;
    let staging = world.staging.name.clone();
    load_objects(&admin, &staging, &fixture.as_user_wrote(&staging)).await;

    // The Certificate kind the blueprint allows, granted as `rbac.extraRules` would.
    let certificates: PolicyRule = object(json!({"apiGroups": ["cert-manager.io"],
        "resources": ["certificates"], "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]}));
    let (client, _grant) =
        as_chart_service_account(&admin, &world.home.name, vec![certificates]).await;

    // Cluster-wide reads happen as soon as the account's rules take effect.
    let nodes = eventually("the account's bindings take effect", T, || async {
        match Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
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
    assert!(
        forbidden(
            Api::<ClusterRole>::all(client.clone())
                .create(
                    &PostParams::default(),
                    &object(json!({"metadata": {"name": unique("no")}}))
                )
                .await
        ),
        "no cluster-scoped writes"
    );

    world.configure = Some(|parts| {
        parts.settings.leader_election = Some(LeaderElection {
            lease_name: "sandcastle-leader".into(),
            identity: "rbac".into(),
            lease_duration: Duration::from_secs(15),
        });
    });
    world.start_as(client).await;
    let (status, body) = world.get_from(world.addr(), "/readyz").await;
    assert_eq!(status, 200, "ready as the ServiceAccount: {body}");

    let head = sha();
    let opened = world.gh.open_pull_request(
        &world.repo,
        PrSpec::new(pr(1), head.clone(), "feature/rbac"),
    );
    let (status, body) = world.deliver(&opened).await;
    assert_eq!(status, 200, "{body}");
    let preview = "rbac-pr-1".to_owned();
    let pe = world.wait_phase(&preview, Phase::Ready, T).await;
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
        names.len() > 1,
        "the blueprint's own Roles copied too: {names:?}"
    );

    let (status, _) = world
        .deliver(&world.gh.close(&world.repo, pr(1), true))
        .await;
    assert_eq!(status, 200);
    world.wait_phase(&preview, Phase::Removed, T).await;
    assert!(!world.namespace_exists(&ns).await, "namespace {ns} deleted");
    world.wait_github_state(&head, "inactive", T).await;
}
