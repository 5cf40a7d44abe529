//! The lifecycle rules as pure functions of time: when a preview expires, how far activity and
//! `/preview extend` move its expiry (never past `maxTtl` from creation), when it is idle enough
//! to stop, when to warn of its expiry, when it must next be looked at, and who gets a slot under a Blueprint's
//! `maxPreviews`. The controller, the webhook, the commands and the cost simulation
//! (`examples/lifecycle_sim.rs`) all decide with these, so what is simulated is what runs.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

fn plus(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX)
}

/// The latest a preview created at `created` may live.
pub fn hard_limit(created: Timestamp, max_ttl: Duration) -> Timestamp {
    plus(created, max_ttl)
}

/// The expiry after activity (a push, a command): `now + ttl`, never past `created + max_ttl`,
/// never earlier than it already is.
pub fn expires_after_activity(
    created: Timestamp,
    current: Option<Timestamp>,
    now: Timestamp,
    ttl: Duration,
    max_ttl: Duration,
) -> Timestamp {
    let wanted = plus(now, ttl).min(hard_limit(created, max_ttl));
    match current {
        Some(c) if c >= wanted => c,
        _ => wanted,
    }
}

/// What `/preview extend <by>` (or the API) did to the expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extension {
    pub expires_at: Timestamp,
    /// The request went past `maxTtl` from creation and was cut there.
    pub capped: bool,
}

/// Extend by `by` from the current expiry (or from now, if that is later), capped at
/// `created + max_ttl`. Never shortens a preview's life.
pub fn extend(
    created: Timestamp,
    current: Option<Timestamp>,
    now: Timestamp,
    by: Duration,
    max_ttl: Duration,
) -> Extension {
    let base = current.map_or(now, |c| c.max(now));
    let wanted = plus(base, by);
    let limit = hard_limit(created, max_ttl);
    let capped = wanted > limit;
    let at = wanted.min(limit);
    Extension {
        expires_at: current.map_or(at, |c| c.max(at)),
        capped,
    }
}

/// Whether a preview expiring at `expires_at` is due for teardown at `now`.
pub fn is_expired(expires_at: Timestamp, now: Timestamp) -> bool {
    now >= expires_at
}

/// When a preview last active at `last_activity` stops; `None` when idle stop is off (`0`).
pub fn idle_deadline(last_activity: Timestamp, stop_after_idle: Duration) -> Option<Timestamp> {
    (!stop_after_idle.is_zero()).then(|| plus(last_activity, stop_after_idle))
}

/// Whether the preview should be scaled to zero at `now`.
pub fn is_idle(last_activity: Timestamp, stop_after_idle: Duration, now: Timestamp) -> bool {
    idle_deadline(last_activity, stop_after_idle).is_some_and(|d| now >= d)
}

/// When to warn of an expiry at `expires_at`, `warning` before it, for an expiry last set at
/// `set_at` (the last activity: a push, a command). `None` when warnings are off (`0`), or when
/// the window would open before the expiry was set: someone active since then has just seen it
/// (with a TTL no longer than the warning, a new preview would be warned of at once).
pub fn warning_at(
    expires_at: Timestamp,
    warning: Duration,
    set_at: Timestamp,
) -> Option<Timestamp> {
    let back = SignedDuration::try_from(warning).unwrap_or(SignedDuration::MAX);
    let at = expires_at.checked_sub(back).unwrap_or(Timestamp::MIN);
    (!warning.is_zero() && at > set_at).then_some(at)
}

/// Whether a warning of the expiry at `expires_at` (set at `set_at`) is due at `now`: inside the
/// window before it, and not given for this expiry yet (`warned`: the expiry last warned of). A
/// preview extended or kept has a new expiry, warned of again when its window comes.
pub fn warning_due(
    expires_at: Timestamp,
    set_at: Timestamp,
    warned: Option<Timestamp>,
    warning: Duration,
    now: Timestamp,
) -> bool {
    warning_at(expires_at, warning, set_at).is_some_and(|at| now >= at)
        && now < expires_at
        && warned != Some(expires_at)
}

/// How long until the next of `deadlines` that is still ahead of `now` (time-based transitions
/// need a requeue then, not a poll of everything).
pub fn until_next(now: Timestamp, deadlines: &[Option<Timestamp>]) -> Option<Duration> {
    deadlines
        .iter()
        .flatten()
        .filter(|d| **d > now)
        .min()
        .and_then(|d| d.duration_since(now).try_into().ok())
}

/// A Blueprint's answer to one request for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Start it.
    Admitted,
    /// Wait: `position` in line (1 = next to start) while `in_use` of `cap` slots are held.
    Queued {
        position: u32,
        in_use: u32,
        cap: u32,
    },
    /// Refused (`overCapacity: reject`).
    Rejected { in_use: u32, cap: u32 },
}

