//! Tests of the guardrail objects.

use serde_json::json;

use super::*;
use crate::plan::PreviewContext;
use crate::{NamespaceName, PrNumber, RepoName, Sha};

fn ctx() -> PreviewContext {
    PreviewContext {
        preview: NamespaceName::new("shop-pr-42").unwrap(),
        namespace: NamespaceName::new("preview-shop-pr-42").unwrap(),
        source_namespace: None,
        blueprint: "shop".to_owned(),
        repo: RepoName::new("acme/shop").unwrap(),
        pr: Some(PrNumber::new(42).unwrap()),
        sha: Sha::new("0123456789abcdef0123456789abcdef01234567").unwrap(),
        branch: "main".to_owned(),
        default_host: String::new(),
        edge: Default::default(),
        pool_member: None,
        data: Default::default(),
    }
}

fn isolation(yaml: &str) -> Isolation {
    serde_saphyr::from_str(yaml).unwrap()
}

fn find<'v>(objects: &'v [Value], kind: &str, name: &str) -> &'v Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn namespace_labels_enforce_the_pod_security_level() {
    let labels = namespace_labels(&ctx(), &isolation("podSecurity: restricted"));
    let want: BTreeMap<String, String> = [
        ("app.kubernetes.io/managed-by", "sandcastle"),
        ("pod-security.kubernetes.io/enforce", "restricted"),
        ("pod-security.kubernetes.io/enforce-version", "latest"),
        ("sandcastle.dev/pr", "42"),
        ("sandcastle.dev/preview", "shop-pr-42"),
        ("sandcastle.dev/repo", "acme.shop"),
        (
            "sandcastle.dev/sha",
            "0123456789abcdef0123456789abcdef01234567",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(labels, want);
    let baseline = namespace_labels(&ctx(), &Isolation::default());
    assert_eq!(baseline["pod-security.kubernetes.io/enforce"], "baseline");
}

#[test]
fn the_blueprints_own_namespace_labels_tighten_the_namespace() {
    let from_blueprint: BTreeMap<String, String> = [
        ("pod-security.kubernetes.io/enforce", "restricted"),
        ("pod-security.kubernetes.io/warn", "restricted"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .into();
    let labels = namespace_labels_with(&ctx(), &Isolation::default(), &from_blueprint);
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "restricted");
    assert_eq!(
        labels["pod-security.kubernetes.io/enforce-version"],
        "latest"
    );
    assert_eq!(labels["pod-security.kubernetes.io/warn"], "restricted");
    assert_eq!(labels["sandcastle.dev/preview"], "shop-pr-42");
}

#[test]
fn network_isolation_modes_differ_only_in_internet_egress() {
    let internet = json!({"to": [
        {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8", "100.64.0.0/10", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"]}},
        {"ipBlock": {"cidr": "::/0", "except": ["fc00::/7", "fe80::/10"]}},
    ]});
    let namespace = network_policy(&ctx(), &Isolation::default(), "ingress-nginx").unwrap();
    let strict =
        network_policy(&ctx(), &isolation("networkPolicy: strict"), "ingress-nginx").unwrap();
    assert!(network_policy(&ctx(), &isolation("networkPolicy: off"), "ingress-nginx").is_none());

    let common_ingress = json!([
        {"from": [{"podSelector": {}}]},
        {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}]},
    ]);
    let common_egress = vec![
        json!({"to": [{"podSelector": {}}]}),
        json!({
            "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        }),
    ];
    for policy in [&namespace, &strict] {
        assert_eq!(policy["spec"]["podSelector"], json!({}));
        assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(policy["spec"]["ingress"], common_ingress);
        assert_eq!(policy["metadata"]["namespace"], "preview-shop-pr-42");
    }
    assert_eq!(strict["spec"]["egress"], json!(common_egress));
    let mut with_internet = common_egress;
    with_internet.push(internet);
    assert_eq!(namespace["spec"]["egress"], json!(with_internet));
}

#[test]
fn guardrails_include_quota_limits_and_accounts() {
    let objects = guardrail_objects(&ctx(), &Isolation::default(), "ingress-nginx");
    let names: Vec<String> = objects
        .iter()
        .map(|o| {
            format!(
                "{} {}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "ResourceQuota sandcastle-quota",
            "LimitRange sandcastle-limits",
            "NetworkPolicy sandcastle-isolation",
            "ServiceAccount default",
            "ServiceAccount preview-agent",
            "Secret preview-agent-anchor",
            "Role preview-agent",
            "RoleBinding preview-agent",
        ]
    );
    assert_eq!(
        find(&objects, "ResourceQuota", "sandcastle-quota")["spec"]["hard"],
        json!({
            "requests.cpu": "8", "requests.memory": "16Gi", "pods": "50",
            "requests.storage": "50Gi", "persistentvolumeclaims": "20", "services.loadbalancers": "0",
        })
    );
    assert_eq!(
        find(&objects, "LimitRange", "sandcastle-limits")["spec"]["limits"],
        json!([{"type": "Container", "default": {"cpu": "1", "memory": "1Gi"}, "defaultRequest": {"cpu": "50m", "memory": "64Mi"}}])
    );
    assert_eq!(
        find(&objects, "ServiceAccount", "default")["automountServiceAccountToken"],
        false
    );
    let role = find(&objects, "Role", "preview-agent");
    let rules = role["rules"].as_array().unwrap();
    let grants = |resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == resource)
                && r["verbs"].as_array().unwrap().iter().any(|x| x == verb)
        })
    };
    for resource in [
        "pods",
        "pods/log",
        "events",
        "deployments",
        "statefulsets",
        "replicasets",
        "jobs",
        "cronjobs",
        "services",
        "configmaps",
    ] {
        assert!(
            grants(resource, "get") && grants(resource, "list") && grants(resource, "watch"),
            "{resource}"
        );
    }
    assert!(grants("deployments", "patch"));
    assert!(!grants("secrets", "get"));
    assert!(!grants("pods", "delete"));
    let binding = find(&objects, "RoleBinding", "preview-agent");
    assert_eq!(binding["subjects"][0]["namespace"], "preview-shop-pr-42");
    for o in &objects {
        assert_eq!(
            o["metadata"]["labels"]["sandcastle.dev/preview"],
            "shop-pr-42"
        );
        assert_eq!(
            o["metadata"]["annotations"]["sandcastle.dev/repository"],
            "acme/shop"
        );
        assert_eq!(o["metadata"]["namespace"], "preview-shop-pr-42");
    }
    let off = guardrail_objects(&ctx(), &isolation("networkPolicy: off"), "ingress-nginx");
    assert!(off.iter().all(|o| o["kind"] != "NetworkPolicy"));
}

