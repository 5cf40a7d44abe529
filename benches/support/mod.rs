//! Shared by the benchmarks: a kube client for the control plane the bench script started, and
//! percentile summaries.

#![allow(dead_code)]

use std::time::Duration;

use kube::Client;

/// A client from `KUBECONFIG` (set by `scripts/bench-*`); exits with instructions without one.
pub async fn client() -> Client {
    let Ok(path) = std::env::var("KUBECONFIG") else {
        eprintln!(
            "KUBECONFIG is not set: run this benchmark through scripts/bench-webhook or scripts/bench-lifecycle"
        );
        std::process::exit(2);
    };
    sandcastle::serve::kube_client(&sandcastle::config::KubeArgs {
        kubeconfig: Some(path.into()),
        namespace: String::new(),
    })
    .await
    .expect("kube client")
}

pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{:06}", rand::random::<u32>() % 1_000_000)
}

/// p50, p90, p99 and max of `samples`, as milliseconds.
pub fn summary(samples: &mut [Duration]) -> String {
    samples.sort();
    let pick = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1000.0
    };
    format!(
        "n={:<4} p50={:>7.2} ms  p90={:>7.2} ms  p99={:>7.2} ms  max={:>7.2} ms",
        samples.len(),
        pick(0.5),
        pick(0.9),
        pick(0.99),
        pick(1.0)
    )
}
