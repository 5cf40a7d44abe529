//! Wake on visit for a preview's Gateway API HTTPRoutes, as pure rules: where a stopped
//! preview's routes go, how a route is parked and told from one that is not, the ReferenceGrant
//! that lets it reach Sandcastle's own namespace, and the hosts a visit names.
//!
//! An HTTPRoute cannot use the preview's `ExternalName` [`super::WAKE_SERVICE`] as Ingresses do:
//! Gateway API implementations refuse `ExternalName` Services as backends (Traefik's Gateway
//! provider does). So a stopped preview's routes are sent to a Service of Sandcastle's own
//! namespace whose port leads to the wake listener ([`WakeRouteService`],
//! `--wake-route-service`), which a [`reference_grant`] there lets the preview's routes name;
//! or, without one (or in another cluster), to [`PARKED_SERVICE`] in the preview's namespace,
//! a Service whose selector matches no pod, so that the Gateway answers at once that nothing
//! serves the host (503). Each route's own `spec.rules` are kept on it (in
//! `sandcastle.dev/stopped-routes`, as `{"rules": …}`) and put back as they were once the preview
//! is Ready. GRPCRoutes are not parked: no visitor opens them.

use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

use sandcastle_crd::labels::{MANAGED_BY, MANAGER, PARKED, PREVIEW};

/// The Gateway API's group.
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// The Service a stopped preview's HTTPRoutes are parked on when they wake nothing (a name
/// Sandcastle keeps for itself in a preview's namespace).
pub const PARKED_SERVICE: &str = "sandcastle-parked";

/// A Service of Sandcastle's own namespace whose port leads to the wake listener, for
/// HTTPRoutes (`--wake-route-service NAME:PORT`; the chart's own Service and its wake port).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WakeRouteService {
    name: String,
    port: u16,
}

/// Why a wake route Service was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WakeRouteServiceError {
    #[error(
        "expected NAME:PORT (a Service of Sandcastle's namespace, such as sandcastle:8081), got {0:?}"
    )]
    Shape(String),
    #[error("{0:?} is not a Service name (lower-case letters, digits and '-', at most 63)")]
    Name(String),
    #[error("{0:?} is not a port (1 to 65535)")]
    Port(String),
}

impl WakeRouteService {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

impl FromStr for WakeRouteService {
    type Err = WakeRouteServiceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, port) = s
            .rsplit_once(':')
            .ok_or_else(|| WakeRouteServiceError::Shape(s.to_owned()))?;
        // A Service's name is a DNS label that starts with a letter.
        let label =
            crate::naming::is_dns_label(name) && name.starts_with(|c: char| c.is_ascii_lowercase());
        if !label {
            return Err(WakeRouteServiceError::Name(name.to_owned()));
        }
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| WakeRouteServiceError::Port(port.to_owned()))?;
        Ok(Self {
            name: name.to_owned(),
            port,
        })
    }
}

impl fmt::Display for WakeRouteService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.name, self.port)
    }
}

/// Where a stopped preview's HTTPRoutes are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteParking<'a> {
    /// The waking page, through `service` in Sandcastle's namespace `home`.
    WakePage {
        service: &'a WakeRouteService,
        home: &'a str,
    },
    /// Nowhere: [`PARKED_SERVICE`], which has no endpoints.
    Closed,
}

impl RouteParking<'_> {
    /// Whether a visit wakes the preview.
    pub fn wakes(self) -> bool {
        matches!(self, RouteParking::WakePage { .. })
    }

    /// The backend every rule of a parked route names.
    fn backend(self) -> Value {
        match self {
            RouteParking::WakePage { service, home } => {
                json!({"name": service.name, "namespace": home, "port": service.port})
            }
            RouteParking::Closed => json!({"name": PARKED_SERVICE, "port": 80}),
        }
    }
}

/// The [`PARKED_SERVICE`] of `preview`'s namespace: no pod carries its selector's label, so its
/// EndpointSlice lists no endpoint (a Gateway answers 503; a Service without any EndpointSlice
/// would be refused as a backend, and answered 500).
pub fn parked_service(preview: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": PARKED_SERVICE,
            "labels": {MANAGED_BY: MANAGER, PREVIEW: preview},
        },
        "spec": {
            "clusterIP": "None",
            "selector": {PARKED: "nothing"},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        },
    })
}

