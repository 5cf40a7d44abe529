//! Judging check runs (a Blueprint's `waitForChecks`), without I/O: a commit may be deployed
//! only once every named check run has passed on it — the newest run of each name completed with
//! `success` (or `neutral`/`skipped`, which GitHub's required checks accept too); and the memory
//! of GitHub's last "not yet" per preview, which stands until the next poll or a nudge
//! (`checks` asks GitHub).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;

use sandcastle_domain::Sha;
use sandcastle_github::client::{CheckConclusion, CheckRun, CheckStatus};

/// How often a preview waiting for checks looks again on its own, by default.
pub const POLL: Duration = Duration::from_secs(60);

/// Whether the preview's commit may be deployed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    Passed,
    /// Not yet: the checks not passed (by name), a sentence for people, when to look again.
    Waiting {
        pending: Vec<String>,
        message: String,
        again: Duration,
    },
}

/// The required checks that have not passed, each with what is wrong (`None`: not finished or
/// not started yet).
fn not_passed<'a>(
    required: &'a [String],
    runs: &[CheckRun],
) -> Vec<(&'a str, Option<CheckConclusion>)> {
    required
        .iter()
        .filter_map(|name| {
            let newest = runs.iter().filter(|r| &r.name == name).max_by_key(|r| r.id);
            match newest {
                Some(r) if r.status == CheckStatus::Completed => match r.conclusion {
                    Some(
                        CheckConclusion::Success
                        | CheckConclusion::Neutral
                        | CheckConclusion::Skipped,
                    ) => None,
                    other => Some((name.as_str(), other.or(Some(CheckConclusion::Unknown)))),
                },
                _ => Some((name.as_str(), None)),
            }
        })
        .collect()
}

fn conclusion_word(c: CheckConclusion) -> &'static str {
    match c {
        CheckConclusion::ActionRequired => "action required",
        CheckConclusion::Cancelled => "cancelled",
        CheckConclusion::Failure => "failed",
        CheckConclusion::Neutral => "neutral",
        CheckConclusion::Success => "succeeded",
        CheckConclusion::Skipped => "skipped",
        CheckConclusion::Stale => "stale",
        CheckConclusion::TimedOut => "timed out",
        CheckConclusion::StartupFailure => "failed to start",
        CheckConclusion::Unknown => "did not pass",
    }
}

/// Judge `runs` (the check runs on `sha`) against `required`.
pub(crate) fn judge(required: &[String], runs: &[CheckRun], sha: &Sha, poll: Duration) -> Gate {
    let missing = not_passed(required, runs);
    if missing.is_empty() {
        return Gate::Passed;
    }
    let names: Vec<String> = missing
        .iter()
        .map(|(n, c)| match c {
            None => (*n).to_owned(),
            Some(c) => format!("{n} ({})", conclusion_word(*c)),
        })
        .collect();
    Gate::Waiting {
        pending: missing.iter().map(|(n, _)| (*n).to_owned()).collect(),
        message: format!(
            "waiting for checks on {}: {}",
            sha.short(),
            names.join(", ")
        ),
        again: poll,
    }
}

/// GitHub's last "not yet" per preview: for which commit, checks and nudge, and when.
#[derive(Debug, Clone, Default)]
pub struct Asked(Arc<Mutex<HashMap<String, Answer>>>);

#[derive(Debug, Clone)]
struct Answer {
    key: String,
    at: Timestamp,
    gate: Gate,
}

impl Asked {
    /// The remembered answer for `preview` under `key`, with the time left until the next
    /// poll; `None` once the poll is due or anything in the key changed.
    pub(crate) fn recall(
        &self,
        preview: &str,
        key: &str,
        now: Timestamp,
        poll: Duration,
    ) -> Option<Gate> {
        let map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let answer = map.get(preview).filter(|a| a.key == key)?;
        let elapsed = Duration::try_from(now.duration_since(answer.at)).unwrap_or(Duration::ZERO);
        let left = poll.checked_sub(elapsed).filter(|d| !d.is_zero())?;
        match &answer.gate {
            Gate::Waiting {
                pending, message, ..
            } => Some(Gate::Waiting {
                pending: pending.clone(),
                message: message.clone(),
                again: left,
            }),
            Gate::Passed => None,
        }
    }

