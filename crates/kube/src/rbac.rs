//! The least Kubernetes access Sandcastle needs, as data: the cluster-wide rules (preview
//! namespaces are made on the fly, so their kinds need a ClusterRole), the rules in
//! Sandcastle's own namespace (its custom resources and the leader Lease), and what the
//! credentials of other clusters need (a target's, a source's), each permission by name so that
//! a cluster lacking one is told which. `sandcastle rbac`
//! writes them into the Helm chart, and the integration tests run Sandcastle as a ServiceAccount
//! bound to exactly these rules, so the chart cannot drift from what the code does.

use k8s_openapi::api::rbac::v1::PolicyRule;

use sandcastle_domain::guardrails;

const READ: &[&str] = &["get", "list", "watch"];
/// The Gateway API's group (HTTPRoutes, GRPCRoutes, Gateways, ReferenceGrants).
const GATEWAY_API: &str = "gateway.networking.k8s.io";
/// CSI volume snapshots' group (VolumeSnapshots, VolumeSnapshotContents).
const SNAPSHOTS: &str = "snapshot.storage.k8s.io";
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
/// - The Gateway API's routes (HTTPRoutes, GRPCRoutes): read in sources, written in previews;
///   Gateways and ReferenceGrants read in sources (to refuse and to leave out by name). Where the
///   Gateway API is not installed these rules name nothing.
/// - VolumeSnapshots: taken of a Blueprint's claims in its source namespace (`spec.data`), made
///   in previews to restore them. VolumeSnapshotContents (cluster-scoped): made to bind a
///   preview's VolumeSnapshot to the source's snapshot, always retained, and deleted with the
///   preview; Kubernetes RBAC cannot say "only those".
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
        // The gate in front of `signedIn` previews, on clusters running Traefik.
        rule(&["traefik.io"], &["middlewares"], WRITE),
        rule(&["policy"], &["poddisruptionbudgets"], WRITE),
        // Snapshots of a Blueprint's data (`spec.data`), and their restores into previews.
        rule(
            &[SNAPSHOTS],
            &["volumesnapshots", "volumesnapshotcontents"],
            WRITE,
        ),
        rule(&[GATEWAY_API], &["httproutes", "grpcroutes"], WRITE),
        rule(&[GATEWAY_API], &["gateways", "referencegrants"], READ),
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

/// What a target cluster's credentials need (a cluster previews are placed in, registered with
/// a Secret): [`cluster_rules`] but for what only Sandcastle's own cluster serves — reading the
/// CustomResourceDefinitions (for `/readyz`) and reviewing callers' access (SubjectAccessReviews
/// are asked of Sandcastle's cluster, where the PreviewEnvironments are). TokenReviews stay: a
/// token minted for a preview there is checked there.
pub fn target_rules() -> Vec<PolicyRule> {
    cluster_rules()
        .into_iter()
        .filter(|r| {
            let resources = r.resources.as_deref().unwrap_or_default();
            !resources
                .iter()
                .any(|x| x == "customresourcedefinitions" || x == "subjectaccessreviews")
        })
        .collect()
}

/// What reading a Blueprint's source namespace in another cluster needs: the namespace, and
/// every kind a source may hold (read only).
pub fn source_rules() -> Vec<PolicyRule> {
    vec![
        rule(&[""], &["namespaces"], &["get"]),
        rule(
            &[""],
            &[
                "configmaps",
                "secrets",
                "services",
                "serviceaccounts",
                "persistentvolumeclaims",
                "pods",
            ],
            READ,
        ),
        rule(
            &["apps"],
            &["deployments", "statefulsets", "replicasets", "daemonsets"],
            READ,
        ),
        rule(&["batch"], &["jobs", "cronjobs"], READ),
        rule(
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
            READ,
        ),
        rule(
            &["rbac.authorization.k8s.io"],
            &["roles", "rolebindings"],
            READ,
        ),
        rule(&["autoscaling"], &["horizontalpodautoscalers"], READ),
        rule(&["policy"], &["poddisruptionbudgets"], READ),
        rule(
            &[GATEWAY_API],
            &["httproutes", "grpcroutes", "gateways", "referencegrants"],
            READ,
        ),
    ]
}

