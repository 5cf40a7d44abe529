//! What is copied and left out, and how copies are changed: labels, env, images, namespace
//! references, phases and determinism.

use serde_json::json;

use super::*;

#[test]
fn controller_made_and_kubernetes_own_objects_are_left_out() {
    let yaml = "\
apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web-5d8f, ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: u, controller: true}]}\n---
apiVersion: v1\nkind: Pod\nmetadata: {name: web-5d8f-x, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f, uid: u, controller: true}]}\n---
apiVersion: v1\nkind: Endpoints\nmetadata: {name: web}\n---
apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-abc}\n---
apiVersion: apps/v1\nkind: ControllerRevision\nmetadata: {name: db-7f}\n---
apiVersion: v1\nkind: Event\nmetadata: {name: web.1}\n---
apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: leader}\n---
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-root-ca.crt}\n---
apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default}\n---
apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: staging-quota}\n---
apiVersion: batch/v1\nkind: Job\nmetadata: {name: nightly-123, ownerReferences: [{apiVersion: batch/v1, kind: CronJob, name: nightly, uid: u}]}\n---
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: generated, ownerReferences: [{apiVersion: example.com/v1, kind: App, name: shop, uid: u, controller: true}]}\n---
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: annotated, ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: other, uid: u}]}\n---
apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {template: {spec: {containers: []}}, volumeClaimTemplates: [{metadata: {name: data}}]}\n---
apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data-db-0}\n---
apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: cache-0, ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: cache, uid: u}]}\n---
apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: uploads}\n";
    let p = run(yaml, "").unwrap();
    let table = [
        (
            "ReplicaSet",
            "web-5d8f",
            "ReplicaSets are created by their Deployment",
        ),
        ("Pod", "web-5d8f-x", "Pods are created by their workloads"),
        (
            "Endpoints",
            "web",
            "Endpoints are created from their Service",
        ),
        (
            "EndpointSlice",
            "web-abc",
            "EndpointSlices are created from their Service",
        ),
        (
            "ControllerRevision",
            "db-7f",
            "ControllerRevisions are history kept by their workload",
        ),
        ("Event", "web.1", "Events are history, not configuration"),
        (
            "Lease",
            "leader",
            "Leases are taken by running programs (leader election)",
        ),
        (
            "ConfigMap",
            "kube-root-ca.crt",
            "published by Kubernetes in every namespace",
        ),
        (
            "ServiceAccount",
            "default",
            "every namespace has its own default ServiceAccount (Sandcastle sets it up)",
        ),
        (
            "ResourceQuota",
            "staging-quota",
            "the preview namespace gets its own quota from the Blueprint's isolation.quota",
        ),
        ("Job", "nightly-123", "created by CronJob nightly"),
        ("ConfigMap", "generated", "owned by App shop"),
        (
            "PersistentVolumeClaim",
            "data-db-0",
            "created by StatefulSet db from its volumeClaimTemplates",
        ),
        (
            "PersistentVolumeClaim",
            "cache-0",
            "created by StatefulSet cache from its volumeClaimTemplates",
        ),
    ];
    for (kind, name, want) in table {
        assert_eq!(left_out(&p, kind, name), Some(want), "{kind} {name}");
    }
    // Owner references without `controller: true` do not make an object controller-made.
    assert!(
        find(&p, "ConfigMap", "annotated")["metadata"]
            .get("ownerReferences")
            .is_none()
    );
    find(&p, "PersistentVolumeClaim", "uploads");
    assert_eq!(p.left_out.len(), table.len());
}

