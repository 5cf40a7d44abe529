//! The line for new rollouts: at most a few previews roll out at once (`--max-concurrent-rollouts`),
//! taken in the order they were asked for, so that under a burst the first asked are Ready
//! first instead of every preview sharing the API server until all are Ready together. A
//! rollout holds its place from its first apply until it leaves `Deploying` (Ready, failed,
//! stopped, removed); the rest wait `Pending` with their place in line. Kept in memory by the
//! replica that leads (a new leader starts with an empty line, and rollouts under way go on);
//! an entry not seen for a while (a preview deleted while waiting, a pass that never came) is
//! forgotten, so nothing waits on a preview that is gone. Data only, no I/O.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::Timestamp;

/// A rollout not seen for this long no longer holds its place.
pub(crate) const RUNNING_STALE: Duration = Duration::from_secs(120);
/// A preview waiting and not seen for this long leaves the line (waiting previews look again
/// every [`WAIT_POLL`]).
pub(crate) const WAITING_STALE: Duration = Duration::from_secs(75);
/// How often a waiting preview looks again, besides being poked when its turn may have come: a
/// safety net only (each look is a read of the preview).
pub(crate) const WAIT_POLL: Duration = Duration::from_secs(30);

/// What a preview asking to roll out is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    Go,
    /// 1: first of those waiting.
    Wait {
        place: usize,
        rolling: usize,
    },
}

#[derive(Debug, Default)]
struct Line {
    running: HashMap<String, Instant>,
    waiting: BTreeMap<(Timestamp, String), Instant>,
}

impl Line {
    fn forget_stale(&mut self, now: Instant) {
        self.running
            .retain(|_, seen| now.duration_since(*seen) < RUNNING_STALE);
        self.waiting
            .retain(|_, seen| now.duration_since(*seen) < WAITING_STALE);
    }

    fn remove_waiting(&mut self, name: &str) {
        self.waiting.retain(|(_, n), _| n != name);
    }
}

/// The rollouts under way and the previews waiting to start one; `limit` 0: no line.
#[derive(Debug)]
pub(crate) struct Rollouts {
    limit: usize,
    line: Mutex<Line>,
}

impl Rollouts {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            line: Mutex::default(),
        }
    }

    fn line(&self) -> std::sync::MutexGuard<'_, Line> {
        self.line
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Preview `name`, asked for at `asked`, wants to start a rollout (`new`) or go on with one.
    /// A rollout already under way always goes on.
    pub(crate) fn turn(&self, name: &str, asked: Timestamp, new: bool, now: Instant) -> Turn {
        if self.limit == 0 {
            return Turn::Go;
        }
        let mut line = self.line();
        line.forget_stale(now);
        if let Some(seen) = line.running.get_mut(name) {
            *seen = now;
            return Turn::Go;
        }
        if !new {
            return Turn::Go;
        }
        line.remove_waiting(name);
        line.waiting.insert((asked, name.to_owned()), now);
        let free = self.limit.saturating_sub(line.running.len());
        let ahead = line
            .waiting
            .keys()
            .position(|(_, n)| n == name)
            .unwrap_or_default();
        if ahead < free {
            line.remove_waiting(name);
            line.running.insert(name.to_owned(), now);
            return Turn::Go;
        }
        Turn::Wait {
            place: ahead + 1,
            rolling: line.running.len(),
        }
    }

    /// Preview `name` is no longer rolling out nor waiting; the previews whose turn may have
    /// come (to look again now).
    pub(crate) fn leave(&self, name: &str) -> Vec<String> {
        if self.limit == 0 {
            return Vec::new();
        }
        let mut line = self.line();
        let was_running = line.running.remove(name).is_some();
        line.remove_waiting(name);
        if !was_running {
            return Vec::new();
        }
        let free = self.limit.saturating_sub(line.running.len());
        line.waiting
            .keys()
            .take(free)
            .map(|(_, n)| n.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s as i64).unwrap()
    }

    #[test]
    fn the_first_asked_go_first_and_the_rest_wait_with_their_place() {
        let r = Rollouts::new(2);
        let t = Instant::now();
        // Asked in the order a, b, c, d; seen in another order.
        assert_eq!(r.turn("c", at(3), true, t), Turn::Go);
        assert_eq!(r.turn("a", at(1), true, t), Turn::Go);
        assert_eq!(
            r.turn("d", at(4), true, t),
            Turn::Wait {
                place: 1,
                rolling: 2
            }
        );
        assert_eq!(
            r.turn("b", at(2), true, t),
            Turn::Wait {
                place: 1,
                rolling: 2
            }
        );
        assert_eq!(
            r.turn("d", at(4), true, t),
            Turn::Wait {
                place: 2,
                rolling: 2
            }
        );
        // A rollout under way goes on, new or not.
        assert_eq!(r.turn("a", at(1), false, t), Turn::Go);
        assert_eq!(r.turn("a", at(1), true, t), Turn::Go);
        // One ends: the first asked of those waiting is next, and only it.
        assert_eq!(r.leave("c"), vec!["b".to_owned()]);
        assert_eq!(
            r.turn("d", at(4), true, t),
            Turn::Wait {
                place: 2,
                rolling: 1
            }
        );
        assert_eq!(r.turn("b", at(2), true, t), Turn::Go);
        assert_eq!(r.leave("a"), vec!["d".to_owned()]);
        assert_eq!(r.turn("d", at(4), true, t), Turn::Go);
        // A preview that was not rolling out frees nothing; one that waited leaves the line.
        assert!(r.leave("zzz").is_empty());
        assert!(matches!(
            r.turn("e", at(5), true, t),
            Turn::Wait { place: 1, .. }
        ));
        assert!(matches!(
            r.turn("f", at(6), true, t),
            Turn::Wait { place: 2, .. }
        ));
        assert!(r.leave("e").is_empty());
        assert!(matches!(
            r.turn("f", at(6), true, t),
            Turn::Wait { place: 1, .. }
        ));
    }

    #[test]
    fn what_is_not_seen_for_a_while_holds_no_place_and_no_limit_means_no_line() {
        let r = Rollouts::new(1);
        let t = Instant::now();
        assert_eq!(r.turn("a", at(1), true, t), Turn::Go);
        assert!(matches!(r.turn("b", at(2), true, t), Turn::Wait { .. }));
        assert!(matches!(
            r.turn("c", at(3), true, t),
            Turn::Wait { place: 2, .. }
        ));
        // b is gone without a word; a's pass never came.
        let later = t + WAITING_STALE + Duration::from_secs(1);
        assert!(matches!(
            r.turn("c", at(3), true, later),
            Turn::Wait { place: 1, .. }
        ));
        let much_later = t + RUNNING_STALE + Duration::from_secs(1);
        assert_eq!(r.turn("c", at(3), true, much_later), Turn::Go);
        // A rollout that is not new passes whatever the line.
        assert_eq!(r.turn("x", at(0), false, much_later), Turn::Go);

        let none = Rollouts::new(0);
        for n in ["a", "b", "c"] {
            assert_eq!(none.turn(n, at(1), true, t), Turn::Go);
        }
    }
}
