//! `isolation.egress` as policy: the checks a Blueprint's egress rules must pass, the rules they
//! add to the preview's NetworkPolicy, and the `CiliumNetworkPolicy` that allows host names.
//!
//! A NetworkPolicy can only allow addresses and pods; host names need a DNS-aware network plugin.
//! Cilium's `toFQDNs` is the one used widely, so FQDN rules render as a `CiliumNetworkPolicy`
//! beside the NetworkPolicy: Cilium allows what either policy allows. Its DNS rule lets the pods
//! resolve names through Cilium's DNS proxy, which is how Cilium learns the addresses of the names.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::{Value, json};

use super::{NETWORK_POLICY, namespace_peer, object};
use crate::naming::is_dns_label;
use crate::preview::{PreviewContext, Problem};
use sandcastle_crd::{EgressPort, EgressRule, Isolation, NetworkIsolation};

/// Name of the CiliumNetworkPolicy holding a preview's FQDN egress rules.
pub const FQDN_POLICY: &str = "sandcastle-egress-fqdn";
/// API version and kind of the object FQDN rules need.
pub const CILIUM_API_VERSION: &str = "cilium.io/v2";
pub const CILIUM_POLICY_KIND: &str = "CiliumNetworkPolicy";

/// Every problem of the Blueprint's egress rules, naming the field at fault.
pub fn check(isolation: &Isolation, blueprint: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut problem = |field: String, reason: String| {
        out.push(Problem::field("Blueprint", blueprint, field, reason));
    };
    if !isolation.egress.is_empty() && isolation.network_policy == NetworkIsolation::Off {
        problem(
            "spec.isolation.egress".to_owned(),
            "has no effect with networkPolicy: off; use networkPolicy: strict to allow only these destinations".to_owned(),
        );
    }
    for (i, rule) in isolation.egress.iter().enumerate() {
        let at = format!("spec.isolation.egress[{i}]");
        for (j, cidr) in rule.cidrs.iter().enumerate() {
            if let Err(reason) = cidr_problem(cidr) {
                problem(format!("{at}.cidrs[{j}]"), reason);
            }
        }
        if let Some(ns) = &rule.namespace
            && !is_dns_label(ns)
        {
            problem(
                format!("{at}.namespace"),
                format!(
                    "{ns:?} is not a namespace name (lower-case letters, digits and '-', at most 63)"
                ),
            );
        }
        for (j, name) in rule.fqdns.iter().enumerate() {
            if !fqdn(name) {
                problem(
                    format!("{at}.fqdns[{j}]"),
                    format!("{name:?} is not a host name or a `*.`-wildcard of one"),
                );
            }
        }
        for (j, port) in rule.ports.iter().enumerate() {
            if port.port == 0 || port.end_port.is_some_and(|end| end < port.port) {
                problem(
                    format!("{at}.ports[{j}]"),
                    "ports run from 1 to 65535, endPort not below port".to_owned(),
                );
            }
        }
    }
    out
}

/// Why `cidr` is not a network in canonical CIDR notation.
fn cidr_problem(cidr: &str) -> Result<(), String> {
    let (addr, bits) = cidr
        .split_once('/')
        .ok_or_else(|| format!("{cidr:?} is not in CIDR notation (address/prefix length)"))?;
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| format!("{cidr:?}: {addr:?} is not an IP address"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let bits: u32 = bits
        .parse()
        .ok()
        .filter(|b| *b <= max && !bits.starts_with('+') && (bits == "0" || !bits.starts_with('0')))
        .ok_or_else(|| format!("{cidr:?}: the prefix length must be 0 to {max}"))?;
    let network = match addr {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from_bits(
            a.to_bits() & u32::MAX.checked_shl(32 - bits).unwrap_or(0),
        )),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from_bits(
            a.to_bits() & u128::MAX.checked_shl(128 - bits).unwrap_or(0),
        )),
    };
    if network != addr {
        return Err(format!(
            "{cidr:?} has host bits set; the network is {network}/{bits}"
        ));
    }
    Ok(())
}

/// A host name of DNS labels (letters, digits, `-`), optionally starting with `*.`.
fn fqdn(s: &str) -> bool {
    let name = s.strip_prefix("*.").unwrap_or(s);
    name.len() <= 253
        && name.contains('.')
        && name
            .split('.')
            .all(|l| is_dns_label(&l.to_ascii_lowercase()))
}

fn ports(ports: &[EgressPort]) -> Vec<Value> {
    ports
        .iter()
        .map(|p| {
            let mut out = json!({"protocol": p.protocol.as_str(), "port": p.port});
            if let Some(end) = p.end_port {
                out["endPort"] = json!(end);
            }
            out
        })
        .collect()
}

