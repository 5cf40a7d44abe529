//! The writes of `/preview` commands (deploy now, stop, wake, extend, destroy, refresh): run a
//! preview now even at an unchanged commit, change an existing one as a command asks, move its
//! expiry, stop or wake it (these three through [`update`], which only they use). Deploying and
//! changing go through the read-modify-write loop every delivery's write shares; all retry on
//! conflicts. A command is activity, so they stamp it with [`touch`] ([`modify`]'s callers do,
//! in their change).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use super::{Outcome, Write, touch, write};
use crate::events::Request;
use sandcastle_crd::PreviewEnvironment;
use sandcastle_domain::intent::{Change, Intent};
use sandcastle_domain::{lifecycle, transitions};

/// `/preview`: run `intent.preview` at `intent.sha` now, creating it or bringing it back from a
/// tombstone, waking it, and starting a new rollout even when the commit is unchanged (a retry).
/// `pinned`: a fork's commit, which later pushes do not move. `intent.change` must be a deploy.
pub async fn deploy_now(
    api: &Api<PreviewEnvironment>,
    intent: &Intent,
    request: &Request,
    pinned: bool,
    delivery: &str,
    now: Timestamp,
) -> Result<Outcome, kube::Error> {
    if !matches!(intent.change, Change::Deploy { .. }) {
        return Ok(Outcome::Skipped);
    }
    write(api, intent.preview.as_str(), delivery, request, |current| {
        let created = current.is_none();
        match transitions::deploy_now(current, intent, pinned, delivery, now) {
            Some(pe) if created => Write::Create(Box::new(pe)),
            Some(pe) => Write::Replace(Box::new(pe)),
            None => Write::Done(Outcome::Skipped),
        }
    })
    .await
}

/// A command's change to an existing preview: `change` edits a copy (spec or annotations) or
/// says why nothing should be written. A preview that does not exist is [`Outcome::Skipped`].
pub async fn modify(
    api: &Api<PreviewEnvironment>,
    name: &str,
    delivery: &str,
    request: &Request,
    mut change: impl FnMut(&mut PreviewEnvironment) -> Result<(), Outcome>,
) -> Result<Outcome, kube::Error> {
    write(api, name, delivery, request, |current| {
        let Some(pe) = current else {
            return Write::Done(Outcome::Skipped);
        };
        let mut next = pe.clone();
        if let Err(outcome) = change(&mut next) {
            return Write::Done(outcome);
        }
        if next.spec == pe.spec && next.annotations() == pe.annotations() {
            return Write::Done(Outcome::Unchanged);
        }
        Write::Replace(Box::new(next))
    })
    .await
}

/// Read-modify-write `name` with `f` (retried on conflicts); `None` when it does not exist or is
/// being deleted. `f` returns what it decided, or `None` to write nothing.
async fn update<T>(
    api: &Api<PreviewEnvironment>,
    name: &str,
    mut f: impl FnMut(&mut PreviewEnvironment) -> Option<T>,
) -> Result<Option<T>, kube::Error> {
    for _ in 0..5 {
        let Some(pe) = api.get_opt(name).await? else {
            return Ok(None);
        };
        if pe.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let mut next = pe.clone();
        let Some(out) = f(&mut next) else {
            return Ok(None);
        };
        next.status = None;
        match api.replace(name, &PostParams::default(), &next).await {
            Ok(_) => return Ok(Some(out)),
            Err(kube::Error::Api(r)) if r.code == 409 => continue,
            Err(e) => return Err(e),
        }
    }
    Err(kube::Error::Api(
        kube::core::Status::failure(
            &format!("preview {name} kept changing; try again"),
            "Conflict",
        )
        .with_code(409)
        .boxed(),
    ))
}

/// `/preview extend <by>` and the API: move the expiry by `by` (from the current expiry, or now
/// if later), never past `max_ttl` (the Blueprint's `maxTtl`) from creation. Counts as activity.
/// `None` when the preview does not exist or is torn down.
pub async fn extend(
    api: &Api<PreviewEnvironment>,
    name: &str,
    by: Duration,
    max_ttl: Duration,
    now: Timestamp,
) -> Result<Option<lifecycle::Extension>, kube::Error> {
    update(api, name, |pe| {
        if pe.spec.teardown.is_some() {
            return None;
        }
        let created = pe.creation_timestamp().map_or(now, |t| t.0);
        let current = pe.spec.expires_at.as_ref().map(|t| t.0);
        let ext = lifecycle::extend(created, current, now, by, max_ttl);
        pe.spec.expires_at = Some(Time(ext.expires_at));
        touch(pe, now);
        Some(ext)
    })
    .await
}

/// `/preview stop` and `/preview wake` (and the API): ask for the preview to be scaled to zero or
/// back. Counts as activity, so a woken preview is not idle at once. `None` when the preview does
/// not exist or is torn down.
pub async fn set_stopped(
    api: &Api<PreviewEnvironment>,
    name: &str,
    stopped: bool,
    now: Timestamp,
) -> Result<Option<()>, kube::Error> {
    update(api, name, |pe| {
        if pe.spec.teardown.is_some() {
            return None;
        }
        pe.spec.stopped = stopped;
        touch(pe, now);
        Some(())
    })
    .await
}
