//! Helm's hooks in a preview, which is not a Helm release: a chart's `pre-install` Jobs (its
//! migrations and seeds) run in the seed phase and its `pre-delete` Jobs before teardown, as
//! Sandcastle's own `sandcastle.dev/hook` would have them; other objects of those hooks (the
//! ServiceAccount a migration runs as) are copied like any object; every other hook (`test`,
//! `post-install`, upgrades, rollbacks) and any hook Pod is left out, with the reason.

use super::Obj;
use sandcastle_crd::labels;

/// The hooks an object names (`helm.sh/hook: pre-install,pre-upgrade`), if any.
fn hooks(obj: &Obj) -> Option<Vec<&str>> {
    let text = obj.value["metadata"]["annotations"][labels::HELM_HOOK].as_str()?;
    Some(
        text.split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .collect(),
    )
}

fn is_job(obj: &Obj) -> bool {
    obj.group == "batch" && obj.kind == "Job"
}

/// Give a hook Job the `sandcastle.dev/hook` its Helm hook means, unless it has one.
pub(crate) fn translate(obj: &mut Obj) {
    if !is_job(obj) {
        return;
    }
    let Some(hooks) = hooks(obj) else { return };
    let ours = if hooks.contains(&"pre-install") {
        labels::HOOK_SEED
    } else if hooks.contains(&"pre-delete") {
        labels::HOOK_PRE_DELETE
    } else {
        return;
    };
    let annotations = &mut obj.value["metadata"]["annotations"];
    if annotations.get(labels::HOOK).is_none() {
        annotations[labels::HOOK] = ours.into();
    }
}

/// Why a Helm hook object is left out of the preview, when it is.
pub(crate) fn left_out(obj: &Obj) -> Option<String> {
    let hooks = hooks(obj)?;
    let all = hooks.join(",");
    if obj.group.is_empty() && obj.kind == "Pod" {
        return Some(format!(
            "a Helm hook ({}: {all}): Helm runs it, a preview does not",
            labels::HELM_HOOK
        ));
    }
    if hooks.contains(&"pre-install") || hooks.contains(&"pre-delete") {
        return None;
    }
    Some(format!(
        "a Helm hook ({}: {all}): a preview runs a chart's pre-install hooks (Jobs in the seed \
         phase) and pre-delete Jobs, not others",
        labels::HELM_HOOK
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(kind: &str, hook: &str) -> Obj {
        let group = if kind == "Job" { "batch" } else { "" };
        Obj {
            group: group.into(),
            kind: kind.into(),
            name: "x".into(),
            value: json!({"metadata": {"name": "x", "annotations": {"helm.sh/hook": hook}}}),
        }
    }

    #[test]
    fn pre_install_jobs_seed_and_pre_delete_jobs_run_before_teardown() {
        let mut migrate = obj("Job", "pre-install,pre-upgrade");
        translate(&mut migrate);
        assert_eq!(
            migrate.value["metadata"]["annotations"][labels::HOOK],
            "seed"
        );
        assert_eq!(left_out(&migrate), None);
        let mut backup = obj("Job", "pre-delete");
        translate(&mut backup);
        assert_eq!(
            backup.value["metadata"]["annotations"][labels::HOOK],
            "pre-delete"
        );
        let mut account = obj("ServiceAccount", "pre-install");
        translate(&mut account);
        assert_eq!(
            account.value["metadata"]["annotations"].get(labels::HOOK),
            None
        );
        assert_eq!(left_out(&account), None);
    }

    #[test]
    fn other_hooks_and_hook_pods_are_left_out_with_the_reason() {
        let mut notify = obj("Job", "post-install");
        translate(&mut notify);
        assert_eq!(
            notify.value["metadata"]["annotations"].get(labels::HOOK),
            None
        );
        assert_eq!(
            left_out(&notify).unwrap(),
            "a Helm hook (helm.sh/hook: post-install): a preview runs a chart's pre-install hooks \
             (Jobs in the seed phase) and pre-delete Jobs, not others"
        );
        assert_eq!(
            left_out(&obj("Pod", "test-success")).unwrap(),
            "a Helm hook (helm.sh/hook: test-success): Helm runs it, a preview does not"
        );
        let plain = Obj {
            group: String::new(),
            kind: "ConfigMap".into(),
            name: "c".into(),
            value: json!({"metadata": {"name": "c"}}),
        };
        assert_eq!(left_out(&plain), None);
    }
}
