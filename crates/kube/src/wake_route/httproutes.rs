//! A stopped preview's HTTPRoutes sent to the waking page (or nowhere) and back, and the
//! ReferenceGrant in Sandcastle's namespace that lets them reach the wake route Service (the
//! rules are in [`sandcastle_domain::wake::routes`]). One patch per route carries both its
//! parked rules and its own (kept in `sandcastle.dev/stopped-routes`), so a crash between two
//! patches never loses a route. A cluster that does not serve HTTPRoutes has none to park.

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use sandcastle_crd::labels::{
    LIFECYCLE_FIELD_MANAGER, MANAGED_BY, MANAGER, PREVIEW, STOPPED_ROUTES,
};
use sandcastle_domain::wake::routes::{self, GATEWAY_GROUP, PARKED_SERVICE, RouteParking};

fn http_routes() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GATEWAY_GROUP, "v1", "HTTPRoute"),
        "httproutes",
    )
}

fn reference_grants() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GATEWAY_GROUP, "v1beta1", "ReferenceGrant"),
        "referencegrants",
    )
}

fn merge() -> PatchParams {
    PatchParams {
        field_manager: Some(LIFECYCLE_FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

fn gone<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// The objects `api` lists; none where the cluster does not serve the kind.
async fn list(
    api: &Api<DynamicObject>,
    lp: &ListParams,
) -> Result<Vec<DynamicObject>, kube::Error> {
    match api.list(lp).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// What parking the HTTPRoutes of a namespace found.
#[derive(Debug, Default)]
pub(super) struct Parked {
    /// The hosts they serve.
    pub hosts: Vec<String>,
    /// How many there are.
    pub routes: usize,
}

/// Send every HTTPRoute of `ns` where `parking` says: first the ReferenceGrant that lets them
/// name the wake route Service (or the [`PARKED_SERVICE`] they name instead), then one patch per
/// route. Parking a parked route changes nothing; without routes nothing is made.
pub(super) async fn park(
    client: &Client,
    ns: &str,
    preview: &str,
    parking: RouteParking<'_>,
) -> Result<Parked, kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &http_routes());
    let found = list(&api, &ListParams::default()).await?;
    if found.is_empty() {
        return Ok(Parked::default());
    }
    let apply = PatchParams::apply(LIFECYCLE_FIELD_MANAGER).force();
    match parking {
        RouteParking::WakePage { service, home } => {
            let grant = routes::reference_grant(service, home, preview, ns);
            let grants: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), home, &reference_grants());
            grants.patch(preview, &apply, &Patch::Apply(&grant)).await?;
        }
        RouteParking::Closed => {
            let services: Api<k8s_openapi::api::core::v1::Service> =
                Api::namespaced(client.clone(), ns);
            let service = routes::parked_service(preview);
            services
                .patch(PARKED_SERVICE, &apply, &Patch::Apply(&service))
                .await?;
        }
    }
    let mut parked = Parked {
        hosts: Vec::new(),
        routes: found.len(),
    };
    for route in found {
        let spec = route.data.get("spec").cloned().unwrap_or(Value::Null);
        parked.hosts.extend(routes::hosts_of(&spec));
        if routes::is_parked(&spec) {
            continue;
        }
        let Some(rules) = routes::parked_rules(&spec, parking) else {
            continue;
        };
        // Its own rules now (a rollout may have applied new ones since it was last parked).
        let own = routes::rules_of(&spec).to_string();
        let body = json!({
            "metadata": {"annotations": {STOPPED_ROUTES: own}},
            "spec": {"rules": rules},
        });
        gone(
            api.patch(&route.name_any(), &merge(), &Patch::Merge(&body))
                .await,
        )?;
    }
    Ok(parked)
}

/// Give every parked HTTPRoute of `ns` its own rules back, then remove the [`PARKED_SERVICE`]
/// and, with `home` (Sandcastle's namespace, when the preview lives in its cluster), the
/// preview's ReferenceGrant there. A route a rollout applied again meanwhile keeps what it was
/// given. Returns how many were put back.
pub(super) async fn unpark(
    client: &Client,
    ns: &str,
    preview: &str,
    home: Option<&str>,
) -> Result<usize, kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &http_routes());
    let mut restored = 0;
    for route in list(&api, &ListParams::default()).await? {
        let Some(kept) = route.annotations().get(STOPPED_ROUTES) else {
            continue;
        };
        let spec = route.data.get("spec").cloned().unwrap_or(Value::Null);
        let own = serde_json::from_str::<Value>(kept)
            .ok()
            .and_then(|v| v.get("rules").filter(|r| r.is_array()).cloned());
        let body = match own {
            Some(rules) if routes::is_parked(&spec) => {
                restored += 1;
                json!({"metadata": {"annotations": {STOPPED_ROUTES: null}}, "spec": {"rules": rules}})
            }
            // Applied anew by a rollout, or an unreadable record: only the record goes.
            _ => json!({"metadata": {"annotations": {STOPPED_ROUTES: null}}}),
        };
        gone(
            api.patch(&route.name_any(), &merge(), &Patch::Merge(&body))
                .await,
        )?;
    }
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), ns);
    gone(
        services
            .delete(PARKED_SERVICE, &DeleteParams::default())
            .await,
    )?;
    if let Some(home) = home {
        forget_grant(client, home, preview).await?;
    }
    Ok(restored)
}

/// Delete the ReferenceGrant of `preview` in Sandcastle's namespace `home`, if there is one.
pub async fn forget_grant(client: &Client, home: &str, preview: &str) -> Result<(), kube::Error> {
    let grants: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), home, &reference_grants());
    gone(grants.delete(preview, &DeleteParams::default()).await)
}

/// The ReferenceGrants Sandcastle made in `home`, as (name, preview).
pub async fn grants(client: &Client, home: &str) -> Result<Vec<(String, String)>, kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), home, &reference_grants());
    let lp = ListParams::default().labels(&format!("{MANAGED_BY}={MANAGER},{PREVIEW}"));
    Ok(list(&api, &lp)
        .await?
        .into_iter()
        .filter_map(|g| {
            let preview = g.labels().get(PREVIEW)?.clone();
            Some((g.name_any(), preview))
        })
        .collect())
}
