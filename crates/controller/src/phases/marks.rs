//! One instant per preview on the system's monotonic clock, in this process's memory, shared by
//! the context's clones and forgotten with the preview: what `idle::Drains` (when a stop parked
//! the routes) and `diagnoses::Diagnoses` (when the pods were last looked at) are kept in.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Debug, Default, Clone)]
pub(crate) struct Marks(Arc<Mutex<HashMap<String, Instant>>>);

impl Marks {
    /// Run `f` on `preview`'s mark (`None`: none), which it may set or clear.
    pub(crate) fn with<R>(&self, preview: &str, f: impl FnOnce(&mut Option<Instant>) -> R) -> R {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut mark = all.get(preview).copied();
        let out = f(&mut mark);
        match mark {
            Some(at) => all.insert(preview.to_owned(), at),
            None => all.remove(preview),
        };
        out
    }

    pub(crate) fn forget(&self, preview: &str) {
        self.with(preview, |mark| *mark = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_each_previews_own_until_forgotten() {
        let marks = Marks::default();
        let t0 = Instant::now();
        assert_eq!(marks.with("a", |m| *m), None);
        let clone = marks.clone();
        clone.with("a", |m| *m = Some(t0));
        assert_eq!(marks.with("a", |m| *m), Some(t0), "clones share");
        assert_eq!(marks.with("b", |m| *m), None);
        marks.forget("a");
        assert_eq!(marks.with("a", |m| *m), None);
    }
}
