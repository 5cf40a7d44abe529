//! Replies to `/preview` commands: one polite line each (the help text for `/preview help` and
//! for a command that was not understood). Success mostly needs no reply — the 🚀 reaction and
//! the sticky comment say it — except where the reader asked for an answer (`extend`: until
//! when; `status`). Also the note that a repository's `.github/sandcastle.yml` cannot be used.

use std::time::Duration;

use jiff::Timestamp;

use crate::command_parser::{CommandError, HelpLimits, help_text};
use sandcastle_crd::Phase;
use sandcastle_domain::duration;
use sandcastle_domain::{RepoName, Sha};

use super::markdown::{clock, code, expiry, plain};
use super::state::StickyView;
use super::sticky;

/// Why Sandcastle answers a command with words instead of (only) a reaction.
#[derive(Debug, Clone, PartialEq)]
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
        /// The latest expiry allowed, i.e. creation + `max_ttl`.
        latest: Timestamp,
    },
    /// `/preview extend` worked: the preview now expires `until`; `capped` when that is the
    /// longest it may live (the request asked for more).
    Extended {
        until: Timestamp,
        now: Timestamp,
        capped: Option<Duration>,
    },
    /// `/preview status`: one line per preview of the pull request.
    Status {
        previews: Vec<StickyView>,
        now: Timestamp,
    },
    /// The repository's configuration file cannot be used; the blueprint defaults apply.
    ConfigInvalid {
        path: String,
        branch: String,
        error: String,
    },
    /// A fork PR is not deployed on its own.
    ForkNeedsApproval { sha: Sha },
    /// `/preview` on an issue.
    NotAPullRequest,
    /// `/preview` on a closed pull request.
    PullRequestClosed,
    /// `/preview` on a pull request labelled `no-preview`.
    LabelledNoPreview,
    /// `/preview` on a pull request whose branch name Sandcastle refuses (as written).
    BranchRefused { branch: String },
    /// `stop`, `wake`, `extend`, `destroy` or `status` with no preview to act on.
    NoPreview,
    /// `/preview test NAME` where no preview of the pull request has a test of that name;
    /// `known` are the tests they have.
    UnknownTest { test: String, known: Vec<String> },
    /// No blueprint allows the repository.
    RepoNotEnabled { repo: RepoName },
    /// `/preview refresh-data` by someone who does not maintain the repository.
    NeedsMaintainer { repo: RepoName, permission: String },
    /// `/preview refresh-data` where no Blueprint of the pull request's previews restores
    /// snapshots of its data.
    NoDataSnapshots,
    /// `/preview refresh-data` asked these Blueprints for a new snapshot.
    DataRefreshAsked { blueprints: Vec<String> },
    /// `blueprint`'s `authors` rule for the pull request author's `class` says `off`.
    AuthorClassOff {
        blueprint: String,
        class: sandcastle_crd::AuthorClass,
    },
    /// Not an answer: the warning, `expiryWarning` ahead, that `preview` expires `expires_at`
    /// (and may live until `latest` at most: creation + `maxTtl`).
    ExpiryWarning {
        preview: String,
        expires_at: Timestamp,
        latest: Timestamp,
        now: Timestamp,
    },
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
            "`/preview extend` needs a duration, for example `/preview extend 2d` (a preview \
             lives at most {max} in all)."
        ),
        Reply::NotUnderstood(CommandError::InvalidDuration(input)) => format!(
            "{} is not a duration; write it like `30m`, `4h`, `1h30m` or `2d`.",
            code(clip(input))
        ),
        Reply::NotUnderstood(CommandError::MissingTest) => {
            "`/preview test` needs the name of one of the Blueprint's tests, for example \
             `/preview test smoke`."
                .to_owned()
        }
        Reply::NotUnderstood(CommandError::InvalidTest(input)) => format!(
            "{} is not the name of a test (lower-case letters, digits and `-`).",
            code(clip(input))
        ),
        Reply::NeedsMaintainer { repo, permission } => format!(
            "Only maintainers of {repo} can refresh a Blueprint's data: it changes what every \
             new preview starts from (you have {}).",
            if permission.is_empty() {
                "no access"
            } else {
                permission.as_str()
            }
        ),
        Reply::NoDataSnapshots => "No Blueprint of this pull request's previews restores its \
             data from snapshots (`spec.data.from: snapshot`), so there is no snapshot to refresh."
            .to_owned(),
        Reply::DataRefreshAsked { blueprints } => {
            let names: Vec<String> = blueprints.iter().map(|b| code(b)).collect();
            format!(
                "📸 Asked for a new snapshot of the data of {}: previews made once it is ready \
                 start from it. This pull request's previews keep the data they have; \
                 `reset --latest` (API, CLI or MCP) restores the new one.",
                names.join(", ")
            )
        }
        Reply::UnknownTest { test, known } => {
            let have = if known.is_empty() {
                "its Blueprint has no tests".to_owned()
            } else {
                let names: Vec<String> = known.iter().map(|k| code(k)).collect();
                format!("its tests are {}", names.join(", "))
            };
            format!(
                "This pull request's preview has no test {}: {have}.",
                code(clip(test))
            )
        }
        Reply::NotUnderstood(CommandError::ZeroDuration) => {
            "`/preview extend` needs a duration longer than zero, for example `/preview extend 2d`."
                .to_owned()
        }
        Reply::ExtendTooFar { max_ttl, latest } => format!(
            "A preview lives at most {} after it was created, so this one cannot be extended \
             past {}.",
            duration::human(*max_ttl),
            clock(*latest)
        ),
        Reply::AuthorClassOff { blueprint, class } => format!(
            "Pull requests by {} get no preview of {}: its rule `authors.{}.trigger` is `off`.",
            class.words(),
            code(blueprint),
            class.field()
        ),
        Reply::ExpiryWarning {
            preview,
            expires_at,
            latest,
            now,
        } => {
            let goes = format!(
                "⏳ Preview {} goes {}",
                code(preview),
                expiry(*now, *expires_at)
            );
            if expires_at >= latest {
                format!(
                    "{goes}, the longest it may live. A push or `/preview` after that deploys a \
                     new one."
                )
            } else {
                format!(
                    "{goes}. To keep it longer, comment `/preview extend 1d` or add the `{}` \
                     label (it may live until {}).",
                    sandcastle_domain::intent::KEEP_LABEL,
                    clock(*latest)
                )
            }
        }
        Reply::Extended { until, now, capped } => {
            let mut text = format!("The preview now expires {}.", expiry(*now, *until));
            if let Some(max) = capped {
                text.push_str(&format!(
                    " That is as long as it can live: {} after it was created.",
                    duration::human(*max)
                ));
            }
            text
        }
        Reply::Status { previews, now } => previews
            .iter()
            .map(|v| status_line(v, *now))
            .collect::<Vec<_>>()
            .join("\n"),
        Reply::ConfigInvalid {
            path,
            branch,
            error,
        } => format!(
            "{} on {} cannot be used, so the blueprint defaults apply: {}.",
            code(path),
            code(branch),
            plain(error.trim_end_matches('.'))
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
        Reply::BranchRefused { branch } => format!(
            "Sandcastle does not deploy branch {}: its name has characters Git refuses, or \
             Unicode controls that make it read as another name. Push the change to a branch \
             with a plain name.",
            plain(&format!("{:?}", clip(branch)))
        ),
        Reply::LabelledNoPreview => {
            "This pull request is labelled `no-preview`; remove the label and its preview is \
             deployed."
                .to_owned()
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

/// `- ✅ Ready: `shop-pr-42` at `abc1234` · https://… · expires in 23 h (…)`.
fn status_line(view: &StickyView, now: Timestamp) -> String {
    let mut parts = vec![format!("{}: {}", view.state.title(), code(&view.preview))];
    if let Some(sha) = &view.sha {
        parts[0].push_str(&format!(" at {}", code(sha.short())));
    }
    if let Some(step) = sticky::status_line(view) {
        parts.push(step.replace('\n', " "));
    }
    if let Some(url) = view
        .url
        .as_ref()
        .filter(|_| view.state.phase() != Phase::Removed)
    {
        parts.push(plain(url));
    }
    if let Some(at) = view
        .expires_at
        .filter(|_| view.state.phase() != Phase::Removed)
    {
        parts.push(format!("expires {}", expiry(now, at)));
    }
    format!("- {}", parts.join(" · "))
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
                Reply::UnknownTest {
                    test: "e2e".into(),
                    known: vec!["smoke".into(), "lint".into()],
                },
                "This pull request's preview has no test `e2e`: its tests are `smoke`, `lint`.",
            ),
            (
                Reply::NotUnderstood(CommandError::MissingTest),
                "`/preview test` needs the name of one of the Blueprint's tests, for example \
                 `/preview test smoke`.",
            ),
            (
                Reply::BranchRefused {
                    branch: "fix/\u{202e}gnp.exe".into(),
                },
                "Sandcastle does not deploy branch \"fix/\\u{202e}gnp.exe\": its name has characters \
                 Git refuses, or Unicode controls that make it read as another name. Push the \
                 change to a branch with a plain name.",
            ),
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
                "`/preview extend` needs a duration, for example `/preview extend 2d` (a preview lives at most 7d in all).",
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
                "A preview lives at most 7d after it was created, so this one cannot be extended past Mon 7 Dec 16:00 UTC.",
            ),
            (
                Reply::ForkNeedsApproval { sha },
                "This pull request comes from a fork, so it is not deployed automatically; a maintainer can comment `/preview` to deploy `abc1234`.",
            ),
            (
                Reply::ExpiryWarning {
                    preview: "shop-pr-42".into(),
                    expires_at: "2026-11-29T18:00:00Z".parse().unwrap(),
                    latest: "2026-12-06T16:00:00Z".parse().unwrap(),
                    now: "2026-11-29T16:00:00Z".parse().unwrap(),
                },
                "⏳ Preview `shop-pr-42` goes in 2 h (Sun 29 Nov 18:00 UTC). To keep it longer, comment `/preview extend 1d` or add the `preview-keep` label (it may live until Sun 6 Dec 16:00 UTC).",
            ),
            (
                Reply::ExpiryWarning {
                    preview: "shop-pr-42".into(),
                    expires_at: "2026-12-06T16:00:00Z".parse().unwrap(),
                    latest: "2026-12-06T16:00:00Z".parse().unwrap(),
                    now: "2026-12-06T14:00:00Z".parse().unwrap(),
                },
                "⏳ Preview `shop-pr-42` goes in 2 h (Sun 6 Dec 16:00 UTC), the longest it may live. A push or `/preview` after that deploys a new one.",
            ),
            (
                Reply::AuthorClassOff {
                    blueprint: "shop".into(),
                    class: sandcastle_crd::AuthorClass::DependencyBot,
                },
                "Pull requests by dependency bots get no preview of `shop`: its rule `authors.dependencyBots.trigger` is `off`.",
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
                Reply::Extended {
                    until: "2026-11-30T16:00:00Z".parse().unwrap(),
                    now: "2026-11-29T16:00:00Z".parse().unwrap(),
                    capped: None,
                },
                "The preview now expires in 24 h (Mon 30 Nov 16:00 UTC).",
            ),
            (
                Reply::Extended {
                    until: "2026-12-06T16:00:00Z".parse().unwrap(),
                    now: "2026-11-29T16:00:00Z".parse().unwrap(),
                    capped: Some(Duration::from_secs(7 * 86_400)),
                },
                "The preview now expires in 7 d (Sun 6 Dec 16:00 UTC). That is as long as it can live: 7d after it was created.",
            ),
            (
                Reply::ConfigInvalid {
                    path: ".github/sandcastle.yml".into(),
                    branch: "main".into(),
                    error: "line 2, column 10: trigger must be `auto` or `comment`, not `<always>`"
                        .into(),
                },
                "`.github/sandcastle.yml` on `main` cannot be used, so the blueprint defaults apply: line 2, column 10: trigger must be `auto` or `comment`, not `&lt;always>`.",
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
    fn status_lists_each_preview_in_one_line() {
        let now: Timestamp = "2026-11-29T17:00:00Z".parse().unwrap();
        let sha = Sha::new(&"abc1234".repeat(6)[..40]).unwrap();
        let view = |preview: &str, state| StickyView {
            preview: preview.to_owned(),
            state,
            url: Some("https://42-shop.example.com".to_owned()),
            sha: Some(sha.clone()),
            deployed_at: None,
            blueprint: "shop".to_owned(),
            source: String::new(),
            services: vec![],
            jobs: vec![],
            expires_at: Some("2026-11-30T16:00:00Z".parse().unwrap()),
            stop_after_idle: None,
            api_url: None,
            namespace: None,
            pinned_fork_note: false,
            cluster: None,
            cluster_down: None,
            log_tail: None,
            running: None,
            rule: None,
            tests: Vec::new(),
            data: None,
        };
        let reply = Reply::Status {
            previews: vec![
                view("shop-pr-42", super::super::state::StickyState::Ready),
                view(
                    "web-shop-pr-42",
                    super::super::state::StickyState::WaitingForChecks {
                        checks: vec!["build".into()],
                    },
                ),
            ],
            now,
        };
        assert_eq!(
            text(reply),
            "- ✅ Ready: `shop-pr-42` at `abc1234` · https://42-shop.example.com · expires in 23 h (Mon 30 Nov 16:00 UTC)\n\
             - 🚦 Waiting for checks: `web-shop-pr-42` at `abc1234` · waiting for `build` to pass · https://42-shop.example.com · expires in 23 h (Mon 30 Nov 16:00 UTC)"
        );
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
