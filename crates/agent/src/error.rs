//! Why an operation on previews was refused or failed, with the HTTP status and the stable code
//! each maps to (REST answers with them; MCP turns them into tool errors; the CLI's exit code
//! follows). Messages are for the caller: they name the field at fault and never hold a secret.

use http::StatusCode;

use sandcastle_domain::quote::short;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// No bearer token, or one Kubernetes does not accept (invalid, expired, revoked).
    #[error("{0}")]
    Unauthenticated(String),
    /// Kubernetes RBAC (or a preview token's scope) does not allow it.
    #[error("{0}")]
    Forbidden(String),
    #[error("preview {} does not exist", short(.0))]
    NotFound(String),
    #[error("Blueprint {} does not exist", short(.0))]
    NoBlueprint(String),
    /// A field of the request cannot be used; `code` says which rule it broke.
    #[error("{}: {message}", short(.field))]
    Invalid {
        code: &'static str,
        field: String,
        message: String,
    },
    /// The request conflicts with what exists (an idempotency key reused with another body, a
    /// name taken, a preview torn down).
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// Kubernetes (or GitHub, where the operation needs it) did not answer.
    #[error("{message}")]
    Unavailable { code: &'static str, message: String },
    /// Sandcastle itself is set up wrong (GitHub refuses its App credentials): no retry helps
    /// until an administrator fixes it.
    #[error("{message}")]
    Misconfigured { code: &'static str, message: String },
    /// The caller holds as much as one may (MCP sessions); the message says how to free some.
    #[error("{message}")]
    TooMany { code: &'static str, message: String },
}

impl AgentError {
    pub fn invalid(code: &'static str, field: &str, message: impl Into<String>) -> Self {
        Self::Invalid {
            code,
            field: field.to_owned(),
            message: message.into(),
        }
    }

    pub fn kubernetes(e: &kube::Error) -> Self {
        tracing::warn!(error = %e, "Kubernetes API call failed");
        Self::Unavailable {
            code: "kubernetes_unavailable",
            message: "Kubernetes did not answer; try again".to_owned(),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) | Self::NoBlueprint(_) => StatusCode::NOT_FOUND,
            Self::Invalid { code, .. } => match *code {
                "invalid_body" => StatusCode::BAD_REQUEST,
                "unsupported_media_type" => StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "body_too_large" => StatusCode::PAYLOAD_TOO_LARGE,
                // Something the request names that is not there (a preview's share link, test or
                // workload): not found, like a preview that is not.
                "unknown_share" | "unknown_test" | "unknown_workload" => StatusCode::NOT_FOUND,
                _ => StatusCode::UNPROCESSABLE_ENTITY,
            },
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Misconfigured { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            Self::TooMany { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// The stable code of the JSON error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unauthenticated(_) => "unauthenticated",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "preview_not_found",
            Self::NoBlueprint(_) => "blueprint_not_found",
            Self::Invalid { code, .. }
            | Self::Conflict { code, .. }
            | Self::Unavailable { code, .. }
            | Self::Misconfigured { code, .. }
            | Self::TooMany { code, .. } => code,
        }
    }

    /// The field at fault, when there is one.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }
}

impl AgentError {
    /// A GitHub call needed for `what` failed: refused credentials are a configuration fault
    /// (500, `github_credentials_rejected`, not worth retrying); anything else is GitHub not
    /// answering (503, `github_unavailable`).
    pub fn github(e: &sandcastle_github::client::GitHubError, what: &str) -> Self {
        use sandcastle_github::client::GitHubError;
        match e {
            GitHubError::CredentialsRejected(_) => Self::Misconfigured {
                code: "github_credentials_rejected",
                message: format!("{what}: {e}"),
            },
            _ => Self::Unavailable {
                code: "github_unavailable",
                message: format!("{what}: {e}"),
            },
        }
    }
}

impl From<kube::Error> for AgentError {
    fn from(e: kube::Error) -> Self {
        Self::kubernetes(&e)
    }
}

/// The most characters a duration the API takes may have (its OpenAPI `maxLength`): `12`
/// digits and units bound every sum well inside what the clock can add.
pub const DURATION_MAX_LENGTH: usize = 12;

/// A duration the API was given as `field` (`4h`, `2d`; with `days`, `d` and `w` too), checked as
/// its document says: at most [`DURATION_MAX_LENGTH`] characters, no spaces around it.
pub(crate) fn api_duration(
    field: &str,
    text: &str,
    days: bool,
) -> Result<std::time::Duration, AgentError> {
    if text.len() > DURATION_MAX_LENGTH || text.trim() != text {
        return Err(AgentError::invalid(
            "invalid_duration",
            field,
            format!(
                "{} is not a duration of at most {DURATION_MAX_LENGTH} characters; write it like \
                 30m, 4h, 1h30m or 2d",
                sandcastle_domain::quote::short(text)
            ),
        ));
    }
    sandcastle_domain::duration::parse(text, days)
        .map_err(|e| AgentError::invalid("invalid_duration", field, e.to_string()))
}