/// The ReferenceGrant in Sandcastle's namespace `home` that lets the HTTPRoutes of `preview`'s
/// namespace `namespace` name the wake route `service`: named after the preview and labelled as
/// its, so that teardown and the orphan sweep find it.
pub fn reference_grant(
    service: &WakeRouteService,
    home: &str,
    preview: &str,
    namespace: &str,
) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {
            "name": preview,
            "namespace": home,
            "labels": {MANAGED_BY: MANAGER, PREVIEW: preview},
        },
        "spec": {
            "from": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute", "namespace": namespace}],
            "to": [{"group": "", "kind": "Service", "name": service.name}],
        },
    })
}

/// What an HTTPRoute routes, to be kept while it is parked: its rules.
pub fn rules_of(spec: &Value) -> Value {
    json!({"rules": spec.get("rules").cloned().unwrap_or(Value::Null)})
}

/// `spec`'s rules with every rule sent where `parking` says (its matches and name kept, its
/// filters and backends replaced by the one parked backend); `None` when it has no rule.
pub fn parked_rules(spec: &Value, parking: RouteParking<'_>) -> Option<Value> {
    let rules = spec.get("rules")?.as_array()?;
    if rules.is_empty() {
        return None;
    }
    let parked = rules
        .iter()
        .map(|rule| {
            let mut out = json!({"backendRefs": [parking.backend()]});
            for key in ["name", "matches"] {
                if let Some(v) = rule.get(key).filter(|v| !v.is_null()) {
                    out[key] = v.clone();
                }
            }
            out
        })
        .collect();
    Some(Value::Array(parked))
}

/// Whether a backend is a parked one: [`PARKED_SERVICE`], or a Service of another namespace
/// (the wake route Service; a preview's own routes never name one: the plan keeps their
/// backends in the preview).
fn is_parked_backend(backend: &Value) -> bool {
    let namespaced = backend["namespace"].as_str().is_some_and(|n| !n.is_empty());
    namespaced || backend["name"].as_str() == Some(PARKED_SERVICE)
}

/// Whether every rule of `spec` is parked (and there is one).
pub fn is_parked(spec: &Value) -> bool {
    let rules = spec.get("rules").and_then(Value::as_array);
    rules.is_some_and(|rules| {
        !rules.is_empty()
            && rules.iter().all(|r| {
                let backends = r["backendRefs"].as_array();
                backends.is_some_and(|b| b.len() == 1 && is_parked_backend(&b[0]))
            })
    })
}

