//! Wake on visit, as pure rules: where a stopped preview's hosts go (Sandcastle's waking page,
//! named by a [`WakeTarget`]), how an Ingress is pointed there and back, and what a visit to a
//! host finds.
//!
//! While a preview is stopped, every backend of its Ingresses names the Service
//! [`WAKE_SERVICE`] in the preview's namespace: an `ExternalName` Service for Sandcastle's wake
//! listener or, where no wake listener is configured, a Service with no endpoints ([`Parking`]).
//! The Ingress's own backends are kept in an annotation and put back once the preview is Ready
//! again, so a visitor's reload lands on the app, not on a half-started one. Without a listener
//! they are parked all the same, so that what a stopped host answers (503 at once) does not
//! depend on how the ingress controller treats a Service left without endpoints. HTTPRoutes are
//! parked by the rules of [`routes`].

use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

use sandcastle_crd::labels::{MANAGED_BY, MANAGER, PREVIEW};
use sandcastle_crd::{Phase, PreviewEnvironment};

pub mod routes;

/// The Service standing for Sandcastle's waking page in a stopped preview's namespace (a name
/// Sandcastle keeps for itself there).
pub const WAKE_SERVICE: &str = "sandcastle-wake";

/// Where Sandcastle's wake listener is reached from the ingress controller: a DNS name (such as
/// `sandcastle.sandcastle.svc.cluster.local`) and a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WakeTarget {
    host: String,
    port: u16,
}

/// Why a wake target was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WakeTargetError {
    #[error("expected HOST:PORT (such as sandcastle.sandcastle.svc.cluster.local:8081), got {0:?}")]
    Shape(String),
    #[error("{0:?} is not a DNS name (lower-case letters, digits, '-' and '.')")]
    Host(String),
    #[error("{0:?} is not a port (1 to 65535)")]
    Port(String),
}

impl WakeTarget {
    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

impl FromStr for WakeTarget {
    type Err = WakeTargetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| WakeTargetError::Shape(s.to_owned()))?;
        let dns = host.len() <= 253
            && !host.is_empty()
            && host.split('.').all(super::naming::is_dns_label);
        if !dns {
            return Err(WakeTargetError::Host(host.to_owned()));
        }
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| WakeTargetError::Port(port.to_owned()))?;
        Ok(Self {
            host: host.to_owned(),
            port,
        })
    }
}

impl fmt::Display for WakeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Where a stopped preview's Ingresses are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parking<'a> {
    /// Sandcastle's waking page: a visit starts the preview.
    WakePage(&'a WakeTarget),
    /// Nowhere: a Service with no endpoints, so the ingress controller answers at once that
    /// nothing serves the host (no wake listener is configured for the preview's cluster).
    Closed,
}

impl Parking<'_> {
    /// Whether a visit wakes the preview.
    pub fn wakes(self) -> bool {
        matches!(self, Parking::WakePage(_))
    }

    fn port(self) -> u16 {
        match self {
            Parking::WakePage(target) => target.port,
            Parking::Closed => 80,
        }
    }
}

/// The [`WAKE_SERVICE`] of `preview`'s namespace.
pub fn wake_service(parking: Parking<'_>, preview: &str) -> Value {
    let ports = json!([{"name": "http", "port": parking.port(), "protocol": "TCP"}]);
    let spec = match parking {
        Parking::WakePage(target) => json!({
            "type": "ExternalName",
            "externalName": target.host,
            "ports": ports,
        }),
        // Headless and without a selector: no address is taken and no endpoint ever appears.
        Parking::Closed => json!({"type": "ClusterIP", "clusterIP": "None", "ports": ports}),
    };
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": WAKE_SERVICE,
            "labels": {MANAGED_BY: MANAGER, PREVIEW: preview},
        },
        "spec": spec,
    })
}

/// The backend naming the parked Service.
fn wake_backend(parking: Parking<'_>) -> Value {
    json!({"service": {"name": WAKE_SERVICE, "port": {"number": parking.port()}}})
}

