//! Kubernetes Events on PreviewEnvironments, so that `kubectl describe previewenvironment` tells
//! what happened and who asked; and the requests every write leaves on a preview. A request
//! (pull request event, `/preview` command, API call, with its actor) goes into an annotation in
//! the write's own change, so no entry point makes an extra API call; the controller records it
//! in the preview's status history, and publishes each new history entry (requests, phase
//! changes, stop, wake, expiry) as an Event. The audit line, the history entry and the Event of
//! a write so say the same. Publishing never blocks or fails the caller: an Event that cannot be
//! written is logged and dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use sandcastle_crd::labels::REQUESTS;
use sandcastle_crd::{HistoryEntry, PreviewEnvironment};

/// Longest note Kubernetes accepts on an Event.
const NOTE_LIMIT: usize = 1024;
/// Longest wait for the API server before an Event is given up.
const TIMEOUT: Duration = Duration::from_secs(2);

/// Requests a preview keeps for the controller to record (the newest).
const REQUESTS_KEPT: usize = 10;

/// A request written to a preview: who asked for what, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Unique per request (given when it is noted).
    #[serde(default)]
    pub id: String,
    pub at: Timestamp,
    /// `@login`, or `sandcastle` for its own catch-up resync.
    pub actor: String,
    /// Short kebab-case name, e.g. `pull-request-opened`, `command-stop`.
    pub action: String,
    /// For people, e.g. `/preview stop on #12`.
    pub note: String,
    /// The commit the preview was at when the request was written (set when it is noted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
}

/// Record `request` on `pe` (written with the request's own change), keeping the newest few.
pub fn note_request(pe: &mut PreviewEnvironment, request: &Request) {
    let mut all = requests_of(pe);
    let mut request = request.clone();
    if request.sha.is_none() && !pe.spec.sha.is_empty() {
        request.sha = Some(pe.spec.sha.clone());
    }
    if request.id.is_empty() {
        request.id = format!(
            "{}-{:08x}",
            request.at.as_nanosecond(),
            rand::random::<u32>()
        );
    }
    all.push(request);
    let excess = all.len().saturating_sub(REQUESTS_KEPT);
    all.drain(..excess);
    if let Ok(json) = serde_json::to_string(&all) {
        pe.annotations_mut().insert(REQUESTS.to_owned(), json);
    }
}

/// The requests left on `pe`, oldest first.
pub fn requests_of(pe: &PreviewEnvironment) -> Vec<Request> {
    pe.annotations()
        .get(REQUESTS)
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

/// The last history entry published; `None` for "no history yet". Whole entries are compared:
/// several entries can share a second and an action (a push right after a rollout).
type Mark = Option<HistoryEntry>;

/// What this process published of one preview.
#[derive(Debug, Default)]
struct Published {
    /// The newest history entry published (or found at first sight).
    history: Mark,
}

/// Publishes Events as Sandcastle (one instance name per process).
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
    published: Arc<Mutex<HashMap<String, Published>>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

/// An Event's reason: `PascalCase`, as `kubectl describe` shows reasons.
pub fn reason(action: &str) -> String {
    action
        .split(['-', '_', ' '])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|first| first.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// Cut `note` to what an Event may hold, on a character boundary.
fn bounded(note: String) -> String {
    if note.len() <= NOTE_LIMIT {
        return note;
    }
    let mut end = NOTE_LIMIT - 3;
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &note[..end])
}

/// An Event for `action`; `commit` goes into the Event's action, so that Kubernetes' folding of
/// repeated Events into a series keeps one series per commit and a note never names the wrong one.
fn event(type_: EventType, action: &str, commit: Option<&str>, note: String) -> Event {
    let reason = reason(action);
    Event {
        type_,
        action: commit.map_or_else(|| reason.clone(), |c| format!("{reason}@{c}")),
        reason,
        note: Some(bounded(note.trim().to_owned())),
        secondary: None,
    }
}

/// What one history entry says, as an Event.
pub fn entry_event(entry: &HistoryEntry) -> Event {
    let mut note = entry.result.clone().unwrap_or_default();
    let short = entry.sha.as_deref().map(|sha| &sha[..sha.len().min(7)]);
    if let Some(short) = short.filter(|s| !note.contains(s)) {
        note = format!("{note} (commit {short})");
    }
    if entry.actor != "sandcastle" {
        note = format!("{note}; by {}", entry.actor);
    }
    let type_ = if entry.action == "Failed" {
        EventType::Warning
    } else {
        EventType::Normal
    };
    event(type_, &entry.action, short, note)
}

/// `entry` as the API server keeps it: its time in whole seconds. The same history is seen
/// both as this process wrote it and as read back, and must be the same mark either way.
fn as_written(entry: &HistoryEntry) -> HistoryEntry {
    let mut kept = entry.clone();
    if let Ok(second) = Timestamp::from_second(entry.time.0.as_second()) {
        kept.time.0 = second;
    }
    kept
}

/// History entries after the one marked; all of them when the mark rotated out.
fn after<'a>(history: &'a [HistoryEntry], mark: &Mark) -> &'a [HistoryEntry] {
    let Some(mark) = mark else {
        return history;
    };
    match history.iter().rposition(|e| as_written(e) == *mark) {
        Some(i) => &history[i + 1..],
        None => history,
    }
}