/// One permission, as a SelfSubjectAccessReview asks about it (cluster-wide).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Permission {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub name: Option<String>,
}

impl std::fmt::Display for Permission {
    /// As `kubectl auth can-i` takes it: `create networkpolicies.networking.k8s.io`,
    /// `create serviceaccounts/token preview-agent`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if let Some(sub) = &self.subresource {
            write!(f, "/{sub}")?;
        }
        if let Some(name) = &self.name {
            write!(f, " {name}")?;
        }
        Ok(())
    }
}

/// Every single permission `rules` grant (a rule's groups × resources × verbs × names).
pub fn permissions(rules: &[PolicyRule]) -> Vec<Permission> {
    let mut out = Vec::new();
    for r in rules {
        let names: Vec<Option<String>> = match r.resource_names.as_deref() {
            Some(n) if !n.is_empty() => n.iter().cloned().map(Some).collect(),
            _ => vec![None],
        };
        for group in r.api_groups.as_deref().unwrap_or_default() {
            for resource in r.resources.as_deref().unwrap_or_default() {
                let (resource, subresource) = match resource.split_once('/') {
                    Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
                    None => (resource.clone(), None),
                };
                for verb in &r.verbs {
                    for name in &names {
                        out.push(Permission {
                            verb: verb.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            subresource: subresource.clone(),
                            name: name.clone(),
                        });
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
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

/// What Sandcastle does in its own namespace: Blueprints read (their status written, and patched
/// for one thing: the `data-refresh` annotation a refresh of their data snapshot asks with,
/// through the API or MCP), PreviewEnvironments and
/// PreviewCommands written (with their status), the leader Lease, Events on previews, and the
/// ReferenceGrants that let stopped previews' HTTPRoutes reach the wake route Service
/// (`--wake-route-service`), one per stopped preview.
pub fn namespace_rules() -> Vec<PolicyRule> {
    vec![
        rule(&["sandcastle.dev"], &["blueprints"], READ),
        rule(&["sandcastle.dev"], &["blueprints"], &["patch"]),
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
                "previewevents",
                "previewevents/status",
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
        rule(&[GATEWAY_API], &["referencegrants"], WRITE),
    ]
}

/// What to apply in a target cluster so that Sandcastle may place previews there: a
/// ServiceAccount, a ClusterRole of [`target_rules`] (and one of [`source_rules`], for clusters
/// Blueprints read from), their bindings, the fence on its writes, and a long-lived token Secret
/// for the cluster Secret to carry (`charts/sandcastle/files/target-cluster.yaml`, written by `sandcastle rbac
/// --target`).
pub fn target_yaml() -> anyhow::Result<String> {
    let meta = |kind: &str, name: &str, extra: serde_json::Value| {
        let mut o = serde_json::json!({
            "apiVersion": if kind.starts_with("Cluster") { "rbac.authorization.k8s.io/v1" } else { "v1" },
            "kind": kind,
            "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "sandcastle-target"}},
        });
        if let (Some(o), serde_json::Value::Object(extra)) = (o.as_object_mut(), extra) {
            o.extend(extra);
        }
        o
    };
    let ns = "sandcastle-target";
    let account =
        serde_json::json!({"kind": "ServiceAccount", "name": "sandcastle", "namespace": ns});
    let bind = |role: &str| {
        meta(
            "ClusterRoleBinding",
            role,
            serde_json::json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [account],
            }),
        )
    };
    let preview_agent_fence = super::fence::preview_agent_fence(
        "sandcastle-preview-agent-fence",
        &serde_json::json!({"app.kubernetes.io/name": "sandcastle-target"}),
    );
    let docs = vec![
        meta("Namespace", ns, serde_json::json!({})),
        {
            let mut sa = meta("ServiceAccount", "sandcastle", serde_json::json!({}));
            sa["metadata"]["namespace"] = serde_json::json!(ns);
            sa
        },
        meta(
            "ClusterRole",
            "sandcastle-target",
            serde_json::json!({"rules": target_rules()}),
        ),
        bind("sandcastle-target"),
        meta(
            "ClusterRole",
            "sandcastle-source",
            serde_json::json!({"rules": source_rules()}),
        ),
        bind("sandcastle-source"),
        target_fence(&format!("system:serviceaccount:{ns}:sandcastle")),
        serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "sandcastle-target-fence", "labels": {"app.kubernetes.io/name": "sandcastle-target"}},
            "spec": {"policyName": "sandcastle-target-fence", "validationActions": ["Deny"]},
        }),
        preview_agent_fence[0].clone(),
        preview_agent_fence[1].clone(),
        {
            let mut token = meta(
                "Secret",
                "sandcastle-token",
                serde_json::json!({"type": "kubernetes.io/service-account-token"}),
            );
            token["metadata"]["namespace"] = serde_json::json!(ns);
            token["metadata"]["annotations"] =
                serde_json::json!({"kubernetes.io/service-account.name": "sandcastle"});
            token
        },
    ];
    let mut out = String::from(
        "# Generated by `sandcastle rbac --target`; do not edit.\n\
         # Apply in each cluster Sandcastle places previews in (or reads a Blueprint's source\n\
         # from), then register it: docs/clusters.md. sandcastle-target is the least a target\n\
         # cluster's credentials need; sandcastle-source only reads, for source clusters; the\n\
         # fence (Kubernetes >= 1.30) keeps the account's writes in its previews' namespaces,\n\
         # and the preview-agent fence lets a preview's token only restart its Deployments.\n",
    );
    for doc in docs {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&doc)?);
    }
    Ok(out)
}