fn is_wake_backend(backend: &Value) -> bool {
    backend.pointer("/service/name").and_then(Value::as_str) == Some(WAKE_SERVICE)
}

/// Every backend of an Ingress `spec`: the default one, then each path's.
fn backends_mut(spec: &mut Value) -> Vec<&mut Value> {
    let mut out = Vec::new();
    let Some(spec) = spec.as_object_mut() else {
        return out;
    };
    let (default, rules) = {
        let mut default = None;
        let mut rules = None;
        for (k, v) in spec.iter_mut() {
            match k.as_str() {
                "defaultBackend" => default = Some(v),
                "rules" => rules = Some(v),
                _ => {}
            }
        }
        (default, rules)
    };
    out.extend(default.filter(|d| !d.is_null()));
    let paths = rules
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(|r| r.pointer_mut("/http/paths").and_then(Value::as_array_mut))
        .flatten();
    out.extend(paths.filter_map(|p| p.get_mut("backend")));
    out
}

/// What an Ingress routes, to be kept while it is parked: its default backend and rules.
pub fn routes_of(spec: &Value) -> Value {
    json!({
        "defaultBackend": spec.get("defaultBackend").cloned().unwrap_or(Value::Null),
        "rules": spec.get("rules").cloned().unwrap_or(Value::Null),
    })
}

/// `spec`'s routes with every backend sent where `parking` says; `None` when it routes nothing.
pub fn parked_routes(spec: &Value, parking: Parking<'_>) -> Option<Value> {
    let mut routes = routes_of(spec);
    let backends = backends_mut(&mut routes);
    if backends.is_empty() {
        return None;
    }
    for b in backends {
        *b = wake_backend(parking);
    }
    Some(routes)
}

/// Whether every backend of `spec` is parked (and there is one).
pub fn is_parked(spec: &Value) -> bool {
    let mut spec = spec.clone();
    let backends = backends_mut(&mut spec);
    !backends.is_empty() && backends.iter().all(|b| is_wake_backend(b))
}

/// The hosts an Ingress `spec` serves, as a visit names them.
pub fn hosts_of(spec: &Value) -> Vec<String> {
    spec.get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("host").and_then(Value::as_str))
        .filter_map(visited_host)
        .collect()
}

/// The host a request's `Host` header names: lower-case, without a port or a trailing dot;
/// `None` when it is not a host name.
pub fn visited_host(header: &str) -> Option<String> {
    let header = header.trim();
    let host = match header.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => header,
    };
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let name = host.len() <= 253
        && !host.is_empty()
        && host.split('.').all(|l| {
            // `*.example.com` rules never match a visit, and are never a preview's host.
            super::naming::is_dns_label(l)
        });
    name.then_some(host)
}

/// What a visit to a preview's host finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visit {
    /// No live preview has this host: 404, and nothing is woken.
    Unknown,
    /// Stopped for being idle: the visit wakes it.
    Wake,
    /// Stopped on request (`/preview stop`, the API): a visit does not undo that.
    StoppedOnRequest,
    /// On its way up (woken, deploying, waiting): the page says what it is doing.
    Starting(String),
    /// Ready: the next load reaches the app.
    Ready,
    /// Failed: the page says why.
    Failed(String),
}

/// The live preview among `previews` whose hosts include `host` (torn-down ones never answer).
pub fn preview_for<'a>(
    previews: impl IntoIterator<Item = &'a PreviewEnvironment>,
    host: &str,
) -> Option<&'a PreviewEnvironment> {
    previews.into_iter().find(|pe| {
        pe.spec.teardown.is_none()
            && pe.status.as_ref().is_some_and(|s| {
                s.phase != Some(Phase::Removed) && s.hosts.iter().any(|h| h == host)
            })
    })
}

