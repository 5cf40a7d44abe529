//! `isolation.egress` against the real API server: the allow list lands in the preview's
//! NetworkPolicy as the API server stores it, the CRD refuses rules that are not one thing, and
//! host names need Cilium — refused by name where the cluster does not serve its policy, and
//! accepted by Cilium's own CustomResourceDefinition where it does. (kwok enforces no traffic, so
//! what is checked is what the API server holds.)

use std::time::Duration;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use sandcastle::crd::{Blueprint, Phase};
use serde_json::{Value, json};

use crate::support::eventually;
use crate::support::fixtures::TINY_APP;
use crate::support::world::{World, pr};

const T: Duration = Duration::from_secs(90);
const CILIUM_CRD: &str = "ciliumnetworkpolicies.cilium.io";

#[tokio::test]
async fn an_allow_list_is_what_the_network_policy_holds() {
    let isolation = json!({"isolation": {"networkPolicy": "strict", "egress": [
        {"cidrs": ["140.82.112.0/20", "2606:50c0::/32"], "ports": [{"port": 443}, {"port": 22}]},
        {"namespace": "shared-services", "podSelector": {"matchLabels": {"app": "postgres"}},
         "ports": [{"port": 5432}, {"port": 6000, "endPort": 6010, "protocol": "UDP"}]},
    ]}});
    let world = World::new("allow", TINY_APP, isolation).await;
    world.open(1).await;
    world.wait_phase("allow-pr-1", Phase::Ready, T).await;

    let ns = world.namespace_of("allow-pr-1");
    let policy = Api::<NetworkPolicy>::namespaced(world.client.clone(), &ns)
        .get("sandcastle-isolation")
        .await
        .expect("the preview's NetworkPolicy");
    let stored = serde_json::to_value(policy.spec.unwrap().egress.unwrap()).unwrap();
    assert_eq!(
        stored,
        json!([
            {"to": [{"podSelector": {}}]},
            {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
             "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
            {"to": [{"ipBlock": {"cidr": "140.82.112.0/20"}}, {"ipBlock": {"cidr": "2606:50c0::/32"}}],
             "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 22}]},
            {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shared-services"}},
                     "podSelector": {"matchLabels": {"app": "postgres"}}}],
             "ports": [{"protocol": "TCP", "port": 5432}, {"protocol": "UDP", "port": 6000, "endPort": 6010}]},
        ]),
        "strict with an allow list: the namespace, DNS and the listed destinations, nothing else"
    );
}

#[tokio::test]
async fn the_crd_refuses_an_egress_rule_that_is_not_one_thing() {
    let world = World::unstarted("egress-crd", TINY_APP, json!({})).await;
    // Untyped, so that values the Rust types could not even hold reach the API server.
    let ar = ApiResource::erase::<Blueprint>(&());
    let blueprints: Api<DynamicObject> =
        Api::namespaced_with(world.client.clone(), &world.home.name, &ar);
    for (rule, message) in [
        (
            json!({"cidrs": ["10.0.0.0/8"], "namespace": "db"}),
            "set exactly one of cidrs, namespace or fqdns in each isolation.egress rule",
        ),
        (
            json!({"ports": [{"port": 443}]}),
            "set exactly one of cidrs",
        ),
        (
            json!({"cidrs": ["10.0.0.0/8"], "podSelector": {"matchLabels": {"a": "b"}}}),
            "podSelector needs namespace in an isolation.egress rule",
        ),
        (
            json!({"cidrs": ["10.0.0.0/8"], "ports": [{"port": 9000, "endPort": 8000}]}),
            "endPort must not be below port",
        ),
        (
            json!({"cidrs": ["10.0.0.0/8"], "ports": [{"port": 70000}]}),
            "should be less than or equal to 65535",
        ),
    ] {
        let bp: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
            "metadata": {"name": "bad-egress"},
            "spec": {"source": {"namespace": world.staging.name}, "repositories": ["acme/shop"],
                     "isolation": {"egress": [rule]}},
        }))
        .unwrap();
        let refused = blueprints
            .create(&PostParams::default(), &bp)
            .await
            .expect_err(&format!("{rule} was accepted"));
        assert!(
            refused.to_string().contains(message),
            "{rule}: expected {message:?} in {refused}"
        );
    }
}

