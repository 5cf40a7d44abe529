//! Which objects a preview gets: everything of a copied kind except what controllers create,
//! what Kubernetes or Helm keep for themselves, what the Blueprint skips and the Secrets its
//! policy keeps back.
//!
//! Skipping a workload (`spec.skip`) also leaves out what exists only for it: a
//! HorizontalPodAutoscaler scaling it, and a Service or PodDisruptionBudget whose selector
//! matches pods of skipped workloads only. A selector that matches nothing in the blueprint is
//! kept (it may select pods the user creates later).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::Obj;
use super::kinds::{self, Builtin, Class, KindRule};
use crate::guardrails;
use sandcastle_crd::labels;
use sandcastle_crd::{BlueprintSpec, SecretsMode};

/// What happens to one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Copy(Class),
    LeaveOut(String),
    Refuse(String),
}

/// A workload of the blueprint and the labels of the pods it runs.
#[derive(Debug)]
struct Workload {
    kind: String,
    name: String,
    pod_labels: BTreeMap<String, String>,
    skipped: bool,
}

/// Facts about the whole input that decisions about one object need.
#[derive(Debug, Default)]
pub(crate) struct Index {
    skip: BTreeSet<String>,
    /// StatefulSets and the names of their claim templates.
    statefulsets: Vec<(String, Vec<String>)>,
    workloads: Vec<Workload>,
}

/// Kinds whose objects `spec.skip` names. DaemonSets are included: skipping one is how a
/// blueprint with a node agent in its namespace becomes usable.
const SKIPPABLE: [(&str, &str); 6] = [
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "ReplicaSet"),
    ("apps", "DaemonSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
];

fn skippable(obj: &Obj) -> bool {
    SKIPPABLE
        .iter()
        .any(|(g, k)| *g == obj.group && *k == obj.kind)
}

impl Index {
    pub(crate) fn new(objects: &[Obj], blueprint: &BlueprintSpec) -> Self {
        let skip: BTreeSet<String> = blueprint.skip.iter().cloned().collect();
        let mut index = Index {
            skip,
            ..Index::default()
        };
        for obj in objects {
            if obj.group == "apps" && obj.kind == "StatefulSet" {
                let templates = obj.value["spec"]["volumeClaimTemplates"]
                    .as_array()
                    .map(|vcts| {
                        vcts.iter()
                            .filter_map(|t| t["metadata"]["name"].as_str())
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                index.statefulsets.push((obj.name.clone(), templates));
            }
            let made_by_controller = controller_owner(&obj.value).is_some()
                || owner_of_kind(&obj.value, "CronJob").is_some();
            if skippable(obj) && !made_by_controller {
                let template = if obj.kind == "CronJob" {
                    &obj.value["spec"]["jobTemplate"]["spec"]["template"]
                } else {
                    &obj.value["spec"]["template"]
                };
                index.workloads.push(Workload {
                    kind: obj.kind.clone(),
                    name: obj.name.clone(),
                    pod_labels: string_map(&template["metadata"]["labels"]),
                    skipped: index.skip.contains(&obj.name),
                });
            }
        }
        // Reasons name workloads and StatefulSets: keep them in a fixed order, whatever the
        // order of the input.
        index.statefulsets.sort();
        index
            .workloads
            .sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
        index
    }
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

fn owner_references(value: &Value) -> impl Iterator<Item = &Value> {
    value["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
}

/// The owner reference with `controller: true`.
fn controller_ref(value: &Value) -> Option<&Value> {
    owner_references(value).find(|o| o["controller"].as_bool() == Some(true))
}

/// The owner with `controller: true`, as `Kind name`.
fn controller_owner(value: &Value) -> Option<String> {
    controller_ref(value).map(|o| {
        format!(
            "{} {}",
            o["kind"].as_str().unwrap_or("object"),
            o["name"].as_str().unwrap_or("?")
        )
    })
}

fn owner_of_kind<'v>(value: &'v Value, kind: &str) -> Option<&'v str> {
    owner_references(value)
        .find(|o| o["kind"].as_str() == Some(kind))
        .map(|o| o["name"].as_str().unwrap_or("?"))
}

/// Whether this is one of the objects Sandcastle itself adds to every preview (when a preview
/// namespace is used as a blueprint).
fn is_sandcastle_own(obj: &Obj) -> bool {
    guardrails::is_reserved(&obj.group, &obj.kind, &obj.name)
        && obj.value["metadata"]["labels"][labels::MANAGED_BY].as_str() == Some(labels::MANAGER)
}

pub(crate) fn decide(obj: &Obj, index: &Index, blueprint: &BlueprintSpec) -> Decision {
    let rule = kinds::rule(&obj.group, &obj.kind, &blueprint.allow_kinds);
    if let KindRule::Controller(why) = rule {
        return Decision::LeaveOut(why.to_owned());
    }
    if is_sandcastle_own(obj) {
        return Decision::LeaveOut("added by Sandcastle; every preview gets its own".to_owned());
    }
    if let Some(owner) = controller_ref(&obj.value).and_then(|o| o["kind"].as_str())
        && let Some(why) = kinds::made_by_controller(&obj.group, &obj.kind, owner)
    {
        return Decision::LeaveOut(why.to_owned());
    }
    if let Some(why) = created_by_owner(obj, index) {
        return Decision::LeaveOut(why);
    }
    if let Some(why) = super::helm::left_out(obj) {
        return Decision::LeaveOut(why);
    }
    if skippable(obj) && index.skip.contains(&obj.name) {
        return Decision::LeaveOut("named in spec.skip".to_owned());
    }
    match rule {
        KindRule::Controller(why) | KindRule::Guardrail(why) | KindRule::LeaveOut(why) => {
            Decision::LeaveOut(why.to_owned())
        }
        KindRule::Refuse(why) => Decision::Refuse(why),
        KindRule::Copy(Class::Extra) => Decision::Copy(Class::Extra),
        KindRule::Copy(Class::Builtin(b)) => match left_out_builtin(obj, b, index, blueprint) {
            Some(why) => Decision::LeaveOut(why),
            None => Decision::Copy(Class::Builtin(b)),
        },
    }
}

/// Objects a controller made from another object: the copy of that object makes its own.
fn created_by_owner(obj: &Obj, index: &Index) -> Option<String> {
    if obj.group == "batch"
        && obj.kind == "Job"
        && let Some(cron) = owner_of_kind(&obj.value, "CronJob")
    {
        return Some(format!("created by CronJob {cron}"));
    }
    if obj.group.is_empty() && obj.kind == "PersistentVolumeClaim" {
        if let Some(sts) = owner_of_kind(&obj.value, "StatefulSet") {
            return Some(format!(
                "created by StatefulSet {sts} from its volumeClaimTemplates"
            ));
        }
        if let Some(sts) = claim_of_statefulset(&obj.name, index) {
            return Some(format!(
                "created by StatefulSet {sts} from its volumeClaimTemplates"
            ));
        }
    }
    controller_owner(&obj.value).map(|owner| format!("owned by {owner}"))
}

/// The StatefulSet whose claim template `<template>-<statefulset>-<ordinal>` names this claim.
fn claim_of_statefulset<'i>(claim: &str, index: &'i Index) -> Option<&'i str> {
    index.statefulsets.iter().find_map(|(sts, templates)| {
        templates.iter().find_map(|t| {
            let ordinal = claim.strip_prefix(t.as_str())?.strip_prefix('-')?;
            let ordinal = ordinal.strip_prefix(sts.as_str())?.strip_prefix('-')?;
            (!ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit()))
                .then_some(sts.as_str())
        })
    })
}

