//! The walls Sandcastle puts around every preview namespace, as pure objects: Pod Security
//! labels, a default-deny NetworkPolicy, a ResourceQuota, a LimitRange, a `default`
//! ServiceAccount that mounts no token, and the `preview-agent` account agents get tokens for.
//!
//! With `isolation.egress`, the NetworkPolicy allows the destinations it lists, and a
//! `CiliumNetworkPolicy` those it names by host ([`egress`]).
//!
//! Apply them before the plan's objects: the LimitRange must exist before the first pod, or the
//! quota (which counts requests) rejects pods that set none.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::preview::{ENV_CONFIG_MAP, PreviewContext, preview_labels};
use sandcastle_crd::labels;
use sandcastle_crd::{Isolation, NetworkIsolation, PodSecurityLevel};

pub mod egress;

/// Name of the NetworkPolicy isolating a preview.
pub const NETWORK_POLICY: &str = "sandcastle-isolation";
/// Name of the ResourceQuota of a preview.
pub const RESOURCE_QUOTA: &str = "sandcastle-quota";
/// Name of the LimitRange of a preview.
pub const LIMIT_RANGE: &str = "sandcastle-limits";
/// Name of the ServiceAccount, Role and RoleBinding whose tokens agents get.
pub const PREVIEW_AGENT: &str = "preview-agent";
/// The Secret tokens for `preview-agent` are bound to: deleting the preview (its namespace)
/// deletes it, and so voids every token minted for the preview.
pub const PREVIEW_AGENT_ANCHOR: &str = "preview-agent-anchor";

/// Objects Sandcastle adds to every preview, by API group, kind and name. A blueprint object
/// with one of these names would collide with them.
const RESERVED: [(&str, &str, &str); 11] = [
    ("", "ConfigMap", ENV_CONFIG_MAP),
    ("", "ServiceAccount", PREVIEW_AGENT),
    ("", "Secret", PREVIEW_AGENT_ANCHOR),
    ("rbac.authorization.k8s.io", "Role", PREVIEW_AGENT),
    ("rbac.authorization.k8s.io", "RoleBinding", PREVIEW_AGENT),
    ("networking.k8s.io", "NetworkPolicy", NETWORK_POLICY),
    ("", "ResourceQuota", RESOURCE_QUOTA),
    ("", "LimitRange", LIMIT_RANGE),
    ("cilium.io", "CiliumNetworkPolicy", egress::FQDN_POLICY),
    ("", "Secret", crate::edge::TLS_SECRET),
    ("traefik.io", "Middleware", crate::edge::GATE_MIDDLEWARE),
];

/// Whether Sandcastle adds an object of this group, kind and name to every preview.
pub fn is_reserved(group: &str, kind: &str, name: &str) -> bool {
    RESERVED
        .iter()
        .any(|(g, k, n)| *g == group && *k == kind && *n == name)
}

/// Address ranges that are never "the internet": private (RFC 1918), carrier-grade NAT (used
/// for pod networks by some clusters) and link-local (which holds cloud metadata endpoints).
const NON_PUBLIC_V4: [&str; 5] = [
    "10.0.0.0/8",
    "100.64.0.0/10",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
];
/// IPv6 unique-local and link-local ranges.
const NON_PUBLIC_V6: [&str; 2] = ["fc00::/7", "fe80::/10"];

fn level(isolation: &Isolation) -> &'static str {
    match isolation.pod_security {
        PodSecurityLevel::Baseline => "baseline",
        PodSecurityLevel::Restricted => "restricted",
    }
}

/// Labels of a preview namespace: the preview's labels and Pod Security enforcement at the
/// Blueprint's level, version `latest` (the checks `plan` mirrors).
pub fn namespace_labels(ctx: &PreviewContext, isolation: &Isolation) -> BTreeMap<String, String> {
    let mut out = preview_labels(ctx);
    out.insert(
        labels::POD_SECURITY_ENFORCE.to_owned(),
        level(isolation).to_owned(),
    );
    out.insert(
        labels::POD_SECURITY_ENFORCE_VERSION.to_owned(),
        "latest".to_owned(),
    );
    out
}

/// [`namespace_labels`], tightened by the labels the blueprint's own Namespace object gives
/// ([`crate::plan::namespace_labels`]: Pod Security labels at least as strict as the
/// Blueprint's, which therefore replace Sandcastle's).
pub fn namespace_labels_with(
    ctx: &PreviewContext,
    isolation: &Isolation,
    from_blueprint: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = namespace_labels(ctx, isolation);
    out.extend(from_blueprint.clone());
    out
}

fn object(ctx: &PreviewContext, api_version: &str, kind: &str, name: &str, body: Value) -> Value {
    let labels: Map<String, Value> = preview_labels(ctx)
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let mut out = json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": ctx.namespace.as_str(),
            "labels": labels,
            "annotations": {labels::REPOSITORY_ANNOTATION: ctx.repo.as_str()},
        },
    });
    if let (Some(out), Value::Object(body)) = (out.as_object_mut(), body) {
        out.extend(body);
    }
    out
}

