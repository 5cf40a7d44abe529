//! Removing from a preview what its plan no longer has: a push that drops a Deployment from the
//! chart (or a Blueprint that no longer holds it) removes it from the preview once the new plan
//! is rolled out, as `kubectl apply --prune` and Argo CD's prune do. Only objects Sandcastle put
//! there as part of a plan are candidates: labelled as this preview's, stamped with a commit
//! (`sandcastle.dev/sha`, which only planned objects and guardrails carry), made by no
//! controller; everything the new plan and the guardrails hold is kept. Objects are compared by
//! API group, kind and name: one object read through another version of its kind is the same
//! object. The Gateway API's routes are looked at where the cluster serves them.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::core::ApiResource;
use serde_json::Value;

use super::apply::Resolver;
use super::source::{GATEWAY_ROUTES, LIVE_KINDS, group_of};
use sandcastle_crd::KindRef;
use sandcastle_crd::labels::{MANAGED_BY, MANAGER, PREVIEW, SHA};

/// `(API group, kind, name)` of an object.
fn identity(obj: &Value) -> Option<(String, String, String)> {
    Some((
        group_of(obj["apiVersion"].as_str()?).to_owned(),
        obj["kind"].as_str()?.to_owned(),
        obj["metadata"]["name"].as_str()?.to_owned(),
    ))
}

/// Delete the objects of preview `preview` in `ns` that `keep` does not hold; the kinds looked
/// at are those Sandcastle copies, `extra` (a Blueprint's `allowKinds`) and those of `keep`.
/// Returns what was deleted, as `Kind name`.
pub async fn prune(
    resolver: &Resolver,
    ns: &str,
    preview: &str,
    keep: &[&Value],
    extra: &[KindRef],
) -> Result<Vec<String>, kube::Error> {
    let kept: BTreeSet<(String, String, String)> =
        keep.iter().filter_map(|o| identity(o)).collect();
    // Each kind once, by group and kind (the first version named is asked).
    let mut kinds: BTreeMap<(String, String), String> = BTreeMap::new();
    let copied = LIVE_KINDS
        .iter()
        .chain(GATEWAY_ROUTES)
        .filter(|(_, k)| *k != "Pod" && *k != "DaemonSet")
        .map(|(v, k)| ((*v).to_owned(), (*k).to_owned()));
    let extra = extra
        .iter()
        .map(|k| (k.api_version.clone(), k.kind.clone()));
    let planned = keep.iter().filter_map(|o| {
        Some((
            o["apiVersion"].as_str()?.to_owned(),
            o["kind"].as_str()?.to_owned(),
        ))
    });
    for (api_version, kind) in copied.chain(extra).chain(planned) {
        kinds
            .entry((group_of(&api_version).to_owned(), kind))
            .or_insert(api_version);
    }
    let selector = format!("{MANAGED_BY}={MANAGER},{PREVIEW}={preview},{SHA}");
    let mut removed = Vec::new();
    for ((_, kind), api_version) in kinds {
        // A kind this cluster does not serve (the Gateway API not installed) holds nothing.
        let Ok(ar) = resolver.resolve(&api_version, &kind, "").await else {
            continue;
        };
        removed.extend(prune_kind(resolver, ns, &ar, &selector, &kept).await?);
    }
    Ok(removed)
}

async fn prune_kind(
    resolver: &Resolver,
    ns: &str,
    ar: &ApiResource,
    selector: &str,
    kept: &BTreeSet<(String, String, String)>,
) -> Result<Vec<String>, kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(resolver.client().clone(), ns, ar);
    let list = match api.list(&ListParams::default().labels(selector)).await {
        Ok(l) => l,
        // A kind this cluster does not serve (an extra kind's CRD gone) holds nothing to prune.
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut removed = Vec::new();
    for obj in list.items {
        let Some(name) = obj.metadata.name.clone() else {
            continue;
        };
        let made_by_controller = obj
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| !o.is_empty());
        let key = (ar.group.clone(), ar.kind.clone(), name.clone());
        if made_by_controller || kept.contains(&key) {
            continue;
        }
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => removed.push(format!("{} {name}", ar.kind)),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}
