//! What a stolen token of the chart's ServiceAccount is worth outside Sandcastle's own and its
//! previews' namespaces, tried for real as that account with the chart's defaults: each attempt's
//! outcome — allowed, refused by RBAC, or refused by the chart's fence (a
//! ValidatingAdmissionPolicy, `rbac.fence`) — is asserted, and printed as the table in
//! docs/security.md.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::chart::{ClusterGrant, acting_as, install, render};
use crate::support::cluster::unique;
use crate::support::eventually;
use crate::support::fixtures::TINY_APP;
use crate::support::world::World;

const T: Duration = Duration::from_secs(90);
const FENCE: &str = "Sandcastle writes only in its own namespace";

fn object<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("a valid object")
}

/// How an attempt came out.
fn outcome<T>(r: Result<T, kube::Error>) -> &'static str {
    match r {
        Ok(_) => "allowed",
        Err(kube::Error::Api(e)) if e.code == 403 && e.message.contains(FENCE) => {
            "refused by the fence"
        }
        Err(kube::Error::Api(e)) if e.code == 403 => "refused by RBAC",
        Err(e) => panic!("neither allowed nor refused: {e}"),
    }
}

fn deployment(name: &str) -> Deployment {
    object(json!({"metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {
            "serviceAccountName": "default",
            "containers": [{"name": "c", "image": "registry.example.com/x:1"}]}}}}))
}

#[tokio::test]
async fn what_a_stolen_chart_token_can_do_outside_its_namespaces() {
    let admin = crate::support::client().await;
    let world = World::unstarted("stolen", TINY_APP, json!({})).await;
    let home = world.home.name.clone();
    let other = world.staging.name.clone();
    let release = unique("sc");
    let fullname = format!("{release}-sandcastle");
    let _grant = ClusterGrant {
        name: fullname.clone(),
    };
    install(&admin, &home, &render(&release, &home, &json!([]), false)).await;
    let thief = acting_as(&home, &fullname).await;
    eventually("the chart's bindings and fence take effect", T, || async {
        let probe = Api::<ConfigMap>::namespaced(thief.clone(), "kube-system")
            .create(
                &PostParams {
                    dry_run: true,
                    ..Default::default()
                },
                &object(json!({"metadata": {"name": "probe"}})),
            )
            .await;
        match outcome(probe) {
            "refused by the fence" => Ok(()),
            other => Err(other.to_owned()),
        }
    })
    .await;

    let mut table: Vec<(String, &'static str)> = Vec::new();
    let mut row = |what: &str, how: &'static str| table.push((what.to_owned(), how));
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    for ns in ["kube-system", other.as_str()] {
        let label = if ns == "kube-system" {
            "kube-system"
        } else {
            "another namespace"
        };
        row(
            &format!("list Secrets in {label}"),
            outcome(
                Api::<Secret>::namespaced(thief.clone(), ns)
                    .list(&ListParams::default())
                    .await,
            ),
        );
        row(
            &format!("create a Secret in {label}"),
            outcome(
                Api::<Secret>::namespaced(thief.clone(), ns)
                    .create(&dry, &object(json!({"metadata": {"name": "x"}})))
                    .await,
            ),
        );
        row(
            &format!("create a Deployment (running as any of its ServiceAccounts) in {label}"),
            outcome(
                Api::<Deployment>::namespaced(thief.clone(), ns)
                    .create(&dry, &deployment("x"))
                    .await,
            ),
        );
        row(
            &format!("bind ClusterRole cluster-admin in {label}"),
            outcome(
                Api::<RoleBinding>::namespaced(thief.clone(), ns)
                    .create(&dry, &object(json!({"metadata": {"name": "x"},
                        "subjects": [{"kind": "ServiceAccount", "name": fullname, "namespace": home}],
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}})))
                    .await,
            ),
        );
    }
    row(
        "mint a token for kube-system's ServiceAccount default",
        outcome(
            Api::<ServiceAccount>::namespaced(thief.clone(), "kube-system")
                .create_subresource::<TokenRequest, TokenRequest>(
                    "token",
                    "default",
                    &PostParams::default(),
                    &object(json!({"apiVersion": "authentication.k8s.io/v1",
                        "kind": "TokenRequest", "spec": {"audiences": []}})),
                )
                .await,
        ),
    );
    let namespaces: Api<Namespace> = Api::all(thief.clone());
    row(
        "label kube-system as Sandcastle's",
        outcome(
            namespaces
                .patch(
                    "kube-system",
                    &PatchParams { dry_run: true, ..Default::default() },
                    &Patch::Merge(json!({"metadata": {"labels": {"app.kubernetes.io/managed-by": "sandcastle"}}})),
                )
                .await,
        ),
    );
    row(
        "delete another namespace",
        outcome(
            namespaces
                .delete(
                    &other,
                    &DeleteParams {
                        dry_run: true,
                        ..Default::default()
                    },
                )
                .await,
        ),
    );
    row(
        "create a namespace not labelled as Sandcastle's",
        outcome(
            namespaces
                .create(&dry, &object(json!({"metadata": {"name": unique("x")}})))
                .await,
        ),
    );
    row(
        "create a namespace labelled as Sandcastle's (a preview's)",
        outcome(
            namespaces
                .create(
                    &dry,
                    &object(json!({"metadata": {"name": unique("x"),
                    "labels": {"app.kubernetes.io/managed-by": "sandcastle"}}})),
                )
                .await,
        ),
    );
    row(
        "create a ConfigMap in its own namespace",
        outcome(
            Api::<ConfigMap>::namespaced(thief.clone(), &home)
                .create(&dry, &object(json!({"metadata": {"name": "x"}})))
                .await,
        ),
    );

    println!("| What a stolen token of the chart's account tries | Outcome |\n|---|---|");
    for (what, how) in &table {
        println!("| {what} | {how} |");
    }
    let got: Vec<(&str, &str)> = table.iter().map(|(w, h)| (w.as_str(), *h)).collect();
    assert_eq!(
        got,
        [
            ("list Secrets in kube-system", "allowed"),
            ("create a Secret in kube-system", "refused by the fence"),
            (
                "create a Deployment (running as any of its ServiceAccounts) in kube-system",
                "refused by the fence"
            ),
            (
                "bind ClusterRole cluster-admin in kube-system",
                "refused by RBAC"
            ),
            ("list Secrets in another namespace", "allowed"),
            (
                "create a Secret in another namespace",
                "refused by the fence"
            ),
            (
                "create a Deployment (running as any of its ServiceAccounts) in another namespace",
                "refused by the fence"
            ),
            (
                "bind ClusterRole cluster-admin in another namespace",
                "refused by RBAC"
            ),
            (
                "mint a token for kube-system's ServiceAccount default",
                "refused by RBAC"
            ),
            ("label kube-system as Sandcastle's", "refused by the fence"),
            ("delete another namespace", "refused by the fence"),
            (
                "create a namespace not labelled as Sandcastle's",
                "refused by the fence"
            ),
            (
                "create a namespace labelled as Sandcastle's (a preview's)",
                "allowed"
            ),
            ("create a ConfigMap in its own namespace", "allowed"),
        ]
    );
}
