//! Sandcastle's Prometheus metrics: [`Metrics`] owns the registry and every family and encodes
//! them for `GET /metrics`. One is made per process (in `app::start`); its parts go to those who
//! count: [`WebhookMetrics`] to the webhook handler, [`GitHubMetrics`] to the GitHub App client,
//! [`ControllerMetrics`] to the controller. Parts made on their own (`Default`) count into
//! families no registry shows, which is what a client or controller built outside `app::start`
//! (tests, examples) gets.

use std::borrow::Cow;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::FutureExt;
use http::{Method, StatusCode};
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use sandcastle_crd::{Phase, PreviewEnvironment};

mod clusters;
pub use clusters::ClusterMetrics;

/// The OpenMetrics text format, for scrapers that ask for it.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The classic Prometheus text format, for everyone else (`curl`, older scrapers).
pub const PROMETHEUS_CONTENT_TYPE: &str =
    prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Every metric of one Sandcastle process. Cheap to clone: clones share the registry and the
/// families.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    pub webhook: WebhookMetrics,
    pub github: GitHubMetrics,
    pub controller: ControllerMetrics,
    pub clusters: ClusterMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let webhook = WebhookMetrics::default();
        let github = GitHubMetrics::default();
        let controller = ControllerMetrics::default();
        let clusters = ClusterMetrics::default();
        let mut r = Registry::with_prefix("sandcastle");
        r.register(
            "webhook_deliveries",
            "Deliveries to POST /github/webhook by event and result: the JSON status of the answer, or its error code",
            webhook.deliveries.clone(),
        );
        r.register_with_unit(
            "webhook_duration",
            "Time the webhook handler took for a delivery, from headers to answer",
            Unit::Seconds,
            webhook.duration.clone(),
        );
        r.register(
            "github_requests",
            "Requests to GitHub's API by method and status: the HTTP status, or timeout or error when none came (installation tokens are counted only when minting one fails)",
            github.requests.clone(),
        );
        r.register(
            "github_rate_limit_waits",
            "Times a GitHub call waited for a rate limit before trying again",
            github.rate_limit_waits.clone(),
        );
        r.register(
            "reconciles",
            "Reconciles of PreviewEnvironments by result (ok or error)",
            controller.reconciles.clone(),
        );
        r.register_with_unit(
            "reconcile_duration",
            "Time one reconcile of a PreviewEnvironment took",
            Unit::Seconds,
            controller.reconcile_duration.clone(),
        );
        r.register_collector(Box::new(controller.previews.clone()));
        r.register(
            "cluster_reachable",
            "Whether each registered cluster's API answered at its last check (1) or not (0)",
            clusters.reachable.clone(),
        );
        r.register(
            "cluster_placements",
            "Previews placed in each cluster (in-cluster: Sandcastle's own) by the replica running the controller",
            clusters.placements.clone(),
        );
        Self {
            registry: Arc::new(r),
            webhook,
            github,
            controller,
            clusters,
        }
    }
}

impl Metrics {
    /// The exposition and its content type: OpenMetrics when the scraper's `Accept` header asks
    /// for it (Prometheus does), the classic Prometheus text format otherwise.
    pub fn encode(&self, accept: Option<&str>) -> Result<(&'static str, String), std::fmt::Error> {
        let mut out = String::new();
        if accepts_openmetrics(accept) {
            prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
            Ok((OPENMETRICS_CONTENT_TYPE, out))
        } else {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?;
            Ok((PROMETHEUS_CONTENT_TYPE, out))
        }
    }
}

/// Whether an `Accept` header lists the OpenMetrics text format (with a non-zero quality).
fn accepts_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|accept| {
        accept.split(',').any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
        })
    })
}

/// Histogram buckets (seconds) from 1 ms to 60 s: a delivery takes milliseconds, a reconcile
/// that applies a blueprint seconds.
const SECONDS_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

fn seconds_histogram() -> Histogram {
    Histogram::new(SECONDS_BUCKETS)
}

// --- the webhook -------------------------------------------------------------------------------

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeliveryLabels {
    event: &'static str,
    result: Cow<'static, str>,
}

/// What the webhook handler counts.
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    deliveries: Family<DeliveryLabels, Counter>,
    duration: Histogram,
}

impl Default for WebhookMetrics {
    fn default() -> Self {
        Self {
            deliveries: Family::default(),
            duration: seconds_histogram(),
        }
    }
}

