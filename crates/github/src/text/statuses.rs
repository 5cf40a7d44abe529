//! Deployment status descriptions: what GitHub shows next to each deployment. GitHub refuses
//! descriptions over 140 characters, so every one goes through [`fit_description`].

use std::fmt;
use std::time::Duration;

use sandcastle_crd::ServiceStatus;
use sandcastle_domain::duration;

use sandcastle_domain::ordinal::ordinal;

/// GitHub's limit on a deployment status description, in characters.
pub const DESCRIPTION_MAX: usize = 140;

/// One line of at most [`DESCRIPTION_MAX`] characters: whitespace runs (including line breaks)
/// collapse to one space, and a longer text is cut on a character boundary and ends with `…`.
pub fn fit_description(s: &str) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= DESCRIPTION_MAX {
        return one_line;
    }
    let cut: String = one_line.chars().take(DESCRIPTION_MAX - 1).collect();
    format!("{}…", cut.trim_end())
}

/// `queued`: `Waiting for a free slot (3rd in line)`.
pub fn queued_description(position: Option<u32>) -> String {
    match position {
        Some(n) => fit_description(&format!(
            "Waiting for a free slot ({} in line)",
            ordinal(u64::from(n))
        )),
        None => "Waiting for a free slot".to_owned(),
    }
}

/// What a deployment in progress is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Copying the blueprint's objects from `source` (a namespace name).
    Cloning { source: String, objects: usize },
    /// A seed job is running.
    Seeding { job: String },
    /// Workloads are starting.
    Starting { ready: usize, total: usize },
    /// Scaling a stopped preview back up.
    Waking,
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cloning { source, objects } => {
                write!(f, "Cloning {source} ({})", count(*objects, "object"))
            }
            Self::Seeding { job } => write!(f, "Seeding: job {job} running"),
            Self::Starting { ready, total } => {
                write!(f, "Starting: {ready}/{total} services ready")
            }
            Self::Waking => f.write_str("Waking up"),
        }
    }
}

/// `in_progress`: e.g. `Cloning shop-staging (14 objects)`.
pub fn progress_description(progress: &Progress) -> String {
    fit_description(&progress.to_string())
}

/// `success`: `6/6 services ready` (a service is ready when all its desired replicas are).
pub fn success_description(services: &[ServiceStatus]) -> String {
    let ready = services.iter().filter(|s| s.ready >= s.desired).count();
    fit_description(&format!("{ready}/{} services ready", services.len()))
}

/// Why a preview failed, specific enough to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// A seed job gave up.
    SeedJobFailed {
        job: String,
        /// The Job condition's reason, e.g. `BackoffLimitExceeded`.
        reason: String,
        exit_code: Option<i32>,
    },
    /// The blueprint holds something Sandcastle will not copy.
    BlueprintRefused {
        kind: String,
        name: String,
        /// The rest of the sentence, e.g. `is not allowed`.
        why: String,
    },
    /// A workload did not become ready in time.
    NotReady {
        after: Duration,
        /// `deployment/api`.
        workload: String,
        ready: i32,
        desired: i32,
        /// What the pods are stuck on, e.g. `image ghcr.io/acme/api:abc1234 cannot be pulled
        /// (ImagePullBackOff)`.
        cause: Option<String>,
    },
    /// Anything else, already one sentence for people.
    Other(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SeedJobFailed {
                job,
                reason,
                exit_code,
            } => {
                write!(f, "seed job {job} failed: {reason}")?;
                if let Some(code) = exit_code {
                    write!(f, " (exit {code})")?;
                }
                Ok(())
            }
            Self::BlueprintRefused { kind, name, why } => {
                write!(f, "blueprint refused: {kind} {name} {why}")
            }
            Self::NotReady {
                after,
                workload,
                ready,
                desired,
                cause,
            } => {
                let after = duration::go_style(*after);
                write!(f, "not Ready after {after}: {workload} {ready}/{desired}")?;
                if let Some(cause) = cause {
                    write!(f, ": {cause}")?;
                }
                Ok(())
            }
            Self::Other(text) => f.write_str(text),
        }
    }
}

/// `failure`: e.g. `seed job db-seed failed: BackoffLimitExceeded (exit 1)`.
pub fn failure_description(failure: &Failure) -> String {
    fit_description(&failure.to_string())
}

