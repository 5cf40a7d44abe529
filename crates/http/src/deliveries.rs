//! Delivery ids this process has handled, bounded, so that a redelivery is answered at once. The
//! durable record of applied deliveries is on each PreviewEnvironment; this is only a fast path.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub struct Deliveries {
    inner: Arc<Mutex<Seen>>,
}

#[derive(Debug)]
struct Seen {
    set: HashSet<String>,
    order: VecDeque<String>,
    capacity: usize,
}

impl Deliveries {
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Seen {
                set: HashSet::new(),
                order: VecDeque::new(),
                capacity,
            })),
        }
    }

    pub fn contains(&self, id: &str) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .set
            .contains(id)
    }

    pub fn insert(&self, id: String) {
        let mut seen = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !seen.set.insert(id.clone()) {
            return;
        }
        seen.order.push_back(id);
        while seen.order.len() > seen.capacity {
            if let Some(old) = seen.order.pop_front() {
                seen.set.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_most_recent_ids() {
        let d = Deliveries::new(2);
        d.insert("a".into());
        d.insert("b".into());
        d.insert("b".into());
        assert!(d.contains("a") && d.contains("b"));
        d.insert("c".into());
        assert!(!d.contains("a"), "oldest forgotten");
        assert!(d.contains("b") && d.contains("c"));
    }
}