fn left_out_builtin(
    obj: &Obj,
    kind: Builtin,
    index: &Index,
    blueprint: &BlueprintSpec,
) -> Option<String> {
    let spec = &obj.value["spec"];
    match kind {
        Builtin::ConfigMap if obj.name == "kube-root-ca.crt" => {
            Some("published by Kubernetes in every namespace".to_owned())
        }
        Builtin::ServiceAccount if obj.name == "default" => Some(
            "every namespace has its own default ServiceAccount (Sandcastle sets it up)".to_owned(),
        ),
        Builtin::Secret => secret_left_out(obj, blueprint),
        Builtin::HorizontalPodAutoscaler => {
            let target = &spec["scaleTargetRef"];
            let name = target["name"].as_str()?;
            let kind = target["kind"].as_str()?;
            index
                .workloads
                .iter()
                .any(|w| w.skipped && w.kind == kind && w.name == name)
                .then(|| format!("scales {kind} {name}, which is skipped"))
        }
        Builtin::Service => {
            let selector = string_map(&spec["selector"]);
            if selector.is_empty() {
                return None;
            }
            only_skipped(index, |labels| {
                selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
        }
        Builtin::PodDisruptionBudget => {
            let selector = &spec["selector"];
            only_skipped(index, |labels| selector_matches(selector, labels))
        }
        _ => None,
    }
}

/// "selects only pods of skipped workloads" when every workload whose pods match is skipped
/// (and at least one matches).
fn only_skipped(
    index: &Index,
    matches: impl Fn(&BTreeMap<String, String>) -> bool,
) -> Option<String> {
    let matched: Vec<&Workload> = index
        .workloads
        .iter()
        .filter(|w| matches(&w.pod_labels))
        .collect();
    if matched.is_empty() || matched.iter().any(|w| !w.skipped) {
        return None;
    }
    let names: Vec<String> = matched
        .iter()
        .map(|w| format!("{} {}", w.kind, w.name))
        .collect();
    Some(format!(
        "selects only pods of skipped workloads ({})",
        names.join(", ")
    ))
}

/// Whether a `LabelSelector` (matchLabels and matchExpressions) matches `labels`. A missing
/// selector matches nothing; an empty one matches everything.
pub(crate) fn selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    if !selector.is_object() {
        return false;
    }
    let match_labels = string_map(&selector["matchLabels"]);
    if !match_labels.iter().all(|(k, v)| labels.get(k) == Some(v)) {
        return false;
    }
    let expressions = selector["matchExpressions"].as_array();
    expressions.into_iter().flatten().all(|e| {
        let Some(key) = e["key"].as_str() else {
            return false;
        };
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let value = labels.get(key).map(String::as_str);
        match e["operator"].as_str() {
            Some("In") => value.is_some_and(|v| values.contains(&v)),
            Some("NotIn") => value.is_none_or(|v| !values.contains(&v)),
            Some("Exists") => value.is_some(),
            Some("DoesNotExist") => value.is_none(),
            _ => false,
        }
    })
}

/// Secret types the `copy` policy copies.
const COPIED_SECRET_TYPES: [&str; 3] = [
    "Opaque",
    "kubernetes.io/dockerconfigjson",
    "kubernetes.io/dockercfg",
];

fn secret_left_out(obj: &Obj, blueprint: &BlueprintSpec) -> Option<String> {
    let kind = obj.value["type"].as_str().unwrap_or("Opaque");
    match kind {
        "kubernetes.io/service-account-token" => {
            return Some(
                "ServiceAccount token: Kubernetes issues tokens in each namespace".to_owned(),
            );
        }
        "helm.sh/release.v1" => {
            return Some("Helm release record: the preview is not a Helm release".to_owned());
        }
        _ => {}
    }
    let policy = &blueprint.secrets;
    match policy.mode {
        SecretsMode::None => Some("spec.secrets.mode is none".to_owned()),
        SecretsMode::Copy if !COPIED_SECRET_TYPES.contains(&kind) => Some(format!(
            "type {kind} is not copied by spec.secrets.mode copy (only Opaque and image pull Secrets)"
        )),
        SecretsMode::Copy => None,
        SecretsMode::Allowlist if policy.allowlist.contains(&obj.name) => None,
        SecretsMode::Allowlist => Some("not in spec.secrets.allowlist".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn label_selectors_match_like_kubernetes() {
        let pod = labels(&[("app", "web"), ("tier", "front")]);
        let table = [
            (json!({}), true),
            (Value::Null, false),
            (json!({"matchLabels": {"app": "web"}}), true),
            (json!({"matchLabels": {"app": "db"}}), false),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "x"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "Bogus"}]}),
                false,
            ),
        ];
        for (selector, want) in table {
            assert_eq!(selector_matches(&selector, &pod), want, "{selector}");
        }
    }

    #[test]
    fn reasons_do_not_depend_on_input_order() {
        let workload = |name: &str| Obj {
            group: "apps".to_owned(),
            kind: "Deployment".to_owned(),
            name: name.to_owned(),
            value: json!({"spec": {"template": {"metadata": {"labels": {"tier": "web"}}}}}),
        };
        let service = Obj {
            group: String::new(),
            kind: "Service".to_owned(),
            name: "web".to_owned(),
            value: json!({"spec": {"selector": {"tier": "web"}}}),
        };
        let bp: BlueprintSpec = serde_saphyr::from_str(
            "source: {namespace: s}\nrepositories: [acme/shop]\nskip: [a, b]\n",
        )
        .unwrap();
        let want = Decision::LeaveOut(
            "selects only pods of skipped workloads (Deployment a, Deployment b)".to_owned(),
        );
        for objects in [
            vec![workload("a"), workload("b")],
            vec![workload("b"), workload("a")],
        ] {
            let index = Index::new(&objects, &bp);
            assert_eq!(decide(&service, &index, &bp), want);
        }
    }

    #[test]
    fn statefulset_claims_are_recognised_by_name() {
        let index = Index {
            statefulsets: vec![("db".to_owned(), vec!["data".to_owned()])],
            ..Index::default()
        };
        assert_eq!(claim_of_statefulset("data-db-0", &index), Some("db"));
        assert_eq!(claim_of_statefulset("data-db-12", &index), Some("db"));
        assert_eq!(claim_of_statefulset("data-db", &index), None);
        assert_eq!(claim_of_statefulset("data-db-x", &index), None);
        assert_eq!(claim_of_statefulset("data-dbx-0", &index), None);
        assert_eq!(claim_of_statefulset("uploads", &index), None);
    }
}
