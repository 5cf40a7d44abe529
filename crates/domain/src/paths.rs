//! A Blueprint's `paths` and `ignorePaths`: whether a change touching some files concerns its
//! previews. Globs are git-style (`docs/**`, `*.md`, `**/*.png`), matched by `globset` (the
//! matcher ripgrep uses). When in doubt — GitHub's list cut short, or no files listed — a change
//! concerns previews: a preview too many costs minutes, one too few hides a change.

use globset::{Glob, GlobSet, GlobSetBuilder};

/// A glob of a Blueprint that cannot be read, with its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {glob:?} is not a glob: {why}")]
pub struct GlobError {
    /// `spec.paths[1]`, `spec.ignorePaths[0]`.
    pub field: String,
    pub glob: String,
    pub why: String,
}

/// Which changed files concern a Blueprint's previews.
#[derive(Debug, Clone)]
pub struct PathFilter {
    /// `None`: every path (no `paths` given).
    include: Option<GlobSet>,
    ignore: GlobSet,
}

fn set(globs: &[String], field: &str) -> Result<GlobSet, GlobError> {
    let mut b = GlobSetBuilder::new();
    for (i, g) in globs.iter().enumerate() {
        let glob = Glob::new(g).map_err(|e| GlobError {
            field: format!("spec.{field}[{i}]"),
            glob: g.clone(),
            why: e.kind().to_string(),
        })?;
        b.add(glob);
    }
    b.build().map_err(|e| GlobError {
        field: format!("spec.{field}"),
        glob: String::new(),
        why: e.to_string(),
    })
}

impl PathFilter {
    /// From a Blueprint's `paths` (empty: every path) and `ignorePaths`.
    pub fn new(paths: &[String], ignore_paths: &[String]) -> Result<Self, GlobError> {
        Ok(Self {
            include: (!paths.is_empty())
                .then(|| set(paths, "paths"))
                .transpose()?,
            ignore: set(ignore_paths, "ignorePaths")?,
        })
    }

    /// Whether the filter lets every change through (nothing to ask GitHub).
    pub fn is_open(&self) -> bool {
        self.include.is_none() && self.ignore.is_empty()
    }

    /// Whether a change touching `files` concerns the previews: one file in `paths` (or any,
    /// without `paths`) and not in `ignorePaths`. `None` (GitHub's list was cut short) and an
    /// empty list concern them.
    pub fn concerns(&self, files: Option<&[String]>) -> bool {
        match files {
            None | Some([]) => true,
            Some(files) => files.iter().any(|f| {
                self.include.as_ref().is_none_or(|i| i.is_match(f)) && !self.ignore.is_match(f)
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn ignored_paths_alone_do_not_concern_previews() {
        let f = PathFilter::new(&[], &v(&["docs/**", "**/*.md"])).unwrap();
        assert!(!f.is_open());
        assert!(!f.concerns(Some(&v(&["docs/guide/intro.md", "README.md"]))));
        assert!(
            f.concerns(Some(&v(&["README.md", "src/main.rs"]))),
            "one file that counts"
        );
        assert!(f.concerns(None), "GitHub's list was cut short");
        assert!(f.concerns(Some(&[])), "no files listed");
    }

    #[test]
    fn paths_narrow_and_ignore_paths_cut_from_them() {
        let f =
            PathFilter::new(&v(&["services/web/**"]), &v(&["services/web/**/*_test.go"])).unwrap();
        assert!(f.concerns(Some(&v(&["services/web/main.go"]))));
        assert!(!f.concerns(Some(&v(&["services/api/main.go"]))));
        assert!(!f.concerns(Some(&v(&["services/web/x/y_test.go"]))));
        assert!(PathFilter::new(&[], &[]).unwrap().is_open());
    }

    #[test]
    fn a_bad_glob_names_its_field() {
        let e = PathFilter::new(&v(&["ok/**", "src/[a"]), &[]).unwrap_err();
        assert_eq!(e.field, "spec.paths[1]");
        assert!(
            e.to_string()
                .starts_with("spec.paths[1]: \"src/[a\" is not a glob: "),
            "{e}"
        );
    }
}
