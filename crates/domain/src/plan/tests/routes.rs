//! Gateway API routes in a plan: hosts shared with Ingresses, the URL an HTTPRoute gives, what
//! is kept of their references, and the Gateway API objects refused or left out.

use serde_json::json;

use super::*;

fn route(kind: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: {kind}\nmetadata: {{name: {name}}}\nspec: {spec}\n---\n"
    )
}

fn http_route(name: &str, hosts: &str, service: &str) -> String {
    route(
        "HTTPRoute",
        name,
        &format!(
            "{{parentRefs: [{{name: shared, namespace: gateways}}], hostnames: [{hosts}], rules: [{{backendRefs: [{{name: {service}, port: 80}}]}}]}}"
        ),
    )
}

const INGRESS: &str = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\nspec: {rules: [{host: shop.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]}\n---\n";

const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: app}, ports: [{name: http, port: 80}]}\n---\n";

#[test]
fn an_ingress_and_a_route_naming_one_host_get_one_preview_host() {
    let yaml = format!(
        "{}{INGRESS}",
        http_route("web", "shop.example.com, admin.example.com", "web")
    );
    let p = run(
        &with_app(&yaml),
        "host: '{{pr}}-{{repo}}.preview.example.com'",
    )
    .unwrap();
    assert_eq!(
        find(&p, "Ingress", "web")["spec"]["rules"][0]["host"],
        "42-shop.preview.example.com"
    );
    assert_eq!(
        find(&p, "HTTPRoute", "web")["spec"]["hostnames"],
        json!([
            "42-shop.preview.example.com",
            "admin-42-shop.preview.example.com"
        ])
    );
    // The Ingress gives the URL.
    assert_eq!(p.url.as_deref(), Some("http://42-shop.preview.example.com"));
}

#[test]
fn without_an_ingress_the_route_leading_to_the_primary_service_gives_the_url() {
    let yaml = format!(
        "{SERVICE}{}{}{}",
        http_route("a-admin", "admin.example.com", "admin"),
        http_route("b-web", "shop.example.com, www.example.com", "web"),
        route(
            "GRPCRoute",
            "api",
            "{parentRefs: [{name: shared, namespace: gateways}], hostnames: [grpc.example.com], rules: [{backendRefs: [{name: api, port: 9000}]}]}"
        ),
    );
    let p = run(&with_app(&yaml), "primaryService: web").unwrap();
    assert_eq!(
        p.url.as_deref(),
        Some("http://shop-shop-pr-42.preview.localhost")
    );
    assert_eq!(p.backend(), Some(("web".to_owned(), 80)));
    assert_eq!(
        find(&p, "GRPCRoute", "api")["spec"]["hostnames"],
        json!(["grpc-shop-pr-42.preview.localhost"])
    );
    // Without a primary service (or one no route leads to): the first route's first host.
    for extra in ["", "primaryService: nothing"] {
        let p = run(&with_app(&yaml), extra).unwrap();
        assert_eq!(
            p.url.as_deref(),
            Some("http://admin-shop-pr-42.preview.localhost"),
            "{extra}"
        );
    }
    // Routes go last, with the Ingresses, HTTPRoutes before GRPCRoutes.
    let last = p.steps.last().unwrap();
    assert_eq!(last.stage, Stage::Ingress);
    let kinds: Vec<&str> = last
        .objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["HTTPRoute", "HTTPRoute", "GRPCRoute"]);
}

#[test]
fn references_keep_the_shared_gateway_and_the_previews_own_services() {
    let yaml = route(
        "HTTPRoute",
        "web",
        "{parentRefs: [{name: shared}], hostnames: [shop.example.com], rules: [{backendRefs: [{name: web, namespace: shop-staging, port: 80}]}]}",
    );
    let p = run(&with_app(&yaml), "").unwrap();
    let r = find(&p, "HTTPRoute", "web");
    assert_eq!(
        r["spec"]["parentRefs"],
        json!([{"name": "shared", "namespace": "shop-staging"}])
    );
    assert_eq!(
        r["spec"]["rules"][0]["backendRefs"],
        json!([{"name": "web", "port": 80}])
    );
    assert_eq!(r["metadata"]["namespace"], "shop-pr-42");
    assert_eq!(
        r["metadata"]["labels"]["sandcastle.dev/preview"],
        "shop-pr-42"
    );
}

