//! Gateway API routes (HTTPRoutes and GRPCRoutes) in a preview. Their hosts (`spec.hostnames`)
//! are rewritten with the Ingresses' ([`super::hosts`]); this module owns the rest:
//!
//! - A route names its hosts: one without `spec.hostnames` would take every host of the shared
//!   Gateway (the source's and every other preview's), and is refused.
//! - `spec.parentRefs` keep pointing at the shared Gateway, which is never cloned
//!   ([`super::kinds`] refuses a Gateway in the blueprint): a Gateway parent without a
//!   `namespace` means the route's own namespace, the source, which is written out; when the
//!   source namespace is not known (manifests that name none) the route is refused, naming the
//!   field. Other parents (a mesh route's Service) naming the source namespace follow the copy.
//! - Backends stay in the preview: a `namespace` naming the source is dropped (the preview's
//!   Service of that name is meant), one naming any other namespace is refused, since the
//!   preview owns no ReferenceGrant there. Backends are each rule's `backendRefs` and the
//!   `backendRef` of every `RequestMirror` filter, of a rule or of a backend.

use std::collections::BTreeMap;

use serde_json::Value;

use super::kinds::GATEWAY_GROUP;
use super::manifests::describe;
use super::{Obj, Problem};
use crate::quote::short;

/// Why a route without hostnames is refused.
pub(crate) const NO_HOSTNAMES: &str = "a route without hostnames would take every host of the \
     shared Gateway, other previews' too; name the hosts it serves (they are rewritten from the \
     host template)";

/// The items of a list, with their index (nothing when it is not a list).
fn items(v: &Value) -> impl Iterator<Item = (usize, &Value)> {
    v.as_array().into_iter().flatten().enumerate()
}

fn namespace_of(reference: &Value) -> Option<&str> {
    reference["namespace"].as_str().filter(|n| !n.is_empty())
}

/// Whether a parent reference names a Gateway (the default group and kind).
fn is_gateway(parent: &Value) -> bool {
    if !parent.is_object() {
        return false;
    }
    let group = parent["group"].as_str().unwrap_or(GATEWAY_GROUP);
    let kind = parent["kind"].as_str().unwrap_or("Gateway");
    group == GATEWAY_GROUP && kind == "Gateway"
}

/// The hostnames of a route, as written.
pub(crate) fn hostnames(route: &Value) -> impl Iterator<Item = &str> {
    route["spec"]["hostnames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|h| !h.is_empty())
}

/// Put the preview hosts of `map` in place of the route's hostnames.
pub(crate) fn set_hostnames(route: &mut Value, map: &BTreeMap<String, String>) {
    let hosts = route
        .get_mut("spec")
        .and_then(|s| s.get_mut("hostnames"))
        .and_then(Value::as_array_mut);
    for host in hosts.into_iter().flatten() {
        if let Some(new) = host.as_str().and_then(|h| map.get(h)) {
            *host = Value::String(new.clone());
        }
    }
}

/// Where a backend reference is: a JSON pointer to it, and its field as people write it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct At {
    pointer: String,
    field: String,
}

impl At {
    fn then(&self, key: &str, index: Option<usize>) -> At {
        match index {
            Some(i) => At {
                pointer: format!("{}/{key}/{i}", self.pointer),
                field: format!("{}.{key}[{i}]", self.field),
            },
            None => At {
                pointer: format!("{}/{key}", self.pointer),
                field: format!("{}.{key}", self.field),
            },
        }
    }
}

/// The mirrors' backends among `filters` (at `at`).
fn mirrors(filters: &Value, at: &At, out: &mut Vec<At>) {
    for (k, filter) in items(filters) {
        if filter["requestMirror"]["backendRef"].is_object() {
            out.push(
                at.then("filters", Some(k))
                    .then("requestMirror", None)
                    .then("backendRef", None),
            );
        }
    }
}

/// Every backend reference of a route, in the order of its fields.
fn backend_refs(route: &Value) -> Vec<At> {
    let spec = At {
        pointer: "/spec".to_owned(),
        field: "spec".to_owned(),
    };
    let mut out = Vec::new();
    for (i, rule) in items(&route["spec"]["rules"]) {
        let rule_at = spec.then("rules", Some(i));
        for (j, backend) in items(&rule["backendRefs"]) {
            if !backend.is_object() {
                continue;
            }
            let backend_at = rule_at.then("backendRefs", Some(j));
            out.push(backend_at.clone());
            mirrors(&backend["filters"], &backend_at, &mut out);
        }
        mirrors(&rule["filters"], &rule_at, &mut out);
    }
    out
}

