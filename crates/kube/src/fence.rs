//! The fence on preview tokens, as data: a ValidatingAdmissionPolicy (Kubernetes >= 1.30) that
//! lets a preview's `preview-agent` account change a Deployment only the way `kubectl rollout
//! restart` does — the `kubectl.kubernetes.io/restartedAt` annotation of its pod template — so
//! that the `patch deployments` its Role holds for restarts cannot run another image or mount
//! the namespace's Secrets. RBAC cannot say "only this field"; the chart (`rbac.fence`) and a
//! target cluster's `target-cluster.yaml` install it, both written from here by `sandcastle rbac`.

use serde_json::{Value, json};

use sandcastle_domain::guardrails::PREVIEW_AGENT;

/// The one annotation a preview token may change on a Deployment.
pub const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";

/// The start of the message a refused write gets (tests look for it).
pub const REFUSAL: &str = "a preview's token may only restart its Deployments";

/// Fields of a Deployment a restart leaves as they are, compared before and after the write
/// (optional fields through CEL's optional syntax, absent on both sides being equal).
const UNCHANGED: [&str; 13] = [
    "object.metadata.?labels.orValue({}) == oldObject.metadata.?labels.orValue({})",
    "object.metadata.?annotations.orValue({}) == oldObject.metadata.?annotations.orValue({})",
    "object.metadata.?finalizers.orValue([]) == oldObject.metadata.?finalizers.orValue([])",
    "object.metadata.?ownerReferences.orValue([]) == oldObject.metadata.?ownerReferences.orValue([])",
    "object.spec.?replicas == oldObject.spec.?replicas",
    "object.spec.selector == oldObject.spec.selector",
    "object.spec.?strategy == oldObject.spec.?strategy",
    "object.spec.?minReadySeconds == oldObject.spec.?minReadySeconds",
    "object.spec.?revisionHistoryLimit == oldObject.spec.?revisionHistoryLimit",
    "object.spec.?paused == oldObject.spec.?paused",
    "object.spec.?progressDeadlineSeconds == oldObject.spec.?progressDeadlineSeconds",
    "object.spec.template.spec == oldObject.spec.template.spec",
    "object.spec.template.metadata.?labels.orValue({}) == oldObject.spec.template.metadata.?labels.orValue({})",
];

/// The policy's `spec`: Deployment updates by any namespace's `preview-agent` account, in
/// namespaces labelled as Sandcastle's, may change nothing but the restart annotation.
pub fn preview_agent_policy_spec() -> Value {
    let annotations_kept = format!(
        "variables.after.all(k, k == '{RESTARTED_AT}' || (k in variables.before && variables.before[k] == variables.after[k])) \
         && variables.before.all(k, k == '{RESTARTED_AT}' || k in variables.after)"
    );
    let mut checks: Vec<String> = UNCHANGED.iter().map(|c| (*c).to_owned()).collect();
    checks.push(annotations_kept);
    json!({
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["*"], "resources": ["deployments"], "operations": ["UPDATE"]}],
            "namespaceSelector": {"matchLabels": {"app.kubernetes.io/managed-by": "sandcastle"}},
        },
        "matchConditions": [{
            "name": "preview-agent",
            "expression": format!(
                "request.userInfo.username.startsWith('system:serviceaccount:') && request.userInfo.username.endsWith(':{PREVIEW_AGENT}')"
            ),
        }],
        "variables": [
            {"name": "after", "expression": "object.spec.template.metadata.?annotations.orValue({})"},
            {"name": "before", "expression": "oldObject.spec.template.metadata.?annotations.orValue({})"},
        ],
        "validations": [{
            "expression": checks.join(" && "),
            "message": format!(
                "{REFUSAL} (kubectl rollout restart: the pod template's {RESTARTED_AT} annotation); ask Sandcastle to redeploy to change what runs"
            ),
            "reason": "Forbidden",
        }],
    })
}

/// The policy and its binding as objects named `name` (labels `labels`).
pub fn preview_agent_fence(name: &str, labels: &Value) -> [Value; 2] {
    [
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name, "labels": labels},
            "spec": preview_agent_policy_spec(),
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name, "labels": labels},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_binds_the_preview_agent_accounts_deployment_updates_only() {
        let spec = preview_agent_policy_spec();
        assert_eq!(
            spec["matchConstraints"]["resourceRules"],
            json!([{"apiGroups": ["apps"], "apiVersions": ["*"], "resources": ["deployments"], "operations": ["UPDATE"]}])
        );
        let condition = spec["matchConditions"][0]["expression"].as_str().unwrap();
        assert!(condition.contains("':preview-agent'"), "{condition}");
        let check = spec["validations"][0]["expression"].as_str().unwrap();
        assert!(check.contains("object.spec.template.spec == oldObject.spec.template.spec"));
        assert!(check.contains(RESTARTED_AT));
    }
}