/// The fence of a target cluster (as the chart's `fence.yaml` at home, a
/// ValidatingAdmissionPolicy; Kubernetes >= 1.30): `user` writes only in namespaces labelled as
/// Sandcastle's previews, and makes, relabels or deletes only such namespaces. RBAC cannot say
/// "only those namespaces"; with the fence a stolen token writes nothing in `kube-system` or any
/// other namespace of the target cluster.
fn target_fence(user: &str) -> serde_json::Value {
    let ours = |o: &str| {
        format!(
            "has({o}.metadata.labels) && 'app.kubernetes.io/managed-by' in {o}.metadata.labels \
             && {o}.metadata.labels['app.kubernetes.io/managed-by'] == 'sandcastle'"
        )
    };
    let expression = format!(
        "request.resource.group == '' && request.resource.resource == 'namespaces' && \
         (has(request.subResource) ? request.subResource : '') == '' ? ({}) : \
         (namespaceObject != null && ({}))",
        ours("variables.namespaceItself"),
        ours("namespaceObject")
    );
    let review = |group: &str, resources: &[&str]| serde_json::json!({"apiGroups": [group], "apiVersions": ["*"], "resources": resources, "operations": ["CREATE"]});
    serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "sandcastle-target-fence", "labels": {"app.kubernetes.io/name": "sandcastle-target"}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "operations": ["CREATE", "UPDATE", "DELETE"]}],
                "excludeResourceRules": [
                    review("authentication.k8s.io", &["tokenreviews"]),
                    review("authorization.k8s.io", &["subjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                ],
            },
            "matchConditions": [{"name": "sandcastle-account", "expression": format!("request.userInfo.username == '{user}'")}],
            "variables": [{"name": "namespaceItself", "expression": "request.operation == 'CREATE' ? object : oldObject"}],
            "validations": [{
                "expression": expression,
                "messageExpression": "\"Sandcastle writes only in its previews' namespaces (label app.kubernetes.io/managed-by=sandcastle); refused: \" + request.operation + \" \" + request.resource.resource + (request.namespace != \"\" ? \" in namespace \" + request.namespace : \" \" + request.name)",
                "reason": "Forbidden",
            }],
        },
    })
}

