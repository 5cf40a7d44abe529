//! Claims restored from a snapshot of the Blueprint's data ([`PreviewContext::data`]): a copied
//! PersistentVolumeClaim gets the preview's VolumeSnapshot as its `dataSource`, and a
//! StatefulSet's claim — which its controller would otherwise make empty from the template — is
//! made here, from the template, under the name the StatefulSet adopts
//! (`<template>-<statefulset>-<ordinal>`), already restored.

use serde_json::{Value, json};

use super::Obj;
use super::kinds::{Builtin, Class};
use crate::preview::PreviewContext;

/// Give the kept claims their snapshot, and add the StatefulSets' restored claims.
pub(crate) fn restore(kept: &mut Vec<(Class, Obj)>, ctx: &PreviewContext) {
    if ctx.data.is_empty() {
        return;
    }
    let mut made = Vec::new();
    for (class, obj) in kept.iter_mut() {
        match class {
            Class::Builtin(Builtin::PersistentVolumeClaim) => {
                if let Some(snapshot) = ctx.data.get(&obj.name) {
                    set_source(&mut obj.value, snapshot);
                }
            }
            Class::Builtin(Builtin::StatefulSet) => made.extend(statefulset_claims(obj, ctx)),
            _ => {}
        }
    }
    let have: Vec<String> = kept
        .iter()
        .filter(|(c, _)| *c == Class::Builtin(Builtin::PersistentVolumeClaim))
        .map(|(_, o)| o.name.clone())
        .collect();
    made.retain(|o| !have.contains(&o.name));
    kept.extend(
        made.into_iter()
            .map(|o| (Class::Builtin(Builtin::PersistentVolumeClaim), o)),
    );
}

fn set_source(claim: &mut Value, snapshot: &str) {
    let source = json!({
        "apiGroup": "snapshot.storage.k8s.io",
        "kind": "VolumeSnapshot",
        "name": snapshot,
    });
    claim["spec"]["dataSource"] = source.clone();
    claim["spec"]["dataSourceRef"] = source;
}

/// The claims of StatefulSet `sts` that the preview restores, made from its templates.
fn statefulset_claims(sts: &Obj, ctx: &PreviewContext) -> Vec<Obj> {
    let spec = &sts.value["spec"];
    let replicas = spec["replicas"].as_u64().unwrap_or(1);
    let selector = spec["selector"]["matchLabels"].clone();
    let mut out = Vec::new();
    for template in spec["volumeClaimTemplates"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(tname) = template["metadata"]["name"].as_str() else {
            continue;
        };
        for ordinal in 0..replicas {
            let name = format!("{tname}-{}-{ordinal}", sts.name);
            let Some(snapshot) = ctx.data.get(&name) else {
                continue;
            };
            let mut labels = selector.as_object().cloned().unwrap_or_default();
            if let Some(own) = template["metadata"]["labels"].as_object() {
                labels.extend(own.clone());
            }
            let mut value = json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "labels": labels},
                "spec": template["spec"].clone(),
            });
            if let Some(a) = template["metadata"]["annotations"].as_object() {
                value["metadata"]["annotations"] = json!(a);
            }
            set_source(&mut value, snapshot);
            out.push(Obj {
                group: String::new(),
                kind: "PersistentVolumeClaim".into(),
                name,
                value,
            });
        }
    }
    out
}
