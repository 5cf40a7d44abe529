//! What the sticky comment shows, as values: the view of one preview (`StickyView`, built
//! by `view`), its state, its jobs and the log tail of a failed container.

use std::time::Duration;

use jiff::Timestamp;

use sandcastle_crd::{Interface, Phase, RunningTime, ServiceStatus, TeardownReason};
use sandcastle_domain::Sha;

/// Everything the sticky comment shows.
#[derive(Debug, Clone, PartialEq)]
pub struct StickyView {
    /// The preview's name, e.g. `shop-pr-42`.
    pub preview: String,
    pub state: StickyState,
    pub url: Option<String>,
    /// The commit running (or being deployed).
    pub sha: Option<Sha>,
    pub deployed_at: Option<Timestamp>,
    pub blueprint: String,
    /// What the blueprint clones, in words: `namespace shop-staging`. The last word is shown as
    /// code.
    pub source: String,
    pub services: Vec<ServiceStatus>,
    pub jobs: Vec<JobView>,
    pub expires_at: Option<Timestamp>,
    pub stop_after_idle: Option<Duration>,
    /// Sandcastle's API address for this preview (for agents and the "details" link).
    pub api_url: Option<String>,
    pub namespace: Option<String>,
    /// A fork PR's preview stays on the approved commit; say so.
    pub pinned_fork_note: bool,
    /// A failed preview: the failing container's last log lines (already redacted).
    pub log_tail: Option<LogTail>,
    /// How long it has run (its environment-hours), if it ever did.
    pub running: Option<RunningTime>,
    /// The Blueprint's rule for the pull request author's class, in words.
    pub rule: Option<String>,
    /// The cluster it lives in, when not Sandcastle's own.
    pub cluster: Option<String>,
    /// Why that cluster does not answer, while it does not (`cluster b is unreachable since …`).
    pub cluster_down: Option<String>,
    /// The last run of each of the Blueprint's tests, one line each.
    pub tests: Vec<super::checks::TestLine>,
    /// Which snapshot of the Blueprint's data the preview's claims were restored from.
    pub data: Option<sandcastle_crd::PreviewData>,
}

/// The last log lines of the container a failure comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTail {
    pub pod: String,
    pub container: String,
    /// The lines are from the container's previous run (a crash loop).
    pub previous: bool,
    pub lines: Vec<String>,
}

/// Where the preview stands, with what the reader needs to know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StickyState {
    /// Being created or updated; `step` is a short phrase like `seeding: db-seed running`,
    /// `stuck_on` what the cluster says holds it up (shown as soon as it is known).
    Deploying {
        step: String,
        stuck_on: Option<String>,
    },
    Ready,
    Stopped,
    /// Waiting for a free slot or for a cluster with room; `reason` says which, in words
    /// (`2nd in line; 20/20 previews of shop in use`).
    Queued {
        reason: String,
    },
    /// A fork PR waiting for a maintainer's `/preview`.
    WaitingForApproval {
        sha: Sha,
    },
    /// Waiting for these checks to pass before deploying.
    WaitingForChecks {
        checks: Vec<String>,
    },
    /// One sentence from the cluster saying what failed.
    Failed {
        reason: String,
    },
    Removed {
        reason: TeardownReason,
        actor: Option<String>,
        /// Through what it was asked for.
        via: Option<Interface>,
    },
    /// Sandcastle will not deploy this pull request (no blueprint allows the repo, …).
    Rejected {
        reason: String,
    },
}

impl StickyState {
    /// A stable code for the marker, finer than [`Phase`].
    pub fn code(&self) -> &'static str {
        match self {
            Self::Deploying { .. } => "deploying",
            Self::Ready => "ready",
            Self::Stopped => "stopped",
            Self::Queued { .. } => "queued",
            Self::WaitingForApproval { .. } => "waiting_for_approval",
            Self::WaitingForChecks { .. } => "waiting_for_checks",
            Self::Failed { .. } => "failed",
            Self::Removed { .. } => "removed",
            Self::Rejected { .. } => "rejected",
        }
    }

    /// The resource phase this state corresponds to.
    pub fn phase(&self) -> Phase {
        match self {
            Self::Deploying { .. } => Phase::Deploying,
            Self::Ready => Phase::Ready,
            Self::Stopped => Phase::Stopped,
            Self::Queued { .. }
            | Self::WaitingForApproval { .. }
            | Self::WaitingForChecks { .. } => Phase::Pending,
            Self::Failed { .. } | Self::Rejected { .. } => Phase::Failed,
            Self::Removed { .. } => Phase::Removed,
        }
    }

    pub(super) fn title(&self) -> &'static str {
        match self {
            Self::Deploying { .. } => "⏳ Deploying",
            Self::Ready => "✅ Ready",
            Self::Stopped => "⏸️ Stopped",
            Self::Queued { .. } => "🕒 Queued",
            Self::WaitingForApproval { .. } => "🔒 Waiting for approval",
            Self::WaitingForChecks { .. } => "🚦 Waiting for checks",
            Self::Failed { .. } => "❌ Failed",
            Self::Removed { .. } => "🧹 Removed",
            Self::Rejected { .. } => "🚫 Not deployed",
        }
    }
}

/// A seed (or other) job of the preview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobView {
    pub name: String,
    pub state: JobState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Pending,
    Running,
    Completed,
    Failed,
}