/// The hosts an HTTPRoute `spec` serves, as a visit names them.
pub fn hosts_of(spec: &Value) -> Vec<String> {
    spec.get("hostnames")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(super::visited_host)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> WakeRouteService {
        "sandcastle:8081".parse().unwrap()
    }

    fn route_spec() -> Value {
        json!({
            "parentRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": "shared", "namespace": "gateways"}],
            "hostnames": ["42-shop.preview.example.com", "*.example.com"],
            "rules": [
                {"name": "api", "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                 "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "audit", "port": 80}}}],
                 "backendRefs": [{"group": "", "kind": "Service", "name": "api", "port": 8080, "weight": 1},
                                 {"group": "", "kind": "Service", "name": "api-canary", "port": 8080, "weight": 1}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                 "backendRefs": [{"group": "", "kind": "Service", "name": "web", "port": 80, "weight": 1}]},
                {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]},
            ],
        })
    }

    #[test]
    fn wake_route_services_are_a_name_and_a_port() {
        let s = service();
        assert_eq!((s.name(), s.port()), ("sandcastle", 8081));
        assert_eq!(s.to_string(), "sandcastle:8081");
        let refused = [
            (
                "sandcastle",
                WakeRouteServiceError::Shape("sandcastle".into()),
            ),
            (
                "Sandcastle:80",
                WakeRouteServiceError::Name("Sandcastle".into()),
            ),
            (
                "sandcastle.home:80",
                WakeRouteServiceError::Name("sandcastle.home".into()),
            ),
            (
                "8sandcastle:80",
                WakeRouteServiceError::Name("8sandcastle".into()),
            ),
            (":80", WakeRouteServiceError::Name(String::new())),
            ("sandcastle:0", WakeRouteServiceError::Port("0".into())),
            (
                "sandcastle:70000",
                WakeRouteServiceError::Port("70000".into()),
            ),
            (
                "sandcastle:http",
                WakeRouteServiceError::Port("http".into()),
            ),
        ];
        for (text, want) in refused {
            assert_eq!(text.parse::<WakeRouteService>(), Err(want), "{text}");
        }
    }

    #[test]
    fn parking_sends_every_rule_to_the_wake_route_service_and_keeps_its_matches() {
        let spec = route_spec();
        let s = service();
        let parking = RouteParking::WakePage {
            service: &s,
            home: "sandcastle",
        };
        let parked = parked_rules(&spec, parking).unwrap();
        assert_eq!(
            parked,
            json!([
                {"name": "api", "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                 "backendRefs": [{"name": "sandcastle", "namespace": "sandcastle", "port": 8081}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                 "backendRefs": [{"name": "sandcastle", "namespace": "sandcastle", "port": 8081}]},
                {"backendRefs": [{"name": "sandcastle", "namespace": "sandcastle", "port": 8081}]},
            ])
        );
        let mut whole = spec.clone();
        whole["rules"] = parked;
        assert!(is_parked(&whole));
        assert!(!is_parked(&spec));
        assert!(parking.wakes());
        // What is kept is what puts it back, exactly.
        assert_eq!(rules_of(&spec), json!({"rules": spec["rules"]}));
    }

    #[test]
    fn without_a_wake_route_service_routes_are_parked_on_a_service_without_endpoints() {
        let spec = route_spec();
        let parked = parked_rules(&spec, RouteParking::Closed).unwrap();
        assert_eq!(
            parked[1]["backendRefs"],
            json!([{"name": PARKED_SERVICE, "port": 80}])
        );
        let mut whole = spec;
        whole["rules"] = parked;
        assert!(is_parked(&whole));
        assert!(!RouteParking::Closed.wakes());
        let svc = parked_service("shop-pr-1");
        assert_eq!(svc["metadata"]["name"], PARKED_SERVICE);
        assert_eq!(svc["metadata"]["labels"][PREVIEW], "shop-pr-1");
        assert_eq!(svc["spec"]["selector"], json!({PARKED: "nothing"}));
        assert_eq!(svc["spec"]["ports"][0]["port"], 80);
    }

    #[test]
    fn a_route_without_rules_is_left_alone() {
        for spec in [json!({}), json!({"rules": []}), json!({"rules": "x"})] {
            assert_eq!(parked_rules(&spec, RouteParking::Closed), None, "{spec}");
            assert!(!is_parked(&spec), "{spec}");
        }
        // A rule with a backend of its own is not parked, whatever the others are.
        let spec = json!({"rules": [
            {"backendRefs": [{"name": PARKED_SERVICE, "port": 80}]},
            {"backendRefs": [{"name": "web", "port": 80}]},
        ]});
        assert!(!is_parked(&spec));
    }

    #[test]
    fn the_grant_lets_the_previews_routes_reach_the_wake_route_service_only() {
        let grant = reference_grant(&service(), "sandcastle", "shop-pr-1", "pv-shop-pr-1");
        assert_eq!(grant["metadata"]["namespace"], "sandcastle");
        assert_eq!(grant["metadata"]["name"], "shop-pr-1");
        assert_eq!(grant["metadata"]["labels"][MANAGED_BY], MANAGER);
        assert_eq!(grant["metadata"]["labels"][PREVIEW], "shop-pr-1");
        assert_eq!(
            grant["spec"],
            json!({
                "from": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute", "namespace": "pv-shop-pr-1"}],
                "to": [{"group": "", "kind": "Service", "name": "sandcastle"}],
            })
        );
    }

    #[test]
    fn hosts_are_read_as_visits_name_them() {
        assert_eq!(
            hosts_of(&json!({"hostnames": ["42-Shop.preview.example.com", "*.example.com", 3]})),
            ["42-shop.preview.example.com"]
        );
        assert_eq!(hosts_of(&json!({})), Vec::<String>::new());
    }
}
