//! A week of agent pull-request traffic, simulated against Sandcastle's lifecycle rules (the
//! same functions of time the controller and the webhook use: `domain::lifecycle`), to compare
//! environment-hours with TTL + idle stop against previews that live until the PR closes.
//!
//! Run: `cargo run --example lifecycle_sim [-- --prs 200 --seed 7]`
//!
//! Model (deterministic for a seed): PRs open at random times over 7 days; each gets a burst of
//! 2–7 agent pushes in its first minutes, then review rounds (pushes, commands) with exponential
//! gaps (mean 3 h) during a log-normal active period (median 6 h). Two thirds are merged or
//! closed within a few hours of their last round; a third are abandoned and stay open for days
//! (log-normal, median 3 days from opening, cut at the week's end). A push or command is
//! activity: it extends the expiry
//! (`ttl` from now, within `maxTtl` from creation), wakes a stopped preview, and re-creates an
//! expired one (a new preview, a new `maxTtl` window). "Running" hours count workloads scaled
//! up; "existing" hours count namespaces (stopped ones keep their volumes).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sandcastle::domain::lifecycle;

const WEEK_H: f64 = 168.0;

fn hours(h: f64) -> SignedDuration {
    SignedDuration::from_secs_f64(h * 3600.0)
}

fn h_between(a: Timestamp, b: Timestamp) -> f64 {
    b.duration_since(a).as_secs_f64().max(0.0) / 3600.0
}

/// One pull request: when it opens, when there is activity, when it closes.
struct Pr {
    open: Timestamp,
    activity: Vec<Timestamp>,
    close: Timestamp,
}

fn normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

fn exponential(rng: &mut StdRng, mean: f64) -> f64 {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    -mean * u.ln()
}

fn traffic(n: usize, seed: u64, start: Timestamp, end: Timestamp) -> Vec<Pr> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let open = start + hours(rng.random_range(0.0..WEEK_H));
            // The agent's burst of pushes in the first minutes.
            let mut activity = vec![open];
            let mut t = open;
            for _ in 0..rng.random_range(2..8) {
                t += hours(rng.random_range(0.02..0.2));
                activity.push(t);
            }
            // Review rounds (pushes, commands) while someone works on it: log-normal active
            // period (median 6 h), gaps exponential (mean 3 h).
            let active_until = open + hours((6f64.ln() + 1.0 * normal(&mut rng)).exp());
            loop {
                t += hours(exponential(&mut rng, 3.0));
                if t >= active_until {
                    break;
                }
                activity.push(t);
            }
            let last = *activity.last().expect("opened");
            // Most PRs are merged or closed soon after the last round; a third are abandoned
            // and stay open for days (log-normal, median 3 days from opening).
            let close = if rng.random_bool(0.65) {
                last + hours(exponential(&mut rng, 2.0))
            } else {
                (open + hours((72f64.ln() + 0.8 * normal(&mut rng)).exp())).max(last)
            }
            .min(end);
            activity.retain(|a| *a < close);
            Pr {
                open,
                activity,
                close,
            }
        })
        .collect()
}

#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    running: f64,
    existing: f64,
    previews_created: u32,
    stops: u32,
    expiries: u32,
}

/// Hours used by one PR's previews under `ttl`/`max_ttl`/`idle` (None: no TTL, no idle stop).
fn usage(pr: &Pr, rules: Option<(Duration, Duration, Duration)>) -> Usage {
    let mut u = Usage::default();
    let Some((ttl, max_ttl, idle)) = rules else {
        let h = h_between(pr.open, pr.close);
        return Usage {
            running: h,
            existing: h,
            previews_created: 1,
            ..Usage::default()
        };
    };
    // A live preview: created at, expires at, last active at.
    let mut live: Option<(Timestamp, Timestamp, Timestamp)> = None;
    let mut events = pr.activity.clone();
    events.push(pr.close);
    let mut now = pr.open;
    for (i, at) in events.iter().enumerate() {
        // From `now` to `at`, nothing happens but time.
        if let Some((_, expires, last)) = live {
            let gone = expires.min(*at);
            let stop = lifecycle::idle_deadline(last, idle)
                .unwrap_or(gone)
                .min(gone);
            u.existing += h_between(now, gone);
            u.running += h_between(now, stop.max(now));
            if lifecycle::is_idle(last, idle, gone) && stop > now {
                u.stops += 1;
            }
            if lifecycle::is_expired(expires, *at) {
                live = None;
                u.expiries += 1;
            }
        }
        now = *at;
        if i == events.len() - 1 {
            break; // the PR closed: torn down
        }
        // Activity: create, or extend and wake.
        live = Some(match live {
            None => {
                u.previews_created += 1;
                let expires = lifecycle::expires_after_activity(*at, None, *at, ttl, max_ttl);
                (*at, expires, *at)
            }
            Some((created, expires, _)) => {
                let expires =
                    lifecycle::expires_after_activity(created, Some(expires), *at, ttl, max_ttl);
                (created, expires, *at)
            }
        });
    }
    u
}

fn total(prs: &[Pr], rules: Option<(Duration, Duration, Duration)>) -> Usage {
    prs.iter()
        .map(|p| usage(p, rules))
        .fold(Usage::default(), |a, b| Usage {
            running: a.running + b.running,
            existing: a.existing + b.existing,
            previews_created: a.previews_created + b.previews_created,
            stops: a.stops + b.stops,
            expiries: a.expiries + b.expiries,
        })
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let n = usize::try_from(arg("--prs", 200)).unwrap_or(200);
    let seed = arg("--seed", 7);
    let start: Timestamp = "2026-11-30T00:00:00Z".parse().unwrap();
    let end = start + hours(WEEK_H);
    let prs = traffic(n, seed, start, end);
    let pushes: usize = prs.iter().map(|p| p.activity.len()).sum();
    let open_at_end = prs.iter().filter(|p| p.close >= end).count();
    println!(
        "{n} PRs over 7 days (seed {seed}): {pushes} pushes/commands, {open_at_end} still open at the end"
    );
    let h = |x: u64| Duration::from_secs(x * 3600);
    let baseline = total(&prs, None);
    let rows = [
        ("until the PR closes", baseline),
        (
            "TTL 24h (maxTtl 168h)",
            total(&prs, Some((h(24), h(168), Duration::ZERO))),
        ),
        (
            "TTL 24h + idle stop 4h (defaults)",
            total(&prs, Some((h(24), h(168), h(4)))),
        ),
        (
            "TTL 24h + idle stop 1h",
            total(&prs, Some((h(24), h(168), h(1)))),
        ),
        (
            "TTL 8h + idle stop 1h",
            total(&prs, Some((h(8), h(168), h(1)))),
        ),
    ];
    println!(
        "{:<36} {:>13} {:>9} {:>14} {:>9} {:>7} {:>9}",
        "policy", "running env-h", "vs close", "existing env-h", "previews", "stops", "expiries"
    );
    for (name, u) in rows {
        println!(
            "{name:<36} {:>13.0} {:>8.0}% {:>14.0} {:>9} {:>7} {:>9}",
            u.running,
            100.0 * u.running / baseline.running,
            u.existing,
            u.previews_created,
            u.stops,
            u.expiries
        );
    }
}
