//! The time source for everything that depends on "now" (expiry, idle, timeouts): the system
//! clock in production, a clock tests move by hand. Moving a manual clock is announced on
//! [`Clock::ticks`], so the controller looks at every preview again at once instead of waiting
//! for a requeue measured in real time.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};
use jiff::Timestamp;
use tokio::sync::watch;

#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// `None`: the system clock. `Some`: a manual clock at this instant.
    manual: Option<Arc<watch::Sender<Timestamp>>>,
}

impl Clock {
    pub fn system() -> Self {
        Self { manual: None }
    }

    /// A clock that stands still at `start` until moved with [`Clock::advance`].
    pub fn manual(start: Timestamp) -> Self {
        Self {
            manual: Some(Arc::new(watch::Sender::new(start))),
        }
    }

    pub fn now(&self) -> Timestamp {
        match &self.manual {
            None => Timestamp::now(),
            Some(t) => *t.borrow(),
        }
    }

    /// Move a manual clock forward. A system clock cannot be moved.
    pub fn advance(&self, by: Duration) {
        let Some(t) = &self.manual else {
            panic!("the system clock cannot be moved")
        };
        t.send_modify(|t| {
            *t = t
                .checked_add(
                    jiff::SignedDuration::try_from(by).unwrap_or(jiff::SignedDuration::MAX),
                )
                .unwrap_or(*t);
        });
    }

    /// One item each time a manual clock is moved; never anything for the system clock.
    pub fn ticks(&self) -> BoxStream<'static, ()> {
        match &self.manual {
            None => stream::pending().boxed(),
            Some(t) => {
                let mut rx = t.subscribe();
                rx.mark_unchanged();
                stream::unfold(rx, |mut rx| async move {
                    rx.changed().await.ok()?;
                    Some(((), rx))
                })
                .boxed()
            }
        }
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

    #[tokio::test]
    async fn moving_a_manual_clock_ticks() {
        let c = Clock::manual("2026-11-29T12:00:00Z".parse().unwrap());
        let mut ticks = c.ticks();
        c.advance(Duration::from_secs(1));
        tokio::time::timeout(Duration::from_secs(5), ticks.next())
            .await
            .expect("a tick")
            .expect("stream open");
    }
}
