//! The reply a pull request gets `expiryWarning` before its preview expires: when it goes and
//! how to keep it. Once per expiry: an extended or kept preview has a new expiry, warned of again
//! when its window comes. The preview is looked at again when the window opens (a timer of its
//! own, `admit::requeue`), not by a sweep.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::context::Context;
use sandcastle_crd::{Blueprint, PreviewEnvironment, PreviewStatus};
use sandcastle_domain::lifecycle;
use sandcastle_domain::{PrNumber, RepoName};
use sandcastle_github::command_parser::HelpLimits;
use sandcastle_github::text::replies::{Reply, reply_text};

/// Pause after a failed attempt.
const RETRY_AFTER: Duration = Duration::from_secs(30);

/// Warn `pe`'s pull request that it expires at `expires_at` (set by the activity at `set_at`),
/// if that is due now; records it in `st`. A failed reply is tried again after a pause; it never holds up the rest of the pass.
pub(crate) async fn expiry(
    pe: &PreviewEnvironment,
    bp: &Blueprint,
    st: &mut PreviewStatus,
    expires_at: Timestamp,
    set_at: Timestamp,
    ctx: &Context,
) {
    let now = ctx.clock.now();
    let warned = st.expiry_warned.as_ref().map(|t| t.0);
    let warning = bp.spec.expiry_warning.get();
    if !lifecycle::warning_due(expires_at, set_at, warned, warning, now) {
        return;
    }
    let (Some(installation), Some(number)) = (pe.spec.installation_id, pe.spec.pull_request) else {
        return;
    };
    let (Ok(repo), Ok(number)) = (RepoName::new(&pe.spec.repository), PrNumber::new(number)) else {
        return;
    };
    let name = pe.name_any();
    if ctx.retry.waiting(&name) {
        return;
    }
    let created = pe.creation_timestamp().map_or(now, |t| t.0);
    let reply = Reply::ExpiryWarning {
        preview: name.clone(),
        expires_at,
        latest: lifecycle::hard_limit(created, bp.spec.max_ttl.get()),
        now,
    };
    let body = reply_text(&reply, &HelpLimits::of(Some(&bp.spec)));
    let gh = ctx.github.installation(installation);
    match gh.create_issue_comment(&repo, number, &body).await {
        Ok(_) => {
            tracing::info!(target: "audit", actor = "sandcastle", action = "warn-expiry", preview = %name, expires_at = %expires_at, "expiry warned of");
            st.expiry_warned = Some(Time(expires_at));
        }
        Err(e) => {
            tracing::warn!(preview = %name, error = %e, "warning of the expiry failed");
            ctx.retry.schedule(&name, &ctx.settings.home, RETRY_AFTER);
        }
    }
}
