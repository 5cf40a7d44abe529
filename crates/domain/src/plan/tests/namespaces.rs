//! Manifests that declare the namespace they are cloned from (a Namespace object, and
//! `metadata.namespace` on every object), and objects of other namespaces.

use super::*;

/// What many upstream apps ship: their Namespace, and every object naming it.
const UPSTREAM: &str = "\
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: v1.29
    pod-security.kubernetes.io/warn: privileged
    pod-security.kubernetes.io/audit: restricted
    pod-security.kubernetes.io/audit-version: latest
    istio-injection: enabled
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {DB_URL: 'postgres://db.shop.svc.cluster.local:5432/app', CACHE: 'redis://cache.shop:6379'}
---
apiVersion: v1
kind: Service
metadata: {name: cache, namespace: shop}
spec: {selector: {app: cache}, ports: [{port: 6379}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: web
        image: web
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
";

fn manifests() -> PreviewContext {
    let mut c = ctx();
    c.source_namespace = None;
    c
}

fn plan_manifests(yaml: &str, extra: &str) -> Result<Plan, Refused> {
    plan(&objects(yaml), &blueprint(extra), &manifests())
}

#[test]
fn the_declared_namespace_is_the_previews_own() {
    let p = plan_manifests(UPSTREAM, "").unwrap();
    assert_eq!(
        left_out(&p, "Namespace", "shop"),
        Some(
            "the preview's own namespace; Sandcastle creates it (not kept: pod-security.kubernetes.io/enforce-version v1.29, only latest; pod-security.kubernetes.io/warn privileged, looser than the Blueprint's baseline)"
        )
    );
    assert_eq!(
        p.left_out.iter().filter(|l| l.kind == "Namespace").count(),
        1,
        "declared twice, left out once"
    );
    assert!(p.objects().all(|o| o["kind"] != "Namespace"));
    for o in p.objects() {
        assert_eq!(o["metadata"]["namespace"], "shop-pr-42", "{o}");
    }
    let settings = find(&p, "ConfigMap", "settings");
    assert_eq!(
        settings["data"]["DB_URL"],
        "postgres://db.shop-pr-42.svc.cluster.local:5432/app"
    );
    assert_eq!(settings["data"]["CACHE"], "redis://cache.shop-pr-42:6379");
}

#[test]
fn the_namespace_keeps_pod_security_labels_never_looser_than_the_blueprint() {
    let labels = namespace_labels(&objects(UPSTREAM), &blueprint(""), &manifests());
    let want: BTreeMap<String, String> = [
        ("pod-security.kubernetes.io/audit", "restricted"),
        ("pod-security.kubernetes.io/audit-version", "latest"),
        ("pod-security.kubernetes.io/enforce", "restricted"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .into();
    assert_eq!(labels, want);

    let namespace = |labels: &str| {
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop, labels: {{{labels}}}}}\n")
    };
    let table = [
        (
            "pod-security.kubernetes.io/enforce: baseline",
            "",
            vec!["enforce=baseline"],
        ),
        (
            "pod-security.kubernetes.io/enforce: baseline",
            "isolation: {podSecurity: restricted}",
            vec![],
        ),
        ("pod-security.kubernetes.io/enforce: privileged", "", vec![]),
        ("pod-security.kubernetes.io/enforce: Restricted", "", vec![]),
        (
            "pod-security.kubernetes.io/warn: restricted, pod-security.kubernetes.io/warn-version: latest",
            "isolation: {podSecurity: restricted}",
            vec!["warn=restricted", "warn-version=latest"],
        ),
        (
            "pod-security.kubernetes.io/warn-version: latest",
            "",
            vec![],
        ),
        ("pod-security.kubernetes.io/exempt: yes-please", "", vec![]),
        ("team: shop", "", vec![]),
    ];
    for (labels, extra, want) in table {
        let got = namespace_labels(
            &objects(&namespace(labels)),
            &blueprint(extra),
            &manifests(),
        );
        let got: Vec<String> = got
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}={v}",
                    k.trim_start_matches("pod-security.kubernetes.io/")
                )
            })
            .collect();
        assert_eq!(got, want, "{labels} with {extra:?}");
    }
    // Two declarations: the stricter one counts, whatever the order.
    let two = format!(
        "{}---\n{}",
        namespace("pod-security.kubernetes.io/enforce: restricted"),
        namespace("pod-security.kubernetes.io/enforce: baseline")
    );
    let mut reversed = objects(&two);
    let forward = namespace_labels(&reversed, &blueprint(""), &manifests());
    reversed.reverse();
    assert_eq!(
        forward,
        namespace_labels(&reversed, &blueprint(""), &manifests())
    );
    assert_eq!(forward["pod-security.kubernetes.io/enforce"], "restricted");
}

#[test]
fn a_stricter_namespace_checks_pods_at_its_level() {
    let yaml = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop, labels: {{pod-security.kubernetes.io/enforce: restricted}}}}\n---\n{}",
        deployment("api", "      containers: [{name: c, image: x}]\n")
    );
    let err = plan_manifests(&yaml, "").unwrap_err().to_string();
    assert!(
        err.contains(
            "Deployment api: spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation: must be false under Pod Security level restricted"
        ),
        "{err}"
    );
}

#[test]
fn the_namespace_every_object_names_is_the_source() {
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: shop}}\ndata: {{url: 'http://web.shop.svc'}}\n---\n{}",
        deployment("web", "      containers: [{name: c, image: x}]\n")
    );
    let p = plan_manifests(&yaml, "").unwrap();
    assert_eq!(
        find(&p, "ConfigMap", "a")["data"]["url"],
        "http://web.shop-pr-42.svc"
    );
    assert_eq!(
        find(&p, "ConfigMap", "a")["metadata"]["namespace"],
        "shop-pr-42"
    );
}

#[test]
fn other_namespaces_stay_refused() {
    let web = deployment("web", "      containers: [{name: c, image: x}]\n");
    let table = [
        (
            // A Namespace of another name than the source.
            format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: billing}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: shop}}\n---\n{web}"
            ),
            "Namespace billing is not allowed: a preview clones one namespace (the source is shop)",
        ),
        (
            format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: billing}}\n---\n{web}"
            ),
            "ConfigMap a: metadata.namespace: names namespace billing; a preview clones one namespace (the source is shop)",
        ),
        (
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: shop}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b, namespace: billing}}\n---\n{web}"
            ),
            "ConfigMap a: metadata.namespace: names namespace shop; a preview clones one namespace, and these manifests name several (billing, shop)\nConfigMap b: metadata.namespace: names namespace billing; a preview clones one namespace, and these manifests name several (billing, shop)",
        ),
        (
            format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: billing}}\n---\n{web}"
            ),
            "Namespace billing is not allowed: a preview clones one namespace, and these manifests name several (billing, shop)\nNamespace shop is not allowed: a preview clones one namespace, and these manifests name several (billing, shop)",
        ),
    ];
    for (yaml, want) in table {
        assert_eq!(
            plan_manifests(&yaml, "").unwrap_err().to_string(),
            want,
            "{yaml}"
        );
    }
    // A live source's namespace is given: a Namespace of another name is refused.
    let yaml = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\n{web}");
    assert_eq!(
        refusal(&yaml, ""),
        "Namespace shop is not allowed: a preview clones one namespace (the source is shop-staging)"
    );
    let yaml =
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop-staging}}\n---\n{web}");
    assert_eq!(
        left_out(&run(&yaml, "").unwrap(), "Namespace", "shop-staging"),
        Some("the preview's own namespace; Sandcastle creates it")
    );
}
