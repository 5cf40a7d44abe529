//! Per-cluster metrics: whether each registered cluster's API answers
//! (`cluster_reachable{cluster}`, set by the checks every replica runs) and how many previews
//! were placed in each (`cluster_placements_total{cluster}`, counted by the controller). The
//! previews each cluster holds (`cluster_previews{cluster}`) are counted at scrape time from the
//! controller's cache, beside `previews{phase}`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ClusterLabel {
    cluster: String,
}

/// What is counted per cluster.
#[derive(Clone, Debug, Default)]
pub struct ClusterMetrics {
    pub(super) reachable: Family<ClusterLabel, Gauge>,
    pub(super) placements: Family<ClusterLabel, Counter>,
}

fn label(cluster: &str) -> ClusterLabel {
    ClusterLabel {
        cluster: cluster.to_owned(),
    }
}

impl ClusterMetrics {
    /// Whether `cluster`'s API answered at its last check.
    pub fn reachable(&self, cluster: &str, up: bool) {
        self.reachable
            .get_or_create(&label(cluster))
            .set(i64::from(up));
    }

    /// A preview was placed in `cluster`.
    pub fn placed(&self, cluster: &str) {
        self.placements.get_or_create(&label(cluster)).inc();
    }

    /// `cluster` is no longer registered: its gauge goes (its placements stay counted).
    pub fn forget(&self, cluster: &str) {
        self.reachable.remove(&label(cluster));
    }
}
