//! `helm template`'s arguments for a Blueprint's chart: the release name, the preview's
//! namespace, the chart's values files in order, then the Blueprint's own values (templated,
//! written to the scratch directory), then what `sandcastle render` adds. Hooks come out like
//! any object (the plan decides what runs); `lookup` finds nothing, as in any `helm template`.
//! A chart whose declared dependencies are not vendored in its `charts/` is refused in
//! Sandcastle's words, naming `Chart.yaml`'s `dependencies` line and the charts missing.

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

/// What Helm says when a chart's declared dependencies are not in its `charts/` directory.
const UNVENDORED: &str = "found in Chart.yaml, but missing in charts/ directory:";

/// Helm's refusal of a chart (at `chart`, shown as `shown`) whose dependencies are not vendored,
/// in Sandcastle's words: `Chart.yaml` and the line of its `dependencies`, the charts missing.
pub(crate) fn unvendored(chart: &Path, shown: &str, message: &str) -> Option<RenderError> {
    let names = message
        .lines()
        .find_map(|l| l.split_once(UNVENDORED))
        .map(|(_, names)| names.trim().to_owned())?;
    let text = std::fs::read_to_string(chart.join("Chart.yaml")).unwrap_or_default();
    let line = text
        .lines()
        .position(|l| l.starts_with("dependencies:"))
        .map_or(1, |i| i + 1);
    let shown = shown.trim_end_matches('/');
    Some(RenderError::Unvendored {
        file: format!("{shown}/Chart.yaml"),
        line,
        charts: format!("{shown}/charts/"),
        names: sandcastle_domain::quote::short(&names).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helms_refusal_of_missing_dependencies_is_said_in_sandcastles_words() {
        let chart = tempfile::tempdir().unwrap();
        std::fs::write(
            chart.path().join("Chart.yaml"),
            "apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n  - name: redis\n    version: 20.x\n    repository: oci://registry.example.com/charts\n",
        )
        .unwrap();
        let helm = "An error occurred while checking for chart dependencies. You may need to run `helm dependency build` to fetch missing dependencies: found in Chart.yaml, but missing in charts/ directory: redis, postgresql";
        let e = unvendored(chart.path(), "deploy/chart/", helm).unwrap();
        assert_eq!(
            e.to_string(),
            "deploy/chart/Chart.yaml:4: dependencies not vendored in deploy/chart/charts/: \
             redis, postgresql; a render has no network, so dependencies must be vendored: run \
             `helm dependency build` and commit what it puts in charts/"
        );
        assert!(unvendored(chart.path(), "c", "template: x.yaml:3: nil pointer").is_none());
    }
}
