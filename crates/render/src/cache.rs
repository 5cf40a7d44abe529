//! Results kept by key, in memory, shared by the reconciles that want them together: a
//! repository's tarball by commit (one fetch per commit, whichever previews and Blueprints use
//! it) and a render by everything it depends on (one `helm template` per preview and commit, not
//! one per reconcile). A result is computed once by the first caller, awaited by the others, and
//! kept until the cache's byte budget evicts the least recently used; a failure is not kept.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::OnceCell;

/// A value's size, for the budget.
pub trait Weigh {
    fn bytes(&self) -> usize;
}

impl Weigh for Arc<[u8]> {
    fn bytes(&self) -> usize {
        self.len()
    }
}

impl Weigh for Arc<str> {
    fn bytes(&self) -> usize {
        self.len()
    }
}

type Slot<V> = Arc<OnceCell<V>>;

/// Archives kept, all together.
const ARCHIVES_BUDGET: usize = 512 << 20;
/// Renders kept, all together.
const RENDERS_BUDGET: usize = 128 << 20;

/// What a server keeps between renders: repository archives by commit, renders by everything
/// they depend on.
#[derive(Debug)]
pub struct Kept {
    pub archives: Memo<Arc<[u8]>>,
    pub renders: Memo<Arc<str>>,
}

impl Default for Kept {
    fn default() -> Self {
        Self {
            archives: Memo::new(ARCHIVES_BUDGET),
            renders: Memo::new(RENDERS_BUDGET),
        }
    }
}

/// Values by key within a byte budget.
#[derive(Debug)]
pub struct Memo<V> {
    budget: usize,
    slots: Mutex<HashMap<String, (Instant, Slot<V>)>>,
}

impl<V: Clone + Weigh> Memo<V> {
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            slots: Mutex::default(),
        }
    }

    /// The value of `key`, made by `make` unless it is kept or being made. The flag says whether
    /// this call made it.
    pub async fn get_or_make<E, F>(&self, key: &str, make: F) -> Result<(V, bool), E>
    where
        F: Future<Output = Result<V, E>>,
    {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let entry = slots
                .entry(key.to_owned())
                .or_insert_with(|| (Instant::now(), Arc::default()));
            entry.0 = Instant::now();
            entry.1.clone()
        };
        let mut made = false;
        let value = slot
            .get_or_try_init(|| {
                made = true;
                make
            })
            .await;
        match value {
            Ok(v) => {
                let v = v.clone();
                if made {
                    self.evict();
                }
                Ok((v, made))
            }
            Err(e) => {
                let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
                if slots.get(key).is_some_and(|(_, s)| Arc::ptr_eq(s, &slot)) {
                    slots.remove(key);
                }
                Err(e)
            }
        }
    }

    /// Drop the least recently used values until the kept ones fit the budget (the newest
    /// always stays, however big).
    fn evict(&self) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let weight = |s: &Slot<V>| s.get().map_or(0, Weigh::bytes);
        let mut total: usize = slots.values().map(|(_, s)| weight(s)).sum();
        while total > self.budget && slots.len() > 1 {
            let Some(oldest) = slots
                .iter()
                .filter(|(_, (_, s))| s.initialized())
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((_, s)) = slots.remove(&oldest) {
                total -= weight(&s);
            }
        }
    }

    /// How many values are kept.
    pub fn len(&self) -> usize {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.values().filter(|(_, s)| s.initialized()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize) -> Arc<[u8]> {
        vec![0u8; n].into()
    }

    #[tokio::test]
    async fn a_value_is_made_once_and_failures_are_not_kept() {
        let memo: Memo<Arc<[u8]>> = Memo::new(1000);
        let (_, made) = memo
            .get_or_make("a", async { Ok::<_, ()>(bytes(10)) })
            .await
            .unwrap();
        assert!(made);
        let (v, made) = memo
            .get_or_make("a", async { Ok::<_, ()>(bytes(99)) })
            .await
            .unwrap();
        assert_eq!((v.len(), made), (10, false));
        assert!(
            memo.get_or_make("b", async { Err::<Arc<[u8]>, _>("down") })
                .await
                .is_err()
        );
        let (v, made) = memo
            .get_or_make("b", async { Ok::<_, ()>(bytes(5)) })
            .await
            .unwrap();
        assert_eq!((v.len(), made), (5, true));
    }

    #[tokio::test]
    async fn the_least_recently_used_go_first_when_over_budget() {
        let memo: Memo<Arc<[u8]>> = Memo::new(25);
        for key in ["a", "b"] {
            memo.get_or_make(key, async { Ok::<_, ()>(bytes(10)) })
                .await
                .unwrap();
        }
        // `a` used again: `b` is now the oldest.
        memo.get_or_make("a", async { Ok::<_, ()>(bytes(10)) })
            .await
            .unwrap();
        memo.get_or_make("c", async { Ok::<_, ()>(bytes(10)) })
            .await
            .unwrap();
        assert_eq!(memo.len(), 2);
        let (_, made) = memo
            .get_or_make("a", async { Ok::<_, ()>(bytes(10)) })
            .await
            .unwrap();
        assert!(!made, "a stayed");
    }
}
