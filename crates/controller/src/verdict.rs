//! What one reconcile decided about a preview — a [`Verdict`]: the status to write, what GitHub
//! should show, when to look again — and the one place that writes a preview's status
//! ([`save`]: only when it changed, with server-side apply so that cleared fields really
//! disappear), plus the bounded history of actions the status keeps.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::api::Api;

use sandcastle_crd::labels::FIELD_MANAGER;
use sandcastle_crd::{HISTORY_LIMIT, HistoryEntry, Phase, PreviewEnvironment, PreviewStatus};
use sandcastle_kube::status;

use super::echoes::Echoes;

/// What a pass decided. Phases build it without side effects on the status or GitHub; the
/// reconcile then reports to GitHub once ([`super::report`]) and saves once ([`save`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Verdict {
    pub status: PreviewStatus,
    /// What GitHub should show for the preview's commit; `None`: leave GitHub as it is.
    pub report: Option<super::report::Report>,
    pub next: Next,
    /// The preview waits in line to start a rollout (`phases::rollout::line`): its place and
    /// `status.inLine` stay; any other verdict takes them away.
    pub in_line: bool,
}

/// When to look at the preview again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// After this long (watches on its objects usually bring it back sooner).
    After(Duration),
    /// Only when something changes.
    Change,
    /// Soon: something is in progress (the controller's progress interval).
    Soon,
}

impl Verdict {
    pub(super) fn new(status: PreviewStatus, next: Next) -> Self {
        Self {
            status,
            report: None,
            next,
            in_line: false,
        }
    }

    pub(super) fn waiting_in_line(mut self) -> Self {
        self.in_line = true;
        self
    }

    pub(super) fn reporting(mut self, report: super::report::Report) -> Self {
        self.report = Some(report);
        self
    }
}

/// Write `new` as the status of `pe` unless it says what the current one says (as written:
/// times in whole seconds, so a time taken again this pass is no change); the version written
/// is remembered in `echoes`.
pub(super) async fn save(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    new: &PreviewStatus,
    echoes: &Echoes,
) -> Result<(), kube::Error> {
    if same_as_written(pe.status.as_ref(), new) {
        return Ok(());
    }
    let version = status::apply(api, &pe.name_any(), FIELD_MANAGER, new).await?;
    echoes.wrote(&pe.name_any(), version);
    Ok(())
}

/// Whether `new`, written, would say exactly what `current` says.
fn same_as_written(current: Option<&PreviewStatus>, new: &PreviewStatus) -> bool {
    current == Some(new)
        || current.is_some_and(|c| serde_json::to_value(c).ok() == serde_json::to_value(new).ok())
}

/// Move to `phase` with `message`; a phase change is recorded in the history and the `Ready`
/// condition.
pub(super) fn set_phase(
    st: &mut PreviewStatus,
    phase: Phase,
    message: impl Into<String>,
    now: Timestamp,
    sha: Option<&str>,
) {
    let message = message.into();
    let changed = st.phase != Some(phase);
    st.phase = Some(phase);
    if phase != Phase::Deploying {
        st.stuck_on = None;
    }
    if !matches!(phase, Phase::Deploying | Phase::Failed) {
        st.diagnosis = None;
    }
    st.message = Some(message.clone()).filter(|m| !m.is_empty());
    let ready = phase == Phase::Ready;
    let cond = Condition {
        type_: "Ready".into(),
        status: if ready { "True" } else { "False" }.into(),
        reason: phase.as_str().into(),
        message: message.clone(),
        last_transition_time: Time(now),
        observed_generation: None,
    };
    match st.conditions.iter_mut().find(|c| c.type_ == "Ready") {
        Some(c)
            if c.status == cond.status && c.reason == cond.reason && c.message == cond.message => {}
        Some(c) => {
            let keep_time = c.status == cond.status;
            let time = c.last_transition_time.clone();
            *c = cond;
            if keep_time {
                c.last_transition_time = time;
            }
        }
        None => st.conditions.push(cond),
    }
    if changed {
        record(st, now, "sandcastle", phase.as_str(), sha, Some(&message));
    }
}

/// Request ids a status remembers as recorded.
const REQUESTS_REMEMBERED: usize = 20;

