//! The preview's front door in its objects ([`crate::edge`] holds the rules): with a wildcard
//! certificate, every Ingress serves its hosts over TLS with the namespace's copy of it
//! ([`TLS_SECRET`]) and every host — of Ingresses and Gateway API routes — must be one it
//! serves; with `access: signedIn`, every route passes through the gate first (Traefik: a
//! forwardAuth `Middleware`, named by each Ingress and by a filter on each route rule).

use serde_json::{Value, json};

use super::{Obj, Problem};
use crate::edge::{
    Certificate, Edge, FORWARDED_HEADERS, GATE_MIDDLEWARE, Gate, GateProvider, TLS_SECRET,
};
use crate::preview::PreviewContext;
use sandcastle_crd::Access;

/// Traefik's annotation naming an Ingress's middlewares.
pub(crate) const TRAEFIK_MIDDLEWARES: &str = "traefik.ingress.kubernetes.io/router.middlewares";

const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

fn is_ingress(o: &Obj) -> bool {
    o.group == "networking.k8s.io" && o.kind == "Ingress"
}

fn is_route(o: &Obj) -> bool {
    o.group == GATEWAY_GROUP && (o.kind == "HTTPRoute" || o.kind == "GRPCRoute")
}

/// Put the front door on `objects` (the copied objects, hosts already rewritten); returns the
/// objects it adds (the gate's Middleware). Hosts the certificate does not serve, and a
/// `signedIn` preview without a gate, are problems.
pub(crate) fn apply(
    objects: &mut [&mut Obj],
    edge: &Edge,
    ctx: &PreviewContext,
    problems: &mut Vec<Problem>,
) -> Vec<Obj> {
    if let Some(cert) = &edge.tls {
        for obj in objects.iter_mut() {
            if is_ingress(obj) {
                serve_ingress_tls(obj, cert, problems);
            } else if is_route(obj) {
                check_route_hosts(obj, cert, problems);
            }
        }
    }
    if edge.access != Access::SignedIn {
        return Vec::new();
    }
    let routed = objects.iter().any(|o| is_ingress(o) || is_route(o));
    let Some(gate) = &edge.gate else {
        if routed {
            problems.push(Problem::field(
                "Blueprint",
                &ctx.blueprint,
                "spec.access",
                "signedIn puts Sandcastle's gate in front of the preview's routes, and no gate is \
                 configured (Sandcastle's --gate-url); set access: public or configure the gate",
            ));
        }
        return Vec::new();
    };
    if !routed {
        return Vec::new();
    }
    match gate.provider {
        GateProvider::Traefik => {
            let reference = format!("{}-{GATE_MIDDLEWARE}@kubernetescrd", ctx.namespace);
            for obj in objects.iter_mut() {
                if is_ingress(obj) {
                    name_middleware(&mut obj.value, &reference);
                } else if is_route(obj) {
                    filter_rules(&mut obj.value);
                }
            }
            vec![middleware(gate, ctx)]
        }
    }
}

/// The Ingress serves its rule hosts over TLS with [`TLS_SECRET`] (the blueprint's own `tls`
/// blocks named certificates of its own hosts); each host must be one the certificate serves.
fn serve_ingress_tls(obj: &mut Obj, cert: &Certificate, problems: &mut Vec<Problem>) {
    let mut hosts: Vec<String> = Vec::new();
    let rules = obj.value["spec"]["rules"].as_array().cloned();
    for (i, rule) in rules.iter().flatten().enumerate() {
        let Some(host) = rule["host"].as_str().filter(|h| !h.is_empty()) else {
            continue;
        };
        if !cert.serves(host) {
            problems.push(misfit(obj, &format!("spec.rules[{i}].host"), host, cert));
        }
        if !hosts.iter().any(|h| h == host) {
            hosts.push(host.to_owned());
        }
    }
    let Some(spec) = obj.value.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if hosts.is_empty() {
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("tls");
        }
    } else {
        spec["tls"] = json!([{"hosts": hosts, "secretName": TLS_SECRET}]);
    }
}