#[test]
fn secrets_follow_the_policy() {
    let yaml = "\
apiVersion: v1\nkind: Secret\nmetadata: {name: opaque}\ntype: Opaque\n---
apiVersion: v1\nkind: Secret\nmetadata: {name: untyped}\n---
apiVersion: v1\nkind: Secret\nmetadata: {name: regcred}\ntype: kubernetes.io/dockerconfigjson\n---
apiVersion: v1\nkind: Secret\nmetadata: {name: oldcred}\ntype: kubernetes.io/dockercfg\n---
apiVersion: v1\nkind: Secret\nmetadata: {name: tls}\ntype: kubernetes.io/tls\n---
apiVersion: v1\nkind: Secret\nmetadata: {name: api-token}\ntype: kubernetes.io/service-account-token\n---
apiVersion: v1\nkind: Secret\nmetadata: {name: sh.helm.release.v1.shop.v3}\ntype: helm.sh/release.v1\n";
    let names = |extra: &str| -> Vec<String> {
        let p = run(&with_app(yaml), extra).unwrap();
        p.objects()
            .filter(|o| o["kind"] == "Secret")
            .map(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(names(""), ["oldcred", "opaque", "regcred", "untyped"]);
    assert_eq!(
        names(
            "secrets: {mode: allowlist, allowlist: [tls, api-token, sh.helm.release.v1.shop.v3, nope]}"
        ),
        ["tls"]
    );
    assert_eq!(names("secrets: {mode: none}"), Vec::<String>::new());
    let p = run(&with_app(yaml), "").unwrap();
    assert_eq!(
        left_out(&p, "Secret", "tls"),
        Some(
            "type kubernetes.io/tls is not copied by spec.secrets.mode copy (only Opaque and image pull Secrets)"
        )
    );
    assert_eq!(
        left_out(&p, "Secret", "api-token"),
        Some("ServiceAccount token: Kubernetes issues tokens in each namespace")
    );
    assert_eq!(
        left_out(&p, "Secret", "sh.helm.release.v1.shop.v3"),
        Some("Helm release record: the preview is not a Helm release")
    );
}

const SKIP_SET: &str = "\
apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: admin}\nspec: {selector: {matchLabels: {app: admin}}, template: {metadata: {labels: {app: admin, tier: web}}, spec: {containers: []}}}\n---
apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web, tier: web}}, spec: {containers: []}}}\n---
apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: node-exporter}\n---
apiVersion: v1\nkind: Service\nmetadata: {name: admin}\nspec: {selector: {app: admin}}\n---
apiVersion: v1\nkind: Service\nmetadata: {name: web-tier}\nspec: {selector: {tier: web}}\n---
apiVersion: v1\nkind: Service\nmetadata: {name: external}\nspec: {type: ExternalName, externalName: example.com}\n---
apiVersion: v1\nkind: Service\nmetadata: {name: orphan}\nspec: {selector: {app: gone}}\n---
apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: admin}\nspec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: admin}}\n---
apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\nspec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}}\n---
apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: admin}\nspec: {selector: {matchExpressions: [{key: app, operator: In, values: [admin]}]}}\n---
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: admin}\n";

#[test]
fn skipping_a_workload_leaves_out_what_only_serves_it() {
    let p = run(SKIP_SET, "skip: [admin, node-exporter]").unwrap();
    let table = [
        ("Deployment", "admin", Some("named in spec.skip")),
        ("DaemonSet", "node-exporter", Some("named in spec.skip")),
        (
            "Service",
            "admin",
            Some("selects only pods of skipped workloads (Deployment admin)"),
        ),
        (
            "HorizontalPodAutoscaler",
            "admin",
            Some("scales Deployment admin, which is skipped"),
        ),
        (
            "PodDisruptionBudget",
            "admin",
            Some("selects only pods of skipped workloads (Deployment admin)"),
        ),
        ("Service", "web-tier", None),
        ("Service", "external", None),
        ("Service", "orphan", None),
        ("HorizontalPodAutoscaler", "web", None),
        ("ConfigMap", "admin", None),
    ];
    for (kind, name, want) in table {
        assert_eq!(left_out(&p, kind, name), want, "{kind} {name}");
        if want.is_none() {
            find(&p, kind, name);
        }
    }
}