fn with_ports(mut rule: Value, listed: &[EgressPort]) -> Value {
    if !listed.is_empty() {
        rule["ports"] = Value::Array(ports(listed));
    }
    rule
}

/// The NetworkPolicy egress rules of the Blueprint's `cidrs` and `namespace` destinations.
pub fn network_policy_rules(isolation: &Isolation) -> Vec<Value> {
    let mut out = Vec::new();
    for rule in &isolation.egress {
        if !rule.cidrs.is_empty() {
            let to: Vec<Value> = rule
                .cidrs
                .iter()
                .map(|c| json!({"ipBlock": {"cidr": c}}))
                .collect();
            out.push(with_ports(json!({"to": to}), &rule.ports));
        }
        if let Some(ns) = &rule.namespace {
            let mut peer = namespace_peer(ns);
            if let Some(selector) = &rule.pod_selector {
                peer["podSelector"] = json!(selector);
            }
            out.push(with_ports(json!({"to": [peer]}), &rule.ports));
        }
    }
    out
}

fn fqdn_rule(rule: &EgressRule) -> Value {
    let names: Vec<Value> = rule
        .fqdns
        .iter()
        .map(|n| match n.starts_with("*.") {
            true => json!({"matchPattern": n.to_ascii_lowercase()}),
            false => json!({"matchName": n.to_ascii_lowercase()}),
        })
        .collect();
    let mut out = json!({"toFQDNs": names});
    if !rule.ports.is_empty() {
        let ports: Vec<Value> = rule
            .ports
            .iter()
            .map(|p| {
                let mut port = json!({"port": p.port.to_string(), "protocol": p.protocol.as_str()});
                if let Some(end) = p.end_port {
                    port["endPort"] = json!(end);
                }
                port
            })
            .collect();
        out["toPorts"] = json!([{"ports": ports}]);
    }
    out
}

/// The CiliumNetworkPolicy allowing the Blueprint's `fqdns` destinations, or `None` when it
/// lists none (or adds no NetworkPolicy at all).
pub fn fqdn_policy(ctx: &PreviewContext, isolation: &Isolation) -> Option<Value> {
    let rules: Vec<&EgressRule> = isolation
        .egress
        .iter()
        .filter(|r| !r.fqdns.is_empty())
        .collect();
    if rules.is_empty() || isolation.network_policy == NetworkIsolation::Off {
        return None;
    }
    // DNS through Cilium's proxy (which learns the names' addresses), then the names.
    let dns = json!({
        "toEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "kube-system"}}],
        "toPorts": [{
            "ports": [{"port": "53", "protocol": "ANY"}],
            "rules": {"dns": [{"matchPattern": "*"}]},
        }],
    });
    let egress: Vec<Value> = std::iter::once(dns)
        .chain(rules.into_iter().map(fqdn_rule))
        .collect();
    Some(object(
        ctx,
        CILIUM_API_VERSION,
        CILIUM_POLICY_KIND,
        FQDN_POLICY,
        json!({"spec": {
            "description": format!("FQDN egress of the preview, beside NetworkPolicy {NETWORK_POLICY}"),
            "endpointSelector": {},
            "egress": egress,
        }}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_must_be_canonical_networks() {
        for ok in [
            "140.82.112.0/20",
            "0.0.0.0/0",
            "10.1.2.3/32",
            "2606:50c0::/32",
            "::/0",
        ] {
            assert_eq!(cidr_problem(ok), Ok(()), "{ok}");
        }
        let bad = |c: &str| cidr_problem(c).unwrap_err();
        assert_eq!(
            bad("10.0.0.1/8"),
            "\"10.0.0.1/8\" has host bits set; the network is 10.0.0.0/8"
        );
        assert!(bad("10.0.0.0").contains("not in CIDR notation"));
        assert!(bad("10.0.0.0/33").contains("0 to 32"));
        assert!(bad("10.0.0.0/08").contains("0 to 32"));
        assert!(bad("10.0.0.0/+8").contains("0 to 32"));
        assert!(bad("2001:db8::/129").contains("0 to 128"));
        assert!(bad("example.com/24").contains("not an IP address"));
    }

    #[test]
    fn host_names_and_wildcards() {
        assert!(fqdn("api.payments.example.com"));
        assert!(fqdn("*.githubusercontent.com"));
        assert!(fqdn("API.OpenAI.com"));
        for bad in [
            "localhost",
            "*",
            "*.com.",
            "a..b",
            "-a.b",
            "a.*.b",
            "a b.c",
            "exa_mple.com",
        ] {
            assert!(!fqdn(bad), "{bad}");
        }
        assert!(!fqdn(&format!("{}.com", "a".repeat(64))));
    }
}
