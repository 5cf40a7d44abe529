//! `GitHubError`: every way a GitHub call can fail, shaped for the caller's next move (retry, requeue,
//! report). No variant ever carries a token or key.

use http::StatusCode;
use jiff::Timestamp;

/// Why a call to GitHub failed.
#[derive(Debug, thiserror::Error)]
pub enum GitHubError {
    /// GitHub answered with an error status that retrying will not fix (or retries ran out on a 5xx).
    /// `message` is GitHub's JSON `message` (or the reason phrase).
    #[error("GitHub answered {status}: {message}")]
    Status { status: StatusCode, message: String },
    /// A rate limit asks for a longer wait than the client may block; try again at `retry_at`.
    #[error("GitHub rate limit reached; retry after {retry_at}")]
    RateLimited { retry_at: Timestamp },
    /// No answer within the per-attempt timeout, on every attempt.
    #[error("GitHub did not answer in time")]
    Timeout,
    /// The connection failed (refused, reset, closed early) on every attempt.
    #[error("could not reach GitHub: {0}")]
    Transport(String),
    /// GitHub answered 2xx with a body that is not what `what` should look like.
    #[error("unexpected {what} from GitHub: {source}")]
    Decode {
        what: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// `auto_merge` merged the default branch into the ref (202) and no deployment was created.
    #[error("GitHub merged the default branch into the ref instead of creating a deployment")]
    AutoMerged,
    /// The App could not authenticate: a bad private key, a JWT GitHub refused, or an installation
    /// token that could not be minted.
    #[error("GitHub App authentication failed: {0}")]
    Auth(String),
    /// GitHub answered 401 to the App's own credentials (its JWT, or the JWT minting an
    /// installation token): a wrong App id or a private key GitHub no longer holds. Only an
    /// administrator can fix it.
    #[error(
        "GitHub refused Sandcastle's App credentials ({0}): the App id or private key is wrong or was revoked; an administrator must fix them, retrying will not help"
    )]
    CredentialsRejected(String),
    /// What GitHub sent is bigger than Sandcastle takes (a repository's archive).
    #[error("{what} is larger than {limit_mib} MiB")]
    TooLarge { what: &'static str, limit_mib: u64 },
}

impl GitHubError {
    /// Whether the same call may succeed later without any change on our side.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Status { status, .. } => status.is_server_error(),
            Self::RateLimited { .. } | Self::Timeout | Self::Transport(_) => true,
            Self::Decode { .. }
            | Self::AutoMerged
            | Self::Auth(_)
            | Self::CredentialsRejected(_)
            | Self::TooLarge { .. } => false,
        }
    }

    /// The HTTP status, when GitHub answered with an error status.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether GitHub answered 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(StatusCode::NOT_FOUND)
    }

    pub(crate) fn decode(
        what: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Decode {
            what,
            source: source.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_errors_are_the_transient_ones() {
        let status = |code: u16| GitHubError::Status {
            status: StatusCode::from_u16(code).unwrap(),
            message: "x".to_owned(),
        };
        assert!(status(502).is_retryable());
        assert!(!status(422).is_retryable());
        assert!(status(404).is_not_found());
        assert!(GitHubError::Timeout.is_retryable());
        assert!(
            GitHubError::RateLimited {
                retry_at: Timestamp::UNIX_EPOCH
            }
            .is_retryable()
        );
        assert!(!GitHubError::AutoMerged.is_retryable());
        assert!(!GitHubError::Auth("no".to_owned()).is_retryable());
    }
}
