//! A Blueprint's `isolation.egress`: destinations outside the preview namespace that its pods may
//! reach on top of what the `networkPolicy` mode allows — address ranges, pods of other namespaces,
//! and (on clusters running Cilium) host names.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One allowed destination: exactly one of `cidrs`, `namespace` or `fqdns`, with the ports it
/// may be reached on.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[x_kube(validation = Rule::new("[has(self.cidrs), has(self.__namespace__), has(self.fqdns)].filter(x, x).size() == 1").message("set exactly one of cidrs, namespace or fqdns in each isolation.egress rule"))]
#[x_kube(validation = Rule::new("!has(self.podSelector) || has(self.__namespace__)").message("podSelector needs namespace in an isolation.egress rule"))]
#[serde(rename_all = "camelCase")]
pub struct EgressRule {
    /// Address ranges in CIDR notation, e.g. `140.82.112.0/20` or `2606:50c0::/32`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 43)))]
    pub cidrs: Vec<String>,

    /// Pods of another namespace, by the namespace's name (e.g. shared test services).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub namespace: Option<String>,

    /// With `namespace`: only its pods these labels select (every pod without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,

    /// Host names (`api.payments.example.com`) or wildcards (`*.githubusercontent.com`), allowed by
    /// Cilium's DNS-aware policy (`CiliumNetworkPolicy` `toFQDNs`). A preview of a Blueprint
    /// with such rules fails on a cluster that does not serve `cilium.io/v2`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 253)))]
    pub fqdns: Vec<String>,

    /// Ports these destinations may be reached on; none allows every port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub ports: Vec<EgressPort>,
}

/// A port, or a range of ports up to `endPort`, of one protocol.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[x_kube(validation = Rule::new("!has(self.endPort) || self.endPort >= self.port").message("endPort must not be below port"))]
#[serde(rename_all = "camelCase")]
pub struct EgressPort {
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,

    #[serde(default)]
    pub protocol: Protocol,

    /// The last port of a range starting at `port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub end_port: Option<u16>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    #[serde(rename = "TCP")]
    Tcp,
    #[serde(rename = "UDP")]
    Udp,
    #[serde(rename = "SCTP")]
    Sctp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tcp => "TCP",
            Self::Udp => "UDP",
            Self::Sctp => "SCTP",
        }
    }
}
