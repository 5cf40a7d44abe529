//! Whether a plan runs anything. A preview of only ConfigMaps, Secrets and Services would be
//! Ready at once and serve nothing, and the pull request would hear "success" for it: such a
//! Blueprint is refused instead, with what was read and what was left out, so that its author
//! can see why (a source namespace that is not the one meant, every workload skipped, a
//! controller's objects where its workload was expected).

use super::kinds::{Builtin, Class};
use super::{LeftOut, Obj, PreviewContext, Problem};
use sandcastle_crd::BlueprintSpec;
use sandcastle_crd::labels;

/// Kinds that run pods; `LeftOut` entries of these kinds are named in the refusal.
const WORKLOAD_KINDS: [&str; 6] = [
    "Deployment",
    "StatefulSet",
    "ReplicaSet",
    "Job",
    "CronJob",
    "DaemonSet",
];

fn is_pre_delete(obj: &Obj) -> bool {
    obj.value["metadata"]["annotations"][labels::HOOK].as_str() == Some(labels::HOOK_PRE_DELETE)
}

/// The Blueprint's problem when nothing of `kept` runs in the preview: no workload and no
/// `allowKinds` object (whose meaning Sandcastle does not know), pre-delete hooks aside (they
/// run only at teardown). `read` is how many objects the source gave.
pub(crate) fn check(
    kept: &[(Class, Obj)],
    left_out: &[LeftOut],
    read: usize,
    blueprint: &BlueprintSpec,
    ctx: &PreviewContext,
) -> Option<Problem> {
    let runs = |(class, obj): &&(Class, Obj)| match class {
        Class::Extra => true,
        Class::Builtin(Builtin::Job) => !is_pre_delete(obj),
        Class::Builtin(b) => b.is_workload(),
    };
    if kept.iter().any(|k| runs(&k)) {
        return None;
    }
    let kinds = if blueprint.allow_kinds.is_empty() {
        "Deployment, StatefulSet, ReplicaSet, Job or CronJob"
    } else {
        "Deployment, StatefulSet, ReplicaSet, Job, CronJob or object of spec.allowKinds"
    };
    let mut notes = Vec::new();
    let mut left: Vec<&LeftOut> = left_out
        .iter()
        .filter(|l| WORKLOAD_KINDS.contains(&l.kind.as_str()))
        .collect();
    left.sort();
    if !left.is_empty() {
        let names: Vec<String> = left
            .iter()
            .map(|l| format!("{} {} ({})", l.kind, l.name, l.reason))
            .collect();
        notes.push(format!("left out: {}", names.join(", ")));
    }
    let mut hooks: Vec<&str> = kept
        .iter()
        .filter(|(class, obj)| *class == Class::Builtin(Builtin::Job) && is_pre_delete(obj))
        .map(|(_, obj)| obj.name.as_str())
        .collect();
    hooks.sort_unstable();
    if !hooks.is_empty() {
        let names: Vec<String> = hooks.iter().map(|n| format!("Job {n}")).collect();
        notes.push(format!(
            "pre-delete hooks, run only at teardown: {}",
            names.join(", ")
        ));
    }
    let to_copy = if notes.is_empty() { "" } else { " to copy" };
    let mut reason =
        format!("nothing to run: the source has no {kinds}{to_copy} ({read} objects read)");
    for note in notes {
        reason.push_str("; ");
        reason.push_str(&note);
    }
    Some(Problem::field(
        "Blueprint",
        &ctx.blueprint,
        "spec.source",
        reason,
    ))
}
