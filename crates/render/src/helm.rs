//! `helm template`'s arguments for a Blueprint's chart: the release name, the preview's
//! namespace, the chart's values files in order, then the Blueprint's own values (templated,
//! written to the scratch directory), then what `sandcastle render` adds. Hooks come out like
//! any object (the plan decides what runs); `lookup` finds nothing, as in any `helm template`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sandcastle_crd::HelmSource;

use super::archive::relative;
use super::{RenderError, Variables};

/// The release name when the Blueprint names none.
const DEFAULT_RELEASE: &str = "{{preview}}";

/// Every source of values, in the order Helm merges them (later wins).
pub(crate) struct Values<'a> {
    pub spec: &'a HelmSource,
    pub local: &'a [PathBuf],
    pub sets: &'a [String],
}

pub(crate) fn args(
    root: &Path,
    chart: &Path,
    scratch: &Path,
    values: &Values<'_>,
    vars: &Variables,
) -> Result<Vec<OsString>, RenderError> {
    let spec = values.spec;
    if !chart.join("Chart.yaml").is_file() {
        return Err(RenderError::Missing {
            path: spec.path.clone(),
            what: "no Chart.yaml in this directory at this commit",
        });
    }
    let release = vars
        .render(spec.release_name.as_deref().unwrap_or(DEFAULT_RELEASE))
        .map_err(|e| RenderError::Values(format!("releaseName: {e}")))?;
    let mut args: Vec<OsString> = vec![
        "template".into(),
        release.into(),
        chart.into(),
        "--namespace".into(),
        vars.namespace.clone().into(),
    ];
    let mut missing = Vec::new();
    for file in &spec.values_files {
        let shown = format!("{}/{file}", spec.path.trim_end_matches('/'));
        match relative(file).map(|rel| chart.join(rel)) {
            Some(path) if path.is_file() && path.starts_with(root) => {
                args.extend(["--values".into(), path.into()]);
            }
            _ => missing.push(shown),
        }
    }
    if !missing.is_empty() {
        return Err(RenderError::Values(format!(
            "not found at this commit: {}",
            missing.join(", ")
        )));
    }
    if let Some(own) = &spec.values {
        let own = vars.values(own).map_err(RenderError::Values)?;
        let path = scratch.join("sandcastle-values.json");
        std::fs::write(&path, own.to_string()).map_err(RenderError::Scratch)?;
        args.extend(["--values".into(), path.into()]);
    }
    for file in values.local {
        args.extend(["--values".into(), file.into()]);
    }
    for set in values.sets {
        args.extend(["--set".into(), set.into()]);
    }
    Ok(args)
}