#[test]
fn reserved_names_are_matched_by_group_kind_and_name() {
    assert!(is_reserved("", "ConfigMap", "sandcastle-env"));
    assert!(is_reserved(
        "rbac.authorization.k8s.io",
        "Role",
        "preview-agent"
    ));
    assert!(!is_reserved("", "Secret", "sandcastle-env"));
    assert!(!is_reserved("example.com", "Role", "preview-agent"));
    // The front door's: the wildcard certificate's copy and the gate.
    assert!(is_reserved("", "Secret", "sandcastle-tls"));
    assert!(is_reserved("traefik.io", "Middleware", "sandcastle-gate"));
    assert!(!is_reserved("", "ConfigMap", "sandcastle-tls"));
}

const ALLOW_LIST: &str = r#"
networkPolicy: strict
egress:
  - cidrs: ["140.82.112.0/20", "2606:50c0::/32"]
    ports: [{port: 443}, {port: 22}]
  - namespace: shared-services
    podSelector: {matchLabels: {app: postgres}}
    ports: [{port: 5432}]
  - namespace: mocks
  - fqdns: [api.payments.example.com, "*.githubusercontent.com"]
    ports: [{port: 443}, {port: 8000, endPort: 8100, protocol: TCP}]
"#;

#[test]
fn egress_rules_extend_the_network_policy_after_its_own() {
    let policy = network_policy(&ctx(), &isolation(ALLOW_LIST), "ingress-nginx").unwrap();
    let egress = policy["spec"]["egress"].as_array().unwrap();
    // Same namespace and DNS come first (strict allows nothing else), then the allow list.
    assert_eq!(egress.len(), 5, "{egress:#?}");
    assert_eq!(
        egress[2],
        json!({"to": [{"ipBlock": {"cidr": "140.82.112.0/20"}}, {"ipBlock": {"cidr": "2606:50c0::/32"}}],
            "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 22}]})
    );
    assert_eq!(
        egress[3],
        json!({"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shared-services"}},
            "podSelector": {"matchLabels": {"app": "postgres"}}}],
            "ports": [{"protocol": "TCP", "port": 5432}]})
    );
    // No ports: every port of every pod of the namespace.
    assert_eq!(
        egress[4],
        json!({"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mocks"}}}]})
    );
}