/// Cilium's own definition of `CiliumNetworkPolicy` (scripts/cilium-crd fetches it).
fn cilium_crd() -> Value {
    let path = std::env::var("SANDCASTLE_CILIUM_CRD").unwrap_or_else(|_| {
        panic!(
            "SANDCASTLE_CILIUM_CRD is not set: this test installs Cilium's CiliumNetworkPolicy \
             definition; run `export SANDCASTLE_CILIUM_CRD=$(scripts/cilium-crd path)` (scripts/test does)"
        )
    });
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut docs = sandcastle::domain::plan::parse_manifests(&text).expect("Cilium's CRD parses");
    assert_eq!(docs.len(), 1, "{path} holds one definition");
    docs.remove(0)
}

async fn served(client: &kube::Client, want: bool) {
    let gvk = GroupVersionKind::gvk("cilium.io", "v2", "CiliumNetworkPolicy");
    eventually("CiliumNetworkPolicy served or gone", T, || {
        let (client, gvk) = (client.clone(), gvk.clone());
        async move {
            let is = kube::discovery::pinned_kind(&client, &gvk).await.is_ok();
            if is == want {
                Ok(())
            } else {
                Err(format!("served: {is}"))
            }
        }
    })
    .await;
}

#[tokio::test]
async fn host_names_need_cilium_and_are_refused_by_name_without_it() {
    let crd = cilium_crd();
    let world = World::new(
        "fqdn",
        TINY_APP,
        json!({"isolation": {"networkPolicy": "strict", "egress": [
            {"fqdns": ["api.payments.example.com", "*.githubusercontent.com"], "ports": [{"port": 443}]},
        ]}}),
    )
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(world.client.clone());
    // No other test uses Cilium's kind: remove what an earlier run may have left.
    let _ = crds.delete(CILIUM_CRD, &DeleteParams::default()).await;
    served(&world.client, false).await;

    world.open(1).await;
    let failed = world.wait_phase("fqdn-pr-1", Phase::Failed, T).await;
    let message = failed.status.unwrap().message.unwrap_or_default();
    assert!(
        message.contains("spec.isolation.egress allows hosts by name (fqdns), which needs Cilium")
            && message.contains("does not serve cilium.io/v2 CiliumNetworkPolicy"),
        "{message}"
    );
    let ns = world.namespace_of("fqdn-pr-1");
    assert!(
        !world.namespace_exists(&ns).await,
        "refused before anything is created"
    );

    // With Cilium's definition served, a retry makes the preview, and the API server accepts
    // the policy against Cilium's own schema.
    crds.patch(
        CILIUM_CRD,
        &PatchParams::apply("sandcastle-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("Cilium's CRD installs");
    served(&world.client, true).await;
    let d = world.gh.comment(&world.repo, pr(1), "maria", "/preview");
    let (status, answer) = world.deliver(&d).await;
    assert_eq!(status, 202, "{answer}");
    world.wait_phase("fqdn-pr-1", Phase::Ready, T).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cilium.io", "v2", "CiliumNetworkPolicy"),
        "ciliumnetworkpolicies",
    );
    let cnp = Api::<DynamicObject>::namespaced_with(world.client.clone(), &ns, &ar)
        .get("sandcastle-egress-fqdn")
        .await
        .expect("the preview's CiliumNetworkPolicy");
    assert_eq!(
        cnp.data["spec"]["egress"][1],
        json!({"toFQDNs": [{"matchName": "api.payments.example.com"}, {"matchPattern": "*.githubusercontent.com"}],
               "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}]})
    );
    assert_eq!(
        cnp.data["spec"]["egress"][0]["toPorts"][0]["rules"]["dns"],
        json!([{"matchPattern": "*"}])
    );
    let _ = crds.delete(CILIUM_CRD, &DeleteParams::default()).await;
}
