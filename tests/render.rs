//! `sandcastle render` as people run it: the real binary on the blueprint fixtures, its YAML
//! snapshotted, its refusals on stderr with a non-zero exit.

use std::process::{Command, Output};

use sandcastle::domain::plan::parse_manifests;

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/blueprints");

fn render(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sandcastle-dev"));
    cmd.current_dir(FIXTURES).arg("render").args(args);
    // Only the flags given here count.
    for var in [
        "SANDCASTLE_NAMESPACE_PREFIX",
        "SANDCASTLE_DEFAULT_HOST",
        "SANDCASTLE_INGRESS_NAMESPACE",
        "SANDCASTLE_PUBLIC_URL",
    ] {
        cmd.env_remove(var);
    }
    cmd.output().expect("the sandcastle binary runs")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "render failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

#[test]
fn renders_a_published_application() {
    let out = render(&[
        "--blueprint",
        "k8s-guestbook/guestbook-all-in-one.yaml",
        "--repo",
        "acme/guestbook",
        "--pr",
        "7",
        "--sha",
        SHA,
        "--branch",
        "feature/login",
    ]);
    insta::assert_snapshot!("guestbook", stdout(&out));
}

#[test]
fn renders_the_guardrails_too_when_asked() {
    let out = render(&[
        "--blueprint",
        "bookinfo/bookinfo.yaml",
        "--blueprint",
        "k8s-guestbook/guestbook-all-in-one.yaml",
        "--repo",
        "acme/guestbook",
        "--pr",
        "7",
        "--sha",
        SHA,
        "--guardrails",
        "--namespace-prefix",
        "preview",
        "--ingress-namespace",
        "traefik",
    ]);
    let yaml = stdout(&out);
    let objects = parse_manifests(&yaml).expect("the output is YAML kubectl reads");
    assert_eq!(objects[0]["kind"], "Namespace");
    assert_eq!(objects[0]["metadata"]["name"], "preview-guestbook-pr-7");
    assert_eq!(
        objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "baseline"
    );
    let kinds: Vec<&str> = objects[1..8]
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "ResourceQuota",
            "LimitRange",
            "NetworkPolicy",
            "ServiceAccount",
            "ServiceAccount",
            "Secret",
            "Role"
        ]
    );
    assert!(
        yaml.contains("kubernetes.io/metadata.name: traefik"),
        "{yaml}"
    );
    for obj in &objects[1..] {
        assert_eq!(
            obj["metadata"]["namespace"], "preview-guestbook-pr-7",
            "{obj}"
        );
    }
    assert!(
        objects
            .iter()
            .any(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "productpage-v1"),
        "objects of every file are planned"
    );
}

#[test]
fn renders_with_a_blueprint_spec_and_objects_read_back_from_a_namespace() {
    let out = render(&[
        "--blueprint",
        "kitchen-sink/config.yaml",
        "--blueprint",
        "kitchen-sink/services.yaml",
        "--blueprint",
        "kitchen-sink/workloads.yaml",
        "--source-namespace",
        "shop-staging",
        "--spec",
        "kitchen-sink/blueprint.yaml",
        "--blueprint-name",
        "shop",
        "--repo",
        "acme/shop",
        "--pr",
        "42",
        "--sha",
        SHA,
        "--branch",
        "feature/Login",
    ]);
    let yaml = stdout(&out);
    // The same plan as the fixture's own snapshot (crates/domain/src/plan/snapshots), after one
    // header.
    let snapshot = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/domain/src/plan/snapshots/sandcastle_domain__plan__fixtures__kitchen-sink.snap"
    ))
    .unwrap();
    let planned = snapshot.splitn(3, "---\n").nth(2).unwrap();
    let mut lines = yaml.splitn(3, '\n');
    assert_eq!(
        lines.next(),
        Some("# preview shop-pr-42 of acme/shop#42 at 0123456, in namespace shop-pr-42")
    );
    assert_eq!(lines.next(), Some("# read 3 files, 43 objects"));
    assert_eq!(lines.next().unwrap().trim_end(), planned.trim_end());
}

