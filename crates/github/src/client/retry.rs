//! The retry rules for GitHub calls as one pure function, [`decide`]: from one attempt's outcome to
//! "hand it to the caller", "wait and try again" or "give up". Time and randomness come in as
//! arguments, so every rule of GITHUB.md §3.3 is a row in a table test.

use std::time::Duration;

use http::{HeaderMap, StatusCode};
use jiff::Timestamp;

use super::ClientSettings;

/// GitHub: with no `retry-after` and no exhausted primary limit, "wait at least one minute".
pub const SECONDARY_MIN_WAIT: Duration = Duration::from_secs(60);

/// What one attempt produced.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    /// GitHub answered. `message` is the JSON `message` of the body, if any.
    Response {
        status: StatusCode,
        headers: &'a HeaderMap,
        message: Option<&'a str>,
    },
    /// The attempt hit the per-attempt timeout.
    Timeout,
    /// The connection failed before a full answer arrived.
    Transport,
}

/// Why the client is waiting before the next attempt (for logs and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryReason {
    ServerError,
    Timeout,
    Transport,
    RateLimited,
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Give the response to the caller: a success, or an error status retrying will not fix.
    Accept,
    /// Sleep `after`, then try again.
    Retry {
        after: Duration,
        reason: RetryReason,
    },
    /// Rate limited for longer than the client may block (or retries ran out while limited): the
    /// caller should requeue the work for `retry_at`.
    RateLimited { retry_at: Timestamp },
    /// Retries are exhausted; report the last failure.
    GiveUp,
}

/// Decides what follows an attempt. `attempt` counts the retries already made (0 after the first
/// try); `jitter` is a uniform sample from `[0, 1)` that scales the backoff ("full jitter").
pub fn decide(
    outcome: &Outcome<'_>,
    attempt: u32,
    now: Timestamp,
    settings: &ClientSettings,
    jitter: f64,
) -> Decision {
    let exhausted = attempt >= settings.max_retries;
    let backoff_or_give_up = |reason| {
        if exhausted {
            Decision::GiveUp
        } else {
            Decision::Retry {
                after: backoff(attempt, settings.backoff_base, settings.backoff_cap, jitter),
                reason,
            }
        }
    };
    match *outcome {
        Outcome::Timeout => backoff_or_give_up(RetryReason::Timeout),
        Outcome::Transport => backoff_or_give_up(RetryReason::Transport),
        Outcome::Response {
            status,
            headers,
            message,
        } => {
            if let Some(wait) = rate_limit_wait(status, headers, message, now) {
                let retry_at = add(now, wait);
                if exhausted || wait > settings.max_wait {
                    Decision::RateLimited { retry_at }
                } else {
                    Decision::Retry {
                        after: wait,
                        reason: RetryReason::RateLimited,
                    }
                }
            } else if status.is_server_error() {
                backoff_or_give_up(RetryReason::ServerError)
            } else {
                Decision::Accept
            }
        }
    }
}

/// Exponential backoff with full jitter: a uniform wait in `[0, min(cap, base · 2^attempt))`.
pub fn backoff(attempt: u32, base: Duration, cap: Duration, jitter: f64) -> Duration {
    let ceiling = base
        .saturating_mul(2u32.saturating_pow(attempt.min(31)))
        .min(cap);
    ceiling.mul_f64(jitter.clamp(0.0, 1.0))
}

/// How long a 403/429 asks us to wait, or `None` when it is not a rate limit (GITHUB.md §3.3):
/// `retry-after` first, then an exhausted primary limit's `x-ratelimit-reset`, then the secondary
/// limit's "at least one minute".
fn rate_limit_wait(
    status: StatusCode,
    headers: &HeaderMap,
    message: Option<&str>,
    now: Timestamp,
) -> Option<Duration> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    if let Some(secs) = header_u64(headers, "retry-after") {
        return Some(Duration::from_secs(secs));
    }
    if header_u64(headers, "x-ratelimit-remaining") == Some(0) {
        let wait = header_u64(headers, "x-ratelimit-reset")
            .and_then(|reset| i64::try_from(reset).ok())
            .map_or(SECONDARY_MIN_WAIT, |reset| {
                Duration::from_secs(u64::try_from(reset - now.as_second()).unwrap_or(0))
            });
        return Some(wait);
    }
    let secondary = message.is_some_and(|m| {
        let m = m.to_ascii_lowercase();
        m.contains("secondary rate limit") || m.contains("abuse detection")
    });
    (secondary || status == StatusCode::TOO_MANY_REQUESTS).then_some(SECONDARY_MIN_WAIT)
}

fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

