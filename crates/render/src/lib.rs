//! Rendering a Blueprint's Helm chart or Kustomize overlay into the objects a preview is cloned
//! from, with the tools users already trust: Helm's own `helm template` and Kustomize's own
//! `kustomize build`, run as subprocesses (as Argo CD's repository server does) within bounds —
//! a deadline, a memory limit, an output limit, no network, a scratch directory removed
//! afterwards. The repository's content comes as GitHub's tarball of the commit ([`archive`]).
//!
//! Nothing here re-implements Helm or Kustomize: what is by hand is only what no library does
//! for a subprocess — the bounds ([`run`]), the tarball unpacked without links and within sizes
//! ([`archive`]), and the tools' errors made repository-relative ([`message`]).

pub mod archive;
pub mod cache;
mod helm;
mod kustomize;
pub mod message;
mod run;
mod values;

use std::path::{Path, PathBuf};
use std::time::Duration;

use sandcastle_crd::{HelmSource, KustomizeSource};

pub use archive::{ArchiveError, ArchiveLimits};
pub use values::Variables;

/// The tools and the bounds every render runs within.
#[derive(Debug, Clone)]
pub struct Renderer {
    pub helm: PathBuf,
    pub kustomize: PathBuf,
    pub limits: Limits,
}

impl Default for Renderer {
    /// `helm` and `kustomize` found on `PATH` (the image ships both), default bounds.
    fn default() -> Self {
        Self {
            helm: "helm".into(),
            kustomize: "kustomize".into(),
            limits: Limits::default(),
        }
    }
}

/// Bounds on one render.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The tool is killed after this long.
    pub deadline: Duration,
    /// The most memory the tool may use (its data segment, `RLIMIT_DATA`).
    pub memory_bytes: u64,
    /// The most YAML it may print.
    pub output_bytes: usize,
    /// The repository's archive as downloaded (compressed).
    pub download_bytes: u64,
    /// The repository's content, unpacked.
    pub archive: ArchiveLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(30),
            memory_bytes: 512 << 20,
            output_bytes: 8 << 20,
            download_bytes: 100 << 20,
            archive: ArchiveLimits::default(),
        }
    }
}

/// What to render, and the settings people give it.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    Helm {
        spec: &'a HelmSource,
        /// More files of values (`sandcastle render --values`), after the chart's own; paths on
        /// this machine.
        local_values: &'a [PathBuf],
        /// `--set` pairs, last.
        sets: &'a [String],
    },
    Kustomize(&'a KustomizeSource),
}

impl<'a> Source<'a> {
    /// The source a Blueprint names, if it is rendered.
    pub fn of(source: &'a sandcastle_crd::BlueprintSource) -> Option<Self> {
        if let Some(spec) = &source.helm {
            return Some(Self::Helm {
                spec,
                local_values: &[],
                sets: &[],
            });
        }
        source.kustomize.as_ref().map(Self::Kustomize)
    }

    fn tool(&self) -> Tool {
        match self {
            Self::Helm { .. } => Tool::Helm,
            Self::Kustomize(_) => Tool::Kustomize,
        }
    }

    fn path(&self) -> &str {
        match self {
            Self::Helm { spec, .. } => &spec.path,
            Self::Kustomize(k) => &k.path,
        }
    }
}

/// Which renderer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Helm,
    Kustomize,
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Helm => "helm template",
            Self::Kustomize => "kustomize build",
        })
    }
}

/// Why a render gave no objects. The messages are for the pull request's author: they name
/// the file (and line, where the tool said) relative to the repository.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("{path}: {what}")]
    Missing { path: String, what: &'static str },
    #[error("values: {0}")]
    Values(String),
    #[error(
        "{file}:{line}: dependencies not vendored in {charts}: {names}; a render has no \
         network, so dependencies must be vendored: run `helm dependency build` and commit \
         what it puts in charts/"
    )]
    Unvendored {
        file: String,
        line: usize,
        charts: String,
        names: String,
    },
    #[error(
        "{file}:{line}: names the remote base `{url}`: a render has no network, so remote \
         bases must be vendored into the repository and named by their path"
    )]
    Remote {
        file: String,
        line: usize,
        url: String,
    },
    #[error("{tool} failed:\n{message}")]
    Failed { tool: Tool, message: String },
    #[error("{tool} did not finish within {}s and was stopped", .deadline.as_secs())]
    Deadline { tool: Tool, deadline: Duration },
    #[error("{tool} printed more than {} and was stopped", size(*.limit as u64))]
    Output { tool: Tool, limit: usize },
    #[error("{tool} needed more than {} of memory and was stopped", size(*.limit))]
    Memory { tool: Tool, limit: u64 },
    #[error("{tool} could not be started ({program}): {error}")]
    Spawn {
        tool: Tool,
        program: String,
        error: std::io::Error,
    },
    #[error("scratch directory: {0}")]
    Scratch(std::io::Error),
}

