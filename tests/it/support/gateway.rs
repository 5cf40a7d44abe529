//! The Gateway API in the test control plane: the fast tier serves none of its kinds, so tests of
//! HTTPRoutes install its standard definitions first, from the directory
//! `SANDCASTLE_GATEWAY_API_CRDS` names (`scripts/test` downloads `sigs.k8s.io/gateway-api`
//! through the Go module proxy and points it at `config/crd/standard`). Each definition is
//! created when absent (tests running at once may race: the loser finds it there) and waited on
//! until it is Established and its kinds are served.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use serde_json::Value;

use super::eventually;

const T: Duration = Duration::from_secs(60);

/// The definitions of the directory `SANDCASTLE_GATEWAY_API_CRDS` names, or a failure saying
/// how to get them.
fn definitions() -> Vec<Value> {
    let dir = std::env::var("SANDCASTLE_GATEWAY_API_CRDS").unwrap_or_else(|_| {
        panic!(
            "SANDCASTLE_GATEWAY_API_CRDS is not set: this test installs the Gateway API's standard \
             CRDs; run it with scripts/test, or export SANDCASTLE_GATEWAY_API_CRDS=\"$(cd / && \
             GOFLAGS=-mod=mod go mod download -json sigs.k8s.io/gateway-api@v1.4.0 | sed -n \
             's/^[[:space:]]*\"Dir\": \"\\(.*\\)\",$/\\1/p')/config/crd/standard\""
        )
    });
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("SANDCASTLE_GATEWAY_API_CRDS={dir}: {e}"))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no CRDs in SANDCASTLE_GATEWAY_API_CRDS={dir}"
    );
    files
        .iter()
        .map(|path| {
            let text =
                std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            serde_saphyr::from_str::<Value>(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

/// Make the Gateway API's standard kinds (HTTPRoute, GRPCRoute, Gateway, GatewayClass,
/// ReferenceGrant, BackendTLSPolicy) served by the control plane of `client`.
pub async fn ensure_gateway_api(client: &Client) {
    let served = [
        ("gateway.networking.k8s.io", "v1", "HTTPRoute"),
        ("gateway.networking.k8s.io", "v1beta1", "ReferenceGrant"),
    ];
    install(client, definitions(), &served).await;
}

/// Create each of `definitions` that is absent, wait until all are Established, then until
/// each of `served` (group, version, kind) is served.
pub async fn install(client: &Client, definitions: Vec<Value>, served: &[(&str, &str, &str)]) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for definition in definitions {
        let name = definition["metadata"]["name"]
            .as_str()
            .expect("a CRD has a name")
            .to_owned();
        if crds.get_opt(&name).await.expect("reading CRDs").is_none() {
            let crd: CustomResourceDefinition =
                serde_json::from_value(definition).expect("a CustomResourceDefinition");
            match crds.create(&PostParams::default(), &crd).await {
                Ok(_) => {}
                Err(kube::Error::Api(r)) if r.code == 409 => {}
                Err(e) => panic!("creating CRD {name}: {e}"),
            }
        }
        eventually(&format!("CRD {name} Established"), T, || {
            let (crds, name) = (crds.clone(), name.clone());
            async move {
                let crd = crds.get(&name).await.map_err(|e| e.to_string())?;
                let established = crd
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if established {
                    Ok(())
                } else {
                    Err(format!("{:?}", crd.status))
                }
            }
        })
        .await;
    }
    // Established is the API server's word; discovery follows a moment later.
    for (group, version, kind) in served {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        eventually(&format!("{kind} served"), T, || {
            let (client, gvk) = (client.clone(), gvk.clone());
            async move {
                pinned_kind(&client, &gvk)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        })
        .await;
    }
}
