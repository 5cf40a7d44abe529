//! A visit to a stopped preview's host (wake on visit): which preview it is, from the watch
//! cache, and — when it was stopped for being idle — the activity that wakes it, written as a
//! request by `visitor` so the preview's history and Events say who woke it. Nobody signs in to
//! visit: the host is as public as the app behind it, and a visit can do nothing but this.

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;

use super::Agent;
use sandcastle_crd::labels::LAST_ACTIVITY;
use sandcastle_crd::{Phase, PreviewEnvironment};
use sandcastle_domain::transitions::Outcome;
use sandcastle_domain::wake::{self, Visit};
use sandcastle_kube::events::Request;
use sandcastle_kube::previews;

/// A visit stamps activity when the last stamp is older than this (the page reloads itself
/// every few seconds while the preview starts).
const VISIT_ACTIVITY_EVERY: Duration = Duration::from_secs(30);

/// What a visit found: the preview's name (when one has the host) and its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visited {
    pub preview: Option<String>,
    pub visit: Visit,
}

impl Agent {
    /// A visit to `host` (a `Host` header). A preview stopped for being idle is woken; any other
    /// live preview of that host only counts it as activity; no preview, nothing happens.
    pub async fn visit(&self, host: &str) -> Visited {
        let host = wake::visited_host(host);
        let found = host.as_deref().and_then(|h| {
            let state = self.previews.state();
            wake::preview_for(state.iter().map(|p| p.as_ref()), h).cloned()
        });
        let visit = wake::visit(found.as_ref());
        let (Some(pe), Some(host)) = (found, host) else {
            return Visited {
                preview: None,
                visit,
            };
        };
        let now = self.clock.now();
        if visit == Visit::Wake && super::stamped_before(&pe, now, VISIT_ACTIVITY_EVERY) {
            self.wake_by_visit(&pe, &host, now).await;
        } else if visit != Visit::StoppedOnRequest {
            self.read_activity(&pe, None);
        }
        Visited {
            preview: Some(pe.name_any()),
            visit,
        }
    }

    /// Stamp the activity that wakes `pe`, unless it changed meanwhile (woken, stopped on
    /// request, torn down): best effort, the next reload asks again.
    async fn wake_by_visit(&self, pe: &PreviewEnvironment, host: &str, now: Timestamp) {
        let name = pe.name_any();
        let request = Request {
            sha: None,
            id: String::new(),
            at: now,
            actor: "visitor".to_owned(),
            action: "visit-wake".to_owned(),
            note: format!("woken by a visit to {host}"),
        };
        let delivery = format!("visit-{}", now.as_nanosecond());
        let written = previews::modify(&self.api(), &name, &delivery, &request, |next| {
            let stopped = next.status.as_ref().and_then(|s| s.phase) == Some(Phase::Stopped);
            if !stopped || next.spec.stopped || next.spec.teardown.is_some() {
                return Err(Outcome::Unchanged);
            }
            next.annotations_mut()
                .insert(LAST_ACTIVITY.to_owned(), now.to_string());
            Ok(())
        })
        .await;
        match written {
            Ok(outcome) => {
                tracing::info!(target: "audit", actor = "visitor", action = "wake", preview = %name, sha = %pe.spec.sha, result = outcome.as_str(), via = "visit", host = %host, "preview operation");
            }
            Err(e) => {
                tracing::warn!(preview = %name, error = %e, "a visit could not wake the preview");
            }
        }
    }
}
