//! `sandcastle render --helm DIR` and `--kustomize DIR`: a chart or overlay on this machine,
//! rendered by the same code and tools (and within the same bounds) as the controller renders
//! `source.helm` and `source.kustomize` at a pull request's commit, with the Blueprint's own
//! `releaseName`, `valuesFiles` and `values` when `--spec` gives them.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::Value;

use super::RenderArgs;
use crate::crd::{BlueprintSource, HelmSource, KustomizeSource};
use crate::domain::plan::{PreviewContext, parse_manifests};
use crate::render::{Source, Variables};

/// A chart or an overlay named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Chart {
    kind: Kind,
    /// The directory holding it, standing for the repository.
    root: PathBuf,
    /// Its own directory's name, its path in that "repository".
    name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Helm,
    Kustomize,
}

impl Chart {
    /// The chart or overlay the flags name, if any.
    pub(super) fn of(args: &RenderArgs) -> anyhow::Result<Option<Self>> {
        let (kind, dir, flag) = match (&args.helm, &args.kustomize) {
            (Some(dir), None) => (Kind::Helm, dir, "--helm"),
            (None, Some(dir)) => (Kind::Kustomize, dir, "--kustomize"),
            _ => return Ok(None),
        };
        let dir = dir
            .canonicalize()
            .with_context(|| format!("{flag} {}", dir.display()))?;
        if !dir.is_dir() {
            bail!("{flag} {}: not a directory", dir.display());
        }
        let (Some(root), Some(name)) = (dir.parent(), dir.file_name()) else {
            bail!("{flag} {}: name the chart's own directory", dir.display());
        };
        Ok(Some(Self {
            kind,
            root: root.to_owned(),
            name: name.to_string_lossy().into_owned(),
        }))
    }

    /// The Blueprint source it stands for: the `--spec` document's own `source.helm` settings
    /// (all but its path) apply.
    pub(super) fn source(&self, doc: Option<&Value>) -> anyhow::Result<BlueprintSource> {
        Ok(match self.kind {
            Kind::Helm => {
                let spec = doc.map(|d| {
                    if d["kind"] == "Blueprint" {
                        &d["spec"]
                    } else {
                        d
                    }
                });
                let given = spec.map(|s| s["source"]["helm"].clone());
                let mut helm: HelmSource = match given {
                    Some(v @ Value::Object(_)) => {
                        let mut v = v;
                        v["path"] = Value::from(self.name.clone());
                        serde_json::from_value(v).context("--spec: source.helm")?
                    }
                    _ => HelmSource {
                        path: self.name.clone(),
                        release_name: None,
                        values_files: vec![],
                        values: None,
                    },
                };
                helm.path = self.name.clone();
                BlueprintSource {
                    helm: Some(helm),
                    ..Default::default()
                }
            }
            Kind::Kustomize => BlueprintSource {
                kustomize: Some(KustomizeSource {
                    path: self.name.clone(),
                }),
                ..Default::default()
            },
        })
    }

    /// Render it for the preview `ctx`: the objects, and what was read.
    pub(super) async fn objects(
        &self,
        args: &RenderArgs,
        source: &BlueprintSource,
        ctx: &PreviewContext,
    ) -> anyhow::Result<(Vec<Value>, String)> {
        let renderer = args.tools.renderer();
        let what = match (&source.helm, &source.kustomize) {
            (Some(spec), _) => Source::Helm {
                spec,
                local_values: &args.values,
                sets: &args.set,
            },
            (_, Some(k)) => Source::Kustomize(k),
            _ => bail!("nothing to render"),
        };
        let yaml = renderer
            .render_dir(&self.root, what, &Variables::of(ctx))
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.shown()))?;
        let objects =
            parse_manifests(&yaml).with_context(|| format!("{}: the output", self.shown()))?;
        let read = format!("rendered {} ({} objects)", self.shown(), objects.len());
        Ok((objects, read))
    }

    fn shown(&self) -> String {
        let what = match self.kind {
            Kind::Helm => "Helm chart",
            Kind::Kustomize => "Kustomize overlay",
        };
        format!(
            "{what} {}",
            Path::new(&self.root).join(&self.name).display()
        )
    }
}
