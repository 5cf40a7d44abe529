//! Refusals of kinds, namespaces, RBAC, reserved names, hooks and Blueprint templates.

use super::*;

#[test]
fn kinds_and_namespaces_are_refused_with_the_object_named() {
    let table = [
        (
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: node-exporter}\n",
            "",
            "DaemonSet node-exporter is not allowed: DaemonSets run on every node and cannot be copied (list it in spec.skip to leave it out)",
        ),
        (
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\n",
            "",
            "ClusterRole reader is not allowed: ClusterRole is cluster-scoped and a preview only owns its namespace",
        ),
        (
            "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: fast}\n",
            "allowKinds: [{apiVersion: storage.k8s.io/v1, kind: StorageClass}]",
            "StorageClass fast is not allowed: StorageClass is cluster-scoped and a preview only owns its namespace",
        ),
        (
            "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: tls}\n",
            "",
            "Certificate tls is not allowed: custom resource cert-manager.io Certificate is copied only when spec.allowKinds lists it",
        ),
        (
            "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: old}\n",
            "",
            "ReplicationController old is not allowed: ReplicationController is not a kind Sandcastle copies (add it to spec.allowKinds to copy it as it is)",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: billing}\n",
            "",
            "ConfigMap app: metadata.namespace: names namespace billing; a preview clones one namespace (the source is shop-staging)",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n",
            "",
            "ConfigMap app: metadata.name: v1 ConfigMap app is defined more than once",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sandcastle-env}\n",
            "",
            "ConfigMap sandcastle-env: metadata.name: sandcastle-env is reserved for the ConfigMap Sandcastle adds to every preview; rename it",
        ),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate, annotations: {sandcastle.dev/hook: post-install}}\nspec: {template: {spec: {containers: []}}}\n",
            "",
            "Job migrate: metadata.annotations[\"sandcastle.dev/hook\"]: unknown hook \"post-install\"; use seed or pre-delete",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, annotations: {sandcastle.dev/hook: seed}}\n",
            "",
            "ConfigMap x: metadata.annotations[\"sandcastle.dev/hook\"]: only Jobs can be hooks",
        ),
    ];
    for (yaml, extra, want) in table {
        assert_eq!(refusal(yaml, extra), want, "{yaml}");
    }
}

#[test]
fn objects_of_another_namespace_are_refused_as_such_even_when_names_repeat() {
    let yaml = "\
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop-staging}\n---
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: billing}\n---
apiVersion: v1\nkind: Secret\nmetadata: {name: app, namespace: billing}\n---
apiVersion: v1\nkind: Secret\nmetadata: {name: app}\n";
    assert_eq!(
        refusal(yaml, ""),
        "ConfigMap app: metadata.namespace: names namespace billing; a preview clones one namespace (the source is shop-staging)\n\
         Secret app: metadata.namespace: names namespace billing; a preview clones one namespace (the source is shop-staging)"
    );
    // The same object with and without the source namespace is still the same object.
    let twice = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop-staging}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n";
    assert_eq!(
        refusal(twice, ""),
        "ConfigMap app: metadata.name: v1 ConfigMap app is defined more than once"
    );
}

const BINDING: &str =
    "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\n";