impl WebhookMetrics {
    /// One delivery answered: `event` is its `X-GitHub-Event` header, `result` the JSON status of
    /// the answer (`accepted`, `duplicate`, `ignored`, ...) or the code of the error.
    pub fn delivered(&self, event: Option<&str>, result: Cow<'static, str>, took: Duration) {
        let labels = DeliveryLabels {
            event: event_label(event),
            result,
        };
        self.deliveries.get_or_create(&labels).inc();
        self.duration.observe(took.as_secs_f64());
    }
}

/// The `event` label: the events Sandcastle reads (`github::event::parse`), or `other`. The
/// header is read before the signature is checked, so anyone could make up new values.
fn event_label(event: Option<&str>) -> &'static str {
    match event {
        Some("pull_request") => "pull_request",
        Some("issue_comment") => "issue_comment",
        Some("check_run") => "check_run",
        Some("installation") => "installation",
        Some("installation_repositories") => "installation_repositories",
        Some("ping") => "ping",
        _ => "other",
    }
}

// --- the GitHub App client ---------------------------------------------------------------------

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    status: Cow<'static, str>,
}

/// How one request to GitHub ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Status(StatusCode),
    /// No answer within the per-attempt timeout.
    Timeout,
    /// The connection failed before a full answer arrived.
    Error,
}

/// What the GitHub App client counts.
#[derive(Clone, Debug, Default)]
pub struct GitHubMetrics {
    requests: Family<RequestLabels, Counter>,
    rate_limit_waits: Counter,
}

impl GitHubMetrics {
    /// One request sent to GitHub (each retry is a request of its own).
    pub fn requested(&self, method: &Method, answer: Answer) {
        let status = match answer {
            Answer::Status(s) => Cow::Owned(s.as_str().to_owned()),
            Answer::Timeout => Cow::Borrowed("timeout"),
            Answer::Error => Cow::Borrowed("error"),
        };
        let labels = RequestLabels {
            method: method_label(method),
            status,
        };
        self.requests.get_or_create(&labels).inc();
    }

    /// A call is about to wait for a rate limit.
    pub fn rate_limit_wait(&self) {
        self.rate_limit_waits.inc();
    }
}

fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        _ => "other",
    }
}

// --- the controller ----------------------------------------------------------------------------

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// What the controller counts, and the previews it sees.
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    reconciles: Family<ResultLabel, Counter>,
    reconcile_duration: Histogram,
    /// `previews{phase}`, from the controller's cache while it runs.
    pub previews: PreviewCount,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        Self {
            reconciles: Family::default(),
            reconcile_duration: seconds_histogram(),
            previews: PreviewCount::default(),
        }
    }
}

impl ControllerMetrics {
    /// One reconcile finished.
    pub fn reconciled(&self, ok: bool, took: Duration) {
        let result = if ok { "ok" } else { "error" };
        self.reconciles.get_or_create(&ResultLabel { result }).inc();
        self.reconcile_duration.observe(took.as_secs_f64());
    }
}

/// The controller's cache of PreviewEnvironments and its clock, while it runs.
type Slot = Arc<RwLock<Option<(Store<PreviewEnvironment>, Now)>>>;

/// The controller's clock (tests move it), as metrics read it.
pub type Now = Arc<dyn Fn() -> jiff::Timestamp + Send + Sync>;

/// Counted at each scrape from the controller's cache of PreviewEnvironments: the
/// `previews{phase}` gauge, and `environment_seconds{blueprint,author_class}`, the running time of previews
/// (the stretches this process saw end, [`PreviewCount::ended`], plus those under way). Only
/// the replica running the controller (the leader) has that cache; the others, and the leader
/// until its cache is first filled, leave both out. The seconds start again from the stretches
/// under way when another replica takes over (a counter reset, as after a restart).
#[derive(Clone, Default)]
pub struct PreviewCount {
    store: Slot,
    ended: Arc<std::sync::Mutex<std::collections::BTreeMap<(String, &'static str), u64>>>,
}

/// The `author_class` label of a preview's class: the Blueprint's `authors` field (`members`,
/// `agents`, ...), or `none` for previews without one (sandboxes made through the API).
pub fn class_label(class: Option<sandcastle_crd::AuthorClass>) -> &'static str {
    class.map_or("none", sandcastle_crd::AuthorClass::field)
}

/// The `author_class` label of a preview: its class, or `pool` for a warm pool's preview not
/// claimed yet (its environment-hours are the pool's, counted apart).
pub fn preview_class(pe: &sandcastle_crd::PreviewEnvironment) -> &'static str {
    use kube::ResourceExt as _;
    if pe.labels().contains_key(sandcastle_crd::labels::POOL) {
        "pool"
    } else {
        class_label(pe.spec.author_class)
    }
}

