//! Kubernetes Events on PreviewEnvironments, so that `kubectl describe previewenvironment` tells
//! what happened and who asked: the controller publishes each new entry of a preview's history
//! (phase changes, stop, wake, expiry) and the requests written to it (pull request events,
//! `/preview` commands, with their actor), which the webhook leaves in an annotation in the same
//! write so that its answer costs no extra API call. Publishing never blocks or fails the caller: an Event
//! that cannot be written is logged and dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::crd::labels::LAST_REQUEST;
use crate::crd::{HistoryEntry, PreviewEnvironment};

/// Longest note Kubernetes accepts on an Event.
const NOTE_LIMIT: usize = 1024;
/// Longest wait for the API server before an Event is given up.
const TIMEOUT: Duration = Duration::from_secs(2);

/// A request written to a preview: who asked for what, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub at: Timestamp,
    /// `@login`, or `sandcastle` for its own catch-up resync.
    pub actor: String,
    /// Short kebab-case name, e.g. `pull-request-opened`, `command-stop`.
    pub action: String,
    /// For people, e.g. `/preview stop on #12`.
    pub note: String,
}

/// Record `request` on `pe` (written with the request's own change).
pub fn note_request(pe: &mut PreviewEnvironment, request: &Request) {
    if let Ok(json) = serde_json::to_string(request) {
        pe.annotations_mut().insert(LAST_REQUEST.to_owned(), json);
    }
}

fn request_of(pe: &PreviewEnvironment) -> Option<Request> {
    serde_json::from_str(pe.annotations().get(LAST_REQUEST)?).ok()
}

/// Whether `request` still needs its Event: it differs from the last one this process
/// published, or (first sight) nothing in the history (newest entry at `last_history`) came
/// after it.
fn unpublished(
    previous: Option<&Request>,
    request: &Request,
    last_history: Option<Timestamp>,
) -> bool {
    match previous {
        Some(p) => p != request,
        None => last_history.is_none_or(|t| t <= request.at),
    }
}

/// A history entry by `(time, action)`; empty for "no history yet".
type Mark = (String, String);

/// What this process published of one preview.
#[derive(Debug, Default)]
struct Published {
    /// The newest history entry published (or found at first sight).
    history: Mark,
    request: Option<Request>,
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

fn event(type_: EventType, action: &str, note: String) -> Event {
    Event {
        type_,
        reason: reason(action),
        note: Some(bounded(note.trim().to_owned())),
        action: reason(action),
        secondary: None,
    }
}

/// What a request says, as an Event.
fn request_event(request: &Request) -> Event {
    let note = format!("{}; by {}", request.note, request.actor);
    event(EventType::Normal, &request.action, note)
}

/// What one history entry says, as an Event.
pub fn entry_event(entry: &HistoryEntry) -> Event {
    let mut note = entry.result.clone().unwrap_or_default();
    if let Some(sha) = &entry.sha {
        note = format!("{note} (commit {})", &sha[..sha.len().min(7)]);
    }
    if entry.actor != "sandcastle" {
        note = format!("{note}; by {}", entry.actor);
    }
    let type_ = if entry.action == "Failed" {
        EventType::Warning
    } else {
        EventType::Normal
    };
    event(type_, &entry.action, note)
}

/// History entries after the one marked `(time, action)`; all of them when the mark rotated out.
fn after<'a>(history: &'a [HistoryEntry], mark: &Mark) -> &'a [HistoryEntry] {
    match history
        .iter()
        .rposition(|e| e.time.0.to_string() == mark.0 && e.action == mark.1)
    {
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

    /// Publish what this process has not published yet of `pe`: its last request, then the new
    /// entries of its history. At first sight of a preview (after a restart or a change of
    /// leader) its history counts as published, and its request too unless nothing in the
    /// history came after it; a preview first seen without history has every entry published.
    pub async fn sync(&self, pe: &PreviewEnvironment) {
        let history = pe
            .status
            .as_ref()
            .map(|s| s.history.as_slice())
            .unwrap_or_default();
        let mark = history.last().map_or_else(Mark::default, |last| {
            (last.time.0.to_string(), last.action.clone())
        });
        let request = request_of(pe);
        let events: Vec<Event> = {
            let mut published = self
                .published
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let first_sight = !published.contains_key(&pe.name_any());
            let seen = published.entry(pe.name_any()).or_default();
            let mut events = Vec::new();
            if let Some(r) = &request
                && unpublished(seen.request.as_ref(), r, history.last().map(|e| e.time.0))
            {
                events.push(request_event(r));
            }
            if !first_sight && seen.history != mark {
                events.extend(after(history, &seen.history).iter().map(entry_event));
            }
            seen.history = mark;
            seen.request = request;
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
        let mark = (h[0].time.0.to_string(), "Deploying".to_owned());
        let new: Vec<&str> = after(&h, &mark).iter().map(|e| e.action.as_str()).collect();
        assert_eq!(new, ["Ready", "Stopped"]);
        let gone = ("2000-01-01T00:00:00Z".to_owned(), "Pending".to_owned());
        assert_eq!(
            after(&h, &gone).len(),
            3,
            "the mark rotated out: all are new"
        );
    }

    #[test]
    fn a_request_is_published_once_and_not_again_after_a_restart() {
        let at: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let stop = Request {
            at,
            actor: "@maria".into(),
            action: "command-stop".into(),
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
        note_request(&mut pe, &stop);
        assert_eq!(request_of(&pe), Some(stop.clone()));
        assert!(unpublished(None, &stop, None), "new preview: publish");
        assert!(!unpublished(Some(&stop), &stop, None), "published already");
        let later = at + jiff::SignedDuration::from_secs(5);
        assert!(
            !unpublished(None, &stop, Some(later)),
            "acted on before a restart"
        );
        assert!(unpublished(None, &stop, Some(at)), "not acted on yet");
        let wake = Request {
            action: "command-wake".into(),
            ..stop.clone()
        };
        assert!(unpublished(Some(&stop), &wake, Some(later)));
    }
}
