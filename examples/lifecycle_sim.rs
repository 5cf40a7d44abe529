//! A week of pull-request traffic from people, dependency bots and coding agents, simulated
//! against Sandcastle's lifecycle rules (the same functions of time the controller and the
//! webhook use: `domain::lifecycle`), to compare environment-hours under each policy with
//! previews that live until the PR closes, and to count what each policy costs reviewers.
//!
//! Run: `cargo run --example lifecycle_sim [-- --prs 200 --seed 7]`
//!
//! Model (deterministic for a seed). PRs open at random times over 7 days; their authors are
//! coding agents (40 %), members (30 %), dependency bots (25 %) and outside contributors (5 %).
//! - Agents: 2–7 pushes in the first minutes, then review rounds (pushes, commands) with
//!   exponential gaps (mean 3 h) during a log-normal active period (median 6 h).
//! - Members and outside contributors: 1–3 pushes in the first hour, then rounds with gaps of
//!   mean 4 h during a period of median 8 h.
//! - Dependency bots: 0–2 rebases a day apart.
//! - Two thirds are merged or closed within hours of their last round (bots: mean 6 h); a third
//!   are abandoned and stay open for days (median 3 days, bots 4), cut at the week's end.
//! - A comment-triggered PR gets `/preview` from a maintainer with some chance (outside
//!   contributors 60 %, bots 15 %) some hours after opening; without it, it gets no preview.
//! - Reviewers visit the preview: after each round with chance 60 % (bots 20 %), at an
//!   exponential delay of mean 1.5 h.
//!
//! A push or command is activity: it extends the expiry (`ttl` from now, within `maxTtl` from
//! creation), wakes a stopped preview, and re-creates an expired auto-triggered one. A visit to
//! a running preview goes to the app, which Sandcastle does not see. A visit to a stopped one
//! meets the waking page with wake on visit (it wakes, a few seconds' wait) and, without it, a
//! stopped preview: the reviewer comments `/preview wake` (counted as a command). "Running"
//! hours count workloads scaled up; "existing" hours count namespaces.
//!
//! Off-hours schedules (the rows with one) are judged by `domain::schedule::decide` at each
//! stop and wake instant of the PR's life (UTC; the week starts on a Monday). An agent's pushes
//! stand for its API calls (an agent that pushes reads its preview through the API too), so a
//! stop instant within its idle window leaves its preview running; people's previews are
//! stopped. No PR carries `preview-keep`. Traffic has no daily rhythm: PRs open and reviewers
//! visit at any hour, so the nights' savings shown are the least a team that sleeps would see.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sandcastle::domain::lifecycle;
use sandcastle::domain::schedule::{self, Decision, Facts, Record, Schedule};

const WEEK_H: f64 = 168.0;

fn hours(h: f64) -> SignedDuration {
    SignedDuration::from_secs_f64(h * 3600.0)
}

fn h_between(a: Timestamp, b: Timestamp) -> f64 {
    b.duration_since(a).as_secs_f64().max(0.0) / 3600.0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Author {
    Agent,
    Member,
    Bot,
    Outside,
}

const AUTHORS: [Author; 4] = [Author::Agent, Author::Member, Author::Bot, Author::Outside];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A push or a command.
    Activity,
    /// A maintainer's `/preview` on a comment-triggered PR.
    Ask,
    /// A reviewer opens the preview's URL.
    Visit,
    /// A stop or wake instant of the policy's schedule.
    Tick,
}

