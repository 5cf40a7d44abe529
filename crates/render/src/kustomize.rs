//! `kustomize build`'s arguments for a Blueprint's overlay, with Kustomize's own defaults: files
//! only from within the overlay's root and its bases, no plugins, no Helm inflation (it would
//! fetch charts).

use std::ffi::OsString;
use std::path::Path;

use super::RenderError;

/// The names Kustomize looks for.
const KUSTOMIZATION: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

pub(crate) fn args(overlay: &Path, shown: &str) -> Result<Vec<OsString>, RenderError> {
    if !KUSTOMIZATION.iter().any(|n| overlay.join(n).is_file()) {
        return Err(RenderError::Missing {
            path: shown.to_owned(),
            what: "no kustomization.yaml in this directory at this commit",
        });
    }
    Ok(vec!["build".into(), overlay.into()])
}
