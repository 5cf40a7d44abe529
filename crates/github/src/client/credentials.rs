//! Whether GitHub accepts the App's credentials, as the last App-authenticated answer said: a
//! refused JWT (a key deleted on GitHub, a wrong App id) is a configuration fault, not an outage,
//! and `/readyz` and the API say so until an answer shows the credentials work again.

use std::sync::{Arc, Mutex};

use jiff::Timestamp;

/// GitHub refused the App's credentials: since when, and GitHub's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub since: Timestamp,
    pub message: String,
}

/// Shared by the App's client and every installation client it makes. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Credentials(Arc<Mutex<Option<Rejected>>>);

impl Credentials {
    /// GitHub refused them (the first refusal's time is kept).
    pub fn rejected(&self, message: &str) {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if state.is_none() {
            tracing::error!(error = message, "GitHub refused the App's credentials");
            *state = Some(Rejected {
                since: Timestamp::now(),
                message: message.to_owned(),
            });
        }
    }

    /// GitHub accepted them.
    pub fn accepted(&self) {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if state.take().is_some() {
            tracing::info!("GitHub accepts the App's credentials again");
        }
    }

    /// The refusal that stands, if any.
    pub fn state(&self) -> Option<Rejected> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_stands_until_an_acceptance() {
        let c = Credentials::default();
        assert_eq!(c.state(), None);
        c.rejected("Bad credentials");
        let first = c.state().unwrap();
        let shared = c.clone();
        shared.rejected("again");
        assert_eq!(c.state(), Some(first), "the first refusal is kept");
        c.accepted();
        assert_eq!(c.state(), None);
    }
}
