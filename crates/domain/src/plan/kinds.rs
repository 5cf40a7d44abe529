//! What each kind of object is to a clone: copied (and in which phase and order), created by a
//! controller, replaced by the preview's guardrails, or refused. Kinds are matched by API group
//! and kind, never by kind alone: Knative's `serving.knative.dev` `Service` is not a `Service`.

use super::Stage;
use sandcastle_crd::KindRef;

/// The kinds Sandcastle copies and understands, in their apply order within a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Builtin {
    ConfigMap,
    Secret,
    ServiceAccount,
    Role,
    RoleBinding,
    PersistentVolumeClaim,
    NetworkPolicy,
    Service,
    StatefulSet,
    Deployment,
    ReplicaSet,
    CronJob,
    Job,
    HorizontalPodAutoscaler,
    PodDisruptionBudget,
    Ingress,
    HttpRoute,
    GrpcRoute,
}

/// The API group of the Gateway API's kinds.
pub(crate) const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

const BUILTINS: [(&str, &str, Builtin); 18] = [
    ("", "ConfigMap", Builtin::ConfigMap),
    ("", "Secret", Builtin::Secret),
    ("", "ServiceAccount", Builtin::ServiceAccount),
    ("rbac.authorization.k8s.io", "Role", Builtin::Role),
    (
        "rbac.authorization.k8s.io",
        "RoleBinding",
        Builtin::RoleBinding,
    ),
    ("", "PersistentVolumeClaim", Builtin::PersistentVolumeClaim),
    ("networking.k8s.io", "NetworkPolicy", Builtin::NetworkPolicy),
    ("", "Service", Builtin::Service),
    ("apps", "StatefulSet", Builtin::StatefulSet),
    ("apps", "Deployment", Builtin::Deployment),
    ("apps", "ReplicaSet", Builtin::ReplicaSet),
    ("batch", "CronJob", Builtin::CronJob),
    ("batch", "Job", Builtin::Job),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        Builtin::HorizontalPodAutoscaler,
    ),
    (
        "policy",
        "PodDisruptionBudget",
        Builtin::PodDisruptionBudget,
    ),
    ("networking.k8s.io", "Ingress", Builtin::Ingress),
    (GATEWAY_GROUP, "HTTPRoute", Builtin::HttpRoute),
    (GATEWAY_GROUP, "GRPCRoute", Builtin::GrpcRoute),
];

impl Builtin {
    pub(crate) fn find(group: &str, kind: &str) -> Option<Self> {
        BUILTINS
            .iter()
            .find(|(g, k, _)| *g == group && *k == kind)
            .map(|(_, _, b)| *b)
    }

    /// The phase this kind is applied in (Jobs: see [`super::order`] for hooks).
    pub(crate) fn stage(self) -> Stage {
        match self {
            Builtin::ConfigMap
            | Builtin::Secret
            | Builtin::ServiceAccount
            | Builtin::Role
            | Builtin::RoleBinding
            | Builtin::PersistentVolumeClaim
            | Builtin::NetworkPolicy
            | Builtin::Service => Stage::Config,
            Builtin::StatefulSet => Stage::Data,
            Builtin::Deployment
            | Builtin::ReplicaSet
            | Builtin::CronJob
            | Builtin::Job
            | Builtin::HorizontalPodAutoscaler
            | Builtin::PodDisruptionBudget => Stage::Apps,
            Builtin::Ingress | Builtin::HttpRoute | Builtin::GrpcRoute => Stage::Ingress,
        }
    }

    /// Whether objects of this kind route hosts (their hosts come from the host template).
    pub(crate) fn takes_hosts(self) -> bool {
        matches!(
            self,
            Builtin::Ingress | Builtin::HttpRoute | Builtin::GrpcRoute
        )
    }

    /// Whether this is a Gateway API route.
    pub(crate) fn is_route(self) -> bool {
        matches!(self, Builtin::HttpRoute | Builtin::GrpcRoute)
    }

    /// Whether objects of this kind run pods from a template.
    pub(crate) fn is_workload(self) -> bool {
        matches!(
            self,
            Builtin::Deployment
                | Builtin::StatefulSet
                | Builtin::ReplicaSet
                | Builtin::Job
                | Builtin::CronJob
        )
    }
}

/// How an object that is copied is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Class {
    Builtin(Builtin),
    /// A kind from the Blueprint's `allowKinds`: copied as it is, apart from metadata, labels,
    /// namespace references and the images, env and Pod Security of an obvious pod template.
    Extra,
}