impl Events {
    /// `instance` tells replicas apart (the pod name, the leader identity).
    pub fn new(client: Client, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: "sandcastle".into(),
            instance,
        };
        Self {
            recorder: Recorder::new(client, reporter),
            published: Arc::default(),
        }
    }

    /// Publish `event` on `pe`; failures are logged, never returned.
    pub async fn publish(&self, pe: &PreviewEnvironment, event: Event) {
        let reference = pe.object_ref(&());
        match tokio::time::timeout(TIMEOUT, self.recorder.publish(&event, &reference)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(preview = %pe.name_any(), reason = %event.reason, error = %e, "publishing an Event failed");
            }
            Err(_) => {
                tracing::warn!(preview = %pe.name_any(), reason = %event.reason, "publishing an Event timed out");
            }
        }
    }

    /// Publish what this process has not published yet of `pe`: the new entries of its history
    /// (requests recorded by the controller among them). At first sight of a preview (after a
    /// restart or a change of leader) its history counts as published; a preview first seen
    /// without history has every entry published.
    pub async fn sync(&self, pe: &PreviewEnvironment) {
        let history = pe
            .status
            .as_ref()
            .map(|s| s.history.as_slice())
            .unwrap_or_default();
        let mark: Mark = history.last().map(as_written);
        let events: Vec<Event> = {
            let mut published = self
                .published
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let first_sight = !published.contains_key(&pe.name_any());
            let seen = published.entry(pe.name_any()).or_default();
            let mut events = Vec::new();
            if !first_sight && seen.history != mark {
                events.extend(after(history, &seen.history).iter().map(entry_event));
            }
            seen.history = mark;
            events
        };
        for event in events {
            self.publish(pe, event).await;
        }
    }

    /// Forget a preview that is gone.
    pub fn forget(&self, name: &str) {
        self.published
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn entry(secs: i64, actor: &str, action: &str, result: Option<&str>) -> HistoryEntry {
        HistoryEntry {
            time: Time(jiff::Timestamp::from_second(1_800_000_000 + secs).unwrap()),
            actor: actor.into(),
            action: action.into(),
            sha: Some("0123456789abcdef".into()),
            result: result.map(str::to_owned),
        }
    }

    #[test]
    fn reasons_are_pascal_case() {
        assert_eq!(reason("Ready"), "Ready");
        assert_eq!(reason("expire"), "Expire");
        assert_eq!(reason("delete-orphan"), "DeleteOrphan");
        assert_eq!(reason("command stop"), "CommandStop");
    }

    #[test]
    fn failures_are_warnings_and_notes_say_who_and_which_commit() {
        let e = entry_event(&entry(
            0,
            "sandcastle",
            "Failed",
            Some("seed Job db-seed failed"),
        ));
        assert_eq!(e.type_, EventType::Warning);
        assert_eq!(
            e.note.as_deref(),
            Some("seed Job db-seed failed (commit 0123456)")
        );
        let e = entry_event(&entry(0, "@octocat", "stop", None));
        assert_eq!(e.type_, EventType::Normal);
        assert_eq!(e.note.as_deref(), Some("(commit 0123456); by @octocat"));
        let e = entry_event(&entry(
            0,
            "@octocat",
            "opened",
            Some("opened at commit 0123456"),
        ));
        assert_eq!(
            e.note.as_deref(),
            Some("opened at commit 0123456; by @octocat"),
            "the commit is named once"
        );
        assert_eq!(e.action, "Opened@0123456", "one Event series per commit");
        let long = "é".repeat(2000);
        let e = entry_event(&entry(0, "sandcastle", "Ready", Some(&long)));
        assert!(e.note.unwrap().len() <= NOTE_LIMIT);
    }

    #[test]
    fn only_entries_after_the_mark_are_new() {
        let h = [
            entry(0, "sandcastle", "Deploying", None),
            entry(1, "sandcastle", "Ready", None),
            entry(2, "sandcastle", "Stopped", None),
        ];
        let mark = Some(h[0].clone());
        let new: Vec<&str> = after(&h, &mark).iter().map(|e| e.action.as_str()).collect();
        assert_eq!(new, ["Ready", "Stopped"]);
        // Same second, same action, another commit: still told apart.
        let mut again = entry(0, "sandcastle", "Deploying", None);
        again.sha = Some("fedcba9876543210".into());
        let h2 = [
            h[0].clone(),
            again.clone(),
            entry(0, "sandcastle", "Ready", None),
        ];
        assert_eq!(after(&h2, &Some(h[0].clone())).len(), 2);
        assert_eq!(after(&h2, &Some(again)).len(), 1);
        // The mark taken from the history as this process wrote it (a time to the nanosecond)
        // is the same entry read back in whole seconds.
        let mut written = entry(1, "sandcastle", "Ready", None);
        written.time.0 += jiff::SignedDuration::from_millis(250);
        let mark = Some(as_written(&written));
        let new: Vec<&str> = after(&h, &mark).iter().map(|e| e.action.as_str()).collect();
        assert_eq!(new, ["Stopped"]);
        let gone = Some(entry(-100, "sandcastle", "Pending", None));
        assert_eq!(
            after(&h, &gone).len(),
            3,
            "the mark rotated out: all are new"
        );
    }

    #[test]
    fn requests_are_kept_newest_last_each_with_an_id() {
        let at: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let request = |n: i64| Request {
            sha: None,
            id: String::new(),
            at: at + jiff::SignedDuration::from_secs(n),
            actor: "@maria".into(),
            action: format!("command-{n}"),
            note: "/preview stop on #1".into(),
        };
        let mut pe: PreviewEnvironment = serde_json::from_value(serde_json::json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEnvironment",
            "metadata": {"name": "shop-pr-1"},
            "spec": {"blueprint": "shop", "repository": "acme/shop", "ref": "main",
                "sha": "0123456789012345678901234567890123456789",
                "requestedBy": {"kind": "github-user", "name": "maria"}}
        }))
        .unwrap();
        assert!(requests_of(&pe).is_empty());
        for n in 0..15 {
            note_request(&mut pe, &request(n));
        }
        let kept = requests_of(&pe);
        assert_eq!(kept.len(), REQUESTS_KEPT);
        assert_eq!(kept.last().unwrap().action, "command-14");
        assert_eq!(kept.first().unwrap().action, "command-5");
        let mut ids: Vec<&str> = kept.iter().map(|r| r.id.as_str()).collect();
        assert!(ids.iter().all(|id| !id.is_empty()));
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), REQUESTS_KEPT, "every request has its own id");
    }
}
