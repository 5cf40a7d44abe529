//! Routing a stopped preview's Ingresses to Sandcastle's waking page (or nowhere) and back (the rules are in
//! [`sandcastle_domain::wake`]). One patch per Ingress carries both its parked routes and its own
//! routes (kept in `sandcastle.dev/stopped-routes`), so a crash between two patches never loses
//! a route. Its HTTPRoutes go with them ([`httproutes`]).

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use sandcastle_crd::labels::{LIFECYCLE_FIELD_MANAGER, STOPPED_ROUTES};
use sandcastle_domain::wake::routes::RouteParking;
use sandcastle_domain::wake::{self, Parking, WAKE_SERVICE};

mod httproutes;

pub use httproutes::{forget_grant, grants};

fn merge() -> PatchParams {
    PatchParams {
        field_manager: Some(LIFECYCLE_FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

fn spec_of(ing: &Ingress) -> Value {
    ing.spec
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(Value::Null)
}

async fn patch_ingress(api: &Api<Ingress>, name: &str, body: Value) -> Result<(), kube::Error> {
    match api.patch(name, &merge(), &Patch::Merge(&body)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// What parking a stopped preview's routes found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parked {
    /// The hosts its Ingresses and HTTPRoutes serve, sorted: a visit to one finds the preview.
    pub hosts: Vec<String>,
    /// Whether a visit wakes it: its Ingresses are on the waking page, or it has HTTPRoutes and
    /// they are.
    pub wakes: bool,
}

/// Send every Ingress of `ns` where `parking` says (through the [`WAKE_SERVICE`] made here),
/// and every HTTPRoute where `routes` says. Parking a parked Ingress or route changes nothing.
pub async fn park(
    client: &Client,
    ns: &str,
    preview: &str,
    parking: Parking<'_>,
    routes: RouteParking<'_>,
) -> Result<Parked, kube::Error> {
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let apply = PatchParams::apply(LIFECYCLE_FIELD_MANAGER).force();
    services
        .patch(
            WAKE_SERVICE,
            &apply,
            &Patch::Apply(&wake::wake_service(parking, preview)),
        )
        .await?;
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), ns);
    let mut hosts = Vec::new();
    for ing in ingresses.list(&ListParams::default()).await? {
        let spec = spec_of(&ing);
        hosts.extend(wake::hosts_of(&spec));
        if wake::is_parked(&spec) {
            continue;
        }
        let Some(parked) = wake::parked_routes(&spec, parking) else {
            continue;
        };
        // Its own routes now (a rollout may have applied new ones since it was last parked).
        let own = wake::routes_of(&spec).to_string();
        let body = json!({
            "metadata": {"annotations": {STOPPED_ROUTES: own}},
            "spec": parked,
        });
        patch_ingress(&ingresses, &ing.name_any(), body).await?;
    }
    let http = httproutes::park(client, ns, preview, routes).await?;
    hosts.extend(http.hosts);
    hosts.sort();
    hosts.dedup();
    Ok(Parked {
        hosts,
        wakes: parking.wakes() || (routes.wakes() && http.routes > 0),
    })
}

/// Give every parked Ingress and HTTPRoute of `ns` its own routes back and remove the
/// [`WAKE_SERVICE`] (and what the routes were parked on: with `home`, Sandcastle's namespace
/// when the preview lives in Sandcastle's cluster, the preview's ReferenceGrant there). An
/// Ingress or route a rollout applied again meanwhile keeps what it was given. Returns how many
/// were put back.
pub async fn unpark(
    client: &Client,
    ns: &str,
    preview: &str,
    home: Option<&str>,
) -> Result<usize, kube::Error> {
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), ns);
    let mut restored = 0;
    for ing in ingresses.list(&ListParams::default()).await? {
        let Some(kept) = ing.annotations().get(STOPPED_ROUTES) else {
            continue;
        };
        let own = serde_json::from_str::<Value>(kept).ok();
        let body = match own {
            Some(routes) if wake::is_parked(&spec_of(&ing)) => {
                restored += 1;
                json!({"metadata": {"annotations": {STOPPED_ROUTES: null}}, "spec": routes})
            }
            // Applied anew by a rollout, or an unreadable record: only the record goes.
            _ => json!({"metadata": {"annotations": {STOPPED_ROUTES: null}}}),
        };
        patch_ingress(&ingresses, &ing.name_any(), body).await?;
    }
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    match services
        .delete(WAKE_SERVICE, &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(r)) if r.code == 404 => {}
        Err(e) => return Err(e),
    }
    Ok(restored + httproutes::unpark(client, ns, preview, home).await?)
}