fn namespace_peer(namespace: &str) -> Value {
    json!({"namespaceSelector": {"matchLabels": {labels::NAMESPACE_NAME: namespace}}})
}

/// The NetworkPolicy of a preview, or `None` with `networkPolicy: off`.
///
/// Both `namespace` and `strict` deny everything by default, then allow ingress from pods of
/// the same namespace and from the ingress controller's namespace, and egress to pods of the
/// same namespace and to DNS (UDP and TCP 53 in `kube-system`). `namespace` also allows egress
/// to the public internet: any address except the private, carrier-grade NAT and link-local
/// ranges (IPv4 and IPv6) where pods, Services, nodes and cloud metadata of the cluster live,
/// so a preview can call external APIs but not other namespaces. `strict` allows nothing more.
/// Either way, the Blueprint's `isolation.egress` destinations (addresses and other namespaces'
/// pods) are allowed too.
pub fn network_policy(
    ctx: &PreviewContext,
    isolation: &Isolation,
    ingress_namespace: &str,
) -> Option<Value> {
    if isolation.network_policy == NetworkIsolation::Off {
        return None;
    }
    let same_namespace = json!({"from": [{"podSelector": {}}]});
    let mut ingress = vec![same_namespace];
    if !ingress_namespace.is_empty() {
        ingress.push(json!({"from": [namespace_peer(ingress_namespace)]}));
    }
    let mut allowed = vec![
        json!({"to": [{"podSelector": {}}]}),
        json!({
            "to": [namespace_peer("kube-system")],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        }),
    ];
    if isolation.network_policy == NetworkIsolation::Namespace {
        allowed.push(json!({"to": [
            {"ipBlock": {"cidr": "0.0.0.0/0", "except": NON_PUBLIC_V4}},
            {"ipBlock": {"cidr": "::/0", "except": NON_PUBLIC_V6}},
        ]}));
    }
    allowed.extend(egress::network_policy_rules(isolation));
    Some(object(
        ctx,
        "networking.k8s.io/v1",
        "NetworkPolicy",
        NETWORK_POLICY,
        json!({"spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress,
            "egress": allowed,
        }}),
    ))
}

/// Every guardrail object of a preview namespace, in apply order.
///
/// The ResourceQuota bounds what the scheduler reserves (`requests.cpu`, `requests.memory`),
/// pods, claimed storage and claims, and allows no LoadBalancer Service. It sets no `limits.*`:
/// those would require a limit on every container and make the LimitRange defaults count
/// against the quota, where the defaults are meant as a per-container safety net.
pub fn guardrail_objects(
    ctx: &PreviewContext,
    isolation: &Isolation,
    ingress_namespace: &str,
) -> Vec<Value> {
    let quota = &isolation.quota;
    let limits = &isolation.limit_range;
    let mut out = Vec::new();
    out.push(object(
        ctx,
        "v1",
        "ResourceQuota",
        RESOURCE_QUOTA,
        json!({"spec": {"hard": {
            "requests.cpu": quota.cpu,
            "requests.memory": quota.memory,
            "pods": quota.pods.to_string(),
            "requests.storage": quota.storage,
            "persistentvolumeclaims": quota.persistent_volume_claims.to_string(),
            "services.loadbalancers": "0",
        }}}),
    ));
    out.push(object(
        ctx,
        "v1",
        "LimitRange",
        LIMIT_RANGE,
        json!({"spec": {"limits": [{
            "type": "Container",
            "default": {"cpu": limits.default_limit_cpu, "memory": limits.default_limit_memory},
            "defaultRequest": {"cpu": limits.default_request_cpu, "memory": limits.default_request_memory},
        }]}}),
    ));
    out.extend(network_policy(ctx, isolation, ingress_namespace));
    out.extend(egress::fqdn_policy(ctx, isolation));
    for name in ["default", PREVIEW_AGENT] {
        out.push(object(
            ctx,
            "v1",
            "ServiceAccount",
            name,
            json!({"automountServiceAccountToken": false}),
        ));
    }
    out.push(object(
        ctx,
        "v1",
        "Secret",
        PREVIEW_AGENT_ANCHOR,
        json!({"type": "Opaque"}),
    ));
    let read = ["get", "list", "watch"];
    out.push(object(
        ctx,
        "rbac.authorization.k8s.io/v1",
        "Role",
        PREVIEW_AGENT,
        json!({"rules": [
            {"apiGroups": [""], "resources": ["pods", "pods/log", "events", "services", "configmaps"], "verbs": read},
            {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "replicasets"], "verbs": read},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": read},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": read},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]},
        ]}),
    ));
    out.push(object(
        ctx,
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        PREVIEW_AGENT,
        json!({
            "subjects": [{"kind": "ServiceAccount", "name": PREVIEW_AGENT, "namespace": ctx.namespace.as_str()}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PREVIEW_AGENT},
        }),
    ));
    out
}

#[cfg(test)]
mod tests;