impl std::fmt::Debug for PreviewCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let watching = self.store.read().map(|s| s.is_some()).unwrap_or(false);
        f.debug_struct("PreviewCount")
            .field("watching", &watching)
            .finish()
    }
}

/// Counting from a cache; dropping it stops (the controller stopped).
#[must_use = "the previews are counted only while this is kept"]
#[derive(Debug)]
pub struct Counting(PreviewCount);

impl Drop for Counting {
    fn drop(&mut self) {
        *self.0.store.write().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

impl PreviewCount {
    /// Count the previews of `store` at each scrape, as of `now`, until the returned guard is
    /// dropped.
    pub fn count_from(&self, store: Store<PreviewEnvironment>, now: Now) -> Counting {
        *self.store.write().unwrap_or_else(|p| p.into_inner()) = Some((store, now));
        Counting(self.clone())
    }

    /// A running stretch of `seconds` of a preview of `blueprint` and author class `class`
    /// ([`class_label`]) ended (stopped, torn down).
    pub fn ended(&self, blueprint: &str, class: &'static str, seconds: u64) {
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        *ended.entry((blueprint.to_owned(), class)).or_default() += seconds;
    }

    /// The cache's previews and the time, or `None` without a filled cache.
    fn cached(&self) -> Option<(Vec<Arc<PreviewEnvironment>>, jiff::Timestamp)> {
        let (store, now) = self
            .store
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        // Not filled yet: an empty cache would read as "no previews".
        if !matches!(store.wait_until_ready().now_or_never(), Some(Ok(()))) {
            return None;
        }
        Some((store.state(), now()))
    }

    /// Running seconds per Blueprint and author class: the stretches ended here, and those
    /// under way in `previews`.
    fn running_seconds(
        &self,
        previews: &[Arc<PreviewEnvironment>],
        now: jiff::Timestamp,
    ) -> std::collections::BTreeMap<(String, &'static str), u64> {
        let mut out = self.ended.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for p in previews {
            let since = p
                .status
                .as_ref()
                .and_then(|s| s.running.as_ref()?.since.as_ref());
            let under_way = since.map_or(0, |t| {
                u64::try_from(now.duration_since(t.0).as_secs()).unwrap_or(0)
            });
            let key = (p.spec.blueprint.clone(), preview_class(p));
            *out.entry(key).or_default() += under_way;
        }
        out
    }
}

impl Collector for PreviewCount {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some((previews, now)) = self.cached() else {
            return Ok(());
        };
        let counts = count_phases(
            previews
                .iter()
                .map(|p| p.status.as_ref().and_then(|s| s.phase)),
        );
        let mut family = encoder.encode_descriptor(
            "previews",
            // Registered families get their full stop from the registry; this one is written here.
            "PreviewEnvironments by phase (previews not given a phase yet count as Pending); only from the replica running the controller.",
            None,
            MetricType::Gauge,
        )?;
        for (phase, n) in counts {
            let labels = [("phase", phase.as_str())];
            ConstGauge::new(n).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "cluster_previews",
            "Previews each cluster holds (placed, not yet removed; in-cluster: Sandcastle's own); only from the replica running the controller.",
            None,
            MetricType::Gauge,
        )?;
        for (cluster, n) in count_clusters(&previews) {
            let labels = [("cluster", cluster.as_str())];
            ConstGauge::new(n).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "environment_seconds",
            "Running time of previews (namespace made, not stopped or torn down) by Blueprint and author class: environment-hours times 3600; only from the replica running the controller.",
            None,
            MetricType::Counter,
        )?;
        for ((blueprint, class), seconds) in self.running_seconds(&previews, now) {
            let labels = [("blueprint", blueprint.as_str()), ("author_class", class)];
            ConstCounter::new(seconds).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// Previews per cluster: those placed and not removed yet (a preview placed before clusters
/// were recorded, with a namespace, is in Sandcastle's own).
fn count_clusters(previews: &[Arc<PreviewEnvironment>]) -> std::collections::BTreeMap<String, i64> {
    let mut out = std::collections::BTreeMap::new();
    for p in previews {
        let Some(st) = p.status.as_ref() else {
            continue;
        };
        if st.phase == Some(Phase::Removed) {
            continue;
        }
        let cluster = match (&st.cluster, &st.namespace) {
            (Some(c), _) => c.clone(),
            (None, Some(_)) => sandcastle_crd::IN_CLUSTER.to_owned(),
            (None, None) => continue,
        };
        *out.entry(cluster).or_default() += 1;
    }
    out
}

/// Every phase, each reported even when no preview is in it.
const PHASES: [Phase; 7] = Phase::ALL;

/// The position of `phase` in [`PHASES`]; a new phase does not compile until it is listed.
fn slot(phase: Phase) -> usize {
    match phase {
        Phase::Pending => 0,
        Phase::Deploying => 1,
        Phase::Ready => 2,
        Phase::Stopped => 3,
        Phase::Failed => 4,
        Phase::Terminating => 5,
        Phase::Removed => 6,
    }
}

fn count_phases(phases: impl IntoIterator<Item = Option<Phase>>) -> [(Phase, i64); PHASES.len()] {
    let mut out = PHASES.map(|p| (p, 0));
    for phase in phases {
        out[slot(phase.unwrap_or(Phase::Pending))].1 += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_is_served_to_whoever_asks_for_it() {
        let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        #[rustfmt::skip]
        let cases = [
            (Some(prometheus), true),
            (Some("application/OpenMetrics-Text"), true),
            (Some("text/plain, application/openmetrics-text; q=0"), false),
            (Some("text/plain;version=0.0.4"), false),
            (Some("*/*"), false),
            (None, false),
        ];
        for (accept, want) in cases {
            assert_eq!(accepts_openmetrics(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn labels_stay_few() {
        assert_eq!(event_label(Some("pull_request")), "pull_request");
        assert_eq!(event_label(Some("check_run")), "check_run");
        assert_eq!(event_label(Some("push")), "other");
        assert_eq!(event_label(Some("made-up-by-anyone")), "other");
        assert_eq!(event_label(None), "other");
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        assert_eq!(method_label(&Method::OPTIONS), "other");
    }

    #[test]
    fn phases_are_counted_with_zeros_and_unphased_as_pending() {
        let counts = count_phases([
            Some(Phase::Ready),
            None,
            Some(Phase::Ready),
            Some(Phase::Pending),
        ]);
        assert_eq!(counts.len(), PHASES.len());
        for (i, p) in PHASES.iter().enumerate() {
            assert_eq!(slot(*p), i);
        }
        let get = |phase| counts.iter().find(|(p, _)| *p == phase).unwrap().1;
        assert_eq!(get(Phase::Ready), 2);
        assert_eq!(get(Phase::Pending), 2);
        assert_eq!(get(Phase::Failed), 0);
    }

    #[test]
    fn every_family_is_exposed_with_its_labels() {
        let m = Metrics::default();
        m.webhook.delivered(
            Some("pull_request"),
            "signature_mismatch".into(),
            Duration::from_millis(3),
        );
        m.webhook.delivered(
            Some("pull_request"),
            "accepted".into(),
            Duration::from_millis(30),
        );
        m.github
            .requested(&Method::GET, Answer::Status(StatusCode::NOT_FOUND));
        m.github.requested(&Method::POST, Answer::Timeout);
        m.github.rate_limit_wait();
        m.controller.reconciled(true, Duration::from_millis(200));
        m.controller.reconciled(false, Duration::from_secs(2));

        let (content_type, text) = m.encode(Some("application/openmetrics-text")).unwrap();
        assert_eq!(content_type, OPENMETRICS_CONTENT_TYPE);
        assert!(text.ends_with("# EOF\n"), "{text}");
        for want in [
            r#"sandcastle_webhook_deliveries_total{event="pull_request",result="accepted"} 1"#,
            r#"sandcastle_webhook_deliveries_total{event="pull_request",result="signature_mismatch"} 1"#,
            "# UNIT sandcastle_webhook_duration_seconds seconds",
            "sandcastle_webhook_duration_seconds_count 2",
            r#"sandcastle_webhook_duration_seconds_bucket{le="0.005"} 1"#,
            r#"sandcastle_github_requests_total{method="GET",status="404"} 1"#,
            r#"sandcastle_github_requests_total{method="POST",status="timeout"} 1"#,
            "sandcastle_github_rate_limit_waits_total 1",
            r#"sandcastle_reconciles_total{result="ok"} 1"#,
            r#"sandcastle_reconciles_total{result="error"} 1"#,
            "sandcastle_reconcile_duration_seconds_count 2",
        ] {
            assert!(text.lines().any(|l| l == want), "no {want:?} in\n{text}");
        }
        // No controller cache here: the gauge is left out.
        assert!(!text.contains("sandcastle_previews"), "{text}");

        let (content_type, classic) = m.encode(None).unwrap();
        assert_eq!(content_type, PROMETHEUS_CONTENT_TYPE);
        assert!(
            classic.lines().any(|l| l
                == r#"sandcastle_webhook_deliveries_total{event="pull_request",result="accepted"} 1"#),
            "{classic}"
        );
        assert!(!classic.contains("# EOF"), "{classic}");
    }

    #[test]
    fn a_pools_previews_are_counted_as_the_pools() {
        use kube::ResourceExt as _;
        let mut pe = preview("shop-pool-1", Some(Phase::Ready));
        assert_eq!(preview_class(&pe), "none");
        pe.labels_mut()
            .insert(sandcastle_crd::labels::POOL.to_owned(), "shop".to_owned());
        assert_eq!(preview_class(&pe), "pool");
    }

    fn preview(name: &str, phase: Option<Phase>) -> PreviewEnvironment {
        let mut pe: PreviewEnvironment = serde_json::from_value(serde_json::json!({
            "apiVersion": "sandcastle.dev/v1alpha1",
            "kind": "PreviewEnvironment",
            "metadata": {"name": name, "namespace": "sandcastle"},
            "spec": {
                "blueprint": "shop", "repository": "acme/shop", "ref": "feature",
                "sha": "abc1234def5678abc1234def5678abc1234def56",
                "requestedBy": {"kind": "github-user", "name": "octocat"},
            },
        }))
        .unwrap();
        pe.status = Some(sandcastle_crd::PreviewStatus {
            phase,
            ..Default::default()
        });
        pe
    }

    #[test]
    fn previews_are_counted_from_the_controller_cache_while_it_runs() {
        use kube::runtime::{reflector, watcher::Event};
        let m = Metrics::default();
        let gauge = |m: &Metrics| {
            let (_, text) = m.encode(None).unwrap();
            text.lines()
                .filter(|l| l.starts_with("sandcastle_previews"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        let (store, mut writer) = reflector::store::<PreviewEnvironment>();
        let noon: Now = Arc::new(|| "2026-12-01T12:00:00Z".parse().unwrap());
        let counting = m.controller.previews.count_from(store, noon);
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(preview("a", Some(Phase::Ready))));
        assert!(gauge(&m).is_empty(), "left out until the cache is filled");
        writer.apply_watcher_event(&Event::InitApply(preview("b", Some(Phase::Ready))));
        writer.apply_watcher_event(&Event::InitApply(preview("c", None)));
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(
            gauge(&m),
            [
                r#"sandcastle_previews{phase="Pending"} 1"#,
                r#"sandcastle_previews{phase="Deploying"} 0"#,
                r#"sandcastle_previews{phase="Ready"} 2"#,
                r#"sandcastle_previews{phase="Stopped"} 0"#,
                r#"sandcastle_previews{phase="Failed"} 0"#,
                r#"sandcastle_previews{phase="Terminating"} 0"#,
                r#"sandcastle_previews{phase="Removed"} 0"#,
            ]
        );
        drop(counting);
        assert!(gauge(&m).is_empty(), "left out once the controller stops");
    }

    #[test]
    fn running_time_is_what_ended_plus_what_is_under_way() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        use kube::runtime::{reflector, watcher::Event};
        let m = Metrics::default();
        let seconds = |m: &Metrics| {
            let (_, text) = m.encode(None).unwrap();
            text.lines()
                .filter(|l| l.starts_with("sandcastle_environment_seconds"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        let (store, mut writer) = reflector::store::<PreviewEnvironment>();
        let noon: Now = Arc::new(|| "2026-12-01T12:00:00Z".parse().unwrap());
        let _counting = m.controller.previews.count_from(store, noon);
        let mut running = preview("a", Some(Phase::Ready));
        running.status.as_mut().unwrap().running = Some(sandcastle_crd::RunningTime {
            seconds: 100,
            since: Some(Time("2026-12-01T11:30:00Z".parse().unwrap())),
        });
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(running));
        writer.apply_watcher_event(&Event::InitApply(preview("b", None)));
        writer.apply_watcher_event(&Event::InitDone);
        m.controller.previews.ended("shop", "none", 60);
        m.controller.previews.ended("web", "agents", 7);
        assert_eq!(
            seconds(&m),
            [
                r#"sandcastle_environment_seconds_total{blueprint="shop",author_class="none"} 1860"#,
                r#"sandcastle_environment_seconds_total{blueprint="web",author_class="agents"} 7"#,
            ],
            "ended 60 s plus 30 min under way (the 100 s a preview's status holds ended before: \
             counted when they ended)"
        );
    }

    #[test]
    fn parts_made_alone_count_where_no_registry_shows() {
        let m = Metrics::default();
        GitHubMetrics::default().requested(&Method::GET, Answer::Error);
        let (_, text) = m.encode(None).unwrap();
        assert!(!text.contains("status=\"error\""), "{text}");
    }
}