#[test]
fn objects_and_pod_templates_are_labelled_but_selectors_are_not() {
    let yaml = "\
apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, labels: {app: web, sandcastle.dev/pr: '7'}}\nspec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: x}]}}}\n---
apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec: {schedule: '@daily', jobTemplate: {spec: {template: {spec: {containers: [{name: c, image: x}]}}}}}\n";
    let p = run(yaml, "").unwrap();
    let web = find(&p, "Deployment", "web");
    let object_labels = json!({
        "app": "web",
        "app.kubernetes.io/managed-by": "sandcastle",
        "sandcastle.dev/preview": "shop-pr-42",
        "sandcastle.dev/repo": "acme.shop",
        "sandcastle.dev/pr": "42",
        "sandcastle.dev/sha": SHA,
    });
    assert_eq!(web["metadata"]["labels"], object_labels);
    assert_eq!(web["metadata"]["namespace"], "shop-pr-42");
    assert_eq!(
        web["metadata"]["annotations"]["sandcastle.dev/repository"],
        "acme/shop"
    );
    // Pod templates carry only labels that never change while the pods live: no commit, and
    // nothing naming the preview or its pull request (a pull request may take a sandbox over).
    let mut template_labels = object_labels;
    for changing in [
        "sandcastle.dev/sha",
        "sandcastle.dev/preview",
        "sandcastle.dev/pr",
    ] {
        template_labels.as_object_mut().unwrap().remove(changing);
    }
    assert_eq!(
        web["spec"]["template"]["metadata"]["labels"],
        template_labels
    );
    assert_eq!(
        web["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );

    let cron = find(&p, "CronJob", "nightly");
    template_labels.as_object_mut().unwrap().remove("app");
    assert_eq!(
        cron["spec"]["jobTemplate"]["metadata"]["labels"],
        template_labels
    );
    assert_eq!(
        cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"],
        template_labels
    );

    let mut no_pr = ctx();
    no_pr.pr = None;
    let p = plan(&objects(yaml), &blueprint(""), &no_pr).unwrap();
    let web = find(&p, "Deployment", "web");
    assert!(web["metadata"]["labels"].get("sandcastle.dev/pr").is_none());
    assert_eq!(
        find(&p, "ConfigMap", "sandcastle-env")["data"]["SANDCASTLE_PR"],
        ""
    );
}

#[test]
fn every_container_gets_the_built_in_variables_once_and_matching_images() {
    let yaml = "\
apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\nspec:\n  template:\n    spec:\n      initContainers: [{name: migrate, image: 'ghcr.io/acme/api:1.0@sha256:00ff'}]\n      containers:\n      - {name: api, image: 'ghcr.io/acme/api:1.0', envFrom: [{configMapRef: {name: sandcastle-env}}]}\n      - {name: proxy, image: 'envoyproxy/envoy:v1.30'}\n---
apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: report}\nspec: {jobTemplate: {spec: {template: {spec: {containers: [{name: r, image: 'ghcr.io/acme/worker:2'}]}}}}}\n";
    let p = run(
        yaml,
        "images: [{repository: ghcr.io/acme/api}, {repository: ghcr.io/acme/worker, tag: 'pr-{{pr}}-{{shortSha}}-{{branch}}'}]",
    )
    .unwrap();
    let env = json!([{"configMapRef": {"name": "sandcastle-env"}}]);
    let pod = &find(&p, "Deployment", "api")["spec"]["template"]["spec"];
    assert_eq!(
        pod["initContainers"][0]["image"],
        format!("ghcr.io/acme/api:{SHA}")
    );
    assert_eq!(pod["initContainers"][0]["envFrom"], env);
    assert_eq!(
        pod["containers"][0]["image"],
        format!("ghcr.io/acme/api:{SHA}")
    );
    assert_eq!(pod["containers"][0]["envFrom"], env);
    assert_eq!(pod["containers"][1]["image"], "envoyproxy/envoy:v1.30");
    assert_eq!(pod["containers"][1]["envFrom"], env);
    let cron = &find(&p, "CronJob", "report")["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(
        cron["containers"][0]["image"],
        "ghcr.io/acme/worker:pr-42-0123456-feature-Login"
    );
    assert_eq!(cron["containers"][0]["envFrom"], env);
}

#[test]
fn the_env_config_map_holds_the_built_in_variables() {
    let yaml = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\nspec: {rules: [{host: shop.example.com}]}\n";
    let p = run(&with_app(yaml), "").unwrap();
    let env = find(&p, "ConfigMap", "sandcastle-env");
    assert_eq!(
        env["data"],
        json!({
            "SANDCASTLE_PREVIEW": "shop-pr-42",
            "SANDCASTLE_URL": "http://shop-shop-pr-42.preview.localhost",
            "SANDCASTLE_PR": "42",
            "SANDCASTLE_SHA": SHA,
            "SANDCASTLE_REPOSITORY": "acme/shop",
            "SANDCASTLE_BRANCH": "feature/Login",
            "SANDCASTLE_NAMESPACE": "shop-pr-42",
        })
    );
    assert_eq!(
        env["metadata"]["labels"]["sandcastle.dev/preview"],
        "shop-pr-42"
    );
    assert_eq!(p.steps[0].stage, Stage::Config);
}

#[test]
fn source_namespace_names_are_rewritten_in_dns_form_only() {
    let yaml = "\
apiVersion: v1\nkind: Service\nmetadata: {name: db}\nspec: {selector: {app: db}}\n---
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, annotations: {note: 'see db.shop-staging'}}\ndata:\n  DATABASE_URL: postgres://db.shop-staging.svc.cluster.local:5432/app\n  SHORT: db.shop-staging:5432\n  NAMESPACE: shop-staging\n  EXTERNAL: https://db.shop-staging.example.com\n  PROFILE: spring.profiles.shop-staging\n";
    let p = run(&with_app(yaml), "").unwrap();
    let cm = find(&p, "ConfigMap", "app");
    assert_eq!(
        cm["data"],
        json!({
            "DATABASE_URL": "postgres://db.shop-pr-42.svc.cluster.local:5432/app",
            "SHORT": "db.shop-pr-42:5432",
            "NAMESPACE": "shop-staging",
            "EXTERNAL": "https://db.shop-staging.example.com",
            "PROFILE": "spring.profiles.shop-staging",
        })
    );
    assert_eq!(cm["metadata"]["annotations"]["note"], "see db.shop-pr-42");
}