fn check_route_hosts(obj: &Obj, cert: &Certificate, problems: &mut Vec<Problem>) {
    let hostnames = obj.value["spec"]["hostnames"].as_array();
    for (i, host) in hostnames.into_iter().flatten().enumerate() {
        if let Some(host) = host.as_str()
            && !cert.serves(host)
        {
            problems.push(misfit(obj, &format!("spec.hostnames[{i}]"), host, cert));
        }
    }
}

fn misfit(obj: &Obj, field: &str, host: &str, cert: &Certificate) -> Problem {
    obj.problem(
        field,
        format!(
            "the preview host {host} is not served by the preview certificate ({}): keep preview \
             hosts one label under its wildcard (the Blueprint's spec.host, e.g. \
             {{{{pr}}}}-{{{{repo}}}}.<its domain>)",
            cert.describe()
        ),
    )
}

/// Name the gate first among the Ingress's Traefik middlewares.
fn name_middleware(ingress: &mut Value, reference: &str) {
    let meta = &mut ingress["metadata"];
    if !meta["annotations"].is_object() {
        meta["annotations"] = json!({});
    }
    let own = meta["annotations"][TRAEFIK_MIDDLEWARES]
        .as_str()
        .map(str::trim)
        .unwrap_or_default()
        .to_owned();
    let value = if own.is_empty() {
        reference.to_owned()
    } else {
        format!("{reference},{own}")
    };
    meta["annotations"][TRAEFIK_MIDDLEWARES] = Value::String(value);
}

/// The gate as the first filter of every rule of an HTTPRoute or GRPCRoute.
fn filter_rules(route: &mut Value) {
    let gate = json!({
        "type": "ExtensionRef",
        "extensionRef": {"group": "traefik.io", "kind": "Middleware", "name": GATE_MIDDLEWARE},
    });
    let Some(rules) = route["spec"]["rules"].as_array_mut() else {
        return;
    };
    for rule in rules.iter_mut().filter(|r| r.is_object()) {
        let mut filters = vec![gate.clone()];
        if let Some(own) = rule["filters"].as_array() {
            filters.extend(own.iter().cloned());
        }
        rule["filters"] = Value::Array(filters);
    }
}

