//! The least Kubernetes access Sandcastle needs, as data: the cluster-wide rules (preview
//! namespaces are made on the fly, so their kinds need a ClusterRole) and the rules in
//! Sandcastle's own namespace (its custom resources and the leader Lease). `sandcastle rbac`
//! writes them into the Helm chart, and the integration tests run Sandcastle as a ServiceAccount
//! bound to exactly these rules, so the chart cannot drift from what the code does.

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::domain::guardrails;

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &[
    "get", "list", "watch", "create", "patch", "update", "delete",
];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(owned(groups)),
        resources: Some(owned(resources)),
        verbs: owned(verbs),
        ..PolicyRule::default()
    }
}

/// What Sandcastle does in every namespace it reads (blueprint sources) or makes (previews).
///
/// - The kinds a preview may hold: read in the source namespace, written in the preview's.
/// - Namespaces: made, labelled and deleted (Sandcastle only ever deletes its own, found by
///   label; Kubernetes RBAC cannot say "only those").
/// - ReplicaSets: written (a blueprint's own ReplicaSets are copied, scaled by idle stop and
///   wake) and read, to say why a Deployment is not ready. Pods and Events: read, to say why a
///   workload is not ready, and Pods to refuse bare ones by name. DaemonSets: read, to refuse
///   them by name. `pods/log` and `events.k8s.io`: held so that Sandcastle may grant them
///   to each preview's `preview-agent` Role.
/// - CustomResourceDefinitions: read, for `/readyz`.
/// - The API: TokenReviews and SubjectAccessReviews created (who calls, and may they), and
///   `serviceaccounts/token` created for ServiceAccounts named `preview-agent` only (the tokens
///   agents get for their preview).
pub fn cluster_rules() -> Vec<PolicyRule> {
    vec![
        rule(&[""], &["namespaces"], WRITE),
        rule(
            &[""],
            &[
                "configmaps",
                "secrets",
                "services",
                "serviceaccounts",
                "persistentvolumeclaims",
                "resourcequotas",
                "limitranges",
            ],
            WRITE,
        ),
        rule(
            &["apps"],
            &["deployments", "statefulsets", "replicasets"],
            WRITE,
        ),
        rule(&["batch"], &["jobs", "cronjobs"], WRITE),
        rule(
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
            WRITE,
        ),
        rule(
            &["rbac.authorization.k8s.io"],
            &["roles", "rolebindings"],
            WRITE,
        ),
        rule(&["autoscaling"], &["horizontalpodautoscalers"], WRITE),
        // The FQDN egress rules of `isolation.egress`, on clusters running Cilium.
        rule(&["cilium.io"], &["ciliumnetworkpolicies"], WRITE),
        rule(&["policy"], &["poddisruptionbudgets"], WRITE),
        rule(&[""], &["pods", "pods/log", "events"], READ),
        rule(&["events.k8s.io"], &["events"], READ),
        rule(&["apps"], &["daemonsets"], READ),
        rule(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            READ,
        ),
        rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
        rule(
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
            &["create"],
        ),
        // Tokens only for `preview-agent` (the name is the same in every preview namespace):
        // without `resourceNames` this would mint a token for any ServiceAccount of the
        // cluster, `kube-system`'s included.
        PolicyRule {
            resource_names: Some(vec![guardrails::PREVIEW_AGENT.to_owned()]),
            ..rule(&[""], &["serviceaccounts/token"], &["create"])
        },
    ]
}

/// Copying a blueprint's Roles and RoleBindings faithfully: a Role may grant what Sandcastle
/// does not hold (`escalate`), and a RoleBinding may name any Role or ClusterRole (`bind`).
/// Together they let Sandcastle give any namespaced permission inside any namespace, so the chart
/// makes them optional (`rbac.copyRoles`); without them, a blueprint Role granting more than the
/// rules above fails its preview with the API server's refusal, naming the Role.
pub fn role_copy_rules() -> Vec<PolicyRule> {
    vec![
        rule(&["rbac.authorization.k8s.io"], &["roles"], &["escalate"]),
        rule(
            &["rbac.authorization.k8s.io"],
            &["roles", "clusterroles"],
            &["bind"],
        ),
    ]
}

/// What Sandcastle does in its own namespace: Blueprints read (their status written), PreviewEnvironments and
/// PreviewCommands written (with their status), the leader Lease, and Events on previews.
pub fn namespace_rules() -> Vec<PolicyRule> {
    vec![
        rule(&["sandcastle.dev"], &["blueprints"], READ),
        // The counts of previews each Blueprint shows (`kubectl get bp`).
        rule(
            &["sandcastle.dev"],
            &["blueprints/status"],
            &["get", "patch", "update"],
        ),
        rule(
            &["sandcastle.dev"],
            &[
                "previewenvironments",
                "previewenvironments/status",
                "previewcommands",
                "previewcommands/status",
            ],
            WRITE,
        ),
        rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "list", "watch", "create", "update", "patch"],
        ),
        rule(
            &["events.k8s.io"],
            &["events"],
            &["get", "list", "watch", "create", "patch"],
        ),
    ]
}

/// The rules as the YAML the Helm chart reads (`charts/sandcastle/files/rbac.yaml`).
pub fn rules_yaml() -> anyhow::Result<String> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Rules {
        cluster: Vec<PolicyRule>,
        copy_roles: Vec<PolicyRule>,
        namespace: Vec<PolicyRule>,
    }
    let rules = Rules {
        cluster: cluster_rules(),
        copy_roles: role_copy_rules(),
        namespace: namespace_rules(),
    };
    Ok(format!(
        "# Generated by `sandcastle rbac`; do not edit. The chart's RBAC templates read it.\n{}",
        serde_saphyr::to_string(&rules)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
        rules.iter().any(|r| {
            r.api_groups
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|g| g == group)
                && r.resources
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .any(|x| x == resource)
                && r.verbs.iter().any(|v| v == verb)
        })
    }

    #[test]
    fn every_kind_sandcastle_applies_is_writable_and_daemonsets_only_readable() {
        let rules = cluster_rules();
        for ar in crate::k8s::apply::builtin_resources() {
            if ar.kind == "DaemonSet" {
                assert!(grants(&rules, &ar.group, &ar.plural, "list"));
                assert!(!grants(&rules, &ar.group, &ar.plural, "create"));
                continue;
            }
            for verb in ["get", "list", "create", "patch", "delete"] {
                assert!(
                    grants(&rules, &ar.group, &ar.plural, verb),
                    "{verb} {}/{} missing",
                    ar.group,
                    ar.plural
                );
            }
        }
    }

    #[test]
    fn nothing_cluster_scoped_is_written_but_namespaces() {
        let rules = cluster_rules();
        for resource in [
            "clusterroles",
            "clusterrolebindings",
            "nodes",
            "customresourcedefinitions",
        ] {
            for group in ["", "rbac.authorization.k8s.io", "apiextensions.k8s.io"] {
                assert!(
                    !grants(&rules, group, resource, "create"),
                    "{group}/{resource}"
                );
            }
        }
        assert!(!grants(
            &cluster_rules(),
            "rbac.authorization.k8s.io",
            "roles",
            "escalate"
        ));
    }

    #[test]
    fn the_chart_file_lists_all_three_sets() {
        let yaml = rules_yaml().unwrap();
        for key in ["cluster:", "copyRoles:", "namespace:"] {
            assert!(yaml.contains(&format!("\n{key}")), "{key} in {yaml}");
        }
    }
}
