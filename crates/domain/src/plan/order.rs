//! Apply order: objects sorted into phases, within a phase by a fixed kind order then by name,
//! so that the same input gives the same plan whatever order it came in. Also the plan's text
//! form for people (`sandcastle render`).

use std::fmt::Write as _;

use serde_json::Value;

use super::kinds::{Builtin, Class};
use super::{LeftOut, Obj, Plan, Stage, Step};
use sandcastle_crd::labels;

/// Where an object goes: a phase, or the pre-delete hooks.
fn destination(obj: &Obj, class: Class) -> Option<Stage> {
    match class {
        Class::Builtin(Builtin::Job) => {
            match obj.value["metadata"]["annotations"][labels::HOOK].as_str() {
                Some(labels::HOOK_SEED) => Some(Stage::Seed),
                Some(labels::HOOK_PRE_DELETE) => None,
                _ => Some(Stage::Apps),
            }
        }
        Class::Builtin(b) => Some(b.stage()),
        Class::Extra => Some(Stage::Apps),
    }
}

pub(crate) fn assemble(
    objects: Vec<(Class, Obj)>,
    url: Option<String>,
    left_out: Vec<LeftOut>,
) -> Plan {
    let mut placed: Vec<(Option<Stage>, Class, String, String, String, Value)> = objects
        .into_iter()
        .map(|(class, obj)| {
            (
                destination(&obj, class),
                class,
                obj.group,
                obj.kind,
                obj.name,
                obj.value,
            )
        })
        .collect();
    placed.sort_by(|a, b| (a.0, a.1, &a.2, &a.3, &a.4).cmp(&(b.0, b.1, &b.2, &b.3, &b.4)));
    let mut steps: Vec<Step> = Vec::new();
    let mut pre_delete = Vec::new();
    for (phase, _, _, _, _, value) in placed {
        let Some(phase) = phase else {
            pre_delete.push(value);
            continue;
        };
        match steps.last_mut() {
            Some(step) if step.stage == phase => step.objects.push(value),
            _ => steps.push(Step {
                stage: phase,
                objects: vec![value],
            }),
        }
    }
    Plan {
        steps,
        pre_delete,
        url,
        left_out,
    }
}

pub(crate) fn to_yaml(plan: &Plan) -> Result<String, serde_saphyr::SerializeError> {
    let mut out = String::new();
    let count = plan.objects().count();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "# {count} objects in {} phases", plan.steps.len());
    let _ = writeln!(out, "# url: {}", plan.url.as_deref().unwrap_or("none"));
    if !plan.left_out.is_empty() {
        let _ = writeln!(out, "# left out:");
        for l in &plan.left_out {
            let _ = writeln!(out, "#   {} {}: {}", l.kind, l.name, l.reason);
        }
    }
    for step in &plan.steps {
        for (i, object) in step.objects.iter().enumerate() {
            out.push_str("---\n");
            if i == 0 {
                let _ = writeln!(out, "# phase: {}", step.stage);
            }
            out.push_str(&serde_saphyr::to_string(object)?);
        }
    }
    for (i, object) in plan.pre_delete.iter().enumerate() {
        out.push_str("---\n");
        if i == 0 {
            out.push_str("# pre-delete hooks: run before the preview is torn down\n");
        }
        out.push_str(&serde_saphyr::to_string(object)?);
    }
    Ok(out)
}
