//! Watching a preview without polling: wait until it is Ready (or Failed, Stopped, Removed) or a
//! timeout passes; read its workloads' logs (bounded in lines and bytes, with the values of the
//! namespace's Secrets and token-shaped strings redacted); and its Events, Sandcastle's and the
//! namespace's. The namespace's are read in the cluster the preview lives in.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, LogParams};
use kube::runtime::wait::await_condition;
use kube::{Client, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{Agent, AgentError, Caller, Operation, PreviewView, view};
use sandcastle_crd::labels::{REDEPLOY, RESET};
use sandcastle_crd::{Phase, PreviewEnvironment};
use sandcastle_domain::quote::short;
use sandcastle_domain::{naming, redact::Redactor};

/// What to wait for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema, JsonSchema, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum WaitFor {
    /// Ready — or Failed, which will not become Ready by waiting. A preview asked to stop is
    /// not Ready for a wait, even while its visitors are routed away before its pods stop.
    #[default]
    Ready,
    Stopped,
    /// Torn down (Removed) or gone.
    Removed,
    /// The result of the test `test` names: of the run answering the last request for it, or
    /// (for a test run after each rollout) of the run after the current rollout.
    Test,
}

/// `GET /previews/{name}/wait`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, IntoParams, JsonSchema)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// What to wait for (default `ready`: Ready or Failed; `test` when `test` is given). With
    /// `for=test` and no `test`, every one of the Blueprint's tests: failed as soon as one
    /// fails, passed once all passed.
    #[serde(rename = "for", default)]
    #[param(rename = "for", inline)]
    pub wanted: Option<WaitFor>,
    /// How long at most (`30s`, `5m`; default `5m`); a longer one waits the server's
    /// `--api-max-wait` (`10m` unless configured), then answers `timeout`.
    #[param(pattern = r"^(0|([0-9]+[hmsHMS])+)$", max_length = 12)]
    #[schemars(regex(pattern = r"^(0|([0-9]+[hmsHMS])+)$"), length(max = 12))]
    pub timeout: Option<String>,
    /// The test to wait for (one of the Blueprint's `tests`): with `for=test`, or with no `for`
    /// at all; with another `for`, it is not looked at.
    pub test: Option<String>,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WaitOutcome {
    Ready,
    Failed,
    Stopped,
    Removed,
    /// `for=test`: the test's run succeeded (or every test's, without `test`; a failed,
    /// timed-out or cancelled run, or a failed preview, is `failed`).
    Passed,
    /// The timeout passed first.
    Timeout,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
pub struct WaitResult {
    pub outcome: WaitOutcome,
    /// The preview as it was when the wait ended (absent once it is gone).
    pub preview: Option<PreviewView>,
    /// `for=test`: the test's last run as it was when the wait ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<super::TestRunView>,
}

fn outcome(pe: Option<&PreviewEnvironment>, wanted: WaitFor) -> Option<WaitOutcome> {
    // Gone (deleted, or a tombstone past its retention): nothing more will happen to it.
    let Some(pe) = pe else {
        return Some(WaitOutcome::Removed);
    };
    let phase = pe.status.as_ref().and_then(|s| s.phase);
    let current = is_current(pe) || phase == Some(Phase::Removed);
    match (wanted, phase) {
        (_, Some(Phase::Removed)) => Some(WaitOutcome::Removed),
        // Asked to stop: Ready is the state before the write (routes are parked and drained
        // first, under phase Ready).
        (WaitFor::Ready, Some(Phase::Ready)) if current && !pe.spec.stopped => {
            Some(WaitOutcome::Ready)
        }
        (WaitFor::Ready, Some(Phase::Failed)) if current => Some(WaitOutcome::Failed),
        (WaitFor::Stopped, Some(Phase::Stopped)) if current => Some(WaitOutcome::Stopped),
        _ => None,
    }
}

/// The outcome of waiting for several tests: removed or failed as soon as one says so, passed
/// once every one passed, else not over.
fn tests_outcome(each: &[Option<super::test_runs::Waited>]) -> Option<WaitOutcome> {
    use super::test_runs::Waited;
    if each.contains(&Some(Waited::Removed)) {
        return Some(WaitOutcome::Removed);
    }
    if each.contains(&Some(Waited::Failed)) {
        return Some(WaitOutcome::Failed);
    }
    each.iter()
        .all(|w| *w == Some(Waited::Passed))
        .then_some(WaitOutcome::Passed)
}

/// Whether `pe`'s status has taken in every write made to it: the spec's last change
/// (`observedGeneration`), and the requests kept in annotations — a redeploy of the same commit
/// and a reset — which leave the generation as it was. A status from before a write says
/// nothing about it.
fn is_current(pe: &PreviewEnvironment) -> bool {
    let Some(st) = pe.status.as_ref() else {
        return false;
    };
    let generation = st
        .observed_generation
        .is_none_or(|g| Some(g) >= pe.metadata.generation);
    let annotations = pe.annotations();
    let redeploy = annotations
        .get(REDEPLOY)
        .is_none_or(|t| st.observed_redeploy.as_ref() == Some(t));
    let reset = annotations
        .get(RESET)
        .is_none_or(|t| st.reset_done.as_ref() == Some(t));
    generation && redeploy && reset
}

/// Which logs to read.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, IntoParams, ToSchema, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct LogQuery {
    /// A Deployment, StatefulSet, ReplicaSet or Job of the preview; all pods when absent.
    pub workload: Option<String>,
    pub container: Option<String>,
    /// The last this many lines of each container (default 200).
    #[param(value_type = Option<u64>, maximum = 4_294_967_295_u64)]
    #[schema(value_type = Option<u64>, maximum = 4_294_967_295_u64)]
    pub tail_lines: Option<u32>,
    /// Only lines newer than this (`10m`, `1h`; at least `1s`).
    #[param(
        pattern = r"^([0-9]+[wdhmsWDHMS])*[0-9]*[1-9][0-9]*[wdhmsWDHMS]([0-9]+[wdhmsWDHMS])*$",
        max_length = 12
    )]
    #[schema(
        pattern = r"^([0-9]+[wdhmsWDHMS])*[0-9]*[1-9][0-9]*[wdhmsWDHMS]([0-9]+[wdhmsWDHMS])*$",
        max_length = 12
    )]
    #[schemars(
        regex(
            pattern = r"^([0-9]+[wdhmsWDHMS])*[0-9]*[1-9][0-9]*[wdhmsWDHMS]([0-9]+[wdhmsWDHMS])*$"
        ),
        length(max = 12)
    )]
    pub since: Option<String>,
    /// The container's previous run (after a crash).
    pub previous: Option<bool>,
}

