//! `kustomize build`'s arguments for a Blueprint's overlay, with Kustomize's own defaults: files
//! only from within the overlay's root and its bases, no plugins, no Helm inflation (it would
//! fetch charts). Before it runs, the overlay and its local bases are read for remote ones (a
//! git or HTTP URL in `resources`, `bases` or `components`): a render has no network, so such a
//! base is refused naming the file, its line and the URL, instead of Kustomize's proxy error.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::RenderError;
use sandcastle_domain::quote::short;

/// The names Kustomize looks for.
const KUSTOMIZATION: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];
/// The most kustomizations read for remote bases (an overlay and its local bases).
const MOST_READ: usize = 64;

pub(crate) fn args(overlay: &Path, shown: &str) -> Result<Vec<OsString>, RenderError> {
    if kustomization_in(overlay).is_none() {
        return Err(RenderError::Missing {
            path: shown.to_owned(),
            what: "no kustomization.yaml in this directory at this commit",
        });
    }
    Ok(vec!["build".into(), overlay.into()])
}

fn kustomization_in(dir: &Path) -> Option<PathBuf> {
    KUSTOMIZATION
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// The entries of a kustomization that name other sources.
#[derive(Debug, Default, Deserialize)]
struct Entries {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    bases: Vec<String>,
    #[serde(default)]
    components: Vec<String>,
}

/// Whether a kustomization entry is remote as Kustomize reads it: a URL, or a git repository
/// spec (`github.com/org/repo//path?ref=v1`, `git@host:org/repo`).
pub(crate) fn is_remote(entry: &str) -> bool {
    let e = entry.trim();
    e.contains("://")
        || e.starts_with("git@")
        || e.starts_with("github.com/")
        || e.starts_with("gitlab.com/")
        || e.starts_with("bitbucket.org/")
        || e.contains("?ref=")
        || e.contains(".git//")
}

/// Refuse an overlay (under `root`) any of whose kustomizations, its own or a local base's,
/// names a remote source: the first one found, with its file (repository-relative) and line.
pub(crate) fn refuse_remote_bases(root: &Path, overlay: &Path) -> Result<(), RenderError> {
    let (Ok(root), Ok(overlay)) = (root.canonicalize(), overlay.canonicalize()) else {
        return Ok(());
    };
    let root = root.as_path();
    let mut seen = BTreeSet::new();
    let mut queue = vec![overlay];
    while let Some(dir) = queue.pop() {
        if seen.len() >= MOST_READ || !seen.insert(dir.clone()) {
            continue;
        }
        let Some(file) = kustomization_in(&dir) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        // A kustomization Kustomize cannot read is for Kustomize to refuse, in its words.
        let Ok(entries) = serde_saphyr::from_str::<Entries>(&text) else {
            continue;
        };
        let all = entries
            .resources
            .iter()
            .chain(&entries.bases)
            .chain(&entries.components);
        for entry in all {
            if is_remote(entry) {
                return Err(RenderError::Remote {
                    file: relative_to(root, &file),
                    line: line_of(&text, entry),
                    url: short(entry).into_owned(),
                });
            }
            let local = dir.join(entry);
            if let Ok(local) = local.canonicalize()
                && local.starts_with(root)
                && local.is_dir()
            {
                queue.push(local);
            }
        }
    }
    Ok(())
}

/// `path` as the repository names it.
fn relative_to(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The 1-based line of `text` where `entry` is first written (1 when not found as written).
fn line_of(text: &str, entry: &str) -> usize {
    text.lines()
        .position(|l| l.contains(entry.trim()))
        .map_or(1, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_entries_are_told_from_local_ones() {
        for remote in [
            "https://github.com/kubernetes-sigs/kustomize//examples/multibases?ref=v1.0.6",
            "github.com/acme/infra//base?ref=main",
            "git@github.com:acme/infra.git//base",
            "ssh://git@example.com/acme/infra.git",
            "https://example.com/manifests/all.yaml",
        ] {
            assert!(is_remote(remote), "{remote}");
        }
        for local in ["../base", "deployment.yaml", "./components/redis", "github"] {
            assert!(!is_remote(local), "{local}");
        }
    }

    #[test]
    fn a_remote_base_of_a_local_base_is_named_with_its_file_and_line() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let overlay = root.join("deploy/overlays/preview");
        let base = root.join("deploy/base");
        std::fs::create_dir_all(&overlay).unwrap();
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(
            overlay.join("kustomization.yaml"),
            "resources:\n- ../../base\n- svc.yaml\n",
        )
        .unwrap();
        std::fs::write(
            base.join("kustomization.yaml"),
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - deployment.yaml\n  - https://github.com/acme/infra//redis?ref=v2\n",
        )
        .unwrap();
        let e = refuse_remote_bases(&root, &overlay).unwrap_err();
        assert_eq!(
            e.to_string(),
            "deploy/base/kustomization.yaml:5: names the remote base \
             `https://github.com/acme/infra//redis?ref=v2`: a render has no network, so \
             remote bases must be vendored into the repository and named by their path"
        );
        // Without it, nothing is refused.
        std::fs::write(
            base.join("kustomization.yaml"),
            "resources: [deployment.yaml]\n",
        )
        .unwrap();
        refuse_remote_bases(&root, &overlay).unwrap();
    }
}