    /// Forget a preview that is gone.
    pub(crate) fn forget(&self, preview: &str) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(preview);
    }

    pub(crate) fn remember(&self, preview: &str, key: String, at: Timestamp, gate: &Gate) {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match gate {
            Gate::Waiting { .. } => {
                map.insert(
                    preview.to_owned(),
                    Answer {
                        key,
                        at,
                        gate: gate.clone(),
                    },
                );
            }
            Gate::Passed => {
                map.remove(preview);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        id: u64,
        name: &str,
        status: CheckStatus,
        conclusion: Option<CheckConclusion>,
    ) -> CheckRun {
        CheckRun {
            id,
            name: name.to_owned(),
            status,
            conclusion,
            external_id: None,
        }
    }

    #[test]
    fn every_named_check_must_pass_on_its_newest_run() {
        let sha = Sha::new(&"a".repeat(40)).unwrap();
        let required = vec!["build".to_owned(), "images".to_owned()];
        let done = |id, name, c| run(id, name, CheckStatus::Completed, Some(c));
        assert_eq!(
            judge(&required, &[], &sha, POLL),
            Gate::Waiting {
                pending: required.clone(),
                message: "waiting for checks on aaaaaaa: build, images".into(),
                again: POLL,
            }
        );
        let runs = [
            done(1, "build", CheckConclusion::Success),
            run(2, "images", CheckStatus::InProgress, None),
            done(3, "lint", CheckConclusion::Failure),
        ];
        assert!(matches!(
            judge(&required, &runs, &sha, POLL),
            Gate::Waiting { pending, .. } if pending == ["images"]
        ));
        let runs = [
            done(1, "build", CheckConclusion::Success),
            done(2, "images", CheckConclusion::Failure),
        ];
        assert!(matches!(
            judge(&required, &runs, &sha, POLL),
            Gate::Waiting { message, .. } if message == "waiting for checks on aaaaaaa: images (failed)"
        ));
        // A re-run that passed wins over the earlier failure; other checks do not matter.
        let runs = [
            done(1, "build", CheckConclusion::Success),
            done(2, "images", CheckConclusion::Failure),
            done(5, "images", CheckConclusion::Success),
            done(6, "lint", CheckConclusion::Failure),
        ];
        assert_eq!(judge(&required, &runs, &sha, POLL), Gate::Passed);
        let runs = [
            done(1, "build", CheckConclusion::Skipped),
            done(2, "images", CheckConclusion::Neutral),
        ];
        assert_eq!(judge(&required, &runs, &sha, POLL), Gate::Passed);
    }

    #[test]
    fn an_answer_stands_until_the_poll_or_a_nudge() {
        let asked = Asked::default();
        let at: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let poll = Duration::from_secs(60);
        let waiting = Gate::Waiting {
            pending: vec!["build".into()],
            message: "waiting for checks on aaaaaaa: build".into(),
            again: poll,
        };
        asked.remember("p", "sha|build|".into(), at, &waiting);
        let later = |s: i64| at + jiff::SignedDuration::from_secs(s);
        assert!(matches!(
            asked.recall("p", "sha|build|", later(20), poll),
            Some(Gate::Waiting { again, .. }) if again == Duration::from_secs(40)
        ));
        assert_eq!(
            asked.recall("p", "sha|build|", later(60), poll),
            None,
            "poll due"
        );
        assert_eq!(
            asked.recall("p", "sha|build|build=d2", later(1), poll),
            None,
            "nudged"
        );
        assert_eq!(
            asked.recall("p", "sha2|build|", later(1), poll),
            None,
            "new commit"
        );
        assert_eq!(asked.recall("q", "sha|build|", later(1), poll), None);
        asked.remember("p", "sha|build|".into(), later(2), &Gate::Passed);
        assert_eq!(
            asked.recall("p", "sha|build|", later(3), poll),
            None,
            "passed is final"
        );
    }
}
