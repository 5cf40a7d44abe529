//! Replies to `/preview` commands: one polite line each (the help text for `/preview help` and
//! for a command that was not understood). Success needs no reply: the 🚀 reaction and the
//! sticky comment say it.

use std::time::Duration;

use jiff::Timestamp;

use crate::domain::duration;
use crate::domain::{RepoName, Sha};
use crate::github::commands::{CommandError, HelpLimits, help_text};

use super::{clock, code};

/// Why Sandcastle answers a command with words instead of (only) a reaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `/preview help`.
    Help,
    /// The commenter lacks write access; `permission` is what GitHub reports (`read`, `none`).
    PermissionDenied { repo: RepoName, permission: String },
    /// The command line could not be understood.
    NotUnderstood(CommandError),
    /// `/preview extend` would go past the longest life a preview may have.
    ExtendTooFar {
        max_ttl: Duration,
        /// The latest expiry allowed, i.e. now + `max_ttl`.
        latest: Timestamp,
    },
    /// A fork PR is not deployed on its own.
    ForkNeedsApproval { sha: Sha },
    /// `/preview` on an issue.
    NotAPullRequest,
    /// `/preview` on a closed pull request.
    PullRequestClosed,
    /// `stop`, `wake`, `extend`, `destroy` or `status` with no preview to act on.
    NoPreview,
    /// No blueprint allows the repository.
    RepoNotEnabled { repo: RepoName },
}

/// The Markdown of a reply.
pub fn reply_text(reply: &Reply, limits: &HelpLimits) -> String {
    let max = duration::human(limits.max_ttl);
    match reply {
        Reply::Help => help_text(limits),
        Reply::PermissionDenied { repo, permission } => {
            let have = match permission.as_str() {
                "" | "none" => "no access".to_owned(),
                p => p.to_owned(),
            };
            format!("Only people with write access to {repo} can run `/preview` (you have {have}).")
        }
        Reply::NotUnderstood(CommandError::Unknown(sub)) => format!(
            "{} is not a command I know. Here is what I can do:\n\n{}",
            code(&format!("/preview {}", clip(sub))),
            help_text(limits)
        ),
        Reply::NotUnderstood(CommandError::MissingDuration) => format!(
            "`/preview extend` needs a duration, for example `/preview extend 2d` (at most {max} \
             from now)."
        ),
        Reply::NotUnderstood(CommandError::InvalidDuration(input)) => format!(
            "{} is not a duration; write it like `30m`, `4h`, `1h30m` or `2d`.",
            code(clip(input))
        ),
        Reply::NotUnderstood(CommandError::ZeroDuration) => {
            "`/preview extend` needs a duration longer than zero, for example `/preview extend 2d`."
                .to_owned()
        }
        Reply::ExtendTooFar { max_ttl, latest } => format!(
            "A preview can live at most {} from now, so it can extend up to {}.",
            duration::human(*max_ttl),
            clock(*latest)
        ),
        Reply::ForkNeedsApproval { sha } => format!(
            "This pull request comes from a fork, so it is not deployed automatically; a \
             maintainer can comment `/preview` to deploy {}.",
            code(sha.short())
        ),
        Reply::NotAPullRequest => "`/preview` works on pull requests only.".to_owned(),
        Reply::PullRequestClosed => {
            "This pull request is closed; reopen it to get a preview.".to_owned()
        }
        Reply::NoPreview => {
            "This pull request has no preview yet; comment `/preview` to deploy one.".to_owned()
        }
        Reply::RepoNotEnabled { repo } => format!(
            "No blueprint allows {repo} yet; an operator can add it to a blueprint's \
             repositories."
        ),
    }
}

/// User text quoted back is kept short.
fn clip(s: &str) -> &str {
    match s.char_indices().nth(40) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> HelpLimits {
        HelpLimits {
            ttl: Duration::from_secs(86_400),
            max_ttl: Duration::from_secs(7 * 86_400),
            stop_after_idle: Some(Duration::from_secs(4 * 3600)),
            max_previews: Some(20),
        }
    }

    fn text(reply: Reply) -> String {
        reply_text(&reply, &limits())
    }

    #[test]
    fn one_line_replies() {
        let repo = RepoName::new("acme/shop").unwrap();
        let sha = Sha::new(&"abc1234".repeat(6)[..40]).unwrap();
        let cases = [
            (
                Reply::PermissionDenied {
                    repo: repo.clone(),
                    permission: "read".into(),
                },
                "Only people with write access to acme/shop can run `/preview` (you have read).",
            ),
            (
                Reply::PermissionDenied {
                    repo: repo.clone(),
                    permission: "none".into(),
                },
                "Only people with write access to acme/shop can run `/preview` (you have no access).",
            ),
            (
                Reply::NotUnderstood(CommandError::MissingDuration),
                "`/preview extend` needs a duration, for example `/preview extend 2d` (at most 7d from now).",
            ),
            (
                Reply::NotUnderstood(CommandError::InvalidDuration("so`on".into())),
                "`so'on` is not a duration; write it like `30m`, `4h`, `1h30m` or `2d`.",
            ),
            (
                Reply::NotUnderstood(CommandError::ZeroDuration),
                "`/preview extend` needs a duration longer than zero, for example `/preview extend 2d`.",
            ),
            (
                Reply::ExtendTooFar {
                    max_ttl: Duration::from_secs(7 * 86_400),
                    latest: "2026-12-07T16:00:00Z".parse().unwrap(),
                },
                "A preview can live at most 7d from now, so it can extend up to Mon 7 Dec 16:00 UTC.",
            ),
            (
                Reply::ForkNeedsApproval { sha },
                "This pull request comes from a fork, so it is not deployed automatically; a maintainer can comment `/preview` to deploy `abc1234`.",
            ),
            (
                Reply::NotAPullRequest,
                "`/preview` works on pull requests only.",
            ),
            (
                Reply::NoPreview,
                "This pull request has no preview yet; comment `/preview` to deploy one.",
            ),
            (
                Reply::RepoNotEnabled { repo },
                "No blueprint allows acme/shop yet; an operator can add it to a blueprint's repositories.",
            ),
        ];
        for (reply, want) in cases {
            assert_eq!(text(reply), want);
        }
    }

    #[test]
    fn unknown_commands_get_the_help() {
        let reply = text(Reply::NotUnderstood(CommandError::Unknown("deploy".into())));
        assert!(
            reply.starts_with(
                "`/preview deploy` is not a command I know. Here is what I can do:\n\n"
            )
        );
        assert!(reply.ends_with(&help_text(&limits())));
        let long = text(Reply::NotUnderstood(CommandError::Unknown("x".repeat(500))));
        assert!(long.starts_with(&format!("`/preview {}` is not", "x".repeat(40))));
        assert_eq!(text(Reply::Help), help_text(&limits()));
    }
}