/// The route's problems: no hostnames, a Gateway parent whose namespace cannot be told, a
/// backend in another namespace. `source` is the source namespace, when known.
pub(crate) fn check(obj: &Obj, source: Option<&str>) -> Vec<Problem> {
    let mut problems = Vec::new();
    match &obj.value["spec"]["hostnames"] {
        Value::Array(hosts) if !hosts.is_empty() => {}
        Value::Null | Value::Array(_) => problems.push(obj.problem("spec.hostnames", NO_HOSTNAMES)),
        other => problems.push(obj.problem(
            "spec.hostnames",
            format!("must be a list of host names, found {}", describe(other)),
        )),
    }
    if source.is_none() {
        for (i, parent) in items(&obj.value["spec"]["parentRefs"]) {
            if is_gateway(parent) && namespace_of(parent).is_none() {
                problems.push(obj.problem(
                    format!("spec.parentRefs[{i}].namespace"),
                    "is empty, which means the route's own namespace, and these manifests do not \
                     say which namespace they come from; name the shared Gateway's namespace",
                ));
            }
        }
    }
    for at in backend_refs(&obj.value) {
        let Some(ns) = obj.value.pointer(&at.pointer).and_then(namespace_of) else {
            continue;
        };
        if Some(ns) == source {
            continue;
        }
        let ns = short(ns);
        let reason = match source {
            Some(_) => format!(
                "names namespace {ns}; a preview's routes lead only to its own Services (it owns \
                 no ReferenceGrant in {ns})"
            ),
            None => format!(
                "names namespace {ns}; manifests must leave it empty (the preview's own Service is \
                 meant)"
            ),
        };
        problems.push(obj.problem(format!("{}.namespace", at.field), reason));
    }
    problems
}

/// Point the route's references for the preview (of a route [`check`] accepted): Gateway
/// parents name their namespace outright, the source's where they named none; other parents
/// and every backend naming the source namespace now name none (the preview's).
pub(crate) fn rewrite(route: &mut Value, source: Option<&str>) {
    let targets = backend_refs(route);
    let parents = route
        .get_mut("spec")
        .and_then(|s| s.get_mut("parentRefs"))
        .and_then(Value::as_array_mut);
    for parent in parents.into_iter().flatten() {
        let gateway = is_gateway(parent);
        let named = namespace_of(parent).map(str::to_owned);
        let (Some(map), Some(source)) = (parent.as_object_mut(), source) else {
            continue;
        };
        match named {
            None if gateway => {
                map.insert("namespace".to_owned(), Value::String(source.to_owned()));
            }
            Some(ns) if !gateway && ns == source => {
                map.remove("namespace");
            }
            _ => {}
        }
    }
    for at in targets {
        if let Some(backend) = route
            .pointer_mut(&at.pointer)
            .and_then(Value::as_object_mut)
            && source.is_some()
            && backend.get("namespace").and_then(Value::as_str) == source
        {
            backend.remove("namespace");
        }
    }
}

/// Whether a backend reference names a Service of the route's own namespace.
fn is_own_service(backend: &Value) -> bool {
    let group = backend["group"].as_str().unwrap_or_default();
    let kind = backend["kind"].as_str().unwrap_or("Service");
    group.is_empty() && kind == "Service" && namespace_of(backend).is_none()
}

/// Whether a backend reference leads to the Service `service` of the route's namespace.
fn leads_to(backend: &Value, service: &str) -> bool {
    is_own_service(backend) && backend["name"].as_str() == Some(service)
}

/// Whether one of the route's rules leads to the Service `service`.
pub(crate) fn serves(route: &Value, service: &str) -> bool {
    items(&route["spec"]["rules"])
        .flat_map(|(_, rule)| items(&rule["backendRefs"]))
        .any(|(_, b)| leads_to(b, service))
}

/// Whether a rule matches every path: no matches, or one of them a `PathPrefix` of `/` with
/// nothing else to match.
fn matches_everything(rule: &Value) -> bool {
    let matches = rule["matches"].as_array();
    matches.is_none_or(Vec::is_empty)
        || items(&rule["matches"]).any(|(_, m)| {
            let path = &m["path"];
            let prefix_root = path.is_null()
                || (path["type"].as_str().unwrap_or("PathPrefix") == "PathPrefix"
                    && path["value"].as_str().unwrap_or("/") == "/");
            prefix_root
                && m["headers"].as_array().is_none_or(Vec::is_empty)
                && m["queryParams"].as_array().is_none_or(Vec::is_empty)
                && m["method"].is_null()
        })
}

