//! The sticky comment: exactly one Sandcastle comment per preview on its pull request, edited in
//! place when what it shows changes (state, commit, URL, expiry — not on every reconcile), and
//! when someone asks with `/preview status`. Its id and what it last showed live in the
//! preview's status (written with the reconcile's verdict). It is found again by its hidden marker (only in the App's own comments) when
//! the id is unknown, for example after a crash between posting and saving, and extra copies are
//! deleted (not looked for when the leadership term knows there can be none: `controller::term`); a comment a person deleted is posted again on the next change, one a person edited
//! is overwritten by the next edit.
//!
//! A failed call never blocks the preview: the status keeps what was shown, and the preview is
//! looked at again after a pause (or when GitHub's rate limit allows), never in a tight loop.

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;

use super::context::Context;
use super::error::Error;
use super::report::log_url;
use sandcastle_crd::labels::STICKY_REFRESH;
use sandcastle_crd::{PreviewEnvironment, StickyComment};
use sandcastle_domain::{PrNumber, RepoName};
use sandcastle_github::client::{Comment, GitHubError, Installation};
use sandcastle_github::text::view::{shown_key, sticky_view};
use sandcastle_github::text::{parse_marker, sticky_comment};

/// Pause after a failed attempt when GitHub gives no time to wait for.
const RETRY_AFTER: Duration = Duration::from_secs(30);

/// Bring the sticky comment in line with `pe` (its status as the reconcile is about to save it),
/// and record in that status what the comment now shows.
pub(super) async fn sync(pe: &mut PreviewEnvironment, ctx: &Context) -> Result<(), Error> {
    let (Some(installation), Some(number)) = (pe.spec.installation_id, pe.spec.pull_request) else {
        return Ok(());
    };
    let (Ok(repo), Ok(number)) = (RepoName::new(&pe.spec.repository), PrNumber::new(number)) else {
        return Ok(());
    };
    let name = pe.name_any();
    let page = log_url(&ctx.reporting(), &name);
    let Some(view) = sticky_view(pe, None, Some(page.clone())) else {
        return Ok(());
    };
    let key = shown_key(&view);
    let refresh = pe.annotations().get(STICKY_REFRESH).cloned();
    let current = pe.status.as_ref().and_then(|s| s.sticky.clone());
    let due = current
        .as_ref()
        .is_none_or(|c| c.shown != key || (refresh.is_some() && c.refreshed != refresh));
    if !due || ctx.retry.waiting(&name) {
        return Ok(());
    }

    // Rendering needs the Blueprint (what it clones, the idle limit); it is read only now.
    let blueprint = ctx.blueprint(&pe.spec.blueprint).await?;
    let view = sticky_view(pe, blueprint.as_ref().map(|b| &b.spec), Some(page))
        .expect("the view exists: it did a moment ago");
    let body = sticky_comment(&view, ctx.clock.now());
    let gh = ctx.github.installation(installation);
    let target = Target {
        gh: &gh,
        app_id: ctx.github.app_id(),
        repo: &repo,
        number,
        preview: &name,
    };
    let known = current
        .as_ref()
        .map(|c| c.comment_id)
        .or_else(|| ctx.term.sticky(pe));
    // A pull request opened in this leadership term has no comment of this preview to find.
    let look = !ctx.term.fresh_pull_request(pe);
    match target.post_or_edit(known, &body, look).await {
        Ok((comment_id, created)) => {
            if created {
                ctx.term.created_sticky(pe, comment_id);
            }
            pe.status.get_or_insert_default().sticky = Some(StickyComment {
                comment_id,
                shown: key,
                refreshed: refresh,
            });
            Ok(())
        }
        Err(e) => {
            let wait = match &e {
                GitHubError::RateLimited { retry_at } => until(*retry_at, ctx.clock.now()),
                _ => RETRY_AFTER,
            };
            tracing::warn!(preview = %name, error = %e, retry_in = ?wait, "updating the sticky comment failed");
            ctx.retry.schedule(&name, &ctx.settings.home, wait);
            Ok(())
        }
    }
}

fn until(at: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(at.duration_since(now))
        .unwrap_or_default()
        .max(Duration::from_secs(1))
}

/// The pull request conversation a preview's comment lives in.
struct Target<'a> {
    gh: &'a Installation,
    app_id: u64,
    repo: &'a RepoName,
    number: PrNumber,
    preview: &'a str,
}

impl Target<'_> {
    /// Whether `c` is this preview's sticky comment: written by the App, carrying its marker.
    fn is_ours(&self, c: &Comment) -> bool {
        c.performed_via_github_app.as_ref().map(|a| a.id) == Some(self.app_id)
            && parse_marker(&c.body).is_some_and(|m| m.preview == self.preview)
    }

    /// Edit the comment `known` (or the one the marker finds, when `look`, or a new one) to
    /// `body`; returns its id and whether it is new.
    async fn post_or_edit(
        &self,
        known: Option<u64>,
        body: &str,
        look: bool,
    ) -> Result<(u64, bool), GitHubError> {
        if let Some(id) = known {
            match self.gh.update_issue_comment(self.repo, id, body).await {
                Ok(_) => return Ok((id, false)),
                // Deleted by someone: find another copy, or post it again.
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        } else if !look {
            let created = self
                .gh
                .create_issue_comment(self.repo, self.number, body)
                .await?;
            return Ok((created.id, true));
        }
        let comments = self.gh.list_issue_comments(self.repo, self.number).await?;
        let mut ours = comments
            .iter()
            .filter(|c| Some(c.id) != known && self.is_ours(c));
        let Some(keep) = ours.next() else {
            let created = self
                .gh
                .create_issue_comment(self.repo, self.number, body)
                .await?;
            return Ok((created.id, true));
        };
        for extra in ours {
            tracing::info!(
                preview = self.preview,
                comment = extra.id,
                "deleting a duplicate sticky comment"
            );
            self.gh.delete_issue_comment(self.repo, extra.id).await?;
        }
        self.gh
            .update_issue_comment(self.repo, keep.id, body)
            .await?;
        Ok((keep.id, false))
    }
}