/// Why a preview is stopped and how to start it again (its status and GitHub's description):
/// `Stopped on request: comment /preview wake or push to start it again`. `open_it`: a visit to
/// its host wakes it. A sandbox (`sandbox`: its name) has no pull request to comment on or push
/// to: it is woken through the API.
pub fn stopped_message(why: &str, open_it: bool, sandbox: Option<&str>) -> String {
    let visit = if open_it { "open it, " } else { "" };
    match sandbox {
        Some(name) => {
            format!("{why}: {visit}run `sandcastle previews wake {name}` to start it again")
        }
        None => format!("{why}: {visit}comment /preview wake or push to start it again"),
    }
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str, ready: i32, desired: i32) -> ServiceStatus {
        ServiceStatus {
            name: name.to_owned(),
            kind: "Deployment".to_owned(),
            ready,
            desired,
        }
    }

    #[test]
    fn descriptions_from_the_ux_sketch() {
        assert_eq!(
            queued_description(Some(3)),
            "Waiting for a free slot (3rd in line)"
        );
        assert_eq!(queued_description(None), "Waiting for a free slot");
        assert_eq!(
            progress_description(&Progress::Cloning {
                source: "shop-staging".into(),
                objects: 14
            }),
            "Cloning shop-staging (14 objects)"
        );
        assert_eq!(
            progress_description(&Progress::Cloning {
                source: "shop-staging".into(),
                objects: 1
            }),
            "Cloning shop-staging (1 object)"
        );
        assert_eq!(
            progress_description(&Progress::Seeding {
                job: "db-seed".into()
            }),
            "Seeding: job db-seed running"
        );
        let six: Vec<_> = (0..6).map(|i| svc(&format!("s{i}"), 1, 1)).collect();
        assert_eq!(success_description(&six), "6/6 services ready");
        assert_eq!(
            failure_description(&Failure::SeedJobFailed {
                job: "db-seed".into(),
                reason: "BackoffLimitExceeded".into(),
                exit_code: Some(1),
            }),
            "seed job db-seed failed: BackoffLimitExceeded (exit 1)"
        );
        assert_eq!(
            failure_description(&Failure::BlueprintRefused {
                kind: "DaemonSet".into(),
                name: "node-exporter".into(),
                why: "is not allowed".into(),
            }),
            "blueprint refused: DaemonSet node-exporter is not allowed"
        );
        assert_eq!(
            failure_description(&Failure::NotReady {
                after: Duration::from_secs(600),
                workload: "deployment/api".into(),
                ready: 0,
                desired: 2,
                cause: Some(
                    "image ghcr.io/acme/api:abc1234 cannot be pulled (ImagePullBackOff)".into()
                ),
            }),
            "not Ready after 10m: deployment/api 0/2: image ghcr.io/acme/api:abc1234 cannot be pulled (ImagePullBackOff)"
        );
    }

    #[test]
    fn a_stopped_sandbox_is_woken_through_the_api() {
        assert_eq!(
            stopped_message("Stopped on request", false, None),
            "Stopped on request: comment /preview wake or push to start it again"
        );
        assert_eq!(
            stopped_message("Stopped after 1h without activity", true, None),
            "Stopped after 1h without activity: open it, comment /preview wake or push to start \
             it again"
        );
        assert_eq!(
            stopped_message(
                "Stopped on request",
                false,
                Some("shop-agent-fix-cart-c3e466ee")
            ),
            "Stopped on request: run `sandcastle previews wake shop-agent-fix-cart-c3e466ee` to \
             start it again"
        );
    }

    #[test]
    fn descriptions_never_exceed_140_characters() {
        assert_eq!(fit_description("  a\n\tb  "), "a b");
        let exact = "x".repeat(140);
        assert_eq!(fit_description(&exact), exact);
        let long = "é".repeat(200);
        let fitted = fit_description(&long);
        assert_eq!(fitted.chars().count(), 140);
        assert!(fitted.ends_with('…'));
        // Multi-byte characters at the cut, and a space just before it.
        let emoji = format!("{} {}", "🏖️".repeat(60), "word ".repeat(40));
        let fitted = fit_description(&emoji);
        assert!(fitted.chars().count() <= 140);
        assert!(!fitted.contains(" …"));
        let failure = Failure::NotReady {
            after: Duration::from_secs(5400),
            workload: format!("deployment/{}", "a".repeat(200)),
            ready: 0,
            desired: 2,
            cause: Some("CrashLoopBackOff".into()),
        };
        let d = failure_description(&failure);
        assert!(d.starts_with("not Ready after 1h30m: deployment/aaa"));
        assert_eq!(d.chars().count(), 140);
        let seed = Failure::Other("x\n".repeat(300));
        assert!(failure_description(&seed).chars().count() <= 140);
    }
}