/// One pull request: who opened it, what happened when, when it closed.
struct Pr {
    author: Author,
    events: Vec<(Timestamp, Kind)>,
    open: Timestamp,
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

fn author(rng: &mut StdRng) -> Author {
    match rng.random_range(0..100) {
        0..40 => Author::Agent,
        40..70 => Author::Member,
        70..95 => Author::Bot,
        _ => Author::Outside,
    }
}

/// Pushes and commands from opening until the last round.
fn rounds(rng: &mut StdRng, who: Author, open: Timestamp) -> Vec<Timestamp> {
    let mut activity = vec![open];
    let mut t = open;
    let (burst, step, gap, median) = match who {
        Author::Agent => (rng.random_range(2..8), 0.02..0.2, 3.0, 6f64),
        Author::Member | Author::Outside => (rng.random_range(1..4), 0.1..0.4, 4.0, 8f64),
        Author::Bot => {
            for _ in 0..rng.random_range(0..3) {
                t += hours(exponential(rng, 24.0));
                activity.push(t);
            }
            return activity;
        }
    };
    for _ in 0..burst {
        t += hours(rng.random_range(step.clone()));
        activity.push(t);
    }
    let active_until = open + hours((median.ln() + normal(rng)).exp());
    loop {
        t += hours(exponential(rng, gap));
        if t >= active_until {
            break;
        }
        activity.push(t);
    }
    activity
}

fn traffic(n: usize, seed: u64, start: Timestamp, end: Timestamp) -> Vec<Pr> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let who = author(&mut rng);
            let open = start + hours(rng.random_range(0.0..WEEK_H));
            let activity = rounds(&mut rng, who, open);
            let last = *activity.last().expect("opened");
            let (soon, abandoned) = if who == Author::Bot {
                (6.0, 96f64)
            } else {
                (2.0, 72f64)
            };
            let close = if rng.random_bool(0.65) {
                last + hours(exponential(&mut rng, soon))
            } else {
                (open + hours((abandoned.ln() + 0.8 * normal(&mut rng)).exp())).max(last)
            }
            .min(end);
            let mut events: Vec<(Timestamp, Kind)> =
                activity.iter().map(|t| (*t, Kind::Activity)).collect();
            let ask = match who {
                Author::Outside => 0.6,
                Author::Bot => 0.15,
                _ => 0.0,
            };
            if rng.random_bool(ask) {
                events.push((open + hours(exponential(&mut rng, 4.0)), Kind::Ask));
            }
            let look = if who == Author::Bot { 0.2 } else { 0.6 };
            for t in &activity {
                if rng.random_bool(look) {
                    events.push((*t + hours(exponential(&mut rng, 1.5)), Kind::Visit));
                }
            }
            events.retain(|(t, _)| *t < close);
            events.sort();
            Pr {
                author: who,
                events,
                open,
                close,
            }
        })
        .collect()
}

/// One class's rule in a policy.
#[derive(Debug, Clone, Copy)]
struct Rule {
    /// Previews only on `/preview` (else on every push).
    comment: bool,
    ttl: Duration,
    idle: Duration,
}

/// A policy: each class's rule (in [`AUTHORS`] order), `maxTtl`, wake on visit, and an
/// off-hours schedule.
struct Policy {
    name: &'static str,
    rules: [Rule; 4],
    max_ttl: Duration,
    wake_on_visit: bool,
    schedule: Option<Schedule>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    running: f64,
    existing: f64,
    previews: u32,
    stops: u32,
    /// Visits that met a stopped preview and had to comment `/preview wake`.
    commands: u32,
    /// Visits that met the waking page.
    woken: u32,
    /// Stops at a schedule's stop instant (counted in `stops` too).
    scheduled: u32,
    /// Wakes at a schedule's wake instant.
    scheduled_wakes: u32,
}

impl std::ops::Add for Usage {
    type Output = Self;
    fn add(self, b: Self) -> Self {
        Self {
            running: self.running + b.running,
            existing: self.existing + b.existing,
            previews: self.previews + b.previews,
            stops: self.stops + b.stops,
            commands: self.commands + b.commands,
            woken: self.woken + b.woken,
            scheduled: self.scheduled + b.scheduled,
            scheduled_wakes: self.scheduled_wakes + b.scheduled_wakes,
        }
    }
}

/// A live preview: created, expires, last active.
type Live = (Timestamp, Timestamp, Timestamp);

/// The stop and wake instants of `schedule` from `from` until `to`.
fn instants(schedule: &Schedule, from: Timestamp, to: Timestamp) -> Vec<Timestamp> {
    let mut out = Vec::new();
    let mut t = from;
    while let Some(n) = schedule.next_stop(t).filter(|n| *n < to) {
        out.push(n);
        t = n;
    }
    let mut t = from;
    while let Some(n) = schedule.next_wake(t).filter(|n| *n < to) {
        out.push(n);
        t = n;
    }
    out
}