/// What a visit to `pe` (found by [`preview_for`]) finds.
pub fn visit(pe: Option<&PreviewEnvironment>) -> Visit {
    let Some(pe) = pe else {
        return Visit::Unknown;
    };
    let status = pe.status.clone().unwrap_or_default();
    let message = status.message.clone().unwrap_or_default();
    match status.phase {
        _ if pe.spec.stopped => Visit::StoppedOnRequest,
        Some(Phase::Stopped) => Visit::Wake,
        Some(Phase::Ready) => Visit::Ready,
        Some(Phase::Failed) => Visit::Failed(message),
        _ => Visit::Starting(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandcastle_crd::PreviewStatus;

    fn target() -> WakeTarget {
        "sandcastle.sandcastle.svc.cluster.local:8081"
            .parse()
            .unwrap()
    }

    fn ingress_spec() -> Value {
        json!({
            "ingressClassName": "nginx",
            "tls": [{"hosts": ["a.example.com"], "secretName": "tls"}],
            "rules": [
                {"host": "A.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
                    {"path": "/api", "pathType": "Prefix", "backend": {"service": {"name": "api", "port": {"name": "http"}}}},
                ]}},
                {"host": "b.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix", "backend": {"resource": {"apiGroup": "x", "kind": "Bucket", "name": "b"}}},
                ]}},
                {"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}},
            ],
        })
    }

    #[test]
    fn targets_are_host_and_port() {
        let t = target();
        assert_eq!(t.host(), "sandcastle.sandcastle.svc.cluster.local");
        assert_eq!(t.port(), 8081);
        assert_eq!(
            t.to_string(),
            "sandcastle.sandcastle.svc.cluster.local:8081"
        );
        assert_eq!(
            "localhost:0".parse::<WakeTarget>(),
            Err(WakeTargetError::Port("0".into()))
        );
        assert_eq!(
            "Sand_castle:80".parse::<WakeTarget>(),
            Err(WakeTargetError::Host("Sand_castle".into()))
        );
        assert!(matches!(
            "sandcastle".parse::<WakeTarget>(),
            Err(WakeTargetError::Shape(_))
        ));
        assert!("localhost:70000".parse::<WakeTarget>().is_err());
    }

    #[test]
    fn parking_sends_every_backend_to_the_waking_page_and_keeps_the_rest() {
        let spec = ingress_spec();
        let parked = parked_routes(&spec, Parking::WakePage(&target())).unwrap();
        let mut whole = spec.clone();
        whole["rules"] = parked["rules"].clone();
        assert!(is_parked(&whole));
        assert!(!is_parked(&spec));
        let backends: Vec<&Value> = parked["rules"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["http"]["paths"].as_array().unwrap())
            .map(|p| &p["backend"])
            .collect();
        assert_eq!(backends.len(), 4);
        for b in backends {
            assert_eq!(
                b,
                &json!({"service": {"name": "sandcastle-wake", "port": {"number": 8081}}})
            );
        }
        // Hosts, paths and the default backend (absent) stay as they were.
        assert_eq!(parked["rules"][0]["host"], "A.example.com");
        assert_eq!(parked["rules"][0]["http"]["paths"][1]["path"], "/api");
        assert_eq!(parked["defaultBackend"], Value::Null);
        // What is kept is what puts it back.
        assert_eq!(routes_of(&spec)["rules"], spec["rules"]);
    }

    #[test]
    fn a_default_backend_is_parked_too_and_an_ingress_without_backends_is_left_alone() {
        let spec = json!({"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}});
        let parked = parked_routes(&spec, Parking::WakePage(&target())).unwrap();
        assert_eq!(parked["defaultBackend"]["service"]["name"], WAKE_SERVICE);
        assert_eq!(
            parked_routes(&json!({"rules": []}), Parking::WakePage(&target())),
            None
        );
        assert!(!is_parked(&json!({})));
    }

    #[test]
    fn without_a_wake_listener_routes_are_parked_on_a_service_that_has_no_endpoints() {
        let spec = ingress_spec();
        let parked = parked_routes(&spec, Parking::Closed).unwrap();
        let mut whole = spec;
        whole["rules"] = parked["rules"].clone();
        assert!(is_parked(&whole));
        assert_eq!(
            parked["rules"][1]["http"]["paths"][0]["backend"],
            json!({"service": {"name": "sandcastle-wake", "port": {"number": 80}}})
        );
        let svc = wake_service(Parking::Closed, "shop-pr-1");
        assert_eq!(svc["spec"]["clusterIP"], "None");
        assert_eq!(svc["spec"]["selector"], Value::Null);
        assert_eq!(svc["spec"]["ports"][0]["port"], 80);
        assert!(!Parking::Closed.wakes());
        let t = target();
        let svc = wake_service(Parking::WakePage(&t), "shop-pr-1");
        assert_eq!(svc["spec"]["type"], "ExternalName");
        assert_eq!(svc["spec"]["externalName"], t.host());
        assert!(Parking::WakePage(&t).wakes());
    }

    #[test]
    fn hosts_are_read_as_visits_name_them() {
        assert_eq!(
            hosts_of(&ingress_spec()),
            ["a.example.com", "b.example.com"]
        );
        assert_eq!(
            hosts_of(&json!({"rules": [{"host": "*.example.com"}]})),
            Vec::<String>::new()
        );
        assert_eq!(
            visited_host("A.Example.com:8443"),
            Some("a.example.com".into())
        );
        assert_eq!(visited_host("a.example.com."), Some("a.example.com".into()));
        assert_eq!(visited_host("[::1]:80"), None);
        assert_eq!(visited_host(""), None);
        assert_eq!(visited_host("a b"), None);
    }

    fn preview(name: &str, phase: Phase, hosts: &[&str]) -> PreviewEnvironment {
        let mut pe = PreviewEnvironment::new(
            name,
            serde_json::from_value(json!({
            "repository": "acme/shop", "ref": "main", "sha": "0123456789abcdef0123456789abcdef01234567",
            "requestedBy": {"kind": "github-user", "name": "octocat"},
            "blueprint": "shop"}))
            .unwrap(),
        );
        pe.status = Some(PreviewStatus {
            phase: Some(phase),
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            message: Some("Waking up: 1 workloads restored".into()),
            ..PreviewStatus::default()
        });
        pe
    }

    #[test]
    fn a_visit_finds_only_the_live_preview_of_that_host() {
        let all = [
            preview("gone", Phase::Removed, &["a.example.com"]),
            preview("one", Phase::Stopped, &["a.example.com", "b.example.com"]),
            preview("two", Phase::Ready, &["c.example.com"]),
        ];
        let found = |h: &str| preview_for(&all, h).map(|p| p.metadata.name.clone().unwrap());
        assert_eq!(found("b.example.com").as_deref(), Some("one"));
        assert_eq!(found("a.example.com").as_deref(), Some("one"));
        assert_eq!(found("d.example.com"), None);
        assert_eq!(visit(preview_for(&all, "d.example.com")), Visit::Unknown);
        assert_eq!(visit(Some(&all[1])), Visit::Wake);
        assert_eq!(visit(Some(&all[2])), Visit::Ready);
    }

    #[test]
    fn a_visit_wakes_only_a_preview_stopped_for_idleness() {
        let mut pe = preview("one", Phase::Stopped, &["a.example.com"]);
        pe.spec.stopped = true;
        assert_eq!(visit(Some(&pe)), Visit::StoppedOnRequest);
        let pe = preview("one", Phase::Deploying, &["a.example.com"]);
        assert_eq!(
            visit(Some(&pe)),
            Visit::Starting("Waking up: 1 workloads restored".into())
        );
        let pe = preview("one", Phase::Failed, &["a.example.com"]);
        assert!(matches!(visit(Some(&pe)), Visit::Failed(_)));
    }
}
