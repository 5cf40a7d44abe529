//! One wildcard certificate for every preview (`--preview-tls-secret`): copied into each preview
//! namespace and named by its Ingresses, the URL `https://`, a renewal of the source copied into
//! the live previews; a host the certificate does not serve and a missing Secret fail the
//! preview saying which. (Served over HTTPS through Traefik: `tests/real/gate.rs`.)

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, Patch, PatchParams};
use sandcastle::crd::Phase;
use serde_json::json;

use crate::support::eventually;
use crate::support::fixtures::WEB_APP;
use crate::support::world::World;

const T: Duration = Duration::from_secs(90);

/// A self-signed certificate for `names`: its PEM and its key's PEM.
fn certificate(names: &[&str]) -> (String, String) {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let made = rcgen::generate_simple_self_signed(names).expect("a certificate");
    (made.cert.pem(), made.signing_key.serialize_pem())
}

/// Put the wildcard certificate's Secret `wildcard` in the world's home namespace.
async fn put_wildcard(world: &World, crt: &str, key: &str) {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "wildcard"},
        "stringData": {"tls.crt": crt, "tls.key": key}});
    Api::<Secret>::namespaced(world.client.clone(), &world.home.name)
        .patch(
            "wildcard",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .expect("the wildcard Secret");
}

/// A world whose previews are served with the certificate in Secret `wildcard` of its home.
async fn with_wildcard(name: &str, extra: serde_json::Value) -> World {
    let mut world = World::unstarted(name, WEB_APP, extra).await;
    world.configure = Some(|parts| {
        parts.settings.preview_tls = Some(sandcastle::k8s::tls::TlsSource {
            namespace: parts.settings.home.clone(),
            name: "wildcard".to_owned(),
        });
    });
    world
}

fn data(s: &Secret, key: &str) -> Vec<u8> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn previews_serve_the_wildcard_certificate_and_follow_its_renewal() {
    let mut world = with_wildcard("wild", json!({})).await;
    let (crt, key) = certificate(&["*.preview.example.com"]);
    put_wildcard(&world, &crt, &key).await;
    world.start().await;
    world.open(1).await;
    world.wait_phase("wild-pr-1", Phase::Ready, T).await;

    let pe = world.previews().get("wild-pr-1").await.unwrap();
    assert_eq!(
        pe.status.unwrap().url.as_deref(),
        Some("https://1-wild.preview.example.com")
    );
    let ns = world.namespace_of("wild-pr-1");
    let copies: Api<Secret> = Api::namespaced(world.client.clone(), &ns);
    let copy = copies
        .get("sandcastle-tls")
        .await
        .expect("the certificate's copy");
    assert_eq!(copy.type_.as_deref(), Some("kubernetes.io/tls"));
    assert_eq!(data(&copy, "tls.crt"), crt.as_bytes());
    assert_eq!(data(&copy, "tls.key"), key.as_bytes());
    let ing = Api::<Ingress>::namespaced(world.client.clone(), &ns)
        .get("web")
        .await
        .unwrap();
    let tls = serde_json::to_value(ing.spec.unwrap().tls).unwrap();
    assert_eq!(
        tls,
        json!([{"hosts": ["1-wild.preview.example.com"], "secretName": "sandcastle-tls"}])
    );

    // Renewed: every live preview gets the new certificate.
    let (renewed, renewed_key) = certificate(&["*.preview.example.com"]);
    assert_ne!(renewed, crt);
    put_wildcard(&world, &renewed, &renewed_key).await;
    eventually("the renewal reaches the preview", T, || async {
        let copy = copies
            .get("sandcastle-tls")
            .await
            .map_err(|e| e.to_string())?;
        if data(&copy, "tls.crt") == renewed.as_bytes()
            && data(&copy, "tls.key") == renewed_key.as_bytes()
        {
            Ok(())
        } else {
            Err("the old certificate".to_owned())
        }
    })
    .await;
    // The source's other keys are not copied.
    let copy = copies.get("sandcastle-tls").await.unwrap();
    let keys: Vec<&String> = copy.data.as_ref().unwrap().keys().collect();
    assert_eq!(keys, ["tls.crt", "tls.key"]);
}

#[tokio::test]
async fn a_host_the_certificate_does_not_serve_fails_the_preview_naming_it() {
    let mut world = with_wildcard(
        "deep",
        json!({"host": "{{pr}}.{{repo}}.preview.example.com"}),
    )
    .await;
    let (crt, key) = certificate(&["*.preview.example.com"]);
    put_wildcard(&world, &crt, &key).await;
    world.start().await;
    world.open(1).await;
    world.wait_phase("deep-pr-1", Phase::Failed, T).await;
    let st = world
        .previews()
        .get("deep-pr-1")
        .await
        .unwrap()
        .status
        .unwrap();
    let message = st.message.unwrap();
    assert!(
        message.contains("Ingress web: spec.rules[0].host: the preview host 1.deep.preview.example.com is not served by the preview certificate (*.preview.example.com)"),
        "{message}"
    );
}

#[tokio::test]
async fn a_missing_certificate_fails_the_preview_saying_so() {
    let mut world = with_wildcard("nocert", json!({})).await;
    world.start().await;
    world.open(1).await;
    world.wait_phase("nocert-pr-1", Phase::Failed, T).await;
    let st = world
        .previews()
        .get("nocert-pr-1")
        .await
        .unwrap()
        .status
        .unwrap();
    let message = st.message.unwrap();
    assert_eq!(
        message,
        format!(
            "the preview certificate Secret {}/wildcard: it does not exist",
            world.home.name
        )
    );
    // Once it exists, the preview is deployed.
    let (crt, key) = certificate(&["*.preview.example.com"]);
    put_wildcard(&world, &crt, &key).await;
    world
        .wait_phase("nocert-pr-1", Phase::Ready, Duration::from_secs(150))
        .await;
}