/// Hours and reviewer costs of one PR's previews under `rule` (`None`: live until close).
fn usage(pr: &Pr, rule: Option<Rule>, max_ttl: Duration, policy: Option<&Policy>) -> Usage {
    let Some(rule) = rule else {
        let h = h_between(pr.open, pr.close);
        return Usage {
            running: h,
            existing: h,
            previews: 1,
            ..Usage::default()
        };
    };
    let wake_on_visit = policy.is_some_and(|p| p.wake_on_visit);
    let off_hours = policy.and_then(|p| p.schedule.as_ref());
    let mut u = Usage::default();
    let mut live: Option<Live> = None;
    let mut running = false;
    let mut record: Option<Record> = None;
    let mut asked = !rule.comment;
    let mut now = pr.open;
    let mut events = pr.events.clone();
    if let Some(s) = off_hours {
        events.extend(
            instants(s, pr.open, pr.close)
                .into_iter()
                .map(|t| (t, Kind::Tick)),
        );
        events.sort();
    }
    events.push((pr.close, Kind::Activity));
    for (i, (at, kind)) in events.iter().copied().enumerate() {
        if let Some((_, expires, last)) = live {
            let gone = expires.min(at);
            u.existing += h_between(now, gone);
            if running {
                let idle_from = schedule::idle_from(last, record);
                let stop = lifecycle::idle_deadline(idle_from, rule.idle)
                    .unwrap_or(gone)
                    .min(gone);
                u.running += h_between(now, stop.max(now));
                if lifecycle::is_idle(idle_from, rule.idle, gone) {
                    u.stops += 1;
                    running = false;
                }
            }
            if lifecycle::is_expired(expires, at) {
                live = None;
                running = false;
                record = None;
            }
        }
        now = at;
        if i == events.len() - 1 {
            break; // closed: torn down
        }
        let acts = match kind {
            Kind::Tick => {
                if let (Some(s), Some((_, _, last))) = (off_hours, live) {
                    let facts = Facts {
                        now: at,
                        last_activity: last,
                        agent_activity: (pr.author == Author::Agent).then_some(last),
                        agent_session: schedule::agent_session(rule.idle),
                        keep: false,
                        stopped_on_request: false,
                        live: running,
                        record,
                    };
                    let decision = schedule::decide(s, &facts);
                    match decision {
                        Decision::Stop { .. } if running => {
                            running = false;
                            u.stops += 1;
                            u.scheduled += 1;
                        }
                        Decision::Wake { .. } => {
                            running = true;
                            u.scheduled_wakes += 1;
                        }
                        _ => {}
                    }
                    record = decision.record(record);
                }
                false
            }
            Kind::Activity => asked,
            Kind::Ask => {
                asked = true;
                true
            }
            // A running preview's visit goes to the app; a stopped one's wakes it, by the page
            // or by the reviewer's command.
            Kind::Visit if live.is_some() && !running => {
                if wake_on_visit {
                    u.woken += 1;
                } else {
                    u.commands += 1;
                }
                true
            }
            Kind::Visit => false,
        };
        if !acts {
            continue;
        }
        running = true;
        live = Some(match live {
            None => {
                u.previews += 1;
                (
                    at,
                    lifecycle::expires_after_activity(at, None, at, rule.ttl, max_ttl),
                    at,
                )
            }
            Some((created, expires, _)) => {
                let e = lifecycle::expires_after_activity(
                    created,
                    Some(expires),
                    at,
                    rule.ttl,
                    max_ttl,
                );
                (created, e, at)
            }
        });
    }
    u
}

fn class_of(a: Author) -> usize {
    AUTHORS.iter().position(|x| *x == a).expect("listed")
}

