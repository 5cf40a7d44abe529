//! Off-hours schedules as pure rules: a Blueprint's (or Sandcastle's default) `stop` and `wake`
//! cron expressions (five standard fields, read by `croner`) in an IANA time zone (jiff's, from
//! the system's zone database); the instants they name, before and after a moment; whether a
//! moment lies in off hours (after a stop instant, before the wake instant that ends it); and
//! what the schedule asks of one preview at a moment — stop it, wake it, or leave it, and why.
//! The controller, its requeues and the cost simulation (`examples/lifecycle_sim.rs`) all decide
//! with these.

use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

use sandcastle_crd::ScheduleSpec;

/// The time zone of a schedule that names none.
pub const DEFAULT_TIME_ZONE: &str = "UTC";

/// How long an agent's session lasts after its last call when the Blueprint's `stopAfterIdle`
/// is `0` (idle stop off).
pub const AGENT_SESSION_WITHOUT_IDLE_STOP: Duration = Duration::from_secs(3600);

/// A field of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Stop,
    Wake,
    TimeZone,
}

impl Field {
    /// Where it is in a Blueprint.
    pub fn path(self) -> &'static str {
        match self {
            Self::Stop => "spec.schedule.stop",
            Self::Wake => "spec.schedule.wake",
            Self::TimeZone => "spec.schedule.timeZone",
        }
    }

    /// Its flag among `sandcastle serve`'s (Sandcastle's default schedule).
    pub fn flag(self) -> &'static str {
        match self {
            Self::Stop => "--schedule-stop",
            Self::Wake => "--schedule-wake",
            Self::TimeZone => "--schedule-time-zone",
        }
    }
}

/// A schedule field that cannot be used, and why, said to people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", field.path())]
pub struct ScheduleError {
    pub field: Field,
    pub reason: String,
}

/// One cron expression: as written, and as read.
#[derive(Debug, Clone)]
pub struct CronExpr {
    text: String,
    cron: Cron,
}

/// A moment long ago that every expression that ever happens happens after.
fn reference() -> Timestamp {
    Timestamp::from_second(946_684_800).expect("2000-01-01T00:00:00Z")
}

/// Whole seconds: cron names seconds, and croner's search steps by them.
fn second_of(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

impl CronExpr {
    /// Read `text` as the five standard fields (minute, hour, day of month, month, day of
    /// week; names such as `mon` or `jan` allowed): no seconds, no years, no `@daily`. The
    /// reason of an error is for people.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let shape = "a cron expression of five fields (minute hour day-of-month month \
                     day-of-week), such as `0 20 * * 1-5`";
        if text.is_empty() || text.starts_with('@') || text.split(' ').count() != 5 {
            return Err(format!("`{text}` is not {shape}"));
        }
        let parser = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build();
        let cron = parser
            .parse(&text)
            .map_err(|e| format!("`{text}` is not {shape}: {e}"))?;
        let expr = Self { text, cron };
        if expr.next_after(reference(), &TimeZone::UTC).is_none() {
            return Err(format!("`{}` never happens", expr.text));
        }
        Ok(expr)
    }

    /// As written (runs of spaces made one).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The first instant it names strictly after `t`, on the clocks of `tz`.
    pub fn next_after(&self, t: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let from = second_of(t).to_zoned(tz.clone());
        self.cron
            .find_next_occurrence(&from, false)
            .ok()
            .map(|z| z.timestamp())
    }

    /// The last instant it names at or before `t`, on the clocks of `tz`.
    pub fn last_at_or_before(&self, t: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let from = second_of(t).to_zoned(tz.clone());
        self.cron
            .find_previous_occurrence(&from, true)
            .ok()
            .map(|z| z.timestamp())
    }
}

