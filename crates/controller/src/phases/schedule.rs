//! Off-hours schedules in the controller: the schedule a Blueprint's previews follow (its own
//! `schedule`, else Sandcastle's `--schedule-stop`), refused with the field named when it cannot
//! be read, and what it asks of one preview now (`domain::schedule::decide`), from the
//! preview's activity, its `preview-keep` label (`sandcastle.dev/keep`), an agent's last call
//! (`sandcastle.dev/agent-activity`) and what the schedule last did to it (`status.schedule`).
//! The stop and the wake themselves are the ones idle stop uses (`admit`, `idle`).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::context::Context;
use sandcastle_crd::labels::{AGENT_ACTIVITY, KEEP};
use sandcastle_crd::{
    Blueprint, Phase, PreviewEnvironment, PreviewStatus, ScheduleRecord, ScheduleState,
};
use sandcastle_domain::schedule::{self, Decision, Facts, Record, Schedule, ScheduleError};

/// The schedule `bp`'s previews follow, if any: its own, else Sandcastle's default.
pub(crate) fn of(bp: &Blueprint, ctx: &Context) -> Option<Result<Schedule, ScheduleError>> {
    match &bp.spec.schedule {
        Some(spec) => Some(Schedule::of(spec)),
        None => ctx.settings.schedule.clone().map(Ok),
    }
}

/// Why `bp`'s previews are refused while its schedule cannot be read.
pub(crate) fn refusal(bp: &Blueprint, e: &ScheduleError) -> String {
    format!(
        "Blueprint {} cannot be used until its schedule is fixed: {e}",
        bp.name_any()
    )
}

/// What the schedule last did to the preview, from its status.
pub(crate) fn record_of(st: &PreviewStatus) -> Option<Record> {
    st.schedule.as_ref().map(|r| match r.state {
        ScheduleState::Stopped => Record::Stopped(r.at.0),
        ScheduleState::Woken => Record::Woken(r.at.0),
    })
}

/// Keep `record` in the status.
pub(crate) fn remember(st: &mut PreviewStatus, record: Option<Record>) {
    st.schedule = record.map(|r| match r {
        Record::Stopped(at) => ScheduleRecord {
            state: ScheduleState::Stopped,
            at: Time(at),
        },
        Record::Woken(at) => ScheduleRecord {
            state: ScheduleState::Woken,
            at: Time(at),
        },
    });
}

pub(crate) use schedule::idle_from;

fn agent_activity(pe: &PreviewEnvironment) -> Option<Timestamp> {
    pe.annotations()
        .get(AGENT_ACTIVITY)
        .and_then(|s| s.parse().ok())
}

/// How long an agent's session on `bp`'s previews lasts after its last call.
fn session(bp: &Blueprint) -> Duration {
    schedule::agent_session(bp.spec.stop_after_idle.get())
}

/// What `schedule` asks of `pe` (whose status so far is `st`) at `now`.
pub(crate) fn judge(
    schedule: &Schedule,
    pe: &PreviewEnvironment,
    st: &PreviewStatus,
    bp: &Blueprint,
    last_activity: Timestamp,
    now: Timestamp,
) -> Decision {
    let facts = Facts {
        now,
        last_activity,
        agent_activity: agent_activity(pe),
        agent_session: session(bp),
        keep: pe.labels().get(KEEP).is_some_and(|v| v == "true"),
        stopped_on_request: pe.spec.stopped,
        live: matches!(st.phase, Some(Phase::Ready | Phase::Failed)),
        record: record_of(st),
    };
    schedule::decide(schedule, &facts)
}

/// The instants the schedule needs a look at `pe` again: its next stop and wake instants, and
/// the end of an agent's session that may be holding a stop off.
pub(crate) fn deadlines(
    pe: &PreviewEnvironment,
    bp: &Blueprint,
    ctx: &Context,
    now: Timestamp,
) -> Vec<Timestamp> {
    let Some(Ok(s)) = of(bp, ctx) else {
        return Vec::new();
    };
    let held = agent_activity(pe).map(|a| Decision::AgentSession {
        until: a
            .checked_add(jiff::SignedDuration::try_from(session(bp)).unwrap_or_default())
            .unwrap_or(a),
    });
    schedule::next_look(&s, now, held.unwrap_or(Decision::Leave))
}
