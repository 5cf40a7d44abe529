//! `sandcastle render`: the objects a pull request's preview would get, printed as YAML in apply
//! order, applying nothing. The objects come from manifest files, from a live namespace (read
//! as the controller reads `source.namespace`) or from a Helm chart or Kustomize overlay
//! (rendered as the controller renders `source.helm` and `source.kustomize`, [`chart`]); the
//! plan and its refusals are the controller's own, so a blueprint refused here is refused with
//! the same words on the pull request.

mod chart;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use clap::Args;

use super::args::{KubeArgs, PreviewArgs};
use crate::crd::{BlueprintSource, BlueprintSpec, ManifestsRef};
use crate::domain::intent;
use crate::domain::plan::{self, Manifests, PreviewContext};
use crate::domain::{NamespaceName, PrNumber, RepoName, Sha, guardrails, naming};
use crate::k8s::apply::Resolver;
use crate::k8s::source;

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// What the preview is cloned from: YAML files or directories of `*.yaml` files (manifests,
    /// as a `source.manifests` ConfigMap holds them; repeat the flag for several), or the name of
    /// a live namespace, read through the cluster as the controller reads `source.namespace`.
    #[arg(long, value_name = "FILE|DIR|NAMESPACE", required_unless_present_any = ["helm", "kustomize"], conflicts_with_all = ["helm", "kustomize"])]
    pub blueprint: Vec<String>,

    /// A Helm chart's directory, rendered as `source.helm` is (`helm template`, the preview's
    /// release name and namespace, the `--spec` Blueprint's `valuesFiles` and `values`).
    #[arg(long, value_name = "DIR", conflicts_with = "kustomize")]
    pub helm: Option<PathBuf>,

    /// More values files for `--helm`, after the Blueprint's (later files win).
    #[arg(long = "values", value_name = "FILE", requires = "helm")]
    pub values: Vec<PathBuf>,

    /// Values for `--helm`, as `helm template --set` takes them, applied last.
    #[arg(long = "set", value_name = "KEY=VALUE", requires = "helm")]
    pub set: Vec<String>,

    /// A Kustomize overlay's directory, built as `source.kustomize` is (`kustomize build`).
    #[arg(long, value_name = "DIR")]
    pub kustomize: Option<PathBuf>,

    #[command(flatten)]
    pub tools: super::args::RenderToolArgs,

    /// The Blueprint's settings (images, host, skip, secrets, isolation, ...): a file holding a
    /// Blueprint object or only its `spec` fields. Its `source` is ignored (`--blueprint` is the
    /// source). Without it, a Blueprint document among the `--blueprint` files is used, else the
    /// defaults.
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,

    /// Name of the Blueprint, which names the preview (default: the name of the Blueprint
    /// document, else the repository's name).
    #[arg(long, value_name = "NAME")]
    pub blueprint_name: Option<String>,

    /// The files hold objects read back from this namespace (`kubectl get -o yaml`): they may
    /// name it, and references to it are rewritten as for a live namespace.
    #[arg(long, value_name = "NAMESPACE")]
    pub source_namespace: Option<String>,

    /// The repository, `owner/name`.
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: String,

    /// The pull request number.
    #[arg(long, value_name = "N")]
    pub pr: u64,

    /// The commit to preview (40 hex digits).
    #[arg(long, value_name = "SHA")]
    pub sha: String,

    /// The PR's head branch, for `{{branch}}` templates and `SANDCASTLE_BRANCH` (default:
    /// `pr-<N>`).
    #[arg(long, value_name = "BRANCH")]
    pub branch: Option<String>,

    /// Also print the preview namespace and its guardrails (quota, LimitRange, NetworkPolicy,
    /// ServiceAccounts, the `preview-agent` Role), which the controller applies first.
    #[arg(long)]
    pub guardrails: bool,

    /// Kubeconfig file, to read a live namespace; when unset, in-cluster configuration or the
    /// default kubeconfig is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    #[command(flatten)]
    pub previews: PreviewArgs,
}

/// Where the objects to clone come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Files(Vec<PathBuf>),
    Namespace(String),
    Chart(chart::Chart),
}

