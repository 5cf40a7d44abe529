//! When each member of a burst got where it was going: first seen with a status, Ready — for
//! previews (from a watch on PreviewEnvironments) and for namespaces applied directly (from a
//! watch on their Deployments) — and what the arrival times say: how many had arrived at each
//! quarter, in which order against the order they were asked for; and what the API server was
//! asked meanwhile (its request counters).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use sandcastle::crd::{Phase, PreviewEnvironment, PreviewEvent};

/// Arrival times by name, from one start.
pub struct Arrivals {
    pub start: Instant,
    /// First seen with any status (previews) — when each left the line.
    pub status: Seen,
    /// First seen Ready (previews) or with every Deployment available (namespaces).
    pub ready: Seen,
    task: tokio::task::JoinHandle<()>,
}

/// First times seen, by name.
pub type Seen = Arc<Mutex<HashMap<String, Duration>>>;

impl Drop for Arrivals {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn note(map: &Seen, name: String, at: Duration) {
    map.lock().unwrap().entry(name).or_insert(at);
}

impl Arrivals {
    /// Arrivals noted by `watch(start, status, ready)`, run until dropped.
    fn spawn<F>(watch: impl FnOnce(Instant, Seen, Seen) -> F) -> Self
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let start = Instant::now();
        let (status, ready) = (Seen::default(), Seen::default());
        let task = tokio::spawn(watch(start, status.clone(), ready.clone()));
        Self {
            start,
            status,
            ready,
            task,
        }
    }

    /// Previews in `home`, watched from now on.
    pub fn previews(client: &Client, home: &str) -> Self {
        let api: Api<PreviewEnvironment> = Api::namespaced(client.clone(), home);
        Self::spawn(|start, with_status, ready| async move {
            let mut events = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(ev) = events.next().await {
                let Ok(pe) = ev else { continue };
                let at = start.elapsed();
                let Some(status) = pe.status.as_ref() else {
                    continue;
                };
                note(&with_status, pe.name_any(), at);
                if status.phase == Some(Phase::Ready) {
                    note(&ready, pe.name_any(), at);
                }
            }
        })
    }

    /// Namespaces among `namespaces`, each Ready once it has `deployments` Deployments, all
    /// available; watched from now on.
    pub fn namespaces(client: &Client, namespaces: HashSet<String>, deployments: usize) -> Self {
        let api: Api<Deployment> = Api::all(client.clone());
        Self::spawn(|start, with_status, ready| async move {
            let mut available: HashMap<String, HashSet<String>> = HashMap::new();
            let mut events = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(ev) = events.next().await {
                let Ok(d) = ev else { continue };
                let at = start.elapsed();
                let ns = d.namespace().unwrap_or_default();
                if !namespaces.contains(&ns) {
                    continue;
                }
                note(&with_status, ns.clone(), at);
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let have = d.status.as_ref().and_then(|s| s.available_replicas);
                let names = available.entry(ns.clone()).or_default();
                if have.unwrap_or(0) >= want {
                    names.insert(d.name_any());
                } else {
                    names.remove(&d.name_any());
                }
                if names.len() >= deployments {
                    note(&ready, ns, at);
                }
            }
        })
    }

    /// Wait until every one of `names` is Ready (30 minutes at most); the time it took.
    pub async fn all_ready(&self, names: &HashSet<String>) -> Duration {
        let deadline = Instant::now() + Duration::from_secs(1800);
        loop {
            let ready = self.ready.lock().unwrap().len();
            let done = names
                .iter()
                .all(|n| self.ready.lock().unwrap().contains_key(n));
            if done {
                return self.start.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "{} of {} Ready after 30 min",
                ready,
                names.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// How many had a status `at` after the start.
    pub fn with_status_by(&self, at: Duration) -> usize {
        self.status
            .lock()
            .unwrap()
            .values()
            .filter(|t| **t <= at)
            .count()
    }

    /// Ready times in the order of `asked`.
    pub fn ready_in_order(&self, asked: &[String]) -> Vec<Duration> {
        let ready = self.ready.lock().unwrap();
        asked.iter().map(|n| ready[n]).collect()
    }
}

/// The times by which a quarter, a half, three quarters and all of `times` had arrived.
pub fn quarters(times: &[Duration]) -> [Duration; 4] {
    let mut sorted = times.to_vec();
    sorted.sort();
    let at = |q: usize| sorted[(sorted.len() * q).div_ceil(4).max(1) - 1];
    [at(1), at(2), at(3), at(4)]
}

/// Spearman's rank correlation between the order asked (index) and `times`: 1.0 when they
/// arrived exactly in the order asked, 0 when the order says nothing.
pub fn rank_correlation(times: &[Duration]) -> f64 {
    let n = times.len() as f64;
    if n < 2.0 {
        return 1.0;
    }
    let mut by_time: Vec<usize> = (0..times.len()).collect();
    by_time.sort_by_key(|&i| times[i]);
    let mut rank = vec![0.0; times.len()];
    for (r, &i) in by_time.iter().enumerate() {
        rank[i] = r as f64;
    }
    let d2: f64 = rank
        .iter()
        .enumerate()
        .map(|(i, r)| (i as f64 - r).powi(2))
        .sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

/// The median of `times`.
pub fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// CPU seconds (user and system) process `pid` has used so far; 0 once it is gone.
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // After the command name in parentheses: state is field 3; utime, stime are 14 and 15.
    let Some((_, rest)) = stat.rsplit_once(") ") else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11..13]
        .iter()
        .filter_map(|f| f.parse::<f64>().ok())
        .sum();
    // Linux reports in USER_HZ, 100 on every architecture Rust targets here.
    ticks / 100.0
}

/// CPU seconds each process of the local control plane (`kube-harness etcd`, `kube-harness
/// kube-apiserver`, …) has used so far, by component.
pub fn control_plane_cpu() -> std::collections::BTreeMap<String, f64> {
    let mut by = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return by;
    };
    for pid in dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_harness = args.first().is_some_and(|a| a.ends_with(b"/kube-harness"));
        let component = args.get(1).map(|a| String::from_utf8_lossy(a).into_owned());
        if let (true, Some(component)) = (is_harness, component) {
            *by.entry(component).or_default() += cpu_seconds(pid);
        }
    }
    by
}