#[test]
fn gateways_are_refused_and_reference_grants_left_out() {
    let yaml = format!(
        "{}{}",
        route(
            "Gateway",
            "shared",
            "{gatewayClassName: traefik, listeners: [{name: http, port: 80, protocol: HTTP}]}"
        ),
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: traefik}\nspec: {controllerName: traefik.io/gateway-controller}\n",
    );
    assert_eq!(
        refusal(&with_app(&yaml), ""),
        "Gateway shared is not allowed: a Gateway is shared by every preview and never cloned: \
         keep it out of the blueprint (in a namespace of its own) and point the routes' \
         spec.parentRefs at it\n\
         GatewayClass traefik is not allowed: GatewayClass is cluster-scoped and a preview only \
         owns its namespace; a Gateway is shared by every preview and never cloned: keep it out of \
         the blueprint (in a namespace of its own) and point the routes' spec.parentRefs at it"
    );
    let grant = "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: from-edge}\nspec: {from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: edge}], to: [{group: '', kind: Service}]}\n";
    let p = run(&with_app(grant), "").unwrap();
    assert_eq!(
        left_out(&p, "ReferenceGrant", "from-edge"),
        Some(
            "a ReferenceGrant lets routes of other namespaces reach into the source namespace; a \
             preview grants nothing to other namespaces"
        )
    );
}

#[test]
fn routes_without_hosts_or_reaching_other_namespaces_are_refused() {
    let yaml = format!(
        "{}{}",
        route(
            "HTTPRoute",
            "everything",
            "{parentRefs: [{name: shared, namespace: gateways}], rules: [{backendRefs: [{name: web, port: 80}]}]}"
        ),
        route(
            "GRPCRoute",
            "billing",
            "{hostnames: [api.example.com], rules: [{backendRefs: [{name: billing, namespace: billing, port: 9000}]}]}"
        ),
    );
    assert_eq!(
        refusal(&with_app(&yaml), ""),
        "GRPCRoute billing: spec.rules[0].backendRefs[0].namespace: names namespace billing; a \
         preview's routes lead only to its own Services (it owns no ReferenceGrant in billing)\n\
         HTTPRoute everything: spec.hostnames: a route without hostnames would take every host of \
         the shared Gateway, other previews' too; name the hosts it serves (they are rewritten \
         from the host template)"
    );
}

#[test]
fn manifests_that_name_no_namespace_must_name_the_gateways() {
    let yaml = with_app(&route(
        "HTTPRoute",
        "web",
        "{parentRefs: [{name: shared}], hostnames: [shop.example.com]}",
    ));
    let mut c = ctx();
    c.source_namespace = None;
    let bp = blueprint("");
    let err = plan(&objects(&yaml), &bp, &c).unwrap_err();
    assert_eq!(
        err.to_string(),
        "HTTPRoute web: spec.parentRefs[0].namespace: is empty, which means the route's own \
         namespace, and these manifests do not say which namespace they come from; name the \
         shared Gateway's namespace"
    );
    // Manifests that declare their namespace say which it is.
    let declared =
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\n{yaml}");
    let p = plan(&objects(&declared), &bp, &c).unwrap();
    assert_eq!(
        find(&p, "HTTPRoute", "web")["spec"]["parentRefs"][0]["namespace"],
        "shop"
    );
}

#[test]
fn the_plan_does_not_depend_on_the_order_of_routes() {
    let a = http_route("a", "a.example.com, shared.example.com", "web");
    let b = http_route("b", "shared.example.com, b.example.com", "web");
    let one = run(&with_app(&format!("{a}{b}")), "host: '{{pr}}.example.com'").unwrap();
    let two = run(&with_app(&format!("{b}{a}")), "host: '{{pr}}.example.com'").unwrap();
    assert_eq!(one, two);
    assert_eq!(
        find(&one, "HTTPRoute", "b")["spec"]["hostnames"],
        json!(["shared-42.example.com", "b-42.example.com"])
    );
    assert_eq!(one.url.as_deref(), Some("http://42.example.com"));
}
