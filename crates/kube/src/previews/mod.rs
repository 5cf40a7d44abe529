//! Writing desired state: apply an intent to its PreviewEnvironment (create, move to a commit,
//! wait for a fork's approval, mark for teardown), idempotently and in event order, and list a
//! pull request's previews; plus what every preview write shares (delivery records, retrying on
//! conflicts). What to write is decided by `domain::transitions`, without I/O. The writes of `/preview` commands ([`deploy_now`], [`modify`],
//! [`extend`], [`set_stopped`]) live in `commands.rs`. Every write carries the resourceVersion it
//! read, so concurrent writers never lose each other's changes; a conflict is retried.
//!
//! Every write that is activity (a push, a command, an API call) stamps the
//! `sandcastle.dev/last-activity` annotation ([`touch`]); the controller stops previews idle for
//! the Blueprint's `stopAfterIdle` and never writes that annotation itself. A push also wakes a
//! stopped preview.

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};

use super::events::{Request, note_request};
use sandcastle_crd::labels::{BLUEPRINT, PR, REPO, SANDBOX};
use sandcastle_crd::{Adoption, PreviewEnvironment};
use sandcastle_domain::intent::{Change, Intent};
use sandcastle_domain::transitions::{change, new_preview};
use sandcastle_domain::{PrNumber, RepoName};

mod commands;
pub mod pool;

pub use commands::{deploy_now, extend, modify, set_stopped};
pub use sandcastle_domain::transitions::{Outcome, touch};

/// Annotation holding the last delivery ids applied to a preview (for redelivery detection).
pub const DELIVERIES: &str = "sandcastle.dev/deliveries";
const DELIVERIES_KEPT: usize = 20;
/// Attempts at a write that keeps losing to concurrent writers (a burst of deliveries for one
/// pull request), with a short random pause between them.
const ATTEMPTS: usize = 12;