/// Whether the request at `index` (0-based, in request order among requests without a slot)
/// gets a slot when `holders` of `cap` slots are held. Earlier requests go first: a request
/// never overtakes one made before it.
pub fn admission(cap: u32, holders: u32, index: u32, queue: bool) -> Admission {
    let free = cap.saturating_sub(holders);
    if index < free {
        return Admission::Admitted;
    }
    let in_use = holders;
    if queue {
        Admission::Queued {
            position: index - free + 1,
            in_use,
            cap,
        }
    } else {
        Admission::Rejected { in_use, cap }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_expiry_is_warned_of_once_inside_its_window() {
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        let expires = at("2026-12-01T18:00:00Z");
        let two_hours = std::time::Duration::from_secs(2 * 3600);
        let set = at("2026-12-01T10:00:00Z");
        assert_eq!(
            super::warning_at(expires, two_hours, set),
            Some(at("2026-12-01T16:00:00Z"))
        );
        assert_eq!(
            super::warning_at(expires, two_hours, at("2026-12-01T16:00:00Z")),
            None,
            "set when its window opens (a TTL as short as the warning): no warning"
        );
        let due = |warned, now: &str| super::warning_due(expires, set, warned, two_hours, at(now));
        assert!(!due(None, "2026-12-01T15:59:59Z"), "before the window");
        assert!(due(None, "2026-12-01T16:00:00Z"));
        assert!(
            !due(Some(expires), "2026-12-01T17:00:00Z"),
            "warned of this expiry already"
        );
        assert!(
            due(Some(at("2026-12-01T12:00:00Z")), "2026-12-01T17:00:00Z"),
            "an earlier expiry was warned of; this one was not"
        );
        assert!(
            !due(None, "2026-12-01T18:00:00Z"),
            "expired: nothing to warn of"
        );
        let off = std::time::Duration::ZERO;
        assert!(!super::warning_due(
            expires,
            set,
            None,
            off,
            at("2026-12-01T17:00:00Z")
        ));
    }

    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }
    const H: u64 = 3600;

    #[test]
    fn activity_moves_expiry_forward_within_the_hard_limit() {
        let created = t("2026-11-30T00:00:00Z");
        let ttl = Duration::from_secs(24 * H);
        let max = Duration::from_secs(72 * H);
        let now = t("2026-11-30T10:00:00Z");
        assert_eq!(
            expires_after_activity(created, None, now, ttl, max),
            t("2026-12-01T10:00:00Z")
        );
        // Near the end of maxTtl, activity cannot go past it.
        let late = t("2026-12-02T20:00:00Z");
        assert_eq!(
            expires_after_activity(created, None, late, ttl, max),
            t("2026-12-03T00:00:00Z")
        );
        // Never earlier than it already is (an extension beyond now + ttl stays).
        let extended = t("2026-12-02T12:00:00Z");
        assert_eq!(
            expires_after_activity(created, Some(extended), now, ttl, max),
            extended
        );
    }

    #[test]
    fn extend_within_and_beyond_max_ttl() {
        let created = t("2026-11-30T00:00:00Z");
        let max = Duration::from_secs(168 * H);
        let current = Some(t("2026-12-01T00:00:00Z"));
        let now = t("2026-11-30T12:00:00Z");
        let e = extend(created, current, now, Duration::from_secs(48 * H), max);
        assert_eq!(e.expires_at, t("2026-12-03T00:00:00Z"));
        assert!(!e.capped);
        let e = extend(created, current, now, Duration::from_secs(30 * 24 * H), max);
        assert_eq!(e.expires_at, t("2026-12-07T00:00:00Z"), "cut at maxTtl");
        assert!(e.capped);
        // Already expired in the past: extend from now.
        let e = extend(
            created,
            Some(t("2026-11-30T06:00:00Z")),
            now,
            Duration::from_secs(H),
            max,
        );
        assert_eq!(e.expires_at, t("2026-11-30T13:00:00Z"));
        // A lowered maxTtl never shortens a preview that already lives longer.
        let e = extend(
            created,
            Some(t("2026-12-10T00:00:00Z")),
            now,
            Duration::from_secs(H),
            max,
        );
        assert_eq!(e.expires_at, t("2026-12-10T00:00:00Z"));
        assert!(e.capped);
    }

    #[test]
    fn idle_and_expiry() {
        let last = t("2026-11-30T00:00:00Z");
        let idle = Duration::from_secs(4 * H);
        assert!(!is_idle(last, idle, t("2026-11-30T03:59:59Z")));
        assert!(is_idle(last, idle, t("2026-11-30T04:00:00Z")));
        assert!(
            !is_idle(last, Duration::ZERO, t("2027-01-01T00:00:00Z")),
            "0 = never"
        );
        assert!(is_expired(last, last));
        assert!(!is_expired(t("2026-11-30T00:00:01Z"), last));
    }

    #[test]
    fn next_deadline_is_the_nearest_one_ahead() {
        let now = t("2026-11-30T00:00:00Z");
        let d = until_next(
            now,
            &[
                Some(t("2026-11-29T00:00:00Z")),
                None,
                Some(t("2026-11-30T04:00:00Z")),
                Some(t("2026-11-30T02:00:00Z")),
            ],
        );
        assert_eq!(d, Some(Duration::from_secs(2 * H)));
        assert_eq!(until_next(now, &[None]), None);
    }

    #[test]
    fn slots_go_in_request_order() {
        // cap 2, nobody holding: the first two in line start, the third waits first in line.
        assert_eq!(admission(2, 0, 0, true), Admission::Admitted);
        assert_eq!(admission(2, 0, 1, true), Admission::Admitted);
        assert_eq!(
            admission(2, 0, 2, true),
            Admission::Queued {
                position: 1,
                in_use: 0,
                cap: 2
            }
        );
        assert_eq!(
            admission(20, 20, 2, true),
            Admission::Queued {
                position: 3,
                in_use: 20,
                cap: 20
            }
        );
        assert_eq!(
            admission(2, 2, 0, false),
            Admission::Rejected { in_use: 2, cap: 2 }
        );
        // A lowered cap: more holders than slots, nobody new starts.
        assert_eq!(
            admission(1, 3, 0, true),
            Admission::Queued {
                position: 1,
                in_use: 3,
                cap: 1
            }
        );
    }
}