/// Record in `pe`'s history the requests left on it (by the webhook, commands, the API) that it
/// does not hold yet: who asked for what, at which commit. Their Events follow from the history.
pub(super) fn record_requests(pe: &mut PreviewEnvironment) {
    let requests = sandcastle_kube::events::requests_of(pe);
    if requests.is_empty() {
        return;
    }
    let sha = pe.spec.sha.clone();
    let st = pe.status.get_or_insert_default();
    for r in requests {
        if r.id.is_empty() || st.recorded_requests.contains(&r.id) {
            continue;
        }
        record(
            st,
            r.at,
            &r.actor,
            &r.action,
            Some(r.sha.as_deref().unwrap_or(&sha)),
            Some(&r.note),
        );
        st.recorded_requests.push(r.id);
    }
    let excess = st
        .recorded_requests
        .len()
        .saturating_sub(REQUESTS_REMEMBERED);
    st.recorded_requests.drain(..excess);
}

/// Append an action to the history, keeping the last [`HISTORY_LIMIT`].
pub(super) fn record(
    st: &mut PreviewStatus,
    now: Timestamp,
    actor: &str,
    action: &str,
    sha: Option<&str>,
    result: Option<&str>,
) {
    st.history.push(HistoryEntry {
        time: Time(now),
        actor: actor.to_owned(),
        action: action.to_owned(),
        sha: sha.map(str::to_owned),
        result: result.filter(|r| !r.is_empty()).map(str::to_owned),
    });
    let excess = st.history.len().saturating_sub(HISTORY_LIMIT);
    st.history.drain(..excess);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_recorded_once_and_history_is_bounded() {
        let mut st = PreviewStatus::default();
        let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        set_phase(&mut st, Phase::Deploying, "cloning", now, Some("abc"));
        set_phase(&mut st, Phase::Deploying, "cloning", now, Some("abc"));
        assert_eq!(st.history.len(), 1);
        set_phase(&mut st, Phase::Ready, "1/1 ready", now, Some("abc"));
        assert_eq!(st.history.len(), 2);
        assert_eq!(st.conditions.len(), 1);
        assert_eq!(st.conditions[0].status, "True");
        for i in 0..100 {
            record(&mut st, now, "x", &format!("a{i}"), None, None);
        }
        assert_eq!(st.history.len(), HISTORY_LIMIT);
        assert_eq!(st.history.last().unwrap().action, "a99");
    }

    #[test]
    fn requests_are_recorded_once_with_who_and_which_commit() {
        let mut pe: PreviewEnvironment = serde_json::from_value(serde_json::json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEnvironment",
            "metadata": {"name": "shop-pr-1"},
            "spec": {"blueprint": "shop", "repository": "acme/shop", "ref": "main",
                "sha": "0123456789012345678901234567890123456789",
                "requestedBy": {"kind": "github-user", "name": "maria"}}
        }))
        .unwrap();
        let at: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let stop = sandcastle_kube::events::Request {
            sha: None,
            id: String::new(),
            at,
            actor: "@maria".into(),
            action: "command-stop".into(),
            note: "/preview stop on #1".into(),
        };
        sandcastle_kube::events::note_request(&mut pe, &stop);
        record_requests(&mut pe);
        record_requests(&mut pe);
        let history = &pe.status.as_ref().unwrap().history;
        assert_eq!(history.len(), 1, "{history:?}");
        let entry = &history[0];
        assert_eq!(
            (entry.actor.as_str(), entry.action.as_str()),
            ("@maria", "command-stop")
        );
        assert_eq!(
            entry.sha.as_deref(),
            Some("0123456789012345678901234567890123456789")
        );
        assert_eq!(entry.result.as_deref(), Some("/preview stop on #1"));
        assert_eq!(entry.time.0, at);
        let wake = sandcastle_kube::events::Request {
            sha: None,
            action: "command-wake".into(),
            ..stop
        };
        sandcastle_kube::events::note_request(&mut pe, &wake);
        record_requests(&mut pe);
        assert_eq!(pe.status.unwrap().history.len(), 2);
    }

    #[test]
    fn a_time_taken_again_within_its_second_is_no_change_to_write() {
        let at = |t: &str| Some(Time(t.parse::<Timestamp>().unwrap()));
        let current = PreviewStatus {
            last_activity: at("2026-11-29T12:00:00.100Z"),
            message: Some("cloning".into()),
            ..PreviewStatus::default()
        };
        let again = PreviewStatus {
            last_activity: at("2026-11-29T12:00:00.900Z"),
            ..current.clone()
        };
        assert_ne!(current, again);
        assert!(same_as_written(Some(&current), &again));
        let later = PreviewStatus {
            last_activity: at("2026-11-29T12:00:01Z"),
            ..current.clone()
        };
        assert!(!same_as_written(Some(&current), &later));
        let said = PreviewStatus {
            message: Some("ready".into()),
            ..current.clone()
        };
        assert!(!same_as_written(Some(&current), &said));
        assert!(!same_as_written(None, &current));
    }
}