fn source_of(values: &[String]) -> anyhow::Result<Origin> {
    if let [only] = values
        && !Path::new(only).exists()
    {
        if NamespaceName::new(only).is_ok() {
            return Ok(Origin::Namespace(only.clone()));
        }
        bail!("--blueprint {only}: no such file or directory, and not a namespace name");
    }
    let mut files = Vec::new();
    for value in values {
        let path = Path::new(value);
        if path.is_dir() {
            files.extend(yaml_files_in(path, value)?);
        } else if path.exists() {
            files.push(path.to_owned());
        } else {
            bail!("--blueprint {value}: no such file or directory");
        }
    }
    Ok(Origin::Files(files))
}

/// The `*.yaml` and `*.yml` files of directory `dir` (named `value` on the command line), in
/// name order; subdirectories are not read. A directory without any is an error: rendering it
/// would print a plan of nothing.
fn yaml_files_in(dir: &Path, value: &str) -> anyhow::Result<Vec<PathBuf>> {
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading directory {value}"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    let (mut yaml, others): (Vec<PathBuf>, Vec<PathBuf>) = entries
        .into_iter()
        .partition(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"));
    if yaml.is_empty() {
        if others.is_empty() {
            bail!("--blueprint {value}: the directory is empty");
        }
        let dirs = others.iter().filter(|p| p.is_dir()).count();
        let files = others.len() - dirs;
        bail!(
            "--blueprint {value}: no .yaml or .yml file in this directory (it holds {} and {}; subdirectories are not read)",
            count(dirs, "subdirectory", "subdirectories"),
            count(files, "other file", "other files"),
        );
    }
    yaml.sort();
    Ok(yaml)
}

/// `1 file`, `2 files`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn is_blueprint(obj: &Value) -> bool {
    obj["kind"] == "Blueprint"
        && obj["apiVersion"]
            .as_str()
            .is_some_and(|a| a.starts_with("sandcastle.dev/"))
}

/// What was read from files: the objects, the Blueprint document among them (if any), and
/// warnings about them, each naming its file.
#[derive(Debug, Default)]
struct Read {
    objects: Vec<Value>,
    blueprint: Option<Value>,
    warnings: Vec<String>,
}

/// What was read, as people are told: `read 3 files, 12 objects`.
fn files_read(files: usize, objects: usize) -> String {
    format!(
        "read {}, {}",
        count(files, "file", "files"),
        count(objects, "object", "objects")
    )
}

fn read_files(files: &[PathBuf]) -> anyhow::Result<Read> {
    let mut read = Read::default();
    for file in files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let parsed = Manifests::parse(&text).with_context(|| file.display().to_string())?;
        read.warnings.extend(
            parsed
                .warnings
                .iter()
                .map(|w| format!("{}: {w}", file.display())),
        );
        let Read {
            objects, blueprint, ..
        } = &mut read;
        for doc in parsed.objects {
            if !is_blueprint(&doc) {
                objects.push(doc);
            } else if blueprint.replace(doc).is_some() {
                bail!("{}: more than one Blueprint document", file.display());
            }
        }
    }
    Ok(read)
}

/// The Blueprint's spec from a Blueprint object or bare spec fields, with `source` replaced by
/// what is rendered and `repositories` defaulting to the repository rendered for. Returns the
/// Blueprint's name too, when the document has one.
fn spec_from(
    doc: Option<Value>,
    source: BlueprintSource,
    repo: &RepoName,
) -> anyhow::Result<(BlueprintSpec, Option<String>)> {
    let mut doc = doc.unwrap_or_else(|| json!({}));
    let mut name = None;
    if doc["kind"] == "Blueprint" {
        name = doc["metadata"]["name"].as_str().map(str::to_owned);
        doc = doc["spec"].take();
    }
    let Value::Object(fields) = &mut doc else {
        bail!("the Blueprint spec must be a mapping of fields");
    };
    fields.insert("source".into(), serde_json::to_value(source)?);
    fields
        .entry("repositories")
        .or_insert_with(|| json!([repo.as_str()]));
    let spec = serde_json::from_value(doc).context("invalid Blueprint spec")?;
    Ok((spec, name))
}

