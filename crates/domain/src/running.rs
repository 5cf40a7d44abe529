//! A preview's running time (environment-hours, what its bill is made of): which states run
//! workloads, the stretch opened and closed as the phase moves, and the total as of a moment.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use sandcastle_crd::{Phase, PreviewStatus, RunningTime};

/// Whether a preview in status `st` runs workloads: its namespace is made and it is deploying,
/// ready or failed (a failed preview's pods still hold the nodes). Pending (queued, waiting for
/// checks or an approval), stopped and torn-down previews run none.
pub fn runs(st: &PreviewStatus) -> bool {
    st.namespace.is_some()
        && matches!(
            st.phase,
            Some(Phase::Deploying | Phase::Ready | Phase::Failed)
        )
}

/// Open or close the running stretch of `st` as its state says, at `now`. Returns the seconds of
/// a stretch closed by this change (0 if none).
pub fn accrue(st: &mut PreviewStatus, now: Timestamp) -> u64 {
    let runs = runs(st);
    let running = st.running.get_or_insert_with(RunningTime::default);
    let closed = match (&running.since, runs) {
        (None, true) => {
            running.since = Some(Time(now));
            0
        }
        (Some(since), false) => {
            let took = seconds_between(since.0, now);
            running.seconds += took;
            running.since = None;
            took
        }
        _ => 0,
    };
    if *running == RunningTime::default() {
        st.running = None;
    }
    closed
}

/// The running seconds of `running` as of `now`, the stretch under way included.
pub fn seconds(running: &RunningTime, now: Timestamp) -> u64 {
    let open = running
        .since
        .as_ref()
        .map_or(0, |s| seconds_between(s.0, now));
    running.seconds + open
}

/// Seconds from `from` to `to`, 0 if `to` is earlier (a clock moved back).
pub fn seconds_between(from: Timestamp, to: Timestamp) -> u64 {
    u64::try_from(to.duration_since(from).as_secs()).unwrap_or(0)
}

/// Seconds as environment-hours with one decimal, as shown to people: `0.0`, `1.5`, `26.3`.
pub fn hours(seconds: u64) -> String {
    // Tenths of an hour, rounded half up, in whole numbers (no float rounding surprises).
    let tenths = (seconds + 180) / 360;
    format!("{}.{}", tenths / 10, tenths % 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn status(phase: Phase, namespace: bool) -> PreviewStatus {
        PreviewStatus {
            phase: Some(phase),
            namespace: namespace.then(|| "shop-pr-1".to_owned()),
            ..PreviewStatus::default()
        }
    }

    #[test]
    fn a_stretch_opens_when_workloads_run_and_closes_when_they_stop() {
        let mut st = status(Phase::Pending, false);
        assert_eq!(accrue(&mut st, at("2026-12-01T10:00:00Z")), 0);
        assert_eq!(st.running, None, "nothing ran yet: nothing recorded");

        st = PreviewStatus {
            running: st.running,
            ..status(Phase::Deploying, true)
        };
        assert_eq!(accrue(&mut st, at("2026-12-01T10:00:00Z")), 0);
        st.phase = Some(Phase::Ready);
        assert_eq!(
            accrue(&mut st, at("2026-12-01T10:30:00Z")),
            0,
            "still running"
        );
        let running = st.running.clone().unwrap();
        assert_eq!(running.since, Some(Time(at("2026-12-01T10:00:00Z"))));
        assert_eq!(seconds(&running, at("2026-12-01T11:00:00Z")), 3600);

        st.phase = Some(Phase::Stopped);
        assert_eq!(accrue(&mut st, at("2026-12-01T12:00:00Z")), 7200);
        let running = st.running.clone().unwrap();
        assert_eq!((running.seconds, running.since.clone()), (7200, None));
        assert_eq!(
            seconds(&running, at("2026-12-02T00:00:00Z")),
            7200,
            "stopped: no time runs"
        );

        st.phase = Some(Phase::Deploying);
        accrue(&mut st, at("2026-12-01T13:00:00Z"));
        st.phase = Some(Phase::Removed);
        assert_eq!(accrue(&mut st, at("2026-12-01T13:15:00Z")), 900);
        assert_eq!(st.running.unwrap().seconds, 8100);
    }

    #[test]
    fn failed_previews_run_but_those_without_a_namespace_do_not() {
        assert!(runs(&status(Phase::Failed, true)));
        assert!(
            !runs(&status(Phase::Failed, false)),
            "refused before anything was made"
        );
        assert!(!runs(&status(Phase::Pending, true)), "waiting for checks");
        assert!(!runs(&status(Phase::Terminating, true)));
    }

    #[test]
    fn a_clock_moved_back_counts_nothing() {
        let running = RunningTime {
            seconds: 60,
            since: Some(Time(at("2026-12-01T10:00:00Z"))),
        };
        assert_eq!(seconds(&running, at("2026-12-01T09:00:00Z")), 60);
    }

    #[test]
    fn hours_have_one_decimal_rounded_half_up() {
        assert_eq!(hours(0), "0.0");
        assert_eq!(hours(179), "0.0");
        assert_eq!(hours(180), "0.1");
        assert_eq!(hours(5400), "1.5");
        assert_eq!(hours(94_680), "26.3");
    }
}
