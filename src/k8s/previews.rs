//! Writing desired state: apply an intent to its PreviewEnvironment (create, move to a commit,
//! mark for teardown), idempotently and in event order. Every write carries the resourceVersion it
//! read, so concurrent writers never lose each other's changes; a conflict is retried.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use super::crd::{PreviewEnvironment, PreviewEnvironmentSpec, Requester, RequesterKind, Teardown};
use super::labels::{self, MANAGED_BY, MANAGER, PR, PREVIEW, REPO};
use crate::github::intent::{Change, Intent};

/// Annotation holding the last delivery ids applied to a preview (for redelivery detection).
pub const DELIVERIES: &str = "sandcastle.dev/deliveries";
const DELIVERIES_KEPT: usize = 20;

/// What applying an intent did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Updated,
    /// Already in that state.
    Unchanged,
    /// This delivery was applied before.
    Duplicate,
    /// Older than the last event applied, or the preview was torn down after it: dropped.
    Stale,
    /// Nothing to move (the preview does not exist and the intent does not create one).
    Skipped,
    /// The resource is being deleted; the delivery should be retried later.
    Deleting,
    /// Concurrent writers kept winning; the delivery should be retried later.
    Contended,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Duplicate => "duplicate",
            Self::Stale => "stale",
            Self::Skipped => "skipped",
            Self::Deleting => "deleting",
            Self::Contended => "contended",
        }
    }
}

fn expiry(now: Timestamp, ttl: Duration) -> Time {
    Time(
        now.checked_add(jiff::SignedDuration::try_from(ttl).unwrap_or(jiff::SignedDuration::ZERO))
            .unwrap_or(now),
    )
}

fn record_delivery(pe: &mut PreviewEnvironment, delivery: &str) {
    let annotations = pe.annotations_mut();
    let mut ids: Vec<String> = annotations
        .get(DELIVERIES)
        .map(|s| {
            s.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    ids.push(delivery.to_owned());
    let excess = ids.len().saturating_sub(DELIVERIES_KEPT);
    ids.drain(..excess);
    annotations.insert(DELIVERIES.to_owned(), ids.join(","));
}

fn seen(pe: &PreviewEnvironment, delivery: &str) -> bool {
    pe.annotations()
        .get(DELIVERIES)
        .is_some_and(|s| s.split(',').any(|d| d == delivery))
}

fn new_preview(intent: &Intent, now: Timestamp) -> PreviewEnvironment {
    let (requested_by, expires_at, teardown) = match &intent.change {
        Change::Deploy {
            requested_by, ttl, ..
        } => (requested_by.clone(), Some(expiry(now, *ttl)), None),
        Change::Teardown { reason, actor } => (
            actor.clone().unwrap_or_else(|| "github".into()),
            None,
            Some(Teardown {
                reason: *reason,
                actor: actor.clone(),
                at: Time(intent.event_time),
            }),
        ),
    };
    let mut pe = PreviewEnvironment::new(
        intent.preview.as_str(),
        PreviewEnvironmentSpec {
            blueprint: intent.blueprint.clone(),
            repository: intent.repo.to_string(),
            pull_request: Some(intent.pr.get()),
            git_ref: intent.git_ref.clone(),
            sha: intent.sha.to_string(),
            installation_id: intent.installation_id,
            requested_by: Requester {
                kind: RequesterKind::GithubUser,
                name: requested_by,
            },
            expires_at,
            stopped: false,
            teardown,
            pr_updated_at: Some(Time(intent.event_time)),
        },
    );
    pe.labels_mut().extend([
        (MANAGED_BY.to_owned(), MANAGER.to_owned()),
        (PREVIEW.to_owned(), intent.preview.to_string()),
        (REPO.to_owned(), labels::repo_label_value(&intent.repo)),
        (PR.to_owned(), intent.pr.to_string()),
    ]);
    pe
}

/// Change `pe` as `intent` asks. Returns `None` when nothing should be written.
fn change(
    pe: &PreviewEnvironment,
    intent: &Intent,
    now: Timestamp,
) -> Result<PreviewEnvironment, Outcome> {
    let last = pe.spec.pr_updated_at.as_ref().map(|t| t.0);
    let mut next = pe.clone();
    match &intent.change {
        Change::Deploy { max_ttl, ttl, .. } => {
            if let Some(t) = &pe.spec.teardown {
                // Torn down: only a later event (a reopen) brings the preview back.
                if intent.event_time <= t.at.0 {
                    return Err(Outcome::Stale);
                }
                next.spec.teardown = None;
            } else if last.is_some_and(|l| intent.event_time < l) {
                return Err(Outcome::Stale);
            }
            next.spec.sha = intent.sha.to_string();
            next.spec.git_ref = intent.git_ref.clone();
            next.spec.installation_id = intent.installation_id.or(pe.spec.installation_id);
            // Activity keeps a preview alive: push the expiry to now + ttl, never past
            // creation + maxTtl, never earlier than it already is.
            let created = pe.creation_timestamp().map_or(now, |t| t.0);
            let cap = expiry(created, *max_ttl);
            let wanted = expiry(now, *ttl);
            let current = pe.spec.expires_at.clone();
            let extended = match current {
                Some(c) if c.0 >= wanted.0 => c,
                _ if wanted.0 > cap.0 => cap,
                _ => wanted,
            };
            next.spec.expires_at = Some(extended);
        }
        Change::Teardown { reason, actor } => {
            if pe.spec.teardown.is_some() {
                return Err(Outcome::Unchanged);
            }
            if last.is_some_and(|l| intent.event_time < l) {
                return Err(Outcome::Stale);
            }
            next.spec.teardown = Some(Teardown {
                reason: *reason,
                actor: actor.clone(),
                at: Time(intent.event_time),
            });
        }
    }
    if last.is_none_or(|l| intent.event_time > l) {
        next.spec.pr_updated_at = Some(Time(intent.event_time));
    }
    if next.spec == pe.spec {
        return Err(Outcome::Unchanged);
    }
    Ok(next)
}

/// Apply `intent` (from delivery `delivery`) to the previews in `api`'s namespace.
pub async fn apply(
    api: &Api<PreviewEnvironment>,
    intent: &Intent,
    delivery: &str,
    now: Timestamp,
) -> Result<Outcome, kube::Error> {
    let name = intent.preview.as_str();
    for _ in 0..5 {
        let Some(pe) = api.get_opt(name).await? else {
            if matches!(intent.change, Change::Deploy { create: false, .. }) {
                return Ok(Outcome::Skipped);
            }
            let mut pe = new_preview(intent, now);
            record_delivery(&mut pe, delivery);
            match api.create(&PostParams::default(), &pe).await {
                Ok(_) => return Ok(Outcome::Created),
                Err(kube::Error::Api(r)) if r.code == 409 => continue,
                Err(e) => return Err(e),
            }
        };
        if seen(&pe, delivery) {
            return Ok(Outcome::Duplicate);
        }
        if pe.metadata.deletion_timestamp.is_some() {
            return Ok(Outcome::Deleting);
        }
        let mut next = match change(&pe, intent, now) {
            Ok(next) => next,
            Err(outcome) => return Ok(outcome),
        };
        record_delivery(&mut next, delivery);
        next.status = None;
        match api.replace(name, &PostParams::default(), &next).await {
            Ok(_) => return Ok(Outcome::Updated),
            Err(kube::Error::Api(r)) if r.code == 409 => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(Outcome::Contended)
}
