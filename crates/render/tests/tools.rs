//! Rendering with the real tools (Helm and Kustomize as `scripts/helm` and `scripts/kustomize`
//! build them; `scripts/test` says where): real charts and overlays from `fixtures/sources`,
//! from a directory and from a GitHub-like tarball, and each bound — deadline, output, memory,
//! archive size — holding against a chart written to break it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sandcastle_crd::{HelmSource, KustomizeSource};
use sandcastle_render::{ArchiveLimits, Limits, RenderError, Renderer, Source, Variables};
use serde_json::json;

fn tool(var: &str, script: &str) -> PathBuf {
    let path = std::env::var_os(var).unwrap_or_else(|| {
        panic!("{var} is not set: run the tests with scripts/test, or set it to `{script} path`")
    });
    PathBuf::from(path)
}

fn renderer(limits: Limits) -> Renderer {
    Renderer {
        helm: tool("SANDCASTLE_HELM", "scripts/helm"),
        kustomize: tool("SANDCASTLE_KUSTOMIZE", "scripts/kustomize"),
        limits,
    }
}

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sources")
}

fn vars() -> Variables {
    Variables {
        sha: "0123456789abcdef0123456789abcdef01234567".into(),
        short_sha: "0123456".into(),
        pr: Some(42),
        branch: "feature/login".into(),
        preview: "shop-pr-42".into(),
        repo: "shop".into(),
        owner: "acme".into(),
        namespace: "preview-shop-pr-42".into(),
    }
}

fn helm(path: &str) -> HelmSource {
    HelmSource {
        path: path.into(),
        release_name: None,
        values_files: vec![],
        values: None,
    }
}

fn source(spec: &HelmSource) -> Source<'_> {
    Source::Helm {
        spec,
        local_values: &[],
        sets: &[],
    }
}

/// `(kind, name)` of each rendered document.
fn objects(yaml: &str) -> Vec<(String, String)> {
    sandcastle_domain::plan::parse_manifests(yaml)
        .expect("the render is YAML")
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap_or_default().to_owned(),
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

/// A copy of a fixture chart in a scratch repository, to change.
fn scratch_chart(fixture: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&sources().join(fixture), &dir.path().join("chart"));
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test]
async fn a_real_chart_renders_with_the_previews_values() {
    let mut spec = helm("podinfo-chart");
    spec.values = Some(json!({"image": {"tag": "{{shortSha}}"}, "ui": {"message": "PR {{pr}}"}}));
    let yaml = renderer(Limits::default())
        .render_dir(&sources(), source(&spec), &vars())
        .await
        .unwrap();
    let found = objects(&yaml);
    assert!(
        found.contains(&("Deployment".into(), "shop-pr-42-podinfo".into())),
        "{found:?}"
    );
    assert!(
        yaml.contains("image: \"ghcr.io/stefanprodan/podinfo:0123456\""),
        "{yaml}"
    );
    assert!(yaml.contains("PR 42"));
    // Helm's test hooks come out like any object; the plan leaves them out.
    assert!(yaml.contains("helm.sh/hook"), "{yaml}");
}

#[tokio::test]
async fn a_chart_with_a_vendored_dependency_renders_offline() {
    let mut spec = helm("bitnami-mongodb-sharded");
    spec.release_name = Some("shop".into());
    let yaml = renderer(Limits::default())
        .render_dir(&sources(), source(&spec), &vars())
        .await
        .unwrap();
    let found = objects(&yaml);
    assert!(found.len() >= 15, "{found:?}");
    assert!(found.iter().any(|(k, _)| k == "StatefulSet"), "{found:?}");
    // `.Release.Namespace` is the preview's.
    assert!(yaml.contains("namespace: \"preview-shop-pr-42\""), "{yaml}");
}

#[tokio::test]
async fn a_template_error_names_the_file_and_line() {
    let repo = scratch_chart("podinfo-chart");
    let service = repo.path().join("chart/templates/service.yaml");
    let text = std::fs::read_to_string(&service).unwrap();
    std::fs::write(
        &service,
        text.replacen("{{", "{{ .Values.nope.deeper }}{{", 1),
    )
    .unwrap();
    let err = renderer(Limits::default())
        .render_dir(repo.path(), source(&helm("chart")), &vars())
        .await
        .unwrap_err();
    let RenderError::Failed { message, .. } = &err else {
        panic!("{err}")
    };
    let at = sandcastle_render::message::location(message).unwrap_or_else(|| panic!("{message}"));
    assert!(
        at.starts_with("podinfo/templates/service.yaml:"),
        "{message}"
    );
    assert!(message.contains("nope"), "{message}");
    assert!(
        !message.contains(&repo.path().display().to_string()),
        "{message}"
    );
}

