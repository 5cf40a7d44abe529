//! Traefik's kinds in the test control plane: the fast tier serves none of them, so the gate's
//! tests (whose previews carry a `traefik.io` Middleware) install Traefik's own definitions
//! first, from the file `SANDCASTLE_TRAEFIK_CRDS` names (`scripts/test` points it at Traefik's
//! module, the version the real tier runs), as [`super::gateway`] does for the Gateway API.

use kube::Client;
use serde_json::Value;

/// Traefik's definitions, or a failure saying how to get them.
fn definitions() -> Vec<Value> {
    let path = std::env::var("SANDCASTLE_TRAEFIK_CRDS").unwrap_or_else(|_| {
        panic!(
            "SANDCASTLE_TRAEFIK_CRDS is not set: this test installs Traefik's CRDs (its Middleware \
             is the gate of signed-in-only previews); run it with scripts/test, or export \
             SANDCASTLE_TRAEFIK_CRDS=\"$(cd / && GOFLAGS=-mod=mod go mod download -json \
             github.com/traefik/traefik/v3@v3.6.17 | sed -n 's/^[[:space:]]*\"Dir\": \"\\(.*\\)\",$/\\1/p')\
             /docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml\""
        )
    });
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("SANDCASTLE_TRAEFIK_CRDS={path}: {e}"));
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("SANDCASTLE_TRAEFIK_CRDS={path}: {e}"));
    let docs: Vec<Value> = docs.into_iter().filter(|d| d.is_object()).collect();
    assert!(
        !docs.is_empty(),
        "no CRDs in SANDCASTLE_TRAEFIK_CRDS={path}"
    );
    docs
}

/// Make Traefik's kinds (Middleware among them) served by the control plane of `client`.
pub async fn ensure_traefik(client: &Client) {
    super::gateway::install(
        client,
        definitions(),
        &[("traefik.io", "v1alpha1", "Middleware")],
    )
    .await;
}
