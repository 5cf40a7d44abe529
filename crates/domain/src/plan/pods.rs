//! Pod templates inside workloads: where they are, and what every container of a preview gets
//! (the PR's image when a rule matches, the built-in variables through `envFrom`).

use serde_json::Value;

use super::kinds::{Builtin, Class};
use super::{Obj, env, images, limits};
use sandcastle_crd::{ImageRule, LimitRange};

const TEMPLATE: &[&str] = &["spec", "template"];
const JOB_TEMPLATE: &[&str] = &["spec", "jobTemplate", "spec", "template"];

/// The container lists of a pod spec that a template may hold, in the order pods run them.
pub(crate) const CONTAINER_LISTS: [&str; 3] =
    ["initContainers", "containers", "ephemeralContainers"];

pub(crate) fn get<'v>(value: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

pub(crate) fn get_mut<'v>(value: &'v mut Value, path: &[&str]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |v, key| v.get_mut(key))
}

/// Paths of the pod templates of an object: Deployments, StatefulSets and Jobs have one at
/// `spec.template`, CronJobs at `spec.jobTemplate.spec.template`; an `allowKinds` object has
/// one when either path holds a pod spec with containers (an Argo Rollout, for example).
pub(crate) fn template_paths(obj: &Obj, class: Class) -> Vec<&'static [&'static str]> {
    match class {
        Class::Builtin(Builtin::CronJob) => vec![JOB_TEMPLATE],
        Class::Builtin(b) if b.is_workload() => vec![TEMPLATE],
        Class::Builtin(_) => Vec::new(),
        Class::Extra => [TEMPLATE, JOB_TEMPLATE]
            .into_iter()
            .filter(|p| get(&obj.value, p).is_some_and(|t| t["spec"]["containers"].is_array()))
            .collect(),
    }
}

/// A path as people write it: `spec.jobTemplate.spec.template`.
pub(crate) fn dotted(path: &[&str]) -> String {
    path.join(".")
}

/// Give every container and init container of every pod template the PR's image (when an
/// `images` rule matches), `envFrom` the built-in variables, and a limit where the preview's
/// LimitRange default would fall below its request ([`limits`]).
pub(crate) fn rewrite(
    obj: &mut Obj,
    class: Class,
    tags: &[Option<String>],
    rules: &[ImageRule],
    range: &LimitRange,
) {
    for path in template_paths(obj, class) {
        let Some(spec) = get_mut(&mut obj.value, path).and_then(|t| t.get_mut("spec")) else {
            continue;
        };
        for list in ["initContainers", "containers"] {
            let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
                continue;
            };
            for container in containers {
                images::apply(container, rules, tags);
                env::add_env_from(container);
                limits::fit(container, range);
            }
        }
    }
}