#[tokio::test]
async fn missing_values_files_and_charts_are_named() {
    let mut spec = helm("podinfo-chart");
    spec.values_files = vec![
        "values-prod.yaml".into(),
        "values-preview.yaml".into(),
        "nope.yaml".into(),
    ];
    let err = renderer(Limits::default())
        .render_dir(&sources(), source(&spec), &vars())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "values: not found at this commit: podinfo-chart/values-preview.yaml, podinfo-chart/nope.yaml"
    );
    let err = renderer(Limits::default())
        .render_dir(&sources(), source(&helm("podinfo-kustomize")), &vars())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "podinfo-kustomize: no Chart.yaml in this directory at this commit"
    );
    let err = renderer(Limits::default())
        .render_dir(&sources(), source(&helm("deploy/nowhere")), &vars())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "deploy/nowhere: no such directory at this commit"
    );
}

#[tokio::test]
async fn a_real_overlay_builds_and_remote_bases_are_not_fetched() {
    let overlay = KustomizeSource {
        path: "podinfo-kustomize/overlays/preview".into(),
    };
    let yaml = renderer(Limits::default())
        .render_dir(&sources(), Source::Kustomize(&overlay), &vars())
        .await
        .unwrap();
    let kinds: Vec<String> = objects(&yaml).into_iter().map(|(k, _)| k).collect();
    for kind in [
        "ConfigMap",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
    ] {
        assert!(kinds.contains(&kind.to_owned()), "{kinds:?}");
    }

    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path().join("overlay");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        "resources:\n- github.com/acme/shop//deploy?ref=main\n",
    )
    .unwrap();
    let remote = KustomizeSource {
        path: "overlay".into(),
    };
    let err = renderer(Limits::default())
        .render_dir(repo.path(), Source::Kustomize(&remote), &vars())
        .await
        .unwrap_err();
    // Refused before Kustomize runs, naming the file, the line and the base.
    let text = err.to_string();
    assert_eq!(
        text,
        "overlay/kustomization.yaml:2: names the remote base `github.com/acme/shop//deploy?ref=main`: \
         a render has no network, so remote bases must be vendored into the repository and named \
         by their path"
    );
}

/// A chart whose one template is `body`.
fn chart_with(body: &str) -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    let chart = repo.path().join("chart");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: t\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(chart.join("templates/x.yaml"), body).unwrap();
    repo
}

#[tokio::test]
async fn a_render_that_hangs_is_stopped_at_its_deadline() {
    let repo =
        chart_with("{{- range until 100000 }}{{- range until 100000 }}{{- end }}{{- end }}\n");
    let limits = Limits {
        deadline: Duration::from_secs(2),
        ..Limits::default()
    };
    let started = std::time::Instant::now();
    let err = renderer(limits)
        .render_dir(repo.path(), source(&helm("chart")), &vars())
        .await
        .unwrap_err();
    assert!(matches!(err, RenderError::Deadline { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "helm template did not finish within 2s and was stopped"
    );
    eprintln!("stopped after {:?}", started.elapsed());
}

#[tokio::test]
async fn output_and_memory_are_bounded() {
    let loud = chart_with(
        "{{- range until 20000 }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c{{ . }}}\n{{- end }}\n",
    );
    let limits = Limits {
        output_bytes: 64 << 10,
        ..Limits::default()
    };
    let err = renderer(limits)
        .render_dir(loud.path(), source(&helm("chart")), &vars())
        .await
        .unwrap_err();
    assert!(matches!(err, RenderError::Output { .. }), "{err}");

    let greedy = chart_with(
        "{{- $s := \"x\" }}{{- range until 28 }}{{- $s = print $s $s }}{{- end }}\n# {{ len $s }}\n",
    );
    let limits = Limits {
        memory_bytes: 128 << 20,
        ..Limits::default()
    };
    let err = renderer(limits)
        .render_dir(greedy.path(), source(&helm("chart")), &vars())
        .await
        .unwrap_err();
    assert!(matches!(err, RenderError::Memory { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "helm template needed more than 128 MiB of memory and was stopped"
    );
}

/// `dir` as GitHub serves a commit's tarball: under `acme-shop-0123456/`, gzip-compressed.
fn tarball(dir: &Path, links: &[(&str, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    tar.append_dir_all("acme-shop-0123456", dir).unwrap();
    for (path, target) in links {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        tar.append_link(&mut header, format!("acme-shop-0123456/{path}"), target)
            .unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

#[tokio::test]
async fn a_commits_tarball_renders_and_its_links_are_not_followed() {
    let repo = chart_with(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leak}\ndata:\n  token: {{ .Files.Get \"files/token\" | quote }}\n",
    );
    let secret = repo.path().join("outside-secret");
    std::fs::write(&secret, "s3cr3t").unwrap();
    let tgz = tarball(
        repo.path(),
        &[("chart/files/token", &secret.display().to_string())],
    );
    let yaml = renderer(Limits::default())
        .render_archive(tgz.into(), source(&helm("chart")), &vars())
        .await
        .unwrap();
    assert!(yaml.contains("name: leak"), "{yaml}");
    assert!(!yaml.contains("s3cr3t"), "{yaml}");

    let small = Limits {
        archive: ArchiveLimits {
            files: 100,
            bytes: 10,
        },
        ..Limits::default()
    };
    let tgz = tarball(repo.path(), &[]);
    let err = renderer(small)
        .render_archive(tgz.into(), source(&helm("chart")), &vars())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the repository holds more than 10 bytes at this commit"
    );
}