fn read_spec_file(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("--spec {}", path.display()))
}

/// Everything a render needs, resolved from the flags (reading files or the cluster).
struct Request {
    objects: Vec<Value>,
    spec: BlueprintSpec,
    ctx: PreviewContext,
    /// What was read (`read 3 files, 12 objects`), printed on stderr and in the header.
    read: String,
    /// What people should hear about the input (duplicate keys…), printed on stderr and as
    /// comments in the output.
    warnings: Vec<String>,
}

async fn resolve(args: &RenderArgs) -> anyhow::Result<Request> {
    let repo = RepoName::new(&args.repo).context("--repo")?;
    let pr = PrNumber::new(args.pr).context("--pr")?;
    let sha = Sha::new(&args.sha).context("--sha")?;
    let from = match chart::Chart::of(args)? {
        Some(c) => Origin::Chart(c),
        None => source_of(&args.blueprint)?,
    };
    let Read {
        objects: file_objects,
        blueprint: file_blueprint,
        warnings,
    } = match &from {
        Origin::Files(files) => read_files(files)?,
        Origin::Namespace(_) | Origin::Chart(_) => Read::default(),
    };
    let doc = match (&args.spec, file_blueprint) {
        (Some(_), Some(_)) => {
            bail!("both --spec and a Blueprint document among the --blueprint files; keep one")
        }
        (Some(path), None) => Some(read_spec_file(path)?),
        (None, doc) => doc,
    };
    let source_namespace = match &from {
        Origin::Namespace(ns) => Some(ns.clone()),
        Origin::Files(_) => args.source_namespace.clone(),
        Origin::Chart(_) => None,
    };
    let source = match (&from, &source_namespace) {
        (Origin::Chart(c), _) => c.source(doc.as_ref())?,
        (_, Some(ns)) => BlueprintSource {
            namespace: Some(ns.clone()),
            ..Default::default()
        },
        (_, None) => BlueprintSource {
            manifests: Some(ManifestsRef {
                config_map: "render".into(),
            }),
            ..Default::default()
        },
    };
    let (spec, doc_name) = spec_from(doc, source, &repo)?;
    let mut any_base = spec.clone();
    any_base.base_branches.clear();
    if !intent::admits(&any_base, &repo, "") {
        eprintln!(
            "note: {repo} is not among the Blueprint's repositories ({}): its pull requests get no preview",
            spec.repositories.join(", ")
        );
    }
    let blueprint = args
        .blueprint_name
        .clone()
        .or(doc_name)
        .unwrap_or_else(|| naming::slug(repo.name()));
    let preview = intent::preview_name(&blueprint, &spec, &repo, pr);
    let namespace = naming::namespace_name(&args.previews.namespace_prefix, &preview);
    let ctx = PreviewContext {
        preview,
        namespace,
        source_namespace,
        blueprint,
        repo,
        pr: Some(pr),
        sha,
        branch: args.branch.clone().unwrap_or_else(|| format!("pr-{pr}")),
        default_host: args.previews.default_host.clone(),
        // The certificate is not read here: hosts are not checked against it, and URLs show
        // the scheme the routes themselves give.
        edge: crate::domain::edge::Edge {
            tls: None,
            access: spec.access.unwrap_or(args.previews.edge.preview_access),
            gate: args.previews.edge.gate(),
        },
        pool_member: None,
        data: Default::default(),
    };
    let (objects, read) = match &from {
        Origin::Files(files) => {
            if file_objects.is_empty() {
                bail!("{}: nothing to render", files_read(files.len(), 0));
            }
            let read = files_read(files.len(), file_objects.len());
            (file_objects, read)
        }
        Origin::Namespace(ns) => {
            let kube = KubeArgs {
                kubeconfig: args.kubeconfig.clone(),
                namespace: String::new(),
            };
            let client = crate::serve::kube_client(&kube).await?;
            let objects = source::read(&Resolver::new(client), "", &spec)
                .await
                .context("reading the namespace")?;
            let read = format!(
                "read {} from namespace {ns}",
                count(objects.len(), "object", "objects")
            );
            (objects, read)
        }
        Origin::Chart(c) => c.objects(args, &spec.source, &ctx).await?,
    };
    Ok(Request {
        objects,
        spec,
        ctx,
        read,
        warnings,
    })
}