impl PartialEq for CronExpr {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

/// An IANA time zone, by name.
#[derive(Debug, Clone)]
pub struct Zone {
    name: String,
    tz: TimeZone,
}

impl Zone {
    /// The zone named `name` (`Europe/Paris`, `UTC`) in the zone database.
    pub fn parse(name: &str) -> Result<Self, String> {
        let name = name.trim();
        if name.is_empty() {
            return Err("an empty name is no time zone".to_owned());
        }
        let tz = TimeZone::get(name).map_err(|_| {
            format!("`{name}` is not a time zone of the IANA database (such as Europe/Paris)")
        })?;
        Ok(Self {
            name: name.to_owned(),
            tz,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl PartialEq for Zone {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// When previews of a Blueprint stop for the night (and weekend), and when they wake.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    stop: CronExpr,
    wake: Option<CronExpr>,
    zone: Zone,
}

impl Schedule {
    /// A schedule from its fields as written; an error names the field.
    pub fn new(stop: &str, wake: Option<&str>, zone: Option<&str>) -> Result<Self, ScheduleError> {
        let err = |field: Field| move |reason: String| ScheduleError { field, reason };
        Ok(Self {
            stop: CronExpr::parse(stop).map_err(err(Field::Stop))?,
            wake: wake
                .map(CronExpr::parse)
                .transpose()
                .map_err(err(Field::Wake))?,
            zone: Zone::parse(zone.unwrap_or(DEFAULT_TIME_ZONE)).map_err(err(Field::TimeZone))?,
        })
    }

    /// A Blueprint's `schedule`.
    pub fn of(spec: &ScheduleSpec) -> Result<Self, ScheduleError> {
        Self::new(&spec.stop, spec.wake.as_deref(), spec.time_zone.as_deref())
    }

    pub fn stop(&self) -> &str {
        self.stop.as_str()
    }

    pub fn wake(&self) -> Option<&str> {
        self.wake.as_ref().map(CronExpr::as_str)
    }

    pub fn zone(&self) -> &str {
        self.zone.name()
    }

    /// The first stop instant strictly after `t`.
    pub fn next_stop(&self, t: Timestamp) -> Option<Timestamp> {
        self.stop.next_after(t, &self.zone.tz)
    }

    /// The first wake instant strictly after `t` (none without `wake`).
    pub fn next_wake(&self, t: Timestamp) -> Option<Timestamp> {
        self.wake.as_ref()?.next_after(t, &self.zone.tz)
    }

    /// The stop instant that opened the off hours `now` lies in: the last one at or before
    /// `now`, unless a wake instant came after it (by `now`). Without `wake`, off hours last
    /// until the next stop instant opens new ones.
    pub fn off_hours(&self, now: Timestamp) -> Option<Timestamp> {
        let since = self.stop.last_at_or_before(now, &self.zone.tz)?;
        match self.woken_between(since, now) {
            Some(_) => None,
            None => Some(since),
        }
    }

    /// The first wake instant after `since` and at or before `now`: the one that ended the off
    /// hours `since` opened, once it has come.
    pub fn woken_between(&self, since: Timestamp, now: Timestamp) -> Option<Timestamp> {
        self.next_wake(since).filter(|w| *w <= now)
    }

    /// `schedule 0 20 * * 1-5 Europe/Paris`.
    pub fn describe(&self) -> String {
        format!("schedule {} {}", self.stop(), self.zone())
    }

    /// Why a preview stopped at `now` by this schedule is stopped, for people:
    /// `outside working hours (schedule 0 20 * * 1-5 Europe/Paris); wakes at 07:00` (a wake
    /// more than a day away names its day: `wakes Mon 07:00`).
    pub fn stop_reason(&self, now: Timestamp) -> String {
        let why = format!("outside working hours ({})", self.describe());
        match self.next_wake(now) {
            Some(w) => {
                let at = w.to_zoned(self.zone.tz.clone());
                let soon = w.duration_since(now) <= jiff::SignedDuration::from_hours(24);
                let when = if soon {
                    at.strftime("at %H:%M").to_string()
                } else {
                    at.strftime("%a %H:%M").to_string()
                };
                format!("{why}; wakes {when}")
            }
            None => why,
        }
    }

    /// Why a preview woken by this schedule was woken: `for working hours (schedule 0 7 * * 1-5
    /// Europe/Paris)`.
    pub fn wake_reason(&self) -> String {
        format!(
            "for working hours (schedule {} {})",
            self.wake().unwrap_or(self.stop()),
            self.zone()
        )
    }
}

/// What the schedule last did to a preview (kept in its status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// Stopped for the off hours that began at this stop instant.
    Stopped(Timestamp),
    /// Woken at this wake instant: its idle time counts from here.
    Woken(Timestamp),
}

/// What the schedule knows of one preview at `now`.
#[derive(Debug, Clone, Copy)]
pub struct Facts {
    pub now: Timestamp,
    /// Its last activity, anyone's (`sandcastle.dev/last-activity`).
    pub last_activity: Timestamp,
    /// Its last activity through the API or MCP (`sandcastle.dev/agent-activity`).
    pub agent_activity: Option<Timestamp>,
    /// How long an agent's session lasts after its last call ([`agent_session`]).
    pub agent_session: Duration,
    /// Its pull request carries the `preview-keep` label.
    pub keep: bool,
    /// Stopped on request (`spec.stopped`).
    pub stopped_on_request: bool,
    /// Running and settled: `Ready` or `Failed`.
    pub live: bool,
    pub record: Option<Record>,
}

/// What the schedule asks of one preview.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: working hours, woken by activity since, not running, or stopped on request
    /// (whose stop is the request's: the schedule never wakes it).
    Leave,
    /// Stop it, or keep it stopped: the off hours that began at `since`.
    Stop { since: Timestamp },
    /// Wake it: the wake instant `at` ended the off hours it was stopped for.
    Wake { at: Timestamp },
    /// Off hours, but its pull request carries `preview-keep`: left running.
    Kept,
    /// Off hours, but an agent used it within its session: left running until `until` (or
    /// until activity moves that).
    AgentSession { until: Timestamp },
}

impl Decision {
    /// What to remember after this decision, having remembered `before`: a stop's or a wake's
    /// instant; otherwise the last wake (its idle time counts from there), never a stop that no
    /// longer holds.
    pub fn record(self, before: Option<Record>) -> Option<Record> {
        match self {
            Self::Stop { since } => Some(Record::Stopped(since)),
            Self::Wake { at } => Some(Record::Woken(at)),
            _ => before.filter(|r| matches!(r, Record::Woken(_))),
        }
    }
}

/// When a preview's idle time starts: its last activity, or the wake instant that woke it if
/// later (one nobody opens after the schedule woke it stops again after `stopAfterIdle`).
pub fn idle_from(last_activity: Timestamp, record: Option<Record>) -> Timestamp {
    match record {
        Some(Record::Woken(at)) => last_activity.max(at),
        _ => last_activity,
    }
}

/// How long an agent's session lasts after its last call: the Blueprint's `stopAfterIdle`, or
/// an hour when that is `0`.
pub fn agent_session(stop_after_idle: Duration) -> Duration {
    if stop_after_idle.is_zero() {
        AGENT_SESSION_WITHOUT_IDLE_STOP
    } else {
        stop_after_idle
    }
}

fn plus(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX)
}

/// What `schedule` asks of the preview `f` describes. A preview running when off hours begin is
/// stopped, unless someone was active since they began, its pull request is kept, or an
/// agent's session on it lasts; once that session ends (before the wake instant) it is stopped
/// then. One the schedule stopped is woken at the wake instant, or earlier by activity (a
/// visit, a push, a command); without `wake` only activity wakes it.
pub fn decide(schedule: &Schedule, f: &Facts) -> Decision {
    if f.stopped_on_request {
        return Decision::Leave;
    }
    if let Some(Record::Stopped(since)) = f.record {
        if f.last_activity >= since {
            return Decision::Leave;
        }
        return match schedule.woken_between(since, f.now) {
            Some(at) => Decision::Wake { at },
            None => Decision::Stop { since },
        };
    }
    let Some(since) = schedule.off_hours(f.now) else {
        return Decision::Leave;
    };
    if f.last_activity >= since || !f.live {
        return Decision::Leave;
    }
    if f.keep {
        return Decision::Kept;
    }
    if let Some(until) = f
        .agent_activity
        .map(|a| plus(a, f.agent_session))
        .filter(|u| *u > f.now)
    {
        return Decision::AgentSession { until };
    }
    Decision::Stop { since }
}

/// When the schedule next needs a look at a preview: its next stop or wake instant, or the end
/// of an agent's session that holds off a stop.
pub fn next_look(schedule: &Schedule, now: Timestamp, decision: Decision) -> Vec<Timestamp> {
    let mut at = vec![];
    at.extend(schedule.next_stop(now));
    at.extend(schedule.next_wake(now));
    if let Decision::AgentSession { until } = decision {
        at.push(until);
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn paris() -> Schedule {
        Schedule::new("0 20 * * 1-5", Some("0 7 * * 1-5"), Some("Europe/Paris")).unwrap()
    }

    #[test]
    fn fields_are_read_or_refused_naming_the_field() {
        assert!(Schedule::new("0 20 * * 1-5", None, None).is_ok());
        assert_eq!(paris().zone(), "Europe/Paris");
        assert_eq!(
            Schedule::new("0 20 * * mon-fri", None, None)
                .unwrap()
                .stop(),
            "0 20 * * mon-fri"
        );
        let cases = [
            ("0 25 * * *", None, None, Field::Stop),
            ("0 20 * *", None, None, Field::Stop),
            ("0 0 20 * * 1-5", None, None, Field::Stop),
            ("@daily", None, None, Field::Stop),
            ("", None, None, Field::Stop),
            ("0 0 31 2 *", None, None, Field::Stop),
            ("0 20 * * 1-5", Some("61 7 * * *"), None, Field::Wake),
            (
                "0 20 * * 1-5",
                None,
                Some("Mars/Olympus_Mons"),
                Field::TimeZone,
            ),
            ("0 20 * * 1-5", None, Some(""), Field::TimeZone),
        ];
        for (stop, wake, zone, field) in cases {
            let e = Schedule::new(stop, wake, zone).unwrap_err();
            assert_eq!(e.field, field, "{stop:?} {wake:?} {zone:?}: {e}");
            assert!(e.to_string().starts_with(field.path()), "{e}");
        }
        assert_eq!(
            Schedule::new("0 0 31 2 *", None, None)
                .unwrap_err()
                .to_string(),
            "spec.schedule.stop: `0 0 31 2 *` never happens"
        );
    }

    #[test]
    fn instants_are_on_the_zones_clocks() {
        let s = paris();
        // Tuesday 1 December 2026, 12:00 UTC = 13:00 in Paris (UTC+1 in winter).
        let noon = t("2026-12-01T12:00:00Z");
        assert_eq!(s.next_stop(noon), Some(t("2026-12-01T19:00:00Z")));
        assert_eq!(s.next_wake(noon), Some(t("2026-12-02T06:00:00Z")));
        // Friday evening: the next wake is Monday's.
        let friday = t("2026-12-04T19:00:00Z");
        assert_eq!(s.next_wake(friday), Some(t("2026-12-07T06:00:00Z")));
        assert_eq!(
            s.next_stop(t("2026-12-01T19:00:00Z")),
            Some(t("2026-12-02T19:00:00Z")),
            "strictly after"
        );
    }

    #[test]
    fn off_hours_run_from_a_stop_to_the_wake_that_ends_it() {
        let s = paris();
        assert_eq!(
            s.off_hours(t("2026-12-01T12:00:00Z")),
            None,
            "working hours"
        );
        let stop = t("2026-12-01T19:00:00Z");
        assert_eq!(s.off_hours(stop), Some(stop), "from the stop instant on");
        assert_eq!(s.off_hours(t("2026-12-02T05:59:59Z")), Some(stop));
        assert_eq!(s.off_hours(t("2026-12-02T06:00:00Z")), None, "woken");
        // The weekend: Friday's stop holds until Monday's wake.
        let friday = t("2026-12-04T19:00:00Z");
        assert_eq!(s.off_hours(t("2026-12-06T12:00:00Z")), Some(friday));
        // Without `wake`, off hours last until the next stop.
        let no_wake = Schedule::new("0 20 * * 1-5", None, Some("Europe/Paris")).unwrap();
        assert_eq!(no_wake.off_hours(t("2026-12-02T12:00:00Z")), Some(stop));
    }

    #[test]
    fn daylight_saving_moves_the_instants_with_the_clocks() {
        let s = paris();
        // Paris goes from UTC+1 to UTC+2 on Sunday 28 March 2027: 20:00 is 19:00 UTC before
        // and 18:00 UTC after.
        assert_eq!(
            s.next_stop(t("2027-03-26T12:00:00Z")),
            Some(t("2027-03-26T19:00:00Z"))
        );
        assert_eq!(
            s.next_stop(t("2027-03-27T12:00:00Z")),
            Some(t("2027-03-29T18:00:00Z"))
        );
        assert_eq!(
            s.next_wake(t("2027-03-27T12:00:00Z")),
            Some(t("2027-03-29T05:00:00Z"))
        );
        // The weekend across the change is off hours until Monday 07:00 summer time.
        assert_eq!(
            s.off_hours(t("2027-03-29T04:59:59Z")),
            Some(t("2027-03-26T19:00:00Z"))
        );
        assert_eq!(s.off_hours(t("2027-03-29T05:00:00Z")), None);
        // Back to UTC+1 on Sunday 31 October 2027.
        assert_eq!(
            s.next_stop(t("2027-10-30T12:00:00Z")),
            Some(t("2027-11-01T19:00:00Z"))
        );
        // A time the clocks skip (02:30 on 28 March) happens once, right after the gap; a time
        // they repeat (02:30 on 31 October) happens once.
        let nightly = Schedule::new("30 2 * * *", None, Some("Europe/Paris")).unwrap();
        assert_eq!(
            nightly.next_stop(t("2027-03-27T12:00:00Z")),
            Some(t("2027-03-28T01:00:00Z")),
            "03:00 summer time, the first instant after the gap"
        );
        assert_eq!(
            nightly.next_stop(t("2027-03-28T01:00:00Z")),
            Some(t("2027-03-29T00:30:00Z"))
        );
        let repeated = nightly.next_stop(t("2027-10-30T12:00:00Z")).unwrap();
        assert_eq!(repeated, t("2027-10-31T00:30:00Z"), "the first 02:30");
        assert_eq!(
            nightly.next_stop(repeated),
            Some(t("2027-11-01T01:30:00Z")),
            "not again an hour later"
        );
    }

    #[test]
    fn reasons_say_when_it_wakes() {
        let s = paris();
        assert_eq!(
            s.stop_reason(t("2026-12-01T19:00:00Z")),
            "outside working hours (schedule 0 20 * * 1-5 Europe/Paris); wakes at 07:00"
        );
        assert_eq!(
            s.stop_reason(t("2026-12-04T19:00:00Z")),
            "outside working hours (schedule 0 20 * * 1-5 Europe/Paris); wakes Mon 07:00"
        );
        let no_wake = Schedule::new("0 20 * * 1-5", None, None).unwrap();
        assert_eq!(
            no_wake.stop_reason(t("2026-12-01T20:00:00Z")),
            "outside working hours (schedule 0 20 * * 1-5 UTC)"
        );
        assert_eq!(
            s.wake_reason(),
            "for working hours (schedule 0 7 * * 1-5 Europe/Paris)"
        );
    }

    fn facts(now: &str, last: &str) -> Facts {
        Facts {
            now: t(now),
            last_activity: t(last),
            agent_activity: None,
            agent_session: Duration::from_secs(3600),
            keep: false,
            stopped_on_request: false,
            live: true,
            record: None,
        }
    }

    #[test]
    fn a_running_preview_stops_at_the_stop_instant_and_wakes_at_the_wake_instant() {
        let s = paris();
        let stop = t("2026-12-01T19:00:00Z");
        let before = facts("2026-12-01T18:59:59Z", "2026-12-01T18:00:00Z");
        assert_eq!(decide(&s, &before), Decision::Leave);
        let at = facts("2026-12-01T19:00:00Z", "2026-12-01T18:00:00Z");
        let d = decide(&s, &at);
        assert_eq!(d, Decision::Stop { since: stop });
        let record = d.record(None);
        assert_eq!(record, Some(Record::Stopped(stop)));
        // Stopped through the night...
        let night = Facts {
            live: false,
            record,
            ..facts("2026-12-02T03:00:00Z", "2026-12-01T18:00:00Z")
        };
        assert_eq!(decide(&s, &night), Decision::Stop { since: stop });
        // ...woken at 07:00, and its idle time counts from then.
        let morning = Facts {
            now: t("2026-12-02T06:00:00Z"),
            ..night
        };
        let wake = t("2026-12-02T06:00:00Z");
        let d = decide(&s, &morning);
        assert_eq!(d, Decision::Wake { at: wake });
        assert_eq!(d.record(record), Some(Record::Woken(wake)));
        assert_eq!(
            idle_from(t("2026-12-01T18:00:00Z"), d.record(record)),
            wake,
            "idle from the wake instant"
        );
        assert_eq!(
            idle_from(t("2026-12-02T08:00:00Z"), d.record(record)),
            t("2026-12-02T08:00:00Z")
        );
        assert_eq!(
            Decision::Leave.record(Some(Record::Woken(wake))),
            Some(Record::Woken(wake))
        );
    }

    #[test]
    fn activity_in_off_hours_wakes_and_keeps_a_preview_running() {
        let s = paris();
        let stop = t("2026-12-01T19:00:00Z");
        // A visit at 22:00 to a preview the schedule stopped wakes it.
        let visited = Facts {
            live: false,
            record: Some(Record::Stopped(stop)),
            ..facts("2026-12-01T21:00:00Z", "2026-12-01T21:00:00Z")
        };
        let d = decide(&s, &visited);
        assert_eq!(d, Decision::Leave);
        assert_eq!(d.record(visited.record), None, "no longer the schedule's");
        // Running again, the schedule leaves it to idle stop.
        let later = Facts {
            live: true,
            record: None,
            ..facts("2026-12-01T21:30:00Z", "2026-12-01T21:00:00Z")
        };
        assert_eq!(decide(&s, &later), Decision::Leave);
        // Opened in off hours: not stopped.
        assert_eq!(
            decide(&s, &facts("2026-12-01T23:00:00Z", "2026-12-01T22:00:00Z")),
            Decision::Leave
        );
        // Not running (stopped idle before the stop instant, or deploying): nothing to do, and
        // nothing to wake at 07:00.
        let idle = Facts {
            live: false,
            ..facts("2026-12-01T19:00:00Z", "2026-12-01T15:00:00Z")
        };
        assert_eq!(decide(&s, &idle), Decision::Leave);
        assert_eq!(
            decide(
                &s,
                &Facts {
                    now: t("2026-12-02T06:00:00Z"),
                    ..idle
                }
            ),
            Decision::Leave
        );
    }

    #[test]
    fn kept_agents_and_requests_are_left_alone() {
        let s = paris();
        let at = facts("2026-12-01T19:00:00Z", "2026-12-01T18:30:00Z");
        assert_eq!(decide(&s, &Facts { keep: true, ..at }), Decision::Kept);
        let agent = Facts {
            agent_activity: Some(t("2026-12-01T18:30:00Z")),
            ..at
        };
        let until = t("2026-12-01T19:30:00Z");
        let d = decide(&s, &agent);
        assert_eq!(d, Decision::AgentSession { until });
        assert!(next_look(&s, at.now, d).contains(&until));
        // The session over and still off hours: stopped then.
        assert_eq!(
            decide(
                &s,
                &Facts {
                    now: until,
                    ..agent
                }
            ),
            Decision::Stop {
                since: t("2026-12-01T19:00:00Z")
            }
        );
        // An agent long gone does not hold it.
        let old = Facts {
            agent_activity: Some(t("2026-12-01T10:00:00Z")),
            ..at
        };
        assert!(matches!(decide(&s, &old), Decision::Stop { .. }));
        // Stopped on request: never the schedule's to wake, even one it had stopped.
        let asked = Facts {
            stopped_on_request: true,
            live: false,
            record: Some(Record::Stopped(t("2026-12-01T19:00:00Z"))),
            ..facts("2026-12-02T06:00:00Z", "2026-12-01T18:30:00Z")
        };
        let d = decide(&s, &asked);
        assert_eq!(d, Decision::Leave);
        assert_eq!(d.record(asked.record), None);
    }

    #[test]
    fn without_wake_only_activity_wakes() {
        let s = Schedule::new("0 20 * * *", None, None).unwrap();
        let stop = t("2026-12-01T20:00:00Z");
        let stopped = Facts {
            live: false,
            record: Some(Record::Stopped(stop)),
            ..facts("2026-12-02T09:00:00Z", "2026-12-01T18:00:00Z")
        };
        assert_eq!(decide(&s, &stopped), Decision::Stop { since: stop });
        let visited = Facts {
            last_activity: t("2026-12-02T09:00:00Z"),
            ..stopped
        };
        assert_eq!(decide(&s, &visited), Decision::Leave);
        assert_eq!(agent_session(Duration::ZERO), Duration::from_secs(3600));
        assert_eq!(
            agent_session(Duration::from_secs(600)),
            Duration::from_secs(600)
        );
    }
}