fn add(now: Timestamp, wait: Duration) -> Timestamp {
    let secs = i64::try_from(wait.as_secs()).unwrap_or(i64::MAX / 2);
    Timestamp::from_second(now.as_second().saturating_add(secs)).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ClientSettings {
        ClientSettings {
            max_retries: 4,
            backoff_base: Duration::from_millis(250),
            backoff_cap: Duration::from_secs(8),
            max_wait: Duration::from_secs(120),
            ..ClientSettings::default()
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    const NOW: i64 = 1_760_000_000;

    fn run(
        status: u16,
        h: &[(&'static str, &str)],
        message: Option<&str>,
        attempt: u32,
    ) -> Decision {
        let headers = headers(h);
        let outcome = Outcome::Response {
            status: StatusCode::from_u16(status).unwrap(),
            headers: &headers,
            message,
        };
        let now = Timestamp::from_second(NOW).unwrap();
        decide(&outcome, attempt, now, &settings(), 0.5)
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn retry(ms: u64, reason: RetryReason) -> Decision {
        Decision::Retry {
            after: Duration::from_millis(ms),
            reason,
        }
    }

    #[test]
    fn decision_table() {
        let reset_in = |s: i64| (NOW + s).to_string();
        let secondary = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.";
        #[rustfmt::skip]
        let cases: Vec<(&str, Decision, Decision)> = vec![
            ("201 accepted", run(201, &[], None, 0), Decision::Accept),
            ("404 accepted", run(404, &[], Some("Not Found"), 0), Decision::Accept),
            ("422 fails at once", run(422, &[], Some("Validation Failed"), 0), Decision::Accept),
            ("plain 403 fails at once", run(403, &[("x-ratelimit-remaining", "4999")], Some("Resource not accessible by integration"), 0), Decision::Accept),
            // half of min(8 s, 250 ms * 2^n), jitter being 0.5
            ("500 first retry", run(500, &[], None, 0), retry(125, RetryReason::ServerError)),
            ("502 third retry", run(502, &[], None, 2), retry(500, RetryReason::ServerError)),
            ("503 fourth retry", run(503, &[], None, 3), retry(1000, RetryReason::ServerError)),
            ("5xx retries exhausted", run(500, &[], None, 4), Decision::GiveUp),
            ("retry-after honoured exactly", run(403, &[("retry-after", "30")], Some(secondary), 0), retry(30_000, RetryReason::RateLimited)),
            ("429 retry-after", run(429, &[("retry-after", "7")], None, 1), retry(7_000, RetryReason::RateLimited)),
            ("retry-after beyond max_wait", run(403, &[("retry-after", "600")], Some(secondary), 0), Decision::RateLimited { retry_at: at(NOW + 600) }),
            ("primary: wait until reset", run(403, &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", &reset_in(90))], Some("API rate limit exceeded"), 0), retry(90_000, RetryReason::RateLimited)),
            ("primary 429: wait until reset", run(429, &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", &reset_in(5))], None, 0), retry(5_000, RetryReason::RateLimited)),
            ("primary reset already passed", run(403, &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", &reset_in(-3))], None, 0), retry(0, RetryReason::RateLimited)),
            ("primary reset beyond max_wait", run(403, &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", &reset_in(3600))], None, 0), Decision::RateLimited { retry_at: at(NOW + 3600) }),
            ("secondary without headers waits a minute", run(403, &[], Some(secondary), 0), retry(60_000, RetryReason::RateLimited)),
            ("bare 429 waits a minute", run(429, &[], None, 0), retry(60_000, RetryReason::RateLimited)),
            ("rate limited with retries exhausted", run(403, &[("retry-after", "1")], Some(secondary), 4), Decision::RateLimited { retry_at: at(NOW + 1) }),
        ];
        for (name, got, want) in cases {
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn secondary_minimum_is_subject_to_max_wait() {
        let h = HeaderMap::new();
        let outcome = Outcome::Response {
            status: StatusCode::FORBIDDEN,
            headers: &h,
            message: Some("You have exceeded a secondary rate limit."),
        };
        let tight = ClientSettings {
            max_wait: Duration::from_secs(10),
            ..settings()
        };
        assert_eq!(
            decide(&outcome, 0, at(NOW), &tight, 0.0),
            Decision::RateLimited {
                retry_at: at(NOW + 60)
            }
        );
    }

    #[test]
    fn transport_failures_and_timeouts_back_off() {
        let s = settings();
        assert_eq!(
            decide(&Outcome::Timeout, 1, at(NOW), &s, 1.0),
            retry(500, RetryReason::Timeout)
        );
        assert_eq!(
            decide(&Outcome::Transport, 0, at(NOW), &s, 0.0),
            retry(0, RetryReason::Transport)
        );
        assert_eq!(
            decide(&Outcome::Transport, 4, at(NOW), &s, 0.3),
            Decision::GiveUp
        );
    }

    #[test]
    fn backoff_is_bounded_by_the_cap() {
        let base = Duration::from_millis(250);
        let cap = Duration::from_secs(8);
        assert_eq!(backoff(0, base, cap, 1.0), base);
        assert_eq!(backoff(5, base, cap, 1.0), cap);
        assert_eq!(backoff(40, base, cap, 1.0), cap);
        assert_eq!(backoff(3, base, cap, 0.0), Duration::ZERO);
    }
}