/// The YAML `sandcastle render` prints, or the refusal in the words the controller uses.
/// `guardrails` holds the ingress controller's namespace when the namespace and its guardrails
/// are printed too; `notes` are comment lines for the header (what was read, warnings).
pub fn render(
    objects: &[Value],
    spec: &BlueprintSpec,
    ctx: &PreviewContext,
    guardrails: Option<&str>,
    notes: &[String],
) -> anyhow::Result<String> {
    let plan =
        plan::plan(objects, spec, ctx).map_err(|r| anyhow::anyhow!("blueprint refused: {r}"))?;
    let mut out = format!(
        "# preview {} of {}#{} at {}, in namespace {}\n",
        ctx.preview,
        ctx.repo,
        ctx.pr.map_or_else(String::new, |p| p.to_string()),
        ctx.sha.short(),
        ctx.namespace
    );
    for note in notes {
        out.push_str(&format!("# {note}\n"));
    }
    if let Some(ingress_namespace) = guardrails {
        let namespace = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": ctx.namespace.as_str(),
                "labels": guardrails::namespace_labels_with(
                    ctx,
                    &spec.isolation,
                    &plan::namespace_labels(objects, spec, ctx),
                ),
            },
        });
        let walls = guardrails::guardrail_objects(ctx, &spec.isolation, ingress_namespace);
        for (i, obj) in std::iter::once(&namespace).chain(&walls).enumerate() {
            out.push_str("---\n");
            if i == 0 {
                out.push_str("# guardrails: the namespace and its walls, applied first\n");
            }
            out.push_str(&serde_saphyr::to_string(obj)?);
        }
    }
    out.push_str(&plan.to_yaml()?);
    Ok(out)
}

/// Run `sandcastle render`.
pub async fn run(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let request = resolve(args).await?;
    let ingress = args
        .guardrails
        .then_some(args.previews.ingress_namespace.as_str());
    let notes: Vec<String> = std::iter::once(request.read.clone())
        .chain(request.warnings.iter().map(|w| format!("warning: {w}")))
        .collect();
    for note in &notes {
        eprintln!("{note}");
    }
    let yaml = render(
        &request.objects,
        &request.spec,
        &request.ctx,
        ingress,
        &notes,
    )?;
    print!("{yaml}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_path_that_names_a_namespace_is_a_namespace() {
        assert_eq!(
            source_of(&["shop-staging".into()]).unwrap(),
            Origin::Namespace("shop-staging".into())
        );
        let err = source_of(&["nope/shop.yaml".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--blueprint nope/shop.yaml: no such file or directory, and not a namespace name"
        );
        let err = source_of(&["Cargo.toml".into(), "nope.yaml".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--blueprint nope.yaml: no such file or directory"
        );
    }

    #[test]
    fn a_spec_comes_from_a_blueprint_or_bare_fields() {
        let repo = RepoName::new("acme/shop").unwrap();
        let source = || BlueprintSource {
            namespace: Some("shop-staging".into()),
            ..Default::default()
        };
        let object = json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "Blueprint",
            "metadata": {"name": "shop"},
            "spec": {"source": {"manifests": {"configMap": "x"}}, "repositories": ["acme/*"], "skip": ["admin"]},
        });
        let (spec, name) = spec_from(Some(object), source(), &repo).unwrap();
        assert_eq!(name.as_deref(), Some("shop"));
        assert_eq!(spec.source.namespace.as_deref(), Some("shop-staging"));
        assert!(
            spec.source.manifests.is_none(),
            "the source is what is rendered"
        );
        assert_eq!(spec.skip, ["admin"]);
        assert_eq!(spec.repositories, ["acme/*"]);

        let (spec, name) = spec_from(Some(json!({"ttl": "2h"})), source(), &repo).unwrap();
        assert_eq!((spec.ttl.to_string(), name), ("2h".to_owned(), None));
        assert_eq!(spec.repositories, ["acme/shop"]);
        assert!(spec_from(Some(json!(["not", "a", "spec"])), source(), &repo).is_err());
    }
}