/// The gate's forwardAuth Middleware: every request is asked about first; the answer's
/// [`FORWARDED_HEADERS`] replace the request's, so the app never sees Sandcastle's credentials.
fn middleware(gate: &Gate, ctx: &PreviewContext) -> Obj {
    let value = json!({
        "apiVersion": "traefik.io/v1alpha1",
        "kind": "Middleware",
        "metadata": {"name": GATE_MIDDLEWARE, "namespace": ctx.namespace.as_str()},
        "spec": {"forwardAuth": {
            "address": gate.check_url(ctx.preview.as_str()),
            "trustForwardHeader": false,
            "authResponseHeaders": FORWARDED_HEADERS,
        }},
    });
    Obj {
        group: "traefik.io".to_owned(),
        kind: "Middleware".to_owned(),
        name: GATE_MIDDLEWARE.to_owned(),
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::ctx;

    fn obj(value: Value) -> Obj {
        let api = value["apiVersion"].as_str().unwrap();
        Obj {
            group: api.rsplit_once('/').map_or("", |(g, _)| g).to_owned(),
            kind: value["kind"].as_str().unwrap().to_owned(),
            name: value["metadata"]["name"].as_str().unwrap().to_owned(),
            value,
        }
    }

    fn ingress(hosts: &[&str]) -> Obj {
        let rules: Vec<Value> = hosts.iter().map(|h| json!({"host": h})).collect();
        obj(
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web", "annotations": {TRAEFIK_MIDDLEWARES: "other-mw@kubernetescrd"}},
            "spec": {"rules": rules, "tls": [{"hosts": ["shop.example.com"], "secretName": "staging-cert"}]}}),
        )
    }

    fn route(hosts: &[&str]) -> Obj {
        obj(
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web"},
            "spec": {"hostnames": hosts, "rules": [
                {"backendRefs": [{"name": "web", "port": 80}]},
                {"filters": [{"type": "RequestHeaderModifier"}], "backendRefs": [{"name": "api", "port": 80}]}]}}),
        )
    }

    fn edge(access: Access, gate: bool) -> Edge {
        Edge {
            tls: Some(Certificate {
                names: vec!["*.preview.example.com".to_owned()],
            }),
            access,
            gate: gate.then(|| Gate {
                provider: GateProvider::Traefik,
                address: "http://gate.sandcastle.svc:8081".to_owned(),
            }),
        }
    }

    #[test]
    fn ingresses_serve_their_hosts_with_the_copied_certificate() {
        let mut a = ingress(&["42-shop.preview.example.com", "42-shop.preview.example.com"]);
        let mut problems = Vec::new();
        let added = apply(
            &mut [&mut a],
            &edge(Access::Public, false),
            &ctx(),
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert!(added.is_empty());
        assert_eq!(
            a.value["spec"]["tls"],
            json!([{"hosts": ["42-shop.preview.example.com"], "secretName": TLS_SECRET}])
        );
        // Public: no gate.
        assert_eq!(
            a.value["metadata"]["annotations"][TRAEFIK_MIDDLEWARES],
            "other-mw@kubernetescrd"
        );
    }

    #[test]
    fn hosts_the_wildcard_does_not_serve_are_named() {
        let mut a = ingress(&["api.42-shop.preview.example.com"]);
        let mut r = route(&["42.shop.example.org"]);
        let mut problems = Vec::new();
        apply(
            &mut [&mut a, &mut r],
            &edge(Access::Public, false),
            &ctx(),
            &mut problems,
        );
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(text[0].starts_with("Ingress web: spec.rules[0].host: the preview host api.42-shop.preview.example.com is not served by the preview certificate (*.preview.example.com)"), "{}", text[0]);
        assert!(
            text[1].starts_with(
                "HTTPRoute web: spec.hostnames[0]: the preview host 42.shop.example.org"
            ),
            "{}",
            text[1]
        );
    }

    #[test]
    fn signed_in_previews_pass_every_route_through_the_gate() {
        let c = ctx();
        let mut a = ingress(&["42-shop.preview.example.com"]);
        let mut r = route(&["42-shop.preview.example.com"]);
        let mut problems = Vec::new();
        let added = apply(
            &mut [&mut a, &mut r],
            &edge(Access::SignedIn, true),
            &c,
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            a.value["metadata"]["annotations"][TRAEFIK_MIDDLEWARES],
            format!(
                "{}-sandcastle-gate@kubernetescrd,other-mw@kubernetescrd",
                c.namespace
            )
        );
        for rule in r.value["spec"]["rules"].as_array().unwrap() {
            assert_eq!(rule["filters"][0]["type"], "ExtensionRef");
            assert_eq!(rule["filters"][0]["extensionRef"]["name"], GATE_MIDDLEWARE);
        }
        assert_eq!(
            r.value["spec"]["rules"][1]["filters"][1]["type"],
            "RequestHeaderModifier"
        );
        assert_eq!(added.len(), 1);
        let mw = &added[0].value;
        assert_eq!(
            mw["spec"]["forwardAuth"]["address"],
            format!(
                "http://gate.sandcastle.svc:8081/.sandcastle/gate/{}",
                c.preview
            )
        );
        assert_eq!(mw["spec"]["forwardAuth"]["trustForwardHeader"], false);
        assert_eq!(mw["metadata"]["namespace"], c.namespace.as_str());
    }

    #[test]
    fn signed_in_without_a_gate_is_refused_when_something_is_routed() {
        let mut a = ingress(&["42-shop.preview.example.com"]);
        let mut problems = Vec::new();
        apply(
            &mut [&mut a],
            &edge(Access::SignedIn, false),
            &ctx(),
            &mut problems,
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].field.as_deref(), Some("spec.access"));
        let mut nothing: [&mut Obj; 0] = [];
        let mut problems = Vec::new();
        apply(
            &mut nothing,
            &edge(Access::SignedIn, false),
            &ctx(),
            &mut problems,
        );
        assert!(problems.is_empty(), "nothing to gate: {problems:?}");
    }
}
