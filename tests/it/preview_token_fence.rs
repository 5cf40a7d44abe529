//! A preview's own token (its `preview-agent` account) restarts the preview's Deployments as
//! `kubectl rollout restart` does, and changes nothing else of them: the chart's preview-agent
//! fence (a ValidatingAdmissionPolicy, `rbac.fence`) refuses another image, a mounted Secret, a
//! new label — tried for real, as that token.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use sandcastle::crd::Phase;
use serde_json::{Value, json};

use crate::chart::{install, render};
use crate::support::api::{ALL, account, call};
use crate::support::cluster::{clean_up_after_test, unique};
use crate::support::eventually;
use crate::support::fixtures::TINY_APP;
use crate::support::world::World;

const T: Duration = Duration::from_secs(90);
const REFUSAL: &str = "a preview's token may only restart its Deployments";

/// The fence's policy and binding, removed when the test ends however it ends.
struct Fence(String);

impl Drop for Fence {
    fn drop(&mut self) {
        let name = self.0.clone();
        clean_up_after_test(move |client| async move {
            let dp = DeleteParams::default();
            let _ = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
                .delete(&name, &dp)
                .await;
            let _ = Api::<ValidatingAdmissionPolicy>::all(client)
                .delete(&name, &dp)
                .await;
        });
    }
}

/// A client that talks to the control plane as `token`.
async fn as_token(token: &str) -> Client {
    let mut config = crate::support::cluster::config().await;
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_owned().into()),
        ..kube::config::AuthInfo::default()
    };
    Client::try_from(config).unwrap()
}

/// How a merge patch of Deployment `web` came out: `Ok` or the API's refusal.
async fn patch(deployments: &Api<Deployment>, change: Value) -> Result<(), String> {
    match deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&change))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) => Err(format!("{} {}", e.code, e.message)),
        Err(e) => panic!("neither allowed nor refused: {e}"),
    }
}

#[tokio::test]
async fn a_preview_token_restarts_its_deployments_and_changes_nothing_else() {
    let world = World::new("fenced", TINY_APP, json!({})).await;
    let admin = account(&world, "admin", &[ALL]).await;
    world.open(1).await;
    let pe = world.wait_phase("fenced-pr-1", Phase::Ready, T).await;
    let ns = pe.status.unwrap().namespace.unwrap();
    let minted = call(
        &world,
        "POST",
        "/api/v1/previews/fenced-pr-1/token",
        Some(&admin),
        Some(json!({"expirationSeconds": 900})),
    )
    .await;
    assert_eq!(minted.status, 201, "{:?}", minted.body);
    let token = minted.body["token"].as_str().unwrap().to_owned();

    // The chart's preview-agent fence, as `helm install` applies it.
    let release = unique("sc");
    let name = format!("{release}-sandcastle-preview-agent-fence");
    let _fence = Fence(name.clone());
    let admin_client = crate::support::client().await;
    let objects: Vec<Value> = render(&release, &world.home.name, &json!([]), false)
        .into_iter()
        .filter(|o| o["metadata"]["name"] == name.as_str())
        .collect();
    assert_eq!(
        objects.len(),
        2,
        "the chart renders the preview-agent fence's policy and binding"
    );
    install(&admin_client, &world.home.name, &objects).await;

    let deployments: Api<Deployment> = Api::namespaced(as_token(&token).await, &ns);
    // Each try another image: a write the fence let through before it took effect would make
    // the same change again a no-op, which it has nothing to refuse in.
    let tries = std::sync::atomic::AtomicU32::new(0);
    eventually("the fence refuses another image", T, || async {
        let n = tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let another_image = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": format!("registry.example.com/evil:{n}")}]}}}});
        match patch(&deployments, another_image).await {
            Err(e) if e.contains(REFUSAL) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // What `kubectl rollout restart` sends goes through.
    let restart = json!({"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": "2026-12-04T16:00:00Z"}}}}});
    assert_eq!(patch(&deployments, restart).await, Ok(()));

    // Anything else is refused, naming what a token may do.
    let refused = [
        (
            "a Secret mounted",
            json!({"spec": {"template": {"spec": {"volumes": [
                {"name": "s", "secret": {"secretName": "db"}}]}}}}),
        ),
        (
            "a pod template label",
            json!({"spec": {"template": {"metadata": {"labels": {"x": "y"}}}}}),
        ),
        (
            "another pod template annotation",
            json!({"spec": {"template": {"metadata": {"annotations": {"x": "y"}}}}}),
        ),
        ("the replicas", json!({"spec": {"replicas": 5}})),
        (
            "the Deployment's own labels",
            json!({"metadata": {"labels": {"app.kubernetes.io/managed-by": "me"}}}),
        ),
    ];
    for (what, change) in refused {
        let outcome = patch(&deployments, change).await;
        assert!(
            matches!(&outcome, Err(e) if e.starts_with("403") && e.contains(REFUSAL)),
            "{what}: {outcome:?}"
        );
    }
    let web = deployments.get("web").await.unwrap();
    let spec = web.spec.unwrap().template.spec.unwrap();
    assert!(spec.volumes.is_none(), "no Secret was mounted");
}