impl Renderer {
    /// Render `source` from the repository checked out at `root` (a local directory, as
    /// `sandcastle render` has it): the YAML the tool printed.
    pub async fn render_dir(
        &self,
        root: &Path,
        source: Source<'_>,
        vars: &Variables,
    ) -> Result<String, RenderError> {
        let scratch = scratch()?;
        self.render_in(root, scratch.path(), source, vars).await
    }

    /// Render `source` from GitHub's tarball of a commit: unpacked into a scratch directory,
    /// rendered, and the directory removed whatever happens.
    pub async fn render_archive(
        &self,
        tarball: bytes_like::Bytes,
        source: Source<'_>,
        vars: &Variables,
    ) -> Result<String, RenderError> {
        let scratch = scratch()?;
        let root = scratch.path().join("repo");
        let limits = self.limits.archive;
        let into = root.clone();
        tokio::task::spawn_blocking(move || archive::unpack(&tarball, &into, limits))
            .await
            .map_err(|e| RenderError::Scratch(std::io::Error::other(e)))??;
        let work = scratch.path().join("work");
        std::fs::create_dir(&work).map_err(RenderError::Scratch)?;
        self.render_in(&root, &work, source, vars).await
    }

    async fn render_in(
        &self,
        root: &Path,
        scratch: &Path,
        source: Source<'_>,
        vars: &Variables,
    ) -> Result<String, RenderError> {
        let dir = inside(root, source.path())?;
        let shown = source.path().to_owned();
        let tool = source.tool();
        let (program, args) = match source {
            Source::Helm {
                spec,
                local_values,
                sets,
            } => {
                let values = helm::Values {
                    spec,
                    local: local_values,
                    sets,
                };
                (&self.helm, helm::args(root, &dir, scratch, &values, vars)?)
            }
            Source::Kustomize(k) => {
                let args = kustomize::args(&dir, &k.path)?;
                kustomize::refuse_remote_bases(root, &dir)?;
                (&self.kustomize, args)
            }
        };
        let bounds = run::Bounds {
            deadline: self.limits.deadline,
            memory: self.limits.memory_bytes,
            output: self.limits.output_bytes,
        };
        let rendered = run::run(tool, program, &args, root, scratch, bounds).await;
        match rendered {
            Err(RenderError::Failed { tool, message }) if tool == Tool::Helm => {
                Err(helm::unvendored(&dir, &shown, &message)
                    .unwrap_or(RenderError::Failed { tool, message }))
            }
            other => other,
        }
    }
}

/// A scratch directory of one render, removed when dropped.
fn scratch() -> Result<tempfile::TempDir, RenderError> {
    tempfile::Builder::new()
        .prefix("sandcastle-render-")
        .tempdir()
        .map_err(RenderError::Scratch)
}

/// `path` (from the Blueprint) under `root`, or why it cannot be: absolute, leaving the
/// repository, or not there.
fn inside(root: &Path, path: &str) -> Result<PathBuf, RenderError> {
    let rel = archive::relative(path).ok_or_else(|| RenderError::Missing {
        path: path.to_owned(),
        what: "not a path inside the repository",
    })?;
    let dir = root.join(rel);
    if !dir.is_dir() {
        return Err(RenderError::Missing {
            path: path.to_owned(),
            what: "no such directory at this commit",
        });
    }
    Ok(dir)
}

/// `bytes` as people read a limit: `256 MiB`, `64 KiB`, `10 bytes`.
pub(crate) fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// The tarball's bytes, shared without copying.
pub mod bytes_like {
    pub type Bytes = std::sync::Arc<[u8]>;
}