fn total(prs: &[Pr], policy: Option<&Policy>) -> Usage {
    prs.iter()
        .map(|p| match policy {
            None => usage(p, None, Duration::ZERO, None),
            Some(pol) => usage(
                p,
                Some(pol.rules[class_of(p.author)]),
                pol.max_ttl,
                Some(pol),
            ),
        })
        .fold(Usage::default(), |a, b| a + b)
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// An off-hours schedule in UTC.
fn nights(stop: &str, wake: Option<&str>) -> Schedule {
    Schedule::new(stop, wake, None).expect("a schedule of the table")
}

fn policies() -> Vec<Policy> {
    let h = |x: u64| Duration::from_secs(x * 3600);
    let m = |x: u64| Duration::from_secs(x * 60);
    let all = |ttl, idle| Rule {
        comment: false,
        ttl,
        idle,
    };
    let every = |r: Rule| [r; 4];
    // Agents, members, bots, outside contributors.
    let by_class = |agents: Duration, people: Duration| {
        [
            all(h(24), agents),
            all(h(24), people),
            Rule {
                comment: true,
                ttl: h(24),
                idle: people,
            },
            Rule {
                comment: true,
                ttl: h(24),
                idle: people,
            },
        ]
    };
    vec![
        Policy {
            name: "TTL 24h + idle stop 4h (old defaults)",
            rules: every(all(h(24), h(4))),
            max_ttl: h(168),
            wake_on_visit: false,
            schedule: None,
        },
        Policy {
            name: "TTL 24h + idle stop 1h",
            rules: every(all(h(24), h(1))),
            max_ttl: h(168),
            wake_on_visit: false,
            schedule: None,
        },
        Policy {
            name: "TTL 24h + idle stop 1h + wake on visit",
            rules: every(all(h(24), h(1))),
            max_ttl: h(168),
            wake_on_visit: true,
            schedule: None,
        },
        Policy {
            name: "+ bots, outsiders on /preview",
            rules: by_class(h(1), h(1)),
            max_ttl: h(168),
            wake_on_visit: true,
            schedule: None,
        },
        Policy {
            name: "+ agents idle 30m (new defaults)",
            rules: by_class(m(30), h(1)),
            max_ttl: h(168),
            wake_on_visit: true,
            schedule: None,
        },
        Policy {
            name: "+ agents idle 15m",
            rules: by_class(m(15), h(1)),
            max_ttl: h(168),
            wake_on_visit: true,
            schedule: None,
        },
        Policy {
            name: "defaults + stop 20:00 weekdays, wake 07:00",
            rules: by_class(m(30), h(1)),
            max_ttl: h(168),
            wake_on_visit: true,
            schedule: Some(nights("0 20 * * 1-5", Some("0 7 * * 1-5"))),
        },
        Policy {
            name: "defaults + stop 20:00 weekdays, no wake",
            rules: by_class(m(30), h(1)),
            max_ttl: h(168),
            wake_on_visit: true,
            schedule: Some(nights("0 20 * * 1-5", None)),
        },
        Policy {
            name: "defaults + stop 20:00 daily, no wake",
            rules: by_class(m(30), h(1)),
            max_ttl: h(168),
            wake_on_visit: true,
            schedule: Some(nights("0 20 * * *", None)),
        },
        Policy {
            name: "idle 4h (old) + stop 20:00 wkdays, wake 07:00",
            rules: every(all(h(24), h(4))),
            max_ttl: h(168),
            wake_on_visit: true,
            schedule: Some(nights("0 20 * * 1-5", Some("0 7 * * 1-5"))),
        },
        Policy {
            name: "idle 4h (old) + stop 20:00 wkdays, no wake",
            rules: every(all(h(24), h(4))),
            max_ttl: h(168),
            wake_on_visit: true,
            schedule: Some(nights("0 20 * * 1-5", None)),
        },
        Policy {
            name: "idle stop 30m for all + wake on visit",
            rules: by_class(m(30), m(30)),
            max_ttl: h(168),
            wake_on_visit: true,
            schedule: None,
        },
    ]
}

fn main() {
    let n = usize::try_from(arg("--prs", 200)).unwrap_or(200);
    let seed = arg("--seed", 7);
    let start: Timestamp = "2026-11-30T00:00:00Z".parse().unwrap();
    let end = start + hours(WEEK_H);
    let prs = traffic(n, seed, start, end);
    let count = |k: Kind| {
        prs.iter()
            .flat_map(|p| &p.events)
            .filter(|(_, e)| *e == k)
            .count()
    };
    let mix: Vec<String> = AUTHORS
        .iter()
        .map(|a| format!("{} {:?}", prs.iter().filter(|p| p.author == *a).count(), a))
        .collect();
    println!(
        "{n} PRs over 7 days (seed {seed}; {}): {} pushes/commands, {} visits, {} still open at the end",
        mix.join(", "),
        count(Kind::Activity),
        count(Kind::Visit),
        prs.iter().filter(|p| p.close >= end).count()
    );
    let baseline = total(&prs, None);
    println!(
        "| {:<46} | {:>8} | {:>8} | {:>8} | {:>8} | {:>6} | {:>14} | {:>12} | {:>11} | {:>11} |",
        "policy",
        "running",
        "vs close",
        "existing",
        "previews",
        "stops",
        "/preview wake",
        "waking page",
        "sched. stop",
        "sched. wake"
    );
    let row = |name: &str, u: Usage| {
        println!(
            "| {name:<46} | {:>8.0} | {:>7.0}% | {:>8.0} | {:>8} | {:>6} | {:>14} | {:>12} | {:>11} | {:>11} |",
            u.running,
            100.0 * u.running / baseline.running,
            u.existing,
            u.previews,
            u.stops,
            u.commands,
            u.woken,
            u.scheduled,
            u.scheduled_wakes
        );
    };
    row("previews live until the PR closes", baseline);
    for p in policies() {
        row(p.name, total(&prs, Some(&p)));
    }
}