#[test]
fn role_bindings_stay_inside_the_preview() {
    let table = [
        (
            "subjects: [{kind: ServiceAccount, name: api, namespace: monitoring}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}\n",
            Some(
                "RoleBinding b: subjects[0].namespace: ServiceAccount monitoring/api lives in another namespace; a preview binds only its own ServiceAccounts",
            ),
        ),
        (
            "subjects: [{kind: ServiceAccount, name: api, namespace: shop-staging}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n",
            Some(
                "RoleBinding b: roleRef: ClusterRole cluster-admin is not one of the built-in roles view, edit and admin; bind a Role of the blueprint instead",
            ),
        ),
        (
            "subjects: [{kind: User, name: alice}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n",
            None,
        ),
        (
            "subjects: [{kind: ServiceAccount, name: api}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}\n",
            None,
        ),
    ];
    for (body, want) in table {
        let yaml = with_app(&format!("{BINDING}{body}"));
        match (run(&yaml, ""), want) {
            (Err(e), Some(want)) => assert_eq!(e.to_string(), want),
            (Ok(_), None) => {}
            (got, want) => panic!("{body}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn service_account_subjects_of_the_source_move_with_the_copy() {
    let yaml = format!(
        "{BINDING}subjects:\n- {{kind: ServiceAccount, name: api, namespace: shop-staging}}\n- {{kind: ServiceAccount, name: worker}}\n- {{kind: Group, name: devs}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}}\n"
    );
    let p = run(&with_app(&yaml), "").unwrap();
    let subjects = &find(&p, "RoleBinding", "b")["subjects"];
    assert_eq!(subjects[0]["namespace"], "shop-pr-42");
    assert_eq!(subjects[1]["namespace"], "shop-pr-42");
    assert!(subjects[2].get("namespace").is_none());
}

#[test]
fn broken_templates_refuse_the_blueprint_naming_the_field() {
    let table = [
        (
            "host: \"{{pull}}.preview.example.com\"",
            "Blueprint shop: spec.host: unknown variable {{pull}}; use {{pr}} {{repo}} {{owner}} {{branch}} {{sha}} {{shortSha}} {{preview}} {{host}}",
        ),
        (
            "images: [{repository: ghcr.io/acme/api, tag: \"{{repo}}\"}]",
            "Blueprint shop: spec.images[0].tag: unknown variable {{repo}}; use {{sha}} {{shortSha}} {{pr}} {{branch}}",
        ),
        (
            "images: [{repository: ghcr.io/acme/api, tag: \".{{sha}}\"}]",
            "Blueprint shop: spec.images[0].tag: renders to \".0123456789abcdef0123456789abcdef01234567\", which is not a valid image tag ([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})",
        ),
    ];
    for (extra, want) in table {
        assert_eq!(refusal("", extra), want, "{extra}");
    }
}

#[test]
fn pr_variables_without_a_pr_are_refused() {
    let mut c = ctx();
    c.pr = None;
    let ingress = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\nspec: {rules: [{host: shop.example.com}]}\n";
    let bp = blueprint("host: \"{{pr}}.preview.example.com\"");
    let err = plan(&objects(ingress), &bp, &c).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Blueprint shop: spec.host: {{pr}} has no value here: this preview has no pull request"
    );
    // Without an Ingress the host template is never rendered.
    assert!(plan(&objects(APP), &bp, &c).is_ok());
}

#[test]
fn a_pool_preview_has_hosts_of_its_own_whatever_the_template() {
    let mut c = ctx();
    c.pr = None;
    c.branch = "main".to_owned();
    c.pool_member = Some("pool-0123abcd".to_owned());
    let ingress = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\nspec: {rules: [{host: shop.example.com}]}\n";
    for (template, want) in [
        (
            "{{pr}}-{{repo}}.preview.example.com",
            "pool-0123abcd-shop.preview.example.com",
        ),
        (
            "{{branch}}.preview.example.com",
            "pool-0123abcd.preview.example.com",
        ),
    ] {
        let bp = blueprint(&format!("host: \"{template}\""));
        let p = plan(&objects(&format!("{APP}---\n{ingress}")), &bp, &c).unwrap();
        assert_eq!(p.url.as_deref(), Some(format!("http://{want}").as_str()));
    }
}

#[test]
fn every_problem_is_reported_blueprint_first_then_by_kind_and_name() {
    let yaml = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: b}\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: other}\n";
    let err = run(yaml, "host: \"{{nope}}\"").unwrap_err();
    let text = err.to_string();
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(
        lines,
        [
            "Blueprint shop",
            "ConfigMap c",
            "DaemonSet a is not allowed",
            "DaemonSet b is not allowed"
        ]
    );
    assert_eq!(err.first().unwrap().name, "shop");
}

#[test]
fn objects_without_identity_are_refused() {
    let bp = blueprint("");
    let err = plan(
        &[
            serde_json::json!({"kind": "ConfigMap"}),
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        ],
        &bp,
        &ctx(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "ConfigMap #2: metadata.name: is missing (generateName is not supported: a preview needs stable names)\nobject #1: apiVersion/kind: an object needs apiVersion and kind"
    );
}

#[test]
fn pod_templates_that_are_not_mappings_are_refused_not_a_panic() {
    let table = [
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\nspec: {template: false}\n",
            "Deployment w: spec.template: must be a mapping, found a boolean",
        ),
        (
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: w}\nspec: [1]\n",
            "StatefulSet w: spec: must be a mapping, found a sequence",
        ),
        (
            "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec: {schedule: '* * * * *', jobTemplate: 'x'}\n",
            "CronJob c: spec.jobTemplate: must be a mapping, found a string",
        ),
        (
            "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: {spec: {template: 7}}}\n",
            "CronJob c: spec.jobTemplate.spec.template: must be a mapping, found a number",
        ),
    ];
    for (yaml, want) in table {
        assert_eq!(refusal(&with_app(yaml), ""), want, "{yaml}");
    }
}