#[test]
fn phases_follow_the_kind_order_and_hooks() {
    let yaml = "\
apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\n---
apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\n---
apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\n---
apiVersion: batch/v1\nkind: Job\nmetadata: {name: cleanup, annotations: {sandcastle.dev/hook: pre-delete}}\n---
apiVersion: batch/v1\nkind: Job\nmetadata: {name: once}\n---
apiVersion: batch/v1\nkind: Job\nmetadata: {name: seed, annotations: {sandcastle.dev/hook: seed}}\n---
apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\n---
apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---
apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\n---
apiVersion: v1\nkind: Service\nmetadata: {name: web}\n---
apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: allow}\n---
apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: uploads}\n---
apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: {kind: Role, name: r}\n---
apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\n---
apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: api}\n---
apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---
apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: tls}\n---
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n";
    let p = run(
        yaml,
        "allowKinds: [{apiVersion: cert-manager.io/v1, kind: Certificate}]",
    )
    .unwrap();
    let steps: Vec<(Stage, Vec<String>)> = p
        .steps
        .iter()
        .map(|s| {
            let objects = s
                .objects
                .iter()
                .map(|o| {
                    format!(
                        "{} {}",
                        o["kind"].as_str().unwrap_or_default(),
                        o["metadata"]["name"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            (s.stage, objects)
        })
        .collect();
    let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        steps,
        [
            (
                Stage::Config,
                strings(&[
                    "ConfigMap app",
                    "ConfigMap sandcastle-env",
                    "Secret s",
                    "ServiceAccount api",
                    "Role r",
                    "RoleBinding b",
                    "PersistentVolumeClaim uploads",
                    "NetworkPolicy allow",
                    "Service web",
                ])
            ),
            (Stage::Data, strings(&["StatefulSet db"])),
            (Stage::Seed, strings(&["Job seed"])),
            (
                Stage::Apps,
                strings(&[
                    "Deployment web",
                    "CronJob nightly",
                    "Job once",
                    "HorizontalPodAutoscaler web",
                    "PodDisruptionBudget web",
                    "Certificate tls",
                ])
            ),
            (Stage::Ingress, strings(&["Ingress web"])),
        ]
    );
    assert_eq!(p.pre_delete.len(), 1);
    assert_eq!(p.pre_delete[0]["metadata"]["name"], "cleanup");
    assert_eq!(p.url, None);
    let phases: Vec<&str> = Stage::ALL.iter().map(|p| p.as_str()).collect();
    assert_eq!(phases, ["config", "data", "seed", "apps", "ingress"]);
}

#[test]
fn extra_kinds_are_copied_as_they_are() {
    let yaml = "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: tls, uid: u, namespace: shop-staging}\nspec: {dnsNames: [api.shop-staging.svc], secretName: tls}\nstatus: {ready: true}\n";
    let p = run(
        yaml,
        "allowKinds: [{apiVersion: cert-manager.io/v1alpha2, kind: Certificate}]",
    )
    .unwrap();
    let cert = find(&p, "Certificate", "tls");
    assert_eq!(
        cert["spec"],
        json!({"dnsNames": ["api.shop-pr-42.svc"], "secretName": "tls"})
    );
    assert!(cert.get("status").is_none());
    assert_eq!(cert["metadata"]["namespace"], "shop-pr-42");
    assert!(cert["metadata"].get("uid").is_none());
}
