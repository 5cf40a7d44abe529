//! Ingress hosts and the preview URL.

use serde_json::json;

use super::*;

fn ingress(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}}}\nspec: {spec}\n---\n"
    )
}

fn rule(host: &str, service: &str) -> String {
    format!(
        "{{host: {host}, http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: {service}, port: {{number: 80}}}}}}}}]}}}}"
    )
}

/// Hosts of every rule and TLS block, in plan order, and the URL.
fn hosts(yaml: &str, extra: &str) -> (Vec<String>, Option<String>) {
    let p = run(&with_app(yaml), extra).unwrap();
    let mut out = Vec::new();
    for o in p.objects().filter(|o| o["kind"] == "Ingress") {
        for r in o["spec"]["rules"].as_array().into_iter().flatten() {
            out.push(r["host"].as_str().unwrap_or("<none>").to_owned());
        }
        for t in o["spec"]["tls"].as_array().into_iter().flatten() {
            for h in t["hosts"].as_array().into_iter().flatten() {
                out.push(format!("tls:{}", h.as_str().unwrap_or_default()));
            }
        }
    }
    (out, p.url)
}

#[test]
fn hosts_come_from_the_template_and_stay_distinct() {
    let two = ingress(
        "web",
        &format!(
            "{{tls: [{{hosts: [shop.example.com], secretName: shop-tls}}], rules: [{}, {}, {{http: {{paths: []}}}}]}}",
            rule("shop.example.com", "web"),
            rule("admin.example.com", "admin")
        ),
    );
    let s = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let table = [
        (
            "",
            s(&[
                "shop-shop-pr-42.preview.localhost",
                "admin-shop-pr-42.preview.localhost",
                "<none>",
                "tls:shop-shop-pr-42.preview.localhost",
            ]),
            "https://shop-shop-pr-42.preview.localhost",
        ),
        (
            "host: '{{pr}}-{{repo}}.preview.example.com'",
            s(&[
                "42-shop.preview.example.com",
                "admin-42-shop.preview.example.com",
                "<none>",
                "tls:42-shop.preview.example.com",
            ]),
            "https://42-shop.preview.example.com",
        ),
        (
            "host: '{{branch}}.{{owner}}.preview.example.com'\nprimaryService: admin",
            s(&[
                "feature-login.acme.preview.example.com",
                "admin-feature-login.acme.preview.example.com",
                "<none>",
                "tls:feature-login.acme.preview.example.com",
            ]),
            "http://admin-feature-login.acme.preview.example.com",
        ),
        (
            "host: '{{host}}.{{shortSha}}.Preview.Example.com'\nprimaryService: missing",
            s(&[
                "shop.0123456.preview.example.com",
                "admin.0123456.preview.example.com",
                "<none>",
                "tls:shop.0123456.preview.example.com",
            ]),
            "https://shop.0123456.preview.example.com",
        ),
    ];
    for (extra, want, url) in table {
        assert_eq!(hosts(&two, extra), (want, Some(url.to_owned())), "{extra}");
    }
}

#[test]
fn hosts_meeting_on_the_same_label_are_told_apart() {
    let yaml = format!(
        "{}{}",
        ingress(
            "a",
            &format!("{{rules: [{}]}}", rule("api.example.com", "api"))
        ),
        ingress(
            "b",
            &format!(
                "{{rules: [{}, {}]}}",
                rule("api.example.org", "api2"),
                rule("api.example.com", "api")
            )
        )
    );
    assert_eq!(
        hosts(&yaml, "").0,
        [
            "api-shop-pr-42.preview.localhost",
            "api-shop-pr-42-2.preview.localhost",
            "api-shop-pr-42.preview.localhost",
        ]
    );
}

#[test]
fn ingresses_are_ordered_by_name_for_the_url() {
    let yaml = format!(
        "{}{}",
        ingress(
            "zeta",
            &format!("{{rules: [{}]}}", rule("z.example.com", "z"))
        ),
        ingress(
            "alpha",
            &format!("{{rules: [{}]}}", rule("a.example.com", "a"))
        )
    );
    let (hosts, url) = hosts(&yaml, "host: '{{pr}}.preview.example.com'");
    assert_eq!(
        hosts,
        ["42.preview.example.com", "z-42.preview.example.com"]
    );
    assert_eq!(url.as_deref(), Some("http://42.preview.example.com"));
}

#[test]
fn invalid_hosts_are_refused() {
    let yaml = ingress(
        "web",
        &format!("{{rules: [{}]}}", rule("shop.example.com", "web")),
    );
    assert_eq!(
        refusal(&yaml, "host: '{{pr}}_{{repo}}.example.com'"),
        "Blueprint shop: spec.host: gives shop.example.com the host \"42_shop.example.com\", which is not a valid DNS name"
    );
    let mut c = ctx();
    c.default_host = "{{nope}}.localhost".to_owned();
    let err = plan(&objects(&yaml), &blueprint(""), &c).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Blueprint shop: spec.host: unknown variable {{nope}}; use {{pr}} {{repo}} {{owner}} {{branch}} {{sha}} {{shortSha}} {{preview}} {{host}} (in Sandcastle's default host template \"{{nope}}.localhost\"; set spec.host)"
    );
}

#[test]
fn long_labels_are_fitted() {
    let yaml = ingress(
        "web",
        &format!("{{rules: [{}]}}", rule("shop.example.com", "web")),
    );
    let (hosts, _) = hosts(&yaml, "host: '{{sha}}-{{sha}}.example.com'");
    let first = hosts[0].split('.').next().unwrap_or_default();
    assert_eq!(first.len(), 63);
    assert!(hosts[0].ends_with(".example.com"));
}

#[test]
fn no_ingress_means_no_url() {
    let p = run(APP, "").unwrap();
    assert_eq!(p.url, None);
    assert_eq!(
        find(&p, "ConfigMap", "sandcastle-env")["data"]["SANDCASTLE_URL"],
        json!("")
    );
}

#[test]
fn thousands_of_colliding_hosts_are_numbered_in_order() {
    // Every host has the first label `a`, so with `{{host}}` in the template all meet.
    let n = 3_000;
    let rules: String = (0..n)
        .map(|i| format!("  - host: a.h{i}.example.com\n"))
        .collect();
    let yaml = format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: web}}\nspec:\n  rules:\n{rules}"
    );
    let (hosts, url) = hosts(&yaml, "");
    assert_eq!(hosts.len(), n);
    assert_eq!(
        url.as_deref(),
        Some("http://a-shop-pr-42.preview.localhost")
    );
    for (i, host) in hosts.iter().enumerate().skip(1) {
        assert_eq!(host, &format!("a-shop-pr-42-{}.preview.localhost", i + 1));
    }
}