#[test]
fn a_refused_blueprint_exits_non_zero_and_says_why() {
    for (fixture, extra, message) in [
        (
            "refused-daemonset/manifests.yaml",
            None,
            "error: blueprint refused: DaemonSet node-exporter is not allowed: DaemonSets run on every node",
        ),
        (
            "refused-clusterrole/manifests.yaml",
            None,
            "error: blueprint refused: ClusterRole shop-operator is not allowed",
        ),
        (
            "refused-hostpath-restricted/manifests.yaml",
            Some("refused-hostpath-restricted/blueprint.yaml"),
            "error: blueprint refused: Deployment log-shipper: spec.template.spec.volumes[0].hostPath",
        ),
        (
            "refused-privileged-baseline/manifests.yaml",
            None,
            "error: blueprint refused: Deployment builder: spec.template.spec.containers[0].securityContext.privileged: privileged containers are forbidden by Pod Security level baseline",
        ),
    ] {
        let mut args = vec![
            "--blueprint",
            fixture,
            "--repo",
            "acme/shop",
            "--pr",
            "1",
            "--sha",
            SHA,
        ];
        if let Some(spec) = extra {
            args.extend(["--spec", spec]);
        }
        let out = render(&args);
        assert!(!out.status.success(), "{fixture} was not refused");
        assert!(
            out.stdout.is_empty(),
            "{fixture}: nothing printed on stdout"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let (read, refusal) = stderr.split_once('\n').unwrap_or_default();
        assert!(read.starts_with("read 1 file, "), "{fixture}: {stderr}");
        assert!(
            refusal.starts_with(message),
            "{fixture}: expected `{message}…` after what was read, got:\n{stderr}"
        );
    }
}

#[test]
fn every_problem_of_a_refused_blueprint_is_listed() {
    let out = render(&[
        "--blueprint",
        "refused-many/objects.yaml",
        "--source-namespace",
        "shop-staging",
        "--spec",
        "refused-many/blueprint.yaml",
        "--blueprint-name",
        "shop",
        "--repo",
        "acme/shop",
        "--pr",
        "42",
        "--sha",
        SHA,
    ]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("refused_many", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn bad_input_is_named() {
    let out = render(&[
        "--blueprint",
        "no/such.yaml",
        "--repo",
        "acme/shop",
        "--pr",
        "1",
        "--sha",
        SHA,
    ]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "error: --blueprint no/such.yaml: no such file or directory, and not a namespace name"
    );

    let out = render(&[
        "--blueprint",
        "k8s-guestbook",
        "--repo",
        "acme/shop",
        "--pr",
        "1",
        "--sha",
        "abc",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("error: --sha: "),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh directory for files a test writes.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sandcastle-render-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_duplicate_key_is_applied_as_kubectl_does_with_a_warning() {
    let dir = scratch("duplicate-key");
    let file = dir.join("app.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata:\n  mode: slow\n  mode: fast\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {app: web}\n  labels: {app: web, tier: front}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: nginx}]\n",
    )
    .unwrap();
    let out = render(&[
        "--blueprint",
        file.to_str().unwrap(),
        "--repo",
        "acme/shop",
        "--pr",
        "1",
        "--sha",
        SHA,
    ]);
    let yaml = stdout(&out);
    let path = file.display();
    let warnings = [
        format!(
            "warning: {path}: document 1 (line 6): duplicate key data.mode: the last value is used, as kubectl does"
        ),
        format!(
            "warning: {path}: document 2 (line 13): duplicate key metadata.labels: the last value is used, as kubectl does"
        ),
    ];
    let stderr = String::from_utf8_lossy(&out.stderr);
    for w in &warnings {
        assert!(stderr.lines().any(|l| l == w), "{w} on stderr:\n{stderr}");
        assert!(
            yaml.lines().any(|l| l == format!("# {w}")),
            "{w} in the output:\n{yaml}"
        );
    }
    let objects = parse_manifests(&yaml).unwrap();
    let settings = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "settings")
        .unwrap();
    assert_eq!(settings["data"]["mode"], "fast");
    let web = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "web")
        .unwrap();
    assert_eq!(web["metadata"]["labels"]["tier"], "front");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An application as upstream projects often ship it: its Namespace, declared in two files, and
/// every object naming it.
const DECLARES_ITS_NAMESPACE: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/warn: privileged
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {API: 'http://api.shop.svc.cluster.local'}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: api
        image: ghcr.io/acme/api:1
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
";

#[test]
fn the_namespace_the_manifests_declare_is_the_previews_own() {
    let dir = scratch("declares-namespace");
    let file = dir.join("app.yaml");
    std::fs::write(&file, DECLARES_ITS_NAMESPACE).unwrap();
    for extra in [&[][..], &["--source-namespace", "shop"][..]] {
        let mut args = vec![
            "--blueprint",
            file.to_str().unwrap(),
            "--repo",
            "acme/shop",
            "--pr",
            "3",
            "--sha",
            SHA,
            "--guardrails",
        ];
        args.extend(extra);
        let yaml = stdout(&render(&args));
        let objects = parse_manifests(&yaml).unwrap();
        assert_eq!(objects[0]["kind"], "Namespace");
        assert_eq!(objects[0]["metadata"]["name"], "shop-pr-3");
        let labels = &objects[0]["metadata"]["labels"];
        assert_eq!(
            labels["pod-security.kubernetes.io/enforce"], "restricted",
            "{extra:?}: the stricter level of the blueprint's Namespace"
        );
        assert_eq!(
            labels["pod-security.kubernetes.io/enforce-version"],
            "latest"
        );
        assert!(labels.get("pod-security.kubernetes.io/warn").is_none());
        assert_eq!(
            objects.iter().filter(|o| o["kind"] == "Namespace").count(),
            1,
            "{extra:?}: the blueprint's Namespace is not applied"
        );
        for o in &objects[1..] {
            assert_eq!(o["metadata"]["namespace"], "shop-pr-3", "{o}");
        }
        let settings = objects
            .iter()
            .find(|o| o["metadata"]["name"] == "settings")
            .unwrap();
        assert_eq!(
            settings["data"]["API"],
            "http://api.shop-pr-3.svc.cluster.local"
        );
        assert!(
            yaml.contains(
                "#   Namespace shop: the preview's own namespace; Sandcastle creates it (not kept: pod-security.kubernetes.io/warn privileged, looser than the Blueprint's baseline)"
            ),
            "{yaml}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_was_read_is_said_and_reading_nothing_fails() {
    let out = render(&[
        "--blueprint",
        "k8s-guestbook",
        "--repo",
        "acme/shop",
        "--pr",
        "1",
        "--sha",
        SHA,
    ]);
    let yaml = stdout(&out);
    assert_eq!(yaml.lines().nth(1), Some("# read 1 file, 6 objects"));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "read 1 file, 6 objects"
    );

    let empty = scratch("empty");
    let nested = scratch("nested");
    std::fs::create_dir_all(nested.join("base")).unwrap();
    std::fs::write(nested.join("base/app.yaml"), DECLARES_ITS_NAMESPACE).unwrap();
    std::fs::write(nested.join("README.md"), "# the app\n").unwrap();
    let blank = scratch("blank");
    std::fs::write(blank.join("app.yaml"), "# nothing yet\n---\n").unwrap();
    let table = [
        (
            empty.clone(),
            format!(
                "error: --blueprint {}: the directory is empty",
                empty.display()
            ),
        ),
        (
            nested.clone(),
            format!(
                "error: --blueprint {}: no .yaml or .yml file in this directory (it holds 1 subdirectory and 1 other file; subdirectories are not read)",
                nested.display()
            ),
        ),
        (
            blank,
            "error: read 1 file, 0 objects: nothing to render".to_owned(),
        ),
    ];
    for (dir, want) in table {
        let out = render(&[
            "--blueprint",
            dir.to_str().unwrap(),
            "--repo",
            "acme/shop",
            "--pr",
            "1",
            "--sha",
            SHA,
        ]);
        assert_eq!(out.status.code(), Some(1), "{}", dir.display());
        assert!(out.stdout.is_empty(), "{}", dir.display());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().last(), Some(want.as_str()), "{stderr}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn an_egress_allow_list_renders_as_network_policy_and_cilium_policy() {
    let out = render(&[
        "--blueprint",
        "egress-allow-list/app.yaml",
        "--spec",
        "egress-allow-list/blueprint.yaml",
        "--repo",
        "acme/agent",
        "--pr",
        "3",
        "--sha",
        SHA,
        "--guardrails",
        "--ingress-namespace",
        "ingress-nginx",
    ]);
    let objects = parse_manifests(&stdout(&out)).expect("the output is YAML kubectl reads");
    let find = |kind: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} rendered"))
    };
    let egress = &find("NetworkPolicy")["spec"]["egress"];
    // The namespace, DNS, then the addresses and the other namespace's pods; no internet.
    assert_eq!(egress.as_array().map(Vec::len), Some(4), "{egress}");
    assert_eq!(egress[2]["to"][0]["ipBlock"]["cidr"], "140.82.112.0/20");
    assert_eq!(egress[2]["ports"][1]["port"], 22);
    assert_eq!(
        egress[3]["to"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "shared-services"
    );
    assert_eq!(
        egress[3]["to"][0]["podSelector"]["matchLabels"]["app"],
        "postgres"
    );
    let cilium = find("CiliumNetworkPolicy");
    assert_eq!(cilium["apiVersion"], "cilium.io/v2");
    assert_eq!(cilium["metadata"]["name"], "sandcastle-egress-fqdn");
    let names = &cilium["spec"]["egress"][1]["toFQDNs"];
    assert_eq!(names[0]["matchName"], "api.payments.example.com");
    assert_eq!(names[2]["matchPattern"], "*.mail.example.org");
}

#[test]
fn egress_rules_that_cannot_be_enforced_are_refused_by_field() {
    let out = render(&[
        "--blueprint",
        "refused-egress/app.yaml",
        "--spec",
        "refused-egress/blueprint.yaml",
        "--repo",
        "acme/agent",
        "--pr",
        "3",
        "--sha",
        SHA,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for field in [
        "spec.isolation.egress: has no effect with networkPolicy: off",
        "spec.isolation.egress[0].cidrs[0]: \"10.0.0.1/8\" has host bits set; the network is 10.0.0.0/8",
        "spec.isolation.egress[1].namespace",
        "spec.isolation.egress[2].fqdns[0]",
        "spec.isolation.egress[2].ports[0]",
    ] {
        assert!(stderr.contains(field), "{field} not named in:\n{stderr}");
    }
}

#[test]
fn a_kustomization_is_named_as_one_with_what_to_run_instead() {
    let dir = scratch("kustomize");
    std::fs::write(
        dir.join("deployment.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: nginx}]\n",
    )
    .unwrap();
    for kustomization in [
        // The common shape: no apiVersion or kind at all.
        "resources:\n- deployment.yaml\nimages:\n- name: nginx\n  newTag: \"1.27\"\n",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml]\n",
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches: []\n",
    ] {
        std::fs::write(dir.join("kustomization.yaml"), kustomization).unwrap();
        let out = render(&[
            "--blueprint",
            dir.to_str().unwrap(),
            "--repo",
            "acme/shop",
            "--pr",
            "1",
            "--sha",
            SHA,
        ]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("kustomization.yaml: document 1: a Kustomize file")
                && stderr.contains("Sandcastle takes rendered manifests here")
                && stderr.contains("`source.kustomize`")
                && stderr.contains("`sandcastle render --kustomize DIR`"),
            "{kustomization}:\n{stderr}"
        );
        assert!(!stderr.contains("is missing"), "{stderr}");
    }
}

const SOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/sources");

/// `--helm-binary` and `--kustomize-binary` as `scripts/test` builds them.
fn tools() -> Vec<String> {
    let tool = |var: &str, script: &str| {
        std::env::var(var).unwrap_or_else(|_| {
            panic!(
                "{var} is not set: run the tests with scripts/test, or set it to `{script} path`"
            )
        })
    };
    vec![
        "--helm-binary".into(),
        tool("SANDCASTLE_HELM", "scripts/helm"),
        "--kustomize-binary".into(),
        tool("SANDCASTLE_KUSTOMIZE", "scripts/kustomize"),
    ]
}

fn render_with_tools(args: &[&str]) -> Output {
    let tools = tools();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(tools.iter().map(String::as_str));
    all.extend(["--repo", "acme/shop", "--pr", "42", "--sha", SHA]);
    render(&all)
}

#[test]
fn a_helm_chart_renders_with_the_blueprints_values_and_its_hooks_sorted() {
    let dir = scratch("helm-spec");
    let spec = dir.join("blueprint.yaml");
    std::fs::write(
        &spec,
        "source:\n  helm:\n    path: ignored\n    releaseName: shop\n    values:\n      image: {tag: '{{shortSha}}'}\n      hooks: {preInstall: {job: {enabled: true}}}\nimages: []\n",
    )
    .unwrap();
    let chart = format!("{SOURCES}/podinfo-chart");
    let out = render_with_tools(&[
        "--helm",
        &chart,
        "--spec",
        spec.to_str().unwrap(),
        "--set",
        "ui.message=from-set",
    ]);
    let yaml = stdout(&out);
    let objects = parse_manifests(&yaml).unwrap();
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap_or_else(|| panic!("{yaml}"));
    assert_eq!(deployment["metadata"]["name"], "shop-podinfo");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "ghcr.io/stefanprodan/podinfo:0123456");
    assert!(yaml.contains("from-set"), "{yaml}");
    // The chart's pre-install Job seeds; its test Pods are left out, saying why.
    let seed = objects
        .iter()
        .find(|o| o["kind"] == "Job")
        .unwrap_or_else(|| panic!("{yaml}"));
    assert_eq!(
        seed["metadata"]["annotations"]["sandcastle.dev/hook"],
        "seed"
    );
    assert!(yaml.contains("# phase: seed"), "{yaml}");
    assert!(
        yaml.contains("a Helm hook (helm.sh/hook: test-success): Helm runs it, a preview does not"),
        "{yaml}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rendered Helm chart"), "{stderr}");
}

#[test]
fn a_chart_that_fails_to_render_names_the_file_and_line() {
    let dir = scratch("helm-broken");
    let chart = dir.join("chart");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/api.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.api.name }}\n",
    )
    .unwrap();
    let out = render_with_tools(&["--helm", chart.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("helm template failed:"), "{stderr}");
    assert!(stderr.contains("shop/templates/api.yaml:4:"), "{stderr}");
}

#[test]
fn a_kustomize_overlay_renders_as_the_controller_builds_it() {
    let overlay = format!("{SOURCES}/podinfo-kustomize/overlays/preview");
    let yaml = stdout(&render_with_tools(&["--kustomize", &overlay]));
    let objects = parse_manifests(&yaml).unwrap();
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for kind in ["Deployment", "Service", "HorizontalPodAutoscaler"] {
        assert!(kinds.contains(&kind), "{kinds:?}");
    }
}

#[test]
fn a_chart_whose_dependencies_are_not_vendored_is_told_to_vendor_them() {
    let dir = scratch("helm-unvendored");
    let chart = dir.join("chart");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: shop\nversion: 0.1.0\ndependencies:\n  - name: redis\n    version: 20.x.x\n    repository: oci://registry.example.com/charts\n  - name: postgresql\n    version: 16.x.x\n    repository: https://charts.example.com\n",
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shop}\n",
    )
    .unwrap();
    let out = render_with_tools(&["--helm", chart.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/Chart.yaml:4: dependencies not vendored in")
            && stderr.contains("charts/: redis, postgresql; a render has no network"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("helm dependency build` to fetch"),
        "{stderr}"
    );
}

#[test]
fn a_kustomize_overlay_with_a_remote_base_names_the_file_and_the_url() {
    let dir = scratch("kustomize-remote");
    let overlay = dir.join("deploy/overlays/preview");
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- https://github.com/kubernetes-sigs/kustomize//examples/multibases?ref=v3.3.1\nnamePrefix: preview-\n",
    )
    .unwrap();
    let out = render_with_tools(&["--kustomize", overlay.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "kustomization.yaml:4: names the remote base \
             `https://github.com/kubernetes-sigs/kustomize//examples/multibase"
        ) && stderr.contains("a render has no network, so remote bases must be vendored"),
        "{stderr}"
    );
    assert!(!stderr.contains("proxyconnect"), "{stderr}");
}
