//! One wildcard certificate for every preview, on real pods through Traefik's TLS entry point:
//! a test CA signs `*.preview.localhost`; the preview's page is served over HTTPS with that
//! certificate (checked by a TLS client trusting only the test CA, so the certificate's name
//! must match the preview host), its URL is `https://` and the readiness probe reached it over
//! HTTPS (trusting the Secret's `ca.crt`); the certificate renewed in its source
//! Secret is the one served next. The page is also opened in Chromium over HTTPS (screenshot
//! `target/screenshots/tls-page.png`).

use fantoccini::Locator;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use serde_json::json;

use crate::support::browser::Browser;
use crate::support::eventually;
use crate::support::world::{World, sha};
use crate::tier::{self, T, host_of, open_at};

/// A test CA.
fn authority() -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "Sandcastle test CA");
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// A certificate for `*.preview.localhost` signed by `ca`: PEM, key PEM, DER.
fn wildcard(ca: &CertifiedIssuer<'static, KeyPair>) -> (String, String, Vec<u8>) {
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["*.preview.localhost".to_owned()]).unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

/// The wildcard's Secret as cert-manager writes it for a CA issuer: with `ca.crt`, which
/// Sandcastle's readiness probe trusts.
async fn put_wildcard(world: &World, crt: &str, key: &str, ca: &str) {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "wildcard"},
        "stringData": {"tls.crt": crt, "tls.key": key, "ca.crt": ca}});
    Api::<Secret>::namespaced(world.client.clone(), &world.home.name)
        .patch(
            "wildcard",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .expect("the wildcard Secret");
}

/// GET `https://host/path` through Traefik's TLS entry point, trusting only `ca`: status,
/// `X-Commit`, and the certificate the server presented (DER).
async fn get_https(
    https: &str,
    host: &str,
    path: &str,
    ca: &CertifiedIssuer<'static, KeyPair>,
) -> Result<(u16, String, Vec<u8>), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let root = reqwest::Certificate::from_der(ca.der()).unwrap();
    let addr: std::net::SocketAddr = https.parse().unwrap();
    let client = reqwest::Client::builder()
        .tls_certs_only([root])
        .resolve(host, addr)
        .tls_info(true)
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .unwrap();
    let resp = client
        .get(format!("https://{host}:{}{path}", addr.port()))
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    let presented = resp
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    let commit = resp
        .headers()
        .get("x-commit")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    Ok((resp.status().as_u16(), commit, presented))
}

#[tokio::test]
async fn the_preview_is_served_over_https_with_the_wildcard_and_its_renewal() {
    let tier = tier::tier();
    let mut world = World::unstarted("tls", tier::REAL_APP, tier::blueprint(json!({}))).await;
    // The probe asks https://… through Traefik's TLS entry point.
    world.probe_via = Some(sandcastle::probe::ProbeVia::ConnectTo(tier.https.clone()));
    world.configure = Some(|parts| {
        parts.settings.preview_tls = Some(sandcastle::k8s::tls::TlsSource {
            namespace: parts.settings.home.clone(),
            name: "wildcard".to_owned(),
        });
    });
    let ca = authority();
    let (crt, key, der) = wildcard(&ca);
    put_wildcard(&world, &crt, &key, &ca.pem()).await;
    world.start().await;
    let head = sha();
    tier.image_for(&head);
    open_at(&world, 1, &head).await;
    world.wait_github_state(&head, "success", T).await;
    let pe = world.previews().get("tls-pr-1").await.unwrap();
    assert_eq!(
        pe.status.unwrap().url.as_deref(),
        Some("https://1-tls.preview.localhost")
    );
    let host = host_of(&world, "tls-pr-1").await;

    // Served over HTTPS with the wildcard: a client trusting only the test CA accepts it (the
    // name matches), and it is exactly the certificate of the Secret.
    let served = eventually("the page over HTTPS", T, || async {
        let got = get_https(&tier.https, &host, "/api/info", &ca).await?;
        if got.0 == 200 && got.2 == der {
            Ok(got)
        } else {
            Err(format!("{} {}", got.0, got.1))
        }
    })
    .await;
    assert_eq!(served.1, head.as_str());

    // In Chromium, over HTTPS (the test CA is not the browser's: it is told to accept it).
    let spki = {
        use sha2::Digest as _;
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let hash = sha2::Sha256::digest(cert.public_key().raw);
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, hash)
    };
    let b = Browser::start_with(&[format!("--ignore-certificate-errors-spki-list={spki}")]).await;
    let port = tier.https.rsplit(':').next().unwrap();
    b.client
        .goto(&format!("https://{host}:{port}/"))
        .await
        .unwrap();
    let shown = b
        .client
        .find(Locator::Id("commit"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(shown, head.as_str());
    b.screenshot("tls-page").await;

    // Renewed: the new certificate is the one served.
    let (renewed, renewed_key, renewed_der) = wildcard(&ca);
    put_wildcard(&world, &renewed, &renewed_key, &ca.pem()).await;
    eventually("the renewed certificate is served", T, || async {
        let got = get_https(&tier.https, &host, "/api/info", &ca).await?;
        if got.2 == renewed_der {
            Ok(())
        } else {
            Err("the old certificate".to_owned())
        }
    })
    .await;
}
