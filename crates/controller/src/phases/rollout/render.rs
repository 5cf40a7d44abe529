//! A Blueprint's Helm chart or Kustomize overlay, rendered at the commit a preview deploys: the
//! commit's tarball fetched from GitHub once (whichever previews and Blueprints use it), the
//! chart rendered once per preview and commit (not once per reconcile), the YAML parsed as
//! manifests are. A pull request from a fork reaches this only once its commit is approved: a
//! preview waiting for approval has no commit to deploy yet.

use std::sync::Arc;

use serde_json::Value;

use crate::context::Context;
use crate::error::Error;
use sandcastle_crd::{BlueprintSpec, PreviewEnvironment};
use sandcastle_domain::plan::{PreviewContext, parse_manifests};
use sandcastle_render::{Source, Variables};

/// Why a render gave no objects.
pub(crate) enum Failure {
    /// The Blueprint or the commit is at fault: the preview fails with this, for people.
    Preview(String),
    /// Worth another try soon (GitHub did not answer).
    Passing(Error),
}

/// The objects `spec`'s rendered source gives the preview `pe` at its commit.
pub(crate) async fn objects(
    pe: &PreviewEnvironment,
    spec: &BlueprintSpec,
    pctx: &PreviewContext,
    ctx: &Context,
) -> Result<Vec<Value>, Failure> {
    let Some(source) = Source::of(&spec.source) else {
        return Err(Failure::Preview("the Blueprint renders nothing".into()));
    };
    let what = format!(
        "blueprint {}: {} at {}",
        pctx.blueprint,
        spec.source.describe(),
        pctx.sha.short()
    );
    let Some(installation) = pe.spec.installation_id else {
        return Err(Failure::Preview(format!(
            "{what}: no GitHub App installation is known for {}, so its content cannot be read",
            pctx.repo
        )));
    };
    let renderer = &ctx.settings.render;
    let archive_key = format!("{}@{}", pctx.repo, pctx.sha);
    let fetch = async {
        ctx.github
            .installation(installation)
            .tarball(&pctx.repo, &pctx.sha, renderer.limits.download_bytes)
            .await
    };
    let (tarball, _) = ctx
        .rendered
        .archives
        .get_or_make(&archive_key, fetch)
        .await
        .map_err(|e| {
            if e.is_retryable() {
                Failure::Passing(Error::Transient(format!(
                    "fetching {} at {}: {e}",
                    pctx.repo,
                    pctx.sha.short()
                )))
            } else {
                Failure::Preview(format!("{what}: fetching the repository: {e}"))
            }
        })?;
    let vars = Variables::of(pctx);
    let render_key = serde_json::to_string(&(&archive_key, &spec.source, format!("{vars:?}")))
        .unwrap_or_default();
    let started = std::time::Instant::now();
    let render = async {
        renderer
            .render_archive(tarball, source, &vars)
            .await
            .map(Arc::<str>::from)
    };
    let (yaml, made) = ctx
        .rendered
        .renders
        .get_or_make(&render_key, render)
        .await
        .map_err(|e| Failure::Preview(format!("{what}: {e}")))?;
    if made {
        tracing::info!(
            preview = %pctx.preview,
            source = %spec.source.describe(),
            sha = pctx.sha.short(),
            ms = started.elapsed().as_millis() as u64,
            "rendered"
        );
    }
    parse_manifests(&yaml).map_err(|e| Failure::Preview(format!("{what}: the output: {e}")))
}