/// What each component used between two readings, and the total, as one line.
pub fn cpu_between(
    before: &std::collections::BTreeMap<String, f64>,
    after: &std::collections::BTreeMap<String, f64>,
) -> (f64, String) {
    let used: Vec<(String, f64)> = after
        .iter()
        .filter(|(k, _)| k.as_str() != "up")
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .collect();
    let total = used.iter().map(|(_, v)| v).sum();
    let line = used
        .iter()
        .map(|(k, v)| format!("{k} {v:.1} s"))
        .collect::<Vec<_>>()
        .join(", ");
    (total, line)
}

/// The PreviewEvents the webhook recorded in `home`, created again under new names, `at_once`
/// at a time (all at once when `at_once` is their number), in a namespace of their own that no
/// Sandcastle watches: how long each create took. The floor under the webhook's answer.
pub async fn records_alone(client: &Client, home: &str, at_once: usize) -> Vec<Duration> {
    let recorded = Api::<PreviewEvent>::namespaced(client.clone(), home)
        .list(&ListParams::default())
        .await
        .expect("the records are listed");
    let ns = super::unique("burst-records");
    sandcastle_demo::stage::ensure_namespace(client, &ns)
        .await
        .expect("a namespace for the copies");
    let api = Api::<PreviewEvent>::namespaced(client.clone(), &ns);
    futures::stream::iter(recorded.items)
        .map(|r| {
            let api = api.clone();
            let copy = PreviewEvent::new(&format!("copy-{}", r.name_any()), r.spec);
            async move {
                let sent = Instant::now();
                api.create(&PostParams::default(), &copy)
                    .await
                    .expect("created");
                sent.elapsed()
            }
        })
        .buffer_unordered(at_once.max(1))
        .collect()
        .await
}

/// kube-apiserver's request counts so far, by verb and resource (every code).
pub async fn api_requests_by(client: &Client) -> BTreeMap<String, f64> {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.expect("apiserver metrics");
    let mut by = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix("=\""))
                .map_or("", |v| v.trim_end_matches('"'))
        };
        let sub = label("subresource");
        let key = format!(
            "{} {}{}{}",
            label("verb"),
            label("resource"),
            if sub.is_empty() { "" } else { "/" },
            sub
        );
        *by.entry(key).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    by
}

/// The requests made between two counts, most first.
pub fn made_between(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> Vec<(String, f64)> {
    let mut made: Vec<(String, f64)> = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect();
    made.sort_by(|a, b| b.1.total_cmp(&a.1));
    made
}

/// A CPU profile of kube-apiserver over the next seconds (Go's pprof, served to the admin by
/// default), written to `$SANDCASTLE_BENCH_PROFILE/LABEL.pb.gz` when that is set
/// (`SANDCASTLE_BENCH_PROFILE_SECONDS`, default 12): where the control plane's time went on
/// each side, for `go tool pprof -top`. `None` when not asked for.
pub fn profile(client: &Client, label: &str) -> Option<tokio::task::JoinHandle<()>> {
    let dir = std::path::PathBuf::from(std::env::var_os("SANDCASTLE_BENCH_PROFILE")?);
    let seconds: u64 = std::env::var("SANDCASTLE_BENCH_PROFILE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let (client, path) = (client.clone(), dir.join(format!("{label}.pb.gz")));
    Some(tokio::spawn(async move {
        use futures::AsyncReadExt;
        let uri = format!("/debug/pprof/profile?seconds={seconds}");
        let req = http::Request::get(uri).body(Vec::new()).unwrap();
        let mut body = Vec::new();
        let mut stream = client.request_stream(req).await.expect("apiserver profile");
        stream.read_to_end(&mut body).await.expect("profile read");
        std::fs::create_dir_all(&dir).expect("profile directory");
        std::fs::write(&path, body).expect("profile written");
        println!("kube-apiserver profile: {}", path.display());
    }))
}
