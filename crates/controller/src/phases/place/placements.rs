//! Placement decisions one at a time, and those the controller's cache may not show yet: data
//! below the phase that places (`place`), so that the context can hold it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a decision is counted from memory while the cache may not show it yet.
const REMEMBERED: Duration = Duration::from_secs(120);

/// Placement decisions, one at a time, and those the controller's cache may not show yet.
#[derive(Default)]
pub(crate) struct Placements {
    pub(super) decide: tokio::sync::Mutex<()>,
    pub(super) recent: std::sync::Mutex<HashMap<String, (String, Instant)>>,
}

impl Placements {
    pub(super) fn remember(&self, preview: &str, cluster: &str) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.retain(|_, (_, at)| at.elapsed() < REMEMBERED);
        recent.insert(preview.to_owned(), (cluster.to_owned(), Instant::now()));
    }

    pub(super) fn recent(&self) -> HashMap<String, String> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent
            .iter()
            .filter(|(_, (_, at))| at.elapsed() < REMEMBERED)
            .map(|(p, (c, _))| (p.clone(), c.clone()))
            .collect()
    }
}