/// Log lines, by pod and container.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogLines {
    pub entries: Vec<LogEntry>,
    /// How many pods were read (the preview's, or `workload`'s): with no entries, pods that
    /// have written nothing yet, or none at all.
    #[serde(default)]
    pub pods: u32,
    /// Cut at the line or byte bound.
    pub truncated: bool,
    /// How many values were redacted.
    pub redacted: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
pub struct LogEntry {
    pub pod: String,
    pub container: String,
    pub lines: Vec<String>,
    /// Why this container's lines could not be had (its node did not give them); the other
    /// containers' lines are still there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// A preview's Events: Sandcastle's on the PreviewEnvironment, the namespace's own.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
pub struct EventsView {
    pub preview: Vec<EventView>,
    pub namespace: Vec<EventView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub time: Option<String>,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub reason: Option<String>,
    pub note: Option<String>,
    /// `Kind/name` the Event is about.
    pub object: String,
}

/// What the API server said when it could not get a container's logs from its node, on one
/// line and at most 200 characters.
fn unavailable_reason(code: u16, message: &str) -> String {
    let one_line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = one_line.chars().take(200).collect();
    let more = if cut.len() < one_line.len() {
        "…"
    } else {
        ""
    };
    format!("the node did not give these logs ({code}): {cut}{more}")
}

/// `since` as the seconds Kubernetes takes, which must be at least one (it refuses
/// `sinceSeconds=0`, and a 503 would blame the cluster for the caller's field).
fn log_window(since: &str) -> Result<i64, AgentError> {
    let d = super::error::api_duration("since", since, true)?;
    if d.as_secs() == 0 {
        return Err(AgentError::invalid(
            "invalid_duration",
            "since",
            format!("{} is no time at all; give at least 1s", short(since)),
        ));
    }
    Ok(i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn unknown_workload(w: &str) -> AgentError {
    AgentError::invalid(
        "unknown_workload",
        "workload",
        format!(
            "the preview has no Deployment, StatefulSet, ReplicaSet or Job {}",
            short(w)
        ),
    )
}

/// How long a wait that names no timeout waits.
const DEFAULT_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Events kept per list.
const EVENTS_LIMIT: usize = 200;

fn event_view(e: &Event) -> EventView {
    let time = e.event_time.as_ref().map(|t| t.0.to_string()).or_else(|| {
        e.deprecated_last_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
    });
    let object = e.regarding.as_ref().map_or_else(String::new, |r| {
        format!(
            "{}/{}",
            r.kind.clone().unwrap_or_default(),
            r.name.clone().unwrap_or_default()
        )
    });
    EventView {
        time,
        type_: e.type_.clone(),
        reason: e.reason.clone(),
        note: e.note.clone(),
        object,
    }
}

impl Agent {
    /// Wait until `name` is what `q.wanted` asks (with `for=test`, until test `q.test` has a
    /// result), or `q.timeout` (at most the configured bound; by default five minutes, or the
    /// bound when it is shorter).
    pub async fn wait(
        &self,
        caller: &Caller,
        name: &str,
        q: &WaitQuery,
    ) -> Result<WaitResult, AgentError> {
        let wanted = q.wanted.unwrap_or(if q.test.is_some() {
            WaitFor::Test
        } else {
            WaitFor::Ready
        });
        let pe = self.authorized(caller, Operation::Wait, name).await?;
        let tests = match (wanted, q.test.as_deref()) {
            (WaitFor::Test, Some(t)) => vec![self.test_of(&pe, t).await?],
            (WaitFor::Test, None) => self.all_tests_of(&pe).await?,
            (_, _) => Vec::new(),
        };
        // Waiting is bounded by the server: a longer timeout waits that long, then says so.
        let timeout = match q.timeout.as_deref() {
            Some(t) => super::error::api_duration("timeout", t, false)?,
            None => DEFAULT_WAIT,
        }
        .min(self.limits.wait);
        self.read_activity(&pe, Some(caller.via));
        let ended = move |p: Option<&PreviewEnvironment>| {
            if tests.is_empty() {
                return outcome(p, wanted);
            }
            let each: Vec<_> = tests
                .iter()
                .map(|t| super::test_runs::outcome(p, is_current, &t.name, t.run_on))
                .collect();
            tests_outcome(&each)
        };
        let done = {
            let ended = ended.clone();
            move |p: Option<&PreviewEnvironment>| ended(p).is_some()
        };
        let waited = tokio::time::timeout(timeout, await_condition(self.api(), name, done)).await;
        let last = match waited {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => {
                tracing::warn!(preview = name, error = %e, "waiting on a preview failed");
                self.api().get_opt(name).await?
            }
            Err(_) => self.api().get_opt(name).await?,
        };
        let result = ended(last.as_ref()).unwrap_or(WaitOutcome::Timeout);
        let test = q.test.as_deref().and_then(|t| {
            let st = last.as_ref()?.status.as_ref()?;
            super::test_runs::views(st)
                .into_iter()
                .find(|v| v.name == t)
        });
        Ok(WaitResult {
            outcome: result,
            preview: last.as_ref().map(|p| self.view(p)),
            test,
        })
    }

    /// The logs of `name`'s workloads, bounded and redacted.
    pub async fn logs(
        &self,
        caller: &Caller,
        name: &str,
        q: &LogQuery,
    ) -> Result<LogLines, AgentError> {
        let pe = self.authorized(caller, Operation::Logs, name).await?;
        self.read_activity(&pe, Some(caller.via));
        let ns = view::namespace_of(&pe, &self.addresses.namespace_prefix);
        let since = q.since.as_deref().map(log_window).transpose()?;
        let tail = q.tail_lines.unwrap_or(200).clamp(1, self.limits.log_lines);
        let cluster = self.cluster_of(&pe)?;
        let client = cluster.client();
        // `workload=` (empty) asks for no workload in particular, as leaving it out does.
        let workload = q.workload.as_deref().filter(|w| !w.is_empty());
        let pods = pods_of(client, &ns, workload).await?;
        let redactor = Redactor::new(sandcastle_kube::diagnose::secret_values(client, &ns).await?);
        let mut out = LogLines {
            entries: Vec::new(),
            pods: u32::try_from(pods.len()).unwrap_or(u32::MAX),
            truncated: false,
            redacted: 0,
        };
        let (mut lines_left, mut bytes_left) = (
            self.limits.log_lines as usize,
            self.limits.log_bytes as usize,
        );
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        'pods: for pod in pods {
            // `container=` (empty) asks for no container in particular, as leaving it out does.
            let containers: Vec<String> = match q.container.as_ref().filter(|c| !c.is_empty()) {
                Some(c) => vec![c.clone()],
                None => pod
                    .spec
                    .as_ref()
                    .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
                    .unwrap_or_default(),
            };
            for container in containers {
                let params = LogParams {
                    container: Some(container.clone()),
                    tail_lines: Some(i64::from(tail)),
                    since_seconds: since,
                    limit_bytes: Some(i64::try_from(bytes_left).unwrap_or(i64::MAX).max(1)),
                    previous: q.previous.unwrap_or(false),
                    ..LogParams::default()
                };
                let text = match api.logs(&pod.name_any(), &params).await {
                    Ok(t) => t,
                    Err(kube::Error::Api(r)) if r.code == 400 || r.code == 404 => {
                        // No such container, or not started yet: nothing to show.
                        continue;
                    }
                    Err(kube::Error::Api(r)) if r.code >= 500 => {
                        // The API server could not get them from the pod's node (kubelet down,
                        // node gone): say so for this container, and go on with the others.
                        out.entries.push(LogEntry {
                            pod: pod.name_any(),
                            container,
                            lines: Vec::new(),
                            unavailable: Some(unavailable_reason(r.code, &r.message)),
                        });
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                let mut lines = Vec::new();
                for line in text.lines() {
                    if lines_left == 0 || bytes_left < line.len() + 1 {
                        out.truncated = true;
                        if !lines.is_empty() {
                            out.entries.push(LogEntry {
                                pod: pod.name_any(),
                                container: container.clone(),
                                lines,
                                unavailable: None,
                            });
                        }
                        break 'pods;
                    }
                    let (clean, n) = redactor.redact(line);
                    out.redacted += n;
                    lines_left -= 1;
                    bytes_left -= line.len() + 1;
                    lines.push(clean);
                }
                out.entries.push(LogEntry {
                    pod: pod.name_any(),
                    container,
                    lines,
                    unavailable: None,
                });
            }
        }
        Ok(out)
    }

    /// Sandcastle's Events on `name`, and the Events in its namespace, newest last.
    pub async fn events(&self, caller: &Caller, name: &str) -> Result<EventsView, AgentError> {
        let pe = self.authorized(caller, Operation::Events, name).await?;
        self.read_activity(&pe, Some(caller.via));
        self.events_of(&pe, true).await
    }

    /// A preview's page: the preview and the Events of its namespace, read once (a preview's
    /// page is what its pull request's "details" link opens). The preview's own Events are left
    /// out: each tells an entry of its history, which the page shows, and picking them out of
    /// every preview's Events cost the most of a page with hundreds of previews.
    pub async fn preview_page(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<(PreviewView, Option<EventsView>), AgentError> {
        let pe = self.authorized(caller, Operation::Get, name).await?;
        self.read_activity(&pe, Some(caller.via));
        let events = match self.also_allowed(caller, Operation::Events, &pe).await {
            // The page shows what it can: Events that cannot be read now are left out.
            Ok(()) => self.events_of(&pe, false).await.ok(),
            Err(AgentError::Forbidden(_)) => None,
            Err(e) => return Err(e),
        };
        Ok((self.view(&pe), events))
    }

    /// The Events of its namespace, and (`own`) those of `pe` itself, both served from the API
    /// server's cache (`resourceVersion=0`).
    async fn events_of(
        &self,
        pe: &PreviewEnvironment,
        own: bool,
    ) -> Result<EventsView, AgentError> {
        let name = pe.name_any();
        let ns = view::namespace_of(pe, &self.addresses.namespace_prefix);
        let mut preview: Vec<EventView> = Vec::new();
        if own {
            let home: Api<Event> = Api::namespaced(self.client.clone(), &self.home);
            let fields = format!("regarding.name={name},regarding.kind=PreviewEnvironment");
            preview = home
                .list(&ListParams::default().fields(&fields).match_any())
                .await?
                .items
                .iter()
                .map(event_view)
                .collect();
        }
        let cluster = self.cluster_of(pe)?;
        let theirs: Api<Event> = Api::namespaced(cluster.client().clone(), &ns);
        let mut namespace: Vec<EventView> =
            match theirs.list(&ListParams::default().match_any()).await {
                Ok(l) => l.items.iter().map(event_view).collect(),
                Err(kube::Error::Api(r)) if r.code == 404 => Vec::new(),
                Err(e) => return Err(e.into()),
            };
        for list in [&mut preview, &mut namespace] {
            list.sort_by(|a, b| a.time.cmp(&b.time));
            let excess = list.len().saturating_sub(EVENTS_LIMIT);
            list.drain(..excess);
        }
        Ok(EventsView { preview, namespace })
    }
}

/// The pods of `workload` in `ns` (all of them without one), by name.
async fn pods_of(
    client: &Client,
    ns: &str,
    workload: Option<&str>,
) -> Result<Vec<Pod>, AgentError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let selector = match workload {
        None => None,
        Some(w) if !naming::is_object_name(w) => return Err(unknown_workload(w)),
        Some(w) => Some(
            selector_of(client, ns, w)
                .await?
                .ok_or_else(|| unknown_workload(w))?,
        ),
    };
    let params = match &selector {
        Some(s) => ListParams::default().labels(s),
        None => ListParams::default(),
    };
    let mut list = pods.list(&params).await?.items;
    list.sort_by_key(ResourceExt::name_any);
    Ok(list)
}

/// The pod selector of workload `name` in `ns`, as a label query.
async fn selector_of(client: &Client, ns: &str, name: &str) -> Result<Option<String>, AgentError> {
    use sandcastle_kube::readiness::selector_query as query;
    let c = || client.clone();
    if let Some(d) = Api::<Deployment>::namespaced(c(), ns).get_opt(name).await? {
        return Ok(query(d.spec.and_then(|s| s.selector.match_labels).as_ref()));
    }
    if let Some(s) = Api::<StatefulSet>::namespaced(c(), ns)
        .get_opt(name)
        .await?
    {
        return Ok(query(s.spec.and_then(|s| s.selector.match_labels).as_ref()));
    }
    if let Some(r) = Api::<ReplicaSet>::namespaced(c(), ns).get_opt(name).await? {
        return Ok(query(r.spec.and_then(|s| s.selector.match_labels).as_ref()));
    }
    if let Some(j) = Api::<Job>::namespaced(c(), ns).get_opt(name).await? {
        return Ok(j
            .metadata
            .uid
            .map(|uid| format!("batch.kubernetes.io/controller-uid={uid}")));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_nodes_refusal_is_said_on_one_short_line() {
        assert_eq!(
            unavailable_reason(
                500,
                "Get \"https://10.0.0.7:10250/containerLogs/ns/p/c\":\n dial tcp: connection refused"
            ),
            "the node did not give these logs (500): Get \"https://10.0.0.7:10250/containerLogs/ns/p/c\": dial tcp: connection refused"
        );
        let long = unavailable_reason(502, &"x".repeat(500));
        assert!(long.ends_with('…') && long.chars().count() < 260, "{long}");
    }

    use super::*;
    use sandcastle_crd::PreviewStatus;

    #[test]
    fn a_log_window_is_whole_seconds_and_never_zero() {
        assert_eq!(log_window("10m"), Ok(600));
        assert_eq!(log_window("1s"), Ok(1));
        for bad in ["0", "0s", "0m", "soon"] {
            let e = log_window(bad).unwrap_err();
            assert_eq!(
                (e.code(), e.field()),
                ("invalid_duration", Some("since")),
                "{bad}"
            );
        }
    }

    fn pe(phase: Phase, generation: i64, observed: i64) -> PreviewEnvironment {
        let mut pe: PreviewEnvironment = serde_json::from_value(serde_json::json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEnvironment",
            "metadata": {"name": "s", "generation": generation},
            "spec": {"blueprint": "shop", "repository": "acme/shop", "ref": "b",
                "sha": "abc1234def5678abc1234def5678abc1234def56",
                "requestedBy": {"kind": "github-user", "name": "octocat"}},
        }))
        .unwrap();
        pe.status = Some(PreviewStatus {
            phase: Some(phase),
            observed_generation: Some(observed),
            ..PreviewStatus::default()
        });
        pe
    }

    #[test]
    fn a_wait_ends_on_what_it_waits_for_and_not_on_an_old_status() {
        let ready = pe(Phase::Ready, 2, 2);
        assert_eq!(
            outcome(Some(&ready), WaitFor::Ready),
            Some(WaitOutcome::Ready)
        );
        assert_eq!(outcome(Some(&ready), WaitFor::Stopped), None);
        // Ready for the spec before the last change: not yet.
        assert_eq!(outcome(Some(&pe(Phase::Ready, 3, 2)), WaitFor::Ready), None);
        assert_eq!(
            outcome(Some(&pe(Phase::Failed, 2, 2)), WaitFor::Ready),
            Some(WaitOutcome::Failed)
        );
        assert_eq!(outcome(None, WaitFor::Removed), Some(WaitOutcome::Removed));
        assert_eq!(outcome(None, WaitFor::Ready), Some(WaitOutcome::Removed));
        assert_eq!(
            outcome(Some(&pe(Phase::Removed, 2, 1)), WaitFor::Ready),
            Some(WaitOutcome::Removed)
        );
    }

    /// A reset or a redeploy of the same commit changes annotations, not the spec: a status
    /// that has not taken them in is from before, whatever its generation says.
    #[test]
    fn a_wait_after_a_reset_or_a_redeploy_ends_only_once_it_is_taken_in() {
        use sandcastle_crd::labels::{REDEPLOY, RESET};
        let mut reset = pe(Phase::Ready, 2, 2);
        reset
            .annotations_mut()
            .insert(RESET.to_owned(), "r2".to_owned());
        reset.status.as_mut().unwrap().reset_done = Some("r1".to_owned());
        assert_eq!(outcome(Some(&reset), WaitFor::Ready), None);
        reset.status.as_mut().unwrap().reset_done = Some("r2".to_owned());
        assert_eq!(
            outcome(Some(&reset), WaitFor::Ready),
            Some(WaitOutcome::Ready)
        );

        let mut redeploy = pe(Phase::Ready, 2, 2);
        redeploy
            .annotations_mut()
            .insert(REDEPLOY.to_owned(), "d1".to_owned());
        assert_eq!(outcome(Some(&redeploy), WaitFor::Ready), None);
        redeploy.status.as_mut().unwrap().observed_redeploy = Some("d1".to_owned());
        assert_eq!(
            outcome(Some(&redeploy), WaitFor::Ready),
            Some(WaitOutcome::Ready)
        );

        // Stopped counts only once the stop is taken in, too.
        assert_eq!(
            outcome(Some(&pe(Phase::Stopped, 3, 2)), WaitFor::Stopped),
            None
        );
    }

    #[test]
    fn a_wait_for_every_test_fails_on_the_first_failure_and_passes_on_the_last_pass() {
        use super::super::test_runs::Waited::{Failed, Passed, Removed};
        assert_eq!(tests_outcome(&[Some(Passed), None]), None);
        assert_eq!(
            tests_outcome(&[None, Some(Failed)]),
            Some(WaitOutcome::Failed)
        );
        assert_eq!(
            tests_outcome(&[Some(Passed), Some(Passed)]),
            Some(WaitOutcome::Passed)
        );
        assert_eq!(
            tests_outcome(&[Some(Failed), Some(Removed)]),
            Some(WaitOutcome::Removed)
        );
    }

    /// A stop is taken in (the generation observed) while the preview is still Ready: its
    /// visitors are routed away before its pods stop. A wait for Ready then is not over.
    #[test]
    fn a_wait_for_ready_after_a_stop_does_not_count_the_ready_from_before() {
        let mut stopping = pe(Phase::Ready, 3, 3);
        stopping.spec.stopped = true;
        assert_eq!(outcome(Some(&stopping), WaitFor::Ready), None);
        assert_eq!(outcome(Some(&stopping), WaitFor::Stopped), None);
        let mut stopped = pe(Phase::Stopped, 3, 3);
        stopped.spec.stopped = true;
        assert_eq!(
            outcome(Some(&stopped), WaitFor::Stopped),
            Some(WaitOutcome::Stopped)
        );
    }
}