async fn pause_after_conflict() {
    let ms = rand::random_range(5..60);
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// What a delivery's write does to a preview, decided from what is there.
enum Write {
    Create(Box<PreviewEnvironment>),
    Replace(Box<PreviewEnvironment>),
    /// Nothing to write; the outcome says why.
    Done(Outcome),
}

/// The read-modify-write every delivery's change goes through: a preview that already saw
/// `delivery` is a [`Outcome::Duplicate`], one being deleted [`Outcome::Deleting`]; otherwise
/// `decide` says what to write (from the preview, `None` when absent), which is stamped with the
/// delivery and `request` and written with the resourceVersion read, retried on conflicts.
async fn write(
    api: &Api<PreviewEnvironment>,
    name: &str,
    delivery: &str,
    request: &Request,
    decide: impl FnMut(Option<&PreviewEnvironment>) -> Write,
) -> Result<Outcome, kube::Error> {
    write_after(api, name, None, (delivery, request), decide).await
}

/// [`write`], starting from `read` when the caller has just read the preview.
async fn write_after(
    api: &Api<PreviewEnvironment>,
    name: &str,
    mut read: Option<Option<PreviewEnvironment>>,
    (delivery, request): (&str, &Request),
    mut decide: impl FnMut(Option<&PreviewEnvironment>) -> Write,
) -> Result<Outcome, kube::Error> {
    for _ in 0..ATTEMPTS {
        let current = match read.take() {
            Some(current) => current,
            None => api.get_opt(name).await?,
        };
        if let Some(pe) = &current {
            if seen(pe, delivery) {
                return Ok(Outcome::Duplicate);
            }
            if pe.metadata.deletion_timestamp.is_some() {
                return Ok(Outcome::Deleting);
            }
        }
        let (mut next, created) = match decide(current.as_ref()) {
            Write::Create(pe) => (pe, true),
            Write::Replace(pe) => (pe, false),
            Write::Done(outcome) => return Ok(outcome),
        };
        record_delivery(&mut next, delivery);
        note_request(&mut next, request);
        next.status = None;
        let written = if created {
            api.create(&PostParams::default(), &next).await
        } else {
            api.replace(name, &PostParams::default(), &next).await
        };
        match written {
            Ok(_) if created => return Ok(Outcome::Created),
            Ok(_) => return Ok(Outcome::Updated),
            Err(kube::Error::Api(r)) if r.code == 409 => pause_after_conflict().await,
            Err(e) => return Err(e),
        }
    }
    Ok(Outcome::Contended)
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

/// Apply `intent` (from delivery `delivery`) to the previews in `api`'s namespace; a write
/// records `request` for the preview's Events.
pub async fn apply(
    api: &Api<PreviewEnvironment>,
    intent: &Intent,
    request: &Request,
    delivery: &str,
    now: Timestamp,
) -> Result<Outcome, kube::Error> {
    let creates = !matches!(
        intent.change,
        Change::Deploy { create: false, .. }
            | Change::AwaitApproval { create: false, .. }
            | Change::Teardown { create: false, .. }
            | Change::Relabel
    );
    let read = api.get_opt(intent.preview.as_str()).await?;
    // A pull request's first preview takes over a sandbox of its branch, if there is one, else
    // a preview of its Blueprint's warm pool, if one is ready.
    let adopts = match intent.change {
        Change::Deploy { create: true, .. } if read.is_none() => {
            sandbox_of(api, intent, now).await?
        }
        _ => None,
    };
    write_after(
        api,
        intent.preview.as_str(),
        Some(read),
        (delivery, request),
        |current| match current {
            None if creates => {
                let mut pe = new_preview(intent, now);
                pe.spec.adopts.clone_from(&adopts);
                Write::Create(Box::new(pe))
            }
            None => Write::Done(Outcome::Skipped),
            Some(pe) => match change(pe, intent, now) {
                Ok(next) => Write::Replace(Box::new(next)),
                Err(outcome) => Write::Done(outcome),
            },
        },
    )
    .await
}

/// A live sandbox (a preview made through the API, without a pull request) of the intent's
/// repository, Blueprint and branch: the one a pull request's new preview takes over, keeping
/// its namespace and what runs there. Without one, a ready preview of the Blueprint's warm pool
/// (a sandbox too, of the default branch: the same list), claimed.
async fn sandbox_of(
    api: &Api<PreviewEnvironment>,
    intent: &Intent,
    now: Timestamp,
) -> Result<Option<Adoption>, kube::Error> {
    let selector = format!(
        "{SANDBOX}=true,{REPO}={},{BLUEPRINT}={}",
        sandcastle_domain::naming::repo_label_value(&intent.repo),
        intent.blueprint
    );
    let listed = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    let mut found: Vec<&PreviewEnvironment> = listed
        .iter()
        .filter(|p| {
            p.spec.git_ref == intent.git_ref
                && !sandcastle_domain::pool::is_member(p)
                && p.spec.pull_request.is_none()
                && p.spec.teardown.is_none()
                && p.metadata.deletion_timestamp.is_none()
        })
        .collect();
    found.sort_by_key(|p| p.creation_timestamp().map(|t| t.0));
    if let Some(s) = found.first() {
        return Ok(Some(Adoption {
            preview: s.name_any(),
            namespace: s
                .status
                .as_ref()
                .and_then(|st| st.namespace.clone())
                .unwrap_or_else(|| s.name_any()),
        }));
    }
    let members: Vec<PreviewEnvironment> = listed
        .into_iter()
        .filter(sandcastle_domain::pool::is_member)
        .collect();
    if members.is_empty() {
        return Ok(None);
    }
    let claimant = intent.preview.as_str();
    pool::claim(api, members, &intent.blueprint, &intent.repo, claimant, now).await
}

/// The previews of pull request `pr` of `repo` (tombstones included).
pub async fn of_pull_request(
    api: &Api<PreviewEnvironment>,
    repo: &RepoName,
    pr: PrNumber,
) -> Result<Vec<PreviewEnvironment>, kube::Error> {
    let selector = format!(
        "{REPO}={},{PR}={pr}",
        sandcastle_domain::naming::repo_label_value(repo)
    );
    let mut list = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    list.sort_by_key(ResourceExt::name_any);
    Ok(list)
}