/// The rules as the YAML the Helm chart reads (`charts/sandcastle/files/rbac.yaml`).
pub fn rules_yaml() -> anyhow::Result<String> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Rules {
        cluster: Vec<PolicyRule>,
        copy_roles: Vec<PolicyRule>,
        namespace: Vec<PolicyRule>,
        /// The spec of the fence on preview tokens (`super::fence`).
        preview_agent_fence: serde_json::Value,
    }
    let rules = Rules {
        cluster: cluster_rules(),
        copy_roles: role_copy_rules(),
        namespace: namespace_rules(),
        preview_agent_fence: super::fence::preview_agent_policy_spec(),
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
        for ar in crate::apply::builtin_resources() {
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
    fn routes_are_written_in_previews_and_grants_only_at_home() {
        let cluster = cluster_rules();
        for resource in ["httproutes", "grpcroutes"] {
            assert!(
                grants(&cluster, GATEWAY_API, resource, "patch"),
                "{resource}"
            );
            assert!(grants(&source_rules(), GATEWAY_API, resource, "list"));
        }
        for resource in ["gateways", "referencegrants"] {
            assert!(
                grants(&cluster, GATEWAY_API, resource, "list"),
                "{resource}"
            );
            assert!(
                !grants(&cluster, GATEWAY_API, resource, "create"),
                "{resource}"
            );
            assert!(grants(&source_rules(), GATEWAY_API, resource, "list"));
        }
        let home = namespace_rules();
        assert!(grants(&home, GATEWAY_API, "referencegrants", "create"));
        assert!(grants(&home, GATEWAY_API, "referencegrants", "delete"));
        assert!(!grants(
            &target_rules(),
            GATEWAY_API,
            "referencegrants",
            "create"
        ));
    }

    #[test]
    fn nothing_cluster_scoped_is_written_but_namespaces_and_snapshot_contents() {
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
    fn a_target_cluster_needs_what_previews_need_and_no_more() {
        let target = target_rules();
        for ar in crate::apply::builtin_resources() {
            if ar.kind == "DaemonSet" {
                continue;
            }
            assert!(
                grants(&target, &ar.group, &ar.plural, "create"),
                "{}",
                ar.plural
            );
        }
        assert!(grants(&target, "", "namespaces", "delete"));
        assert!(grants(
            &target,
            "authentication.k8s.io",
            "tokenreviews",
            "create"
        ));
        assert!(!grants(
            &target,
            "authorization.k8s.io",
            "subjectaccessreviews",
            "create"
        ));
        assert!(!grants(
            &target,
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "get"
        ));
        for verb in ["create", "patch", "delete"] {
            assert!(
                source_rules()
                    .iter()
                    .all(|r| !r.verbs.iter().any(|v| v == verb))
            );
        }
    }

    #[test]
    fn permissions_are_named_as_kubectl_auth_can_i_takes_them() {
        let all = permissions(&target_rules());
        let named: Vec<String> = all.iter().map(ToString::to_string).collect();
        for want in [
            "create networkpolicies.networking.k8s.io",
            "delete namespaces",
            "create serviceaccounts/token preview-agent",
            "list pods",
        ] {
            assert!(named.iter().any(|n| n == want), "{want} in {named:?}");
        }
        // 7 verbs for each written kind: no permission twice.
        let mut sorted = named.clone();
        sorted.dedup();
        assert_eq!(sorted.len(), named.len());
    }

    #[test]
    fn the_target_cluster_file_binds_both_roles_to_one_account() {
        let yaml = target_yaml().unwrap();
        for want in [
            "name: sandcastle-target",
            "name: sandcastle-source",
            "kubernetes.io/service-account.name: sandcastle",
        ] {
            assert!(yaml.contains(want), "{want} in {yaml}");
        }
    }

    #[test]
    fn the_chart_file_lists_all_three_sets() {
        let yaml = rules_yaml().unwrap();
        for key in ["cluster:", "copyRoles:", "namespace:"] {
            assert!(yaml.contains(&format!("\n{key}")), "{key} in {yaml}");
        }
    }
}
