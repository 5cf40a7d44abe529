//! One render tool run as a bounded subprocess: a clean environment (no inherited variables, a
//! home in the scratch directory, no `PATH` so Kustomize finds no `git`, every proxy pointed at
//! a closed port so nothing is fetched over HTTP), killed at the deadline, its memory limited
//! (`RLIMIT_DATA`, set with `prlimit` right after it starts: Go reserves far more address space
//! than it uses, so `RLIMIT_AS` would stop it at once), its output read up to a bound.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::message;
use super::{RenderError, Tool};

/// How much of the tool's error output is kept.
const STDERR_BYTES: usize = 64 << 10;
/// Where every proxy variable points: a port nothing listens on (discard).
const NO_NETWORK: &str = "http://127.0.0.1:9";

#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub deadline: Duration,
    pub memory: u64,
    pub output: usize,
}

/// Run `program args` in `cwd`; its YAML, or why there is none. Paths under `root` in its
/// errors are made repository-relative.
pub(crate) async fn run(
    tool: Tool,
    program: &Path,
    args: &[OsString],
    root: &Path,
    scratch: &Path,
    bounds: Bounds,
) -> Result<String, RenderError> {
    let home = scratch.join("home");
    std::fs::create_dir_all(&home).map_err(RenderError::Scratch)?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(root)
        .env_clear()
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("KUBECONFIG", home.join("no-kubeconfig"))
        .env("HTTP_PROXY", NO_NETWORK)
        .env("HTTPS_PROXY", NO_NETWORK)
        .env("ALL_PROXY", NO_NETWORK)
        .env("GOMEMLIMIT", (bounds.memory / 4 * 3).to_string())
        .env("GOTRACEBACK", "none")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(|error| RenderError::Spawn {
        tool,
        program: program.display().to_string(),
        error,
    })?;
    limit_memory(child.id(), bounds.memory);
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(RenderError::Scratch(std::io::Error::other("no pipes")));
    };
    let errors = tokio::spawn(read_bounded(stderr, STDERR_BYTES, Full::Drain));
    let work = async {
        let (out, overflow) = read_bounded(stdout, bounds.output, Full::Stop).await;
        if overflow {
            return Err(RenderError::Output {
                tool,
                limit: bounds.output,
            });
        }
        let status = child.wait().await.map_err(RenderError::Scratch)?;
        Ok((out, status))
    };
    let (out, status) = match tokio::time::timeout(bounds.deadline, work).await {
        Ok(done) => done?,
        Err(_) => {
            return Err(RenderError::Deadline {
                tool,
                deadline: bounds.deadline,
            });
        }
    };
    let (err, _) = errors.await.unwrap_or_default();
    let err = String::from_utf8_lossy(&err);
    if status.success() {
        return String::from_utf8(out).map_err(|_| RenderError::Failed {
            tool,
            message: "its output is not UTF-8".to_owned(),
        });
    }
    if message::out_of_memory(&err) {
        return Err(RenderError::Memory {
            tool,
            limit: bounds.memory,
        });
    }
    Err(RenderError::Failed {
        tool,
        message: message::clean(&err, root),
    })
}

/// Limit the child's data segment. It runs a moment unlimited first: the little a Go runtime
/// allocates while starting.
fn limit_memory(pid: Option<u32>, bytes: u64) {
    let Some(pid) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let limit = rustix::process::Rlimit {
        current: Some(bytes),
        maximum: Some(bytes),
    };
    if let Err(e) = rustix::process::prlimit(Some(pid), rustix::process::Resource::Data, limit) {
        tracing::warn!(error = %e, "could not limit a render's memory");
    }
}

/// What to do once `keep` bytes are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Full {
    /// Stop reading: the output is refused anyway.
    Stop,
    /// Read the rest and drop it, so that the writer never blocks.
    Drain,
}

/// Read up to `keep` bytes; the flag says whether there was more.
async fn read_bounded(
    mut from: impl AsyncRead + Unpin,
    keep: usize,
    full: Full,
) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut more = false;
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return (kept, more),
            Ok(n) => {
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                if n > room {
                    more = true;
                    if full == Full::Stop {
                        return (kept, true);
                    }
                }
            }
        }
    }
}