#[test]
fn host_names_go_to_a_cilium_policy_with_dns_through_its_proxy() {
    let objects = guardrail_objects(&ctx(), &isolation(ALLOW_LIST), "ingress-nginx");
    let cilium = find(&objects, "CiliumNetworkPolicy", egress::FQDN_POLICY);
    assert_eq!(cilium["apiVersion"], "cilium.io/v2");
    assert_eq!(cilium["metadata"]["namespace"], "preview-shop-pr-42");
    assert_eq!(cilium["spec"]["endpointSelector"], json!({}));
    assert_eq!(
        cilium["spec"]["egress"],
        json!([
            {"toEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "kube-system"}}],
             "toPorts": [{"ports": [{"port": "53", "protocol": "ANY"}], "rules": {"dns": [{"matchPattern": "*"}]}}]},
            {"toFQDNs": [{"matchName": "api.payments.example.com"}, {"matchPattern": "*.githubusercontent.com"}],
             "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}, {"port": "8000", "protocol": "TCP", "endPort": 8100}]}]},
        ])
    );
    // Without host names, no Cilium policy: clusters without Cilium stay served.
    let plain = guardrail_objects(
        &ctx(),
        &isolation("egress: [{cidrs: [10.20.0.0/16]}]"),
        "ingress-nginx",
    );
    assert!(plain.iter().all(|o| o["kind"] != "CiliumNetworkPolicy"));
    assert!(is_reserved(
        "cilium.io",
        "CiliumNetworkPolicy",
        egress::FQDN_POLICY
    ));
}

#[test]
fn egress_problems_name_the_field_at_fault() {
    let problems = |yaml: &str| -> Vec<String> {
        egress::check(&isolation(yaml), "shop")
            .iter()
            .map(|p| format!("{} {}", p.field.as_deref().unwrap_or(""), p.reason))
            .collect()
    };
    assert!(problems(ALLOW_LIST).is_empty());
    assert_eq!(
        problems("networkPolicy: off\negress: [{cidrs: [10.0.0.0/8]}]"),
        [
            "spec.isolation.egress has no effect with networkPolicy: off; use networkPolicy: strict to allow only these destinations"
        ]
    );
    assert_eq!(
        problems(
            "egress: [{cidrs: [10.0.0.0/8, 10.1.0.1/16]}, {namespace: Shared_DB}, {fqdns: [localhost], ports: [{port: 0}]}]"
        ),
        [
            "spec.isolation.egress[0].cidrs[1] \"10.1.0.1/16\" has host bits set; the network is 10.1.0.0/16",
            "spec.isolation.egress[1].namespace \"Shared_DB\" is not a namespace name (lower-case letters, digits and '-', at most 63)",
            "spec.isolation.egress[2].fqdns[0] \"localhost\" is not a host name or a `*.`-wildcard of one",
            "spec.isolation.egress[2].ports[0] ports run from 1 to 65535, endPort not below port",
        ]
    );
}
