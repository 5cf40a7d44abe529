//! The time source for everything that depends on "now" (expiry, idle, timeouts): the system
//! clock in production, a clock tests move by hand.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;

#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// `None`: the system clock. `Some`: a manual clock at this instant.
    manual: Option<Arc<Mutex<Timestamp>>>,
}

impl Clock {
    pub fn system() -> Self {
        Self { manual: None }
    }

    /// A clock that stands still at `start` until moved with [`Clock::advance`].
    pub fn manual(start: Timestamp) -> Self {
        Self {
            manual: Some(Arc::new(Mutex::new(start))),
        }
    }

    pub fn now(&self) -> Timestamp {
        match &self.manual {
            None => Timestamp::now(),
            Some(t) => *t.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
        }
    }

    /// Move a manual clock forward. A system clock cannot be moved.
    pub fn advance(&self, by: Duration) {
        let Some(t) = &self.manual else {
            panic!("the system clock cannot be moved")
        };
        let mut t = t.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *t = t
            .checked_add(jiff::SignedDuration::try_from(by).unwrap_or(jiff::SignedDuration::MAX))
            .unwrap_or(*t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let start: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let c = Clock::manual(start);
        assert_eq!(c.now(), start);
        c.advance(Duration::from_secs(3600));
        assert_eq!(c.now().to_string(), "2026-11-29T13:00:00Z");
        let shared = c.clone();
        shared.advance(Duration::from_secs(60));
        assert_eq!(
            c.now().to_string(),
            "2026-11-29T13:01:00Z",
            "clones share the same time"
        );
    }
}