/// The Service and port an HTTPRoute of `objects` sends `host` to: the first Service backend
/// of its rule that matches every path, else of its first rule that has one.
pub(crate) fn backend_of<'a>(
    objects: impl Iterator<Item = &'a Value>,
    host: &str,
) -> Option<(String, u16)> {
    let route = objects
        .filter(|o| o["kind"] == "HTTPRoute")
        .find(|r| hostnames(r).any(|h| h == host))?;
    let service = |rule: &Value| {
        items(&rule["backendRefs"]).find_map(|(_, b)| {
            if !is_own_service(b) {
                return None;
            }
            let port = u16::try_from(b["port"].as_u64()?).ok()?;
            Some((b["name"].as_str()?.to_owned(), port))
        })
    };
    let rules: Vec<&Value> = items(&route["spec"]["rules"]).map(|(_, r)| r).collect();
    let everything = rules
        .iter()
        .filter(|r| matches_everything(r))
        .find_map(|r| service(r));
    everything.or_else(|| rules.iter().find_map(|r| service(r)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn route(spec: Value) -> Obj {
        Obj {
            group: GATEWAY_GROUP.to_owned(),
            kind: "HTTPRoute".to_owned(),
            name: "web".to_owned(),
            value: json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                          "metadata": {"name": "web"}, "spec": spec}),
        }
    }

    fn reasons(problems: &[Problem]) -> Vec<String> {
        problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_route_names_its_hosts() {
        let named = route(json!({"hostnames": ["shop.example.com"]}));
        assert!(check(&named, Some("shop")).is_empty());
        for spec in [
            json!({}),
            json!({"hostnames": []}),
            json!({"hostnames": null}),
        ] {
            assert_eq!(
                reasons(&check(&route(spec), Some("shop"))),
                [format!("HTTPRoute web: spec.hostnames: {NO_HOSTNAMES}")]
            );
        }
        assert_eq!(
            reasons(&check(
                &route(json!({"hostnames": "shop.example.com"})),
                Some("shop")
            )),
            ["HTTPRoute web: spec.hostnames: must be a list of host names, found a string"]
        );
        // A route whose spec is not a mapping is refused for its hosts, never written into.
        let mut odd = route(json!([1, 2]));
        assert_eq!(check(&odd, Some("shop")).len(), 1);
        rewrite(&mut odd.value, Some("shop"));
        assert_eq!(odd.value["spec"], json!([1, 2]));
    }

    #[test]
    fn gateway_parents_keep_pointing_at_the_shared_gateway() {
        let mut r = route(json!({
            "hostnames": ["shop.example.com"],
            "parentRefs": [
                {"name": "shared"},
                {"name": "edge", "namespace": "gateways", "sectionName": "http"},
                {"group": "", "kind": "Service", "name": "db", "namespace": "shop"},
                {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "own", "namespace": "shop"},
                "not a mapping",
            ],
        }));
        assert!(check(&r, Some("shop")).is_empty());
        rewrite(&mut r.value, Some("shop"));
        assert_eq!(
            r.value["spec"]["parentRefs"],
            json!([
                {"name": "shared", "namespace": "shop"},
                {"name": "edge", "namespace": "gateways", "sectionName": "http"},
                {"group": "", "kind": "Service", "name": "db"},
                {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "own", "namespace": "shop"},
                "not a mapping",
            ])
        );
    }

    #[test]
    fn a_gateway_parent_without_a_namespace_needs_a_known_source() {
        let r = route(json!({
            "hostnames": ["shop.example.com"],
            "parentRefs": [{"name": "edge", "namespace": "gateways"}, {"name": "shared"},
                           {"kind": "Service", "group": "", "name": "db"}],
        }));
        assert_eq!(
            reasons(&check(&r, None)),
            [
                "HTTPRoute web: spec.parentRefs[1].namespace: is empty, which means the route's own \
              namespace, and these manifests do not say which namespace they come from; name the \
              shared Gateway's namespace"
            ]
        );
    }

    #[test]
    fn backends_stay_in_the_preview() {
        let spec = json!({
            "hostnames": ["shop.example.com"],
            "rules": [
                {"backendRefs": [
                    {"name": "web", "port": 80},
                    {"name": "api", "namespace": "shop", "port": 8080,
                     "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "shadow", "namespace": "shop", "port": 80}}}]},
                ]},
                {"filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "audit", "namespace": "shop", "port": 80}}}],
                 "backendRefs": [{"name": "web", "port": 80}]},
            ],
        });
        let mut r = route(spec);
        assert!(check(&r, Some("shop")).is_empty());
        rewrite(&mut r.value, Some("shop"));
        let rules = &r.value["spec"]["rules"];
        assert_eq!(
            rules[0]["backendRefs"][1],
            json!({"name": "api", "port": 8080, "filters": [{"type": "RequestMirror",
                   "requestMirror": {"backendRef": {"name": "shadow", "port": 80}}}]})
        );
        assert_eq!(
            rules[1]["filters"][0]["requestMirror"]["backendRef"],
            json!({"name": "audit", "port": 80})
        );
    }

    #[test]
    fn a_backend_in_another_namespace_is_refused_by_its_field() {
        let r = route(json!({
            "hostnames": ["shop.example.com"],
            "rules": [
                {"backendRefs": [{"name": "web", "port": 80}, {"name": "billing", "namespace": "billing", "port": 80}]},
                {"filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "x", "namespace": "audit", "port": 80}}}],
                 "backendRefs": [{"name": "web", "port": 80}]},
            ],
        }));
        assert_eq!(
            reasons(&check(&r, Some("shop"))),
            [
                "HTTPRoute web: spec.rules[0].backendRefs[1].namespace: names namespace billing; \
                 a preview's routes lead only to its own Services (it owns no ReferenceGrant in billing)",
                "HTTPRoute web: spec.rules[1].filters[0].requestMirror.backendRef.namespace: names \
                 namespace audit; a preview's routes lead only to its own Services (it owns no \
                 ReferenceGrant in audit)",
            ]
        );
        let unknown = check(&r, None);
        assert_eq!(unknown.len(), 2);
        assert!(
            unknown[0].reason.contains("manifests must leave it empty"),
            "{unknown:?}"
        );
        // A hostile namespace is quoted short.
        let long = "n".repeat(10_000);
        let r = route(json!({"hostnames": ["a.example.com"],
                             "rules": [{"backendRefs": [{"name": "x", "namespace": long}]}]}));
        let said = reasons(&check(&r, Some("shop")));
        assert!(said[0].len() < 400, "{}", said[0]);
    }

    #[test]
    fn hostnames_are_read_and_replaced() {
        let mut r = route(json!({"hostnames": ["shop.example.com", "", 7, "*.example.com"]}));
        assert_eq!(
            hostnames(&r.value).collect::<Vec<_>>(),
            ["shop.example.com", "*.example.com"]
        );
        let map: BTreeMap<String, String> = [
            (
                "shop.example.com".to_owned(),
                "shop-1.preview.localhost".to_owned(),
            ),
            (
                "*.example.com".to_owned(),
                "wildcard-1.preview.localhost".to_owned(),
            ),
        ]
        .into();
        set_hostnames(&mut r.value, &map);
        assert_eq!(
            r.value["spec"]["hostnames"],
            json!([
                "shop-1.preview.localhost",
                "",
                7,
                "wildcard-1.preview.localhost"
            ])
        );
    }

    #[test]
    fn the_backend_of_a_host_is_the_service_that_takes_every_path() {
        let objects = [
            json!({"kind": "HTTPRoute", "spec": {"hostnames": ["a.example.com"], "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                 "backendRefs": [{"name": "api", "port": 8080}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                 "backendRefs": [{"group": "", "kind": "Service", "name": "web", "port": 80}]},
            ]}}),
            json!({"kind": "HTTPRoute", "spec": {"hostnames": ["b.example.com"], "rules": [
                {"matches": [{"path": {"type": "Exact", "value": "/x"}}],
                 "backendRefs": [{"kind": "Bucket", "group": "x", "name": "b"}, {"name": "x", "port": 81}]},
            ]}}),
            json!({"kind": "HTTPRoute", "spec": {"hostnames": ["c.example.com"], "rules": [
                {"backendRefs": [{"name": "c", "port": 70000}]},
            ]}}),
        ];
        assert_eq!(
            backend_of(objects.iter(), "a.example.com"),
            Some(("web".to_owned(), 80))
        );
        assert_eq!(
            backend_of(objects.iter(), "b.example.com"),
            Some(("x".to_owned(), 81))
        );
        assert_eq!(backend_of(objects.iter(), "c.example.com"), None);
        assert_eq!(backend_of(objects.iter(), "d.example.com"), None);
        assert!(serves(&objects[0], "web") && !serves(&objects[0], "db"));
        assert!(!serves(&objects[1], "b"));
    }
}