/// What the kind of an object means for the clone, before looking at the object itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KindRule {
    Copy(Class),
    /// Created by a controller from another object; the copy gets its own.
    Controller(&'static str),
    /// The preview namespace gets its own from the Blueprint's `isolation`.
    Guardrail(&'static str),
    /// Never copied, for the reason given (a ReferenceGrant concerns other namespaces).
    LeaveOut(&'static str),
    Refuse(String),
}

impl Class {
    /// Whether objects of this class route hosts: Ingresses and Gateway API routes.
    pub(crate) fn takes_hosts(self) -> bool {
        matches!(self, Class::Builtin(b) if b.takes_hosts())
    }
}

/// Kinds controllers create from other objects, with why they are not copied.
const CONTROLLER_CREATED: [(&str, &str, &str); 6] = [
    ("", "Endpoints", "Endpoints are created from their Service"),
    (
        "discovery.k8s.io",
        "EndpointSlice",
        "EndpointSlices are created from their Service",
    ),
    (
        "apps",
        "ControllerRevision",
        "ControllerRevisions are history kept by their workload",
    ),
    ("", "Event", "Events are history, not configuration"),
    (
        "events.k8s.io",
        "Event",
        "Events are history, not configuration",
    ),
    (
        "coordination.k8s.io",
        "Lease",
        "Leases are taken by running programs (leader election)",
    ),
];

/// Built-in kinds that are not namespaced. A preview only owns its namespace.
const CLUSTER_SCOPED: [(&str, &str); 34] = [
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    ("scheduling.k8s.io", "PriorityClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("policy", "PodSecurityPolicy"),
    ("authentication.k8s.io", "TokenReview"),
    ("authorization.k8s.io", "SubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectAccessReview"),
];

/// Why an object of a kind that controllers usually make is not copied when a controller of
/// kind `owner` owns it: ReplicaSets of Deployments, and Pods. Without a controller, a
/// ReplicaSet is a workload like any other (copied), and a Pod is refused ([`rule`]).
pub(crate) fn made_by_controller(group: &str, kind: &str, owner: &str) -> Option<&'static str> {
    match (group, kind, owner) {
        ("apps", "ReplicaSet", "Deployment") => Some("ReplicaSets are created by their Deployment"),
        ("", "Pod", _) => Some("Pods are created by their workloads"),
        _ => None,
    }
}

/// Why a Pod without a controller is refused.
pub(crate) const BARE_POD: &str =
    "it has no owner, and a bare Pod is not copied; run it from a Deployment or a Job";

/// Why a Gateway of the blueprint is refused.
pub(crate) const SHARED_GATEWAY: &str = "a Gateway is shared by every preview and never cloned: keep it out of the blueprint (in a namespace of its own) and point the routes' spec.parentRefs at it";

/// Why a ReferenceGrant of the blueprint is left out.
pub(crate) const REFERENCE_GRANT: &str = "a ReferenceGrant lets routes of other namespaces reach into the source namespace; a preview grants nothing to other namespaces";

/// API groups served by Kubernetes itself; any other group is a custom resource.
const BUILTIN_GROUPS: [&str; 23] = [
    "",
    "extensions",
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "admissionregistration.k8s.io",
    "scheduling.k8s.io",
    "node.k8s.io",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "resource.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "storagemigration.k8s.io",
];

/// The API group of an `apiVersion` (`apps/v1` → `apps`, `v1` → the core group `""`).
pub(crate) fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Whether `group`/`kind` is listed in `allowKinds` (by group and kind: the version does not
/// matter, every served version names the same objects).
fn allowed(group: &str, kind: &str, allow_kinds: &[KindRef]) -> bool {
    allow_kinds
        .iter()
        .any(|k| group_of(&k.api_version) == group && k.kind == kind)
}

/// The rule for a kind. `allowKinds` admits kinds that would otherwise be refused as unknown,
/// never DaemonSets or cluster-scoped kinds, and never changes how built-in rules treat a kind.
pub(crate) fn rule(group: &str, kind: &str, allow_kinds: &[KindRef]) -> KindRule {
    if let Some(builtin) = Builtin::find(group, kind) {
        return KindRule::Copy(Class::Builtin(builtin));
    }
    if let Some((_, _, why)) = CONTROLLER_CREATED
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)
    {
        return KindRule::Controller(why);
    }
    match (group, kind) {
        // Pods owned by a controller were left out before the kind was asked about.
        ("", "Pod") => return KindRule::Refuse(BARE_POD.to_owned()),
        ("", "ResourceQuota") => {
            return KindRule::Guardrail(
                "the preview namespace gets its own quota from the Blueprint's isolation.quota",
            );
        }
        ("", "LimitRange") => {
            return KindRule::Guardrail(
                "the preview namespace gets its own limits from the Blueprint's isolation.limitRange",
            );
        }
        ("apps", "DaemonSet") => {
            return KindRule::Refuse(
                "DaemonSets run on every node and cannot be copied (list it in spec.skip to leave it out)"
                    .to_owned(),
            );
        }
        (GATEWAY_GROUP, "Gateway") => return KindRule::Refuse(SHARED_GATEWAY.to_owned()),
        (GATEWAY_GROUP, "GatewayClass") => {
            return KindRule::Refuse(format!(
                "GatewayClass is cluster-scoped and a preview only owns its namespace; {SHARED_GATEWAY}"
            ));
        }
        (GATEWAY_GROUP, "ReferenceGrant") => return KindRule::LeaveOut(REFERENCE_GRANT),
        _ => {}
    }
    if CLUSTER_SCOPED
        .iter()
        .any(|(g, k)| *g == group && *k == kind)
    {
        return KindRule::Refuse(format!(
            "{kind} is cluster-scoped and a preview only owns its namespace"
        ));
    }
    if allowed(group, kind, allow_kinds) {
        return KindRule::Copy(Class::Extra);
    }
    let full = if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{group} {kind}")
    };
    if BUILTIN_GROUPS.contains(&group) {
        KindRule::Refuse(format!(
            "{full} is not a kind Sandcastle copies (add it to spec.allowKinds to copy it as it is)"
        ))
    } else {
        KindRule::Refuse(format!(
            "custom resource {full} is copied only when spec.allowKinds lists it"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kr(api_version: &str, kind: &str) -> KindRef {
        KindRef {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        }
    }

    #[test]
    fn groups_come_from_api_versions() {
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("cert-manager.io/v1"), "cert-manager.io");
    }

    #[test]
    fn kinds_are_matched_by_group_and_kind() {
        let allow = [
            kr("cert-manager.io/v1", "Certificate"),
            kr("rbac.authorization.k8s.io/v1", "ClusterRole"),
            kr("apps/v1", "DaemonSet"),
        ];
        let mut allow = allow.to_vec();
        allow.push(kr("gateway.networking.k8s.io/v1", "Gateway"));
        let table: [(&str, &str, KindRule); 15] = [
            ("", "Service", KindRule::Copy(Class::Builtin(Builtin::Service))),
            (
                "serving.knative.dev",
                "Service",
                KindRule::Refuse(
                    "custom resource serving.knative.dev Service is copied only when spec.allowKinds lists it"
                        .to_owned(),
                ),
            ),
            ("cert-manager.io", "Certificate", KindRule::Copy(Class::Extra)),
            (
                "apps",
                "ReplicaSet",
                KindRule::Copy(Class::Builtin(Builtin::ReplicaSet)),
            ),
            (
                "rbac.authorization.k8s.io",
                "ClusterRole",
                KindRule::Refuse(
                    "ClusterRole is cluster-scoped and a preview only owns its namespace".to_owned(),
                ),
            ),
            (
                "apps",
                "DaemonSet",
                KindRule::Refuse(
                    "DaemonSets run on every node and cannot be copied (list it in spec.skip to leave it out)"
                        .to_owned(),
                ),
            ),
            (
                "",
                "ReplicationController",
                KindRule::Refuse(
                    "ReplicationController is not a kind Sandcastle copies (add it to spec.allowKinds to copy it as it is)"
                        .to_owned(),
                ),
            ),
            (
                "",
                "ResourceQuota",
                KindRule::Guardrail(
                    "the preview namespace gets its own quota from the Blueprint's isolation.quota",
                ),
            ),
            ("batch", "Job", KindRule::Copy(Class::Builtin(Builtin::Job))),
            (
                "extensions",
                "Ingress",
                KindRule::Refuse(
                    "extensions Ingress is not a kind Sandcastle copies (add it to spec.allowKinds to copy it as it is)"
                        .to_owned(),
                ),
            ),
            (
                GATEWAY_GROUP,
                "HTTPRoute",
                KindRule::Copy(Class::Builtin(Builtin::HttpRoute)),
            ),
            (
                GATEWAY_GROUP,
                "GRPCRoute",
                KindRule::Copy(Class::Builtin(Builtin::GrpcRoute)),
            ),
            // Listed in allowKinds or not, the shared Gateway is never cloned.
            (GATEWAY_GROUP, "Gateway", KindRule::Refuse(SHARED_GATEWAY.to_owned())),
            (
                GATEWAY_GROUP,
                "GatewayClass",
                KindRule::Refuse(format!(
                    "GatewayClass is cluster-scoped and a preview only owns its namespace; {SHARED_GATEWAY}"
                )),
            ),
            (GATEWAY_GROUP, "ReferenceGrant", KindRule::LeaveOut(REFERENCE_GRANT)),
        ];
        for (group, kind, want) in table {
            assert_eq!(rule(group, kind, &allow), want, "{group} {kind}");
        }
    }

    #[test]
    fn routes_are_applied_with_the_ingresses_and_take_hosts() {
        for b in [Builtin::Ingress, Builtin::HttpRoute, Builtin::GrpcRoute] {
            assert_eq!(b.stage(), Stage::Ingress);
            assert!(Class::Builtin(b).takes_hosts());
            assert!(!b.is_workload());
        }
        assert!(Builtin::HttpRoute.is_route() && !Builtin::Ingress.is_route());
        assert!(!Class::Builtin(Builtin::Service).takes_hosts());
        assert!(!Class::Extra.takes_hosts());
        // Routes come after the Ingresses within their phase.
        assert!(Builtin::Ingress < Builtin::HttpRoute && Builtin::HttpRoute < Builtin::GrpcRoute);
    }
}
