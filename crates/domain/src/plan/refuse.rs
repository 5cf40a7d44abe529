//! Refusals that depend on an object's content rather than its kind: objects of another
//! namespace (see [`super::namespaces`]), RoleBindings reaching outside the preview, names Sandcastle reserves and hooks it
//! does not know, and workloads whose pod template is not a mapping. Kinds are refused in
//! [`super::kinds`], pods in [`super::security`], Gateway API routes' references in
//! [`super::routes`].
//!
//! A RoleBinding may bind ServiceAccounts of its own namespace (rewritten to the preview's),
//! users and groups, a Role, or one of the built-in ClusterRoles `view`, `edit` and `admin`:
//! those are namespace-scoped when bound by a RoleBinding and exist in every cluster. Any other
//! ClusterRole is refused: it is defined outside the blueprint and may grant anything.

use super::kinds::{Builtin, Class};
use super::manifests::describe;
use super::namespaces::{Source, named};
use super::pods::{dotted, template_paths};
use super::{Obj, Problem};
use crate::guardrails;
use sandcastle_crd::labels;

/// ClusterRoles a RoleBinding of a preview may refer to.
pub(crate) const BINDABLE_CLUSTER_ROLES: [&str; 3] = ["view", "edit", "admin"];

pub(crate) fn check(obj: &Obj, class: Class, namespaces: &Source) -> Vec<Problem> {
    let mut problems = Vec::new();
    let source = namespaces.name.as_deref();
    if let Some(reason) = named(&obj.value).and_then(|ns| namespaces.other(ns)) {
        problems.push(obj.problem("metadata.namespace", reason));
    }
    if guardrails::is_reserved(&obj.group, &obj.kind, &obj.name) {
        problems.push(obj.problem(
            "metadata.name",
            format!(
                "{} is reserved for the {} Sandcastle adds to every preview; rename it",
                obj.name, obj.kind
            ),
        ));
    }
    if let Some(hook) = obj.value["metadata"]["annotations"][labels::HOOK].as_str() {
        let field = format!("metadata.annotations[\"{}\"]", labels::HOOK);
        if class != Class::Builtin(Builtin::Job) {
            problems.push(obj.problem(field, "only Jobs can be hooks"));
        } else if hook != labels::HOOK_SEED && hook != labels::HOOK_PRE_DELETE {
            problems.push(obj.problem(
                field,
                format!(
                    "unknown hook {hook:?}; use {} or {}",
                    labels::HOOK_SEED,
                    labels::HOOK_PRE_DELETE
                ),
            ));
        }
    }
    if class == Class::Builtin(Builtin::RoleBinding) {
        role_binding(obj, source, &mut problems);
    }
    if let Class::Builtin(b) = class
        && b.is_route()
    {
        problems.extend(super::routes::check(obj, source));
    }
    if let Class::Builtin(_) = class {
        problems.extend(template_shape(obj, class));
    }
    problems
}

/// The first part of the way to a workload's pod template (`spec`, `spec.template`, or
/// `spec.jobTemplate…` for a CronJob) that is there but not a mapping: the pods could not be
/// checked or labelled, and the API server would refuse the object anyway.
fn template_shape(obj: &Obj, class: Class) -> Option<Problem> {
    for path in template_paths(obj, class) {
        let mut at = &obj.value;
        for (i, key) in path.iter().enumerate() {
            let Some(next) = at.get(key) else {
                break;
            };
            if !next.is_object() {
                return Some(obj.problem(
                    dotted(&path[..=i]),
                    format!("must be a mapping, found {}", describe(next)),
                ));
            }
            at = next;
        }
    }
    None
}

fn role_binding(obj: &Obj, source: Option<&str>, problems: &mut Vec<Problem>) {
    let subjects = obj.value["subjects"].as_array().into_iter().flatten();
    for (i, subject) in subjects.enumerate() {
        if subject["kind"].as_str() != Some("ServiceAccount") {
            continue;
        }
        let ns = subject["namespace"].as_str().unwrap_or_default();
        if ns.is_empty() || Some(ns) == source {
            continue;
        }
        let name = subject["name"].as_str().unwrap_or_default();
        let reason = match source {
            Some(_) => format!(
                "ServiceAccount {ns}/{name} lives in another namespace; a preview binds only its own ServiceAccounts"
            ),
            None => format!(
                "names namespace {ns}; manifests must leave it empty (the preview's is filled in)"
            ),
        };
        problems.push(obj.problem(format!("subjects[{i}].namespace"), reason));
    }
    let role_ref = &obj.value["roleRef"];
    let name = role_ref["name"].as_str().unwrap_or_default();
    match role_ref["kind"].as_str() {
        Some("Role") => {}
        Some("ClusterRole") if BINDABLE_CLUSTER_ROLES.contains(&name) => {}
        Some("ClusterRole") => problems.push(obj.problem(
            "roleRef",
            format!(
                "ClusterRole {name} is not one of the built-in roles view, edit and admin; bind a Role of the blueprint instead"
            ),
        )),
        other => problems.push(obj.problem(
            "roleRef.kind",
            format!(
                "{} is not Role or ClusterRole",
                other.map_or("nothing".to_owned(), |k| format!("{k:?}"))
            ),
        )),
    }
}
