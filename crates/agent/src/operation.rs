//! Every operation agents and people perform on previews, once: its name, the RBAC access it
//! asks of the caller (a SubjectAccessReview on `previewenvironments` in Sandcastle's
//! namespace), whether it writes, and whether a preview's own token may run it. REST, MCP and
//! the CLI each expose the list through an exhaustive `match`, so a new operation does not
//! compile until each says how it is offered (or that it is not).

use std::fmt;

/// One thing that can be done to previews.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    List,
    Get,
    Wait,
    Events,
    Logs,
    Create,
    Redeploy,
    Stop,
    Wake,
    Extend,
    Reset,
    Delete,
    Token,
    /// Mint a share link.
    Share,
    /// Revoke a share link.
    Unshare,
    /// Hand out the preview's header secret.
    HeaderSecret,
    /// Run one of the Blueprint's tests in the preview now.
    RunTest,
    /// Take a new snapshot of a Blueprint's data (`spec.data`), for new previews to start from.
    RefreshData,
}

/// What RBAC must allow for an operation: `verb` on `<resource>[/subresource]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub verb: &'static str,
    /// `previewenvironments`, or `blueprints` for what concerns a whole Blueprint.
    pub resource: &'static str,
    pub subresource: Option<&'static str>,
}

impl Operation {
    pub const ALL: [Operation; 18] = [
        Self::List,
        Self::Get,
        Self::Wait,
        Self::Events,
        Self::Logs,
        Self::Create,
        Self::Redeploy,
        Self::Stop,
        Self::Wake,
        Self::Extend,
        Self::Reset,
        Self::Delete,
        Self::Token,
        Self::Share,
        Self::Unshare,
        Self::HeaderSecret,
        Self::RunTest,
        Self::RefreshData,
    ];

    /// The lower-case name (audit lines, history, metrics).
    pub fn name(self) -> &'static str {
        match self {
            Self::List => "list",
            Self::Get => "get",
            Self::Wait => "wait",
            Self::Events => "events",
            Self::Logs => "logs",
            Self::Create => "create",
            Self::Redeploy => "redeploy",
            Self::Stop => "stop",
            Self::Wake => "wake",
            Self::Extend => "extend",
            Self::Reset => "reset",
            Self::Delete => "delete",
            Self::Token => "token",
            Self::Share => "share",
            Self::Unshare => "unshare",
            Self::HeaderSecret => "header-secret",
            Self::RunTest => "run-test",
            Self::RefreshData => "refresh-data",
        }
    }

    /// The access a caller needs (the `previewenvironments` resource in Sandcastle's namespace).
    pub fn access(self) -> Access {
        let (verb, subresource) = match self {
            Self::List => ("list", None),
            Self::Get | Self::Wait => ("get", None),
            Self::Events => ("get", Some("events")),
            Self::Logs => ("get", Some("logs")),
            Self::Create => ("create", None),
            Self::Redeploy | Self::Stop | Self::Wake | Self::Extend => ("update", None),
            Self::Reset => ("update", Some("reset")),
            Self::Delete => ("delete", None),
            Self::Token => ("create", Some("token")),
            Self::Share => ("create", Some("share")),
            Self::Unshare => ("delete", Some("share")),
            // As good as a token: whoever may mint tokens may have it.
            Self::HeaderSecret => ("create", Some("token")),
            Self::RunTest => ("create", Some("tests")),
            Self::RefreshData => {
                return Access {
                    verb: "update",
                    resource: "blueprints",
                    subresource: Some("data-refresh"),
                };
            }
        };
        Access {
            verb,
            resource: "previewenvironments",
            subresource,
        }
    }

    /// Whether it changes anything (audited; off in read-only MCP).
    pub fn writes(self) -> bool {
        match self {
            Self::List | Self::Get | Self::Wait | Self::Events | Self::Logs => false,
            Self::Create
            | Self::Redeploy
            | Self::Stop
            | Self::Wake
            | Self::Extend
            | Self::Reset
            | Self::Delete
            | Self::Token
            | Self::Share
            | Self::Unshare
            | Self::HeaderSecret
            | Self::RunTest
            | Self::RefreshData => true,
        }
    }

    /// Whether a token minted for a preview (its `preview-agent` account) may run it on that
    /// preview. It may read and operate its own preview; it may not create previews or mint
    /// further tokens.
    pub fn for_preview_token(self) -> bool {
        match self {
            Self::List
            | Self::Get
            | Self::Wait
            | Self::Events
            | Self::Logs
            | Self::Redeploy
            | Self::Stop
            | Self::Wake
            | Self::Extend
            | Self::Reset
            | Self::Delete
            | Self::RunTest => true,
            // Nor hand out ways in that outlive it: share links, the header secret.
            Self::Create | Self::Token | Self::Share | Self::Unshare | Self::HeaderSecret => false,
            // Nor act on the Blueprint every other preview comes from.
            Self::RefreshData => false,
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_writes_need_more_than_reading() {
        let mut names: Vec<&str> = Operation::ALL.iter().map(|o| o.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Operation::ALL.len());
        for op in Operation::ALL {
            let access = op.access();
            if op.writes() {
                assert_ne!(access.verb, "get", "{op} writes");
            } else {
                assert!(["get", "list"].contains(&access.verb), "{op} reads");
            }
        }
        assert!(!Operation::Token.for_preview_token());
        assert!(Operation::Logs.for_preview_token());
    }
}
