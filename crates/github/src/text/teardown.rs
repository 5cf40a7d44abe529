//! Why a preview was removed, as one phrase naming who did it and through what — the pull
//! request, a `/preview` command, the API, MCP or the dashboard — for the sticky comment, the
//! preview's status message and GitHub's `inactive` description. Only a GitHub login is written
//! as a mention (`@maria`); any other identity is shown as it is, never after an `@`.

use sandcastle_crd::{Interface, Teardown, TeardownReason};

/// How the phrase is written: Markdown (other identities as code) or plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Markdown,
    Plain,
}

/// A teardown as these sentences need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removal<'a> {
    pub reason: TeardownReason,
    pub actor: Option<&'a str>,
    pub via: Option<Interface>,
}

impl<'a> From<&'a Teardown> for Removal<'a> {
    fn from(t: &'a Teardown) -> Self {
        Self {
            reason: t.reason,
            actor: t.actor.as_deref(),
            via: t.via,
        }
    }
}

/// Who acted, as a sentence may name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who<'a> {
    /// A GitHub login: a mention.
    GitHub(&'a str),
    /// Anything else (a Kubernetes identity, a pull request): shown as it is.
    Other(&'a str),
}

/// Whether `s` can be a GitHub login (`[A-Za-z0-9-]`, at most 39; Apps' bots end in `[bot]`).
fn is_login(s: &str) -> bool {
    let name = s.strip_suffix("[bot]").unwrap_or(s);
    !name.is_empty()
        && name.len() <= 39
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Who `t`'s actor is. A teardown recorded before `via` was: merges, closes, labels and drafts
/// only ever came from the pull request; a destroy may have come from the API, so its actor is
/// not taken for a login.
fn who(t: Removal<'_>) -> Option<Who<'_>> {
    let actor = t.actor?;
    let from_github = match t.via {
        Some(Interface::PullRequest | Interface::Command) => true,
        Some(Interface::Dashboard) => {
            if let Some(login) = actor.strip_prefix("github:").filter(|l| is_login(l)) {
                return Some(Who::GitHub(login));
            }
            false
        }
        Some(Interface::Api | Interface::Mcp | Interface::Sandcastle) => false,
        None => !matches!(
            t.reason,
            TeardownReason::Destroyed | TeardownReason::Adopted
        ),
    };
    Some(if from_github && is_login(actor) {
        Who::GitHub(actor)
    } else {
        Who::Other(actor)
    })
}

/// ` by @maria`, `` by `system:serviceaccount:sandcastle:ci-agent` ``, or nothing.
fn by(t: Removal<'_>, style: Style) -> String {
    match who(t) {
        None => String::new(),
        Some(Who::GitHub(login)) => format!(" by @{login}"),
        // Sandcastle's own words for the pull request: text, not an identity.
        Some(Who::Other(name)) if t.reason == TeardownReason::Adopted => match style {
            Style::Markdown => format!(" by {}", super::markdown::plain(name)),
            Style::Plain => format!(" by {name}"),
        },
        Some(Who::Other(name)) => match style {
            Style::Markdown => format!(" by {}", super::markdown::code(name)),
            Style::Plain => format!(" by {name}"),
        },
    }
}

/// The interface a destroy came through, as it reads before its actor.
fn through(via: Option<Interface>) -> &'static str {
    match via {
        Some(Interface::Api) => " through the API",
        Some(Interface::Mcp) => " through MCP",
        Some(Interface::Dashboard) => " from the dashboard",
        _ => "",
    }
}

/// What happened, e.g. `merged by @octocat`, `` destroyed by @maria with `/preview destroy` ``,
/// `destroyed through the API by system:serviceaccount:sandcastle:ci-agent`, `expired`,
/// `taken over by pull request #77 (shop-pr-77)`.
pub fn what_happened(t: Removal<'_>, style: Style) -> String {
    let by = by(t, style);
    match t.reason {
        TeardownReason::Merged => format!("merged{by}"),
        TeardownReason::Closed => format!("closed{by}"),
        TeardownReason::Expired => "expired".to_owned(),
        TeardownReason::Destroyed if t.via == Some(Interface::Command) => {
            let command = match style {
                Style::Markdown => "`/preview destroy`",
                Style::Plain => "/preview destroy",
            };
            format!("destroyed{by} with {command}")
        }
        TeardownReason::Destroyed => format!("destroyed{}{by}", through(t.via)),
        TeardownReason::NoPreview => match style {
            Style::Markdown => format!("labelled `no-preview`{by}"),
            Style::Plain => format!("labelled no-preview{by}"),
        },
        TeardownReason::Draft => format!("converted to draft{by}"),
        TeardownReason::Adopted => format!("taken over{by}"),
    }
}

/// GitHub's `inactive` description (no names: GitHub shows it to anyone who can read the
/// repository), e.g. `Removed through the API`.
pub fn inactive_description(t: Removal<'_>) -> String {
    match (t.reason, t.via) {
        (TeardownReason::Merged, _) => "Removed: pull request merged",
        (TeardownReason::Closed, _) => "Removed: pull request closed",
        (TeardownReason::Expired, _) => "Removed: preview expired",
        (TeardownReason::Destroyed, Some(Interface::Command)) => "Removed with /preview destroy",
        (TeardownReason::Destroyed, Some(Interface::Api)) => "Removed through the API",
        (TeardownReason::Destroyed, Some(Interface::Mcp)) => "Removed through MCP",
        (TeardownReason::Destroyed, Some(Interface::Dashboard)) => "Removed from the dashboard",
        (TeardownReason::Destroyed, _) => "Removed: destroyed",
        (TeardownReason::NoPreview, _) => "Removed: labelled no-preview",
        (TeardownReason::Draft, _) => "Removed: converted to draft",
        (TeardownReason::Adopted, _) => "Taken over by a pull request's preview",
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn t(reason: TeardownReason, actor: Option<&str>, via: Option<Interface>) -> Teardown {
        Teardown {
            reason,
            actor: actor.map(str::to_owned),
            via,
            at: Time("2026-11-29T12:00:00Z".parse().unwrap()),
        }
    }

    const SA: &str = "system:serviceaccount:sandcastle:ci-agent";

    #[test]
    fn every_interface_is_named_and_only_github_logins_are_mentions() {
        use Interface::*;
        use TeardownReason::*;
        let cases = [
            (
                t(Merged, Some("octocat"), Some(PullRequest)),
                "merged by @octocat",
            ),
            (
                t(Closed, Some("octocat"), Some(PullRequest)),
                "closed by @octocat",
            ),
            (t(Closed, None, Some(PullRequest)), "closed"),
            (
                t(NoPreview, Some("maria"), Some(PullRequest)),
                "labelled `no-preview` by @maria",
            ),
            (
                t(Draft, Some("dependabot[bot]"), Some(PullRequest)),
                "converted to draft by @dependabot[bot]",
            ),
            (t(Expired, None, None), "expired"),
            (
                t(Destroyed, Some("maria"), Some(Command)),
                "destroyed by @maria with `/preview destroy`",
            ),
            (
                t(Destroyed, Some(SA), Some(Api)),
                "destroyed through the API by `system:serviceaccount:sandcastle:ci-agent`",
            ),
            (
                t(Destroyed, Some("alice"), Some(Mcp)),
                "destroyed through MCP by `alice`",
            ),
            (
                t(Destroyed, Some("github:maria"), Some(Dashboard)),
                "destroyed from the dashboard by @maria",
            ),
            (
                t(Destroyed, Some("kubernetes-admin"), Some(Dashboard)),
                "destroyed from the dashboard by `kubernetes-admin`",
            ),
            (
                t(
                    Adopted,
                    Some("pull request #77 (shop-pr-77)"),
                    Some(Sandcastle),
                ),
                "taken over by pull request #77 (shop-pr-77)",
            ),
            // Recorded before `via` was: a destroy's actor is not taken for a login.
            (
                t(Destroyed, Some(SA), None),
                "destroyed by `system:serviceaccount:sandcastle:ci-agent`",
            ),
            (t(Destroyed, Some("maria"), None), "destroyed by `maria`"),
            (t(Merged, Some("octocat"), None), "merged by @octocat"),
            (
                t(Adopted, Some("pull request #77 (shop-pr-77)"), None),
                "taken over by pull request #77 (shop-pr-77)",
            ),
            // Whatever the interface says, something that is no login is not a mention.
            (
                t(Closed, Some("not a login"), Some(PullRequest)),
                "closed by `not a login`",
            ),
        ];
        for (teardown, want) in cases {
            let said = what_happened((&teardown).into(), Style::Markdown);
            assert_eq!(said, want, "{teardown:?}");
            let plain = what_happened((&teardown).into(), Style::Plain);
            assert!(!plain.contains('`'), "{plain}");
            if !matches!(who((&teardown).into()), Some(Who::GitHub(_))) {
                assert!(
                    !said.contains('@') && !plain.contains('@'),
                    "{said} / {plain}"
                );
            }
        }
        assert_eq!(
            what_happened((&t(Destroyed, Some(SA), Some(Api))).into(), Style::Plain),
            "destroyed through the API by system:serviceaccount:sandcastle:ci-agent"
        );
        assert_eq!(
            what_happened(
                (&t(Destroyed, Some("maria"), Some(Command))).into(),
                Style::Plain
            ),
            "destroyed by @maria with /preview destroy"
        );
    }

    #[test]
    fn githubs_description_names_the_interface_of_a_destroy() {
        use Interface::*;
        use TeardownReason::*;
        let d = |via| inactive_description((&t(Destroyed, Some("x"), via)).into());
        assert_eq!(d(Some(Command)), "Removed with /preview destroy");
        assert_eq!(d(Some(Api)), "Removed through the API");
        assert_eq!(d(Some(Mcp)), "Removed through MCP");
        assert_eq!(d(Some(Dashboard)), "Removed from the dashboard");
        assert_eq!(d(None), "Removed: destroyed");
        assert_eq!(
            inactive_description((&t(Merged, Some("octocat"), Some(PullRequest))).into()),
            "Removed: pull request merged"
        );
    }
}
