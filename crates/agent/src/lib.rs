//! What agents and people do to previews through Sandcastle's API, MCP server and CLI, once for
//! all three: list and read previews, create a sandbox without a pull request, redeploy, stop,
//! wake, extend, reset, delete, wait for one (or for one of its tests), run one of its tests,
//! read its logs and events, mint a token scoped to it; and a visit to a stopped preview's
//! host, which wakes it. Every other operation
//! authenticates and authorizes its caller first (`auth`: TokenReview and SubjectAccessReview,
//! no user database of our own) and every write is audited three ways that agree: an `audit` log line here, and — through the request the write leaves on the preview —
//! an entry in its status history and a Kubernetes Event, both written by the controller. Like
//! every entry point, these only write desired state; the controller makes it true.

pub mod auth;
mod create;
mod data;
pub mod error;
pub mod gate;
mod observe;
pub mod operation;
pub mod remote;
pub mod sealed;
mod share;
pub mod test_runs;
mod token;
pub mod view;
mod visit;
mod write;

use std::time::Duration;

use jiff::Timestamp;
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

pub use auth::{Authority, Caller, GitHubAccess, TokenClusters, Via};
pub use create::CreatePreview;
pub use data::{DataRefreshView, SnapshotSetView};
pub use error::AgentError;
pub use gate::{Entry, GateKeys, Knock};
pub use observe::{
    EventsView, LogEntry, LogLines, LogQuery, WaitFor, WaitOutcome, WaitQuery, WaitResult,
};
pub use operation::Operation;
pub use share::{HeaderSecretView, ShareBody, ShareView};
pub use test_runs::TestRunView;
pub use token::{TokenRequestBody, TokenView};
pub use view::{Addresses, ListFilter, PreviewList, PreviewView};
pub use visit::Visited;
pub use write::{ExtendBody, ExtendView, RedeployBody, ResetBody};

use sandcastle_crd::PreviewEnvironment;
use sandcastle_crd::labels::{AGENT_ACTIVITY, LAST_ACTIVITY};
use sandcastle_domain::clock::Clock;
use sandcastle_domain::naming;
use sandcastle_github::client::GitHubApp;
use sandcastle_kube::events::Request;

/// Bounds on what one call may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest a minted preview token lives (and never past the preview's expiry).
    pub token_lifetime: Duration,
    /// The longest one `wait` waits.
    pub wait: Duration,
    /// Most log lines and bytes one `logs` call returns.
    pub log_lines: u32,
    pub log_bytes: u32,
    /// The longest a share link lives.
    pub share_lifetime: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            token_lifetime: Duration::from_secs(3600),
            wait: Duration::from_secs(600),
            log_lines: 5000,
            log_bytes: 1024 * 1024,
            share_lifetime: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// Reads are activity (they keep a preview from being stopped as idle), but stamping it on every
/// read would write on every poll: a read stamps it when the last stamp is older than this.
const READ_ACTIVITY_EVERY: Duration = Duration::from_secs(60);

/// The operations, with what they need. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    pub client: Client,
    /// Sandcastle's namespace (Blueprints, PreviewEnvironments).
    pub home: String,
    pub addresses: Addresses,
    /// For sandboxes of a branch: which commit its head is, which installation reports.
    pub github: GitHubApp,
    pub clock: Clock,
    /// PreviewEnvironments, kept in sync by a watch (lists are served from it).
    pub previews: Store<PreviewEnvironment>,
    pub authority: Authority,
    pub limits: Limits,
    /// The clusters previews live in (their namespaces, pods, logs and tokens are there).
    pub clusters: sandcastle_kube::clusters::Clusters,
    /// The gate's keys: its cookies, tickets, share links and header secrets.
    pub gate_keys: GateKeys,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// The cluster `pe` lives in (Sandcastle's own while it is not placed: nothing of it exists
    /// anywhere yet), if it answers.
    fn cluster_of(
        &self,
        pe: &PreviewEnvironment,
    ) -> Result<std::sync::Arc<sandcastle_kube::clusters::Cluster>, AgentError> {
        let name = pe
            .status
            .as_ref()
            .and_then(sandcastle_domain::placement::placed_in)
            .unwrap_or(sandcastle_crd::IN_CLUSTER);
        let unavailable = |why: String| AgentError::Unavailable {
            code: "cluster_unreachable",
            message: format!(
                "preview {} lives in cluster {name}, which {why}; try again when it is back",
                pe.name_any()
            ),
        };
        let cluster = self
            .clusters
            .get(name)
            .map_err(|_| unavailable("is not registered any more".to_owned()))?;
        if !cluster.is_local() && !cluster.reachable() {
            return Err(unavailable("does not answer".to_owned()));
        }
        Ok(cluster)
    }

    fn api(&self) -> Api<PreviewEnvironment> {
        Api::namespaced(self.client.clone(), &self.home)
    }

    /// The preview `name`, read fresh (a write just made is seen).
    async fn fetch(&self, name: &str) -> Result<PreviewEnvironment, AgentError> {
        if !naming::is_object_name(name) {
            return Err(AgentError::NotFound(name.to_owned()));
        }
        self.api()
            .get_opt(name)
            .await?
            .ok_or_else(|| AgentError::NotFound(name.to_owned()))
    }

    /// Whether `caller` may run `op` (on preview `name`), before anything else is looked at:
    /// what the request asks, and whether the preview exists, are only for those who may. RBAC
    /// decides (a preview token's scope, for such a token), with where the preview lives taken
    /// from the watch cache, so nothing is fetched for a caller who may not. A name no preview
    /// can have is asked about as no name: only a caller allowed `op` on every preview learns
    /// it does not exist.
    pub async fn permit(
        &self,
        caller: &Caller,
        op: Operation,
        name: Option<&str>,
    ) -> Result<(), AgentError> {
        if caller.github.is_some() {
            // A person's access follows the preview's repository: checked with the preview.
            return Ok(());
        }
        let Some(name) = name.filter(|n| naming::is_object_name(n)) else {
            return self.authority.authorize(caller, op, None).await;
        };
        let (namespace, cluster) = self
            .previews
            .get(&kube::runtime::reflector::ObjectRef::new(name).within(&self.home))
            .map(|pe| self.place_of(&pe))
            .unwrap_or_default();
        self.authority
            .authorize(caller, op, Some((name, &namespace, &cluster)))
            .await
    }

    /// The preview namespace and cluster of `pe`.
    fn place_of(&self, pe: &PreviewEnvironment) -> (String, String) {
        (
            view::namespace_of(pe, &self.addresses.namespace_prefix),
            view::cluster_of(pe).to_owned(),
        )
    }

    /// The preview `name` if `caller` may run `op` on it: [`Agent::permit`] first, then the
    /// preview read fresh (and a preview token's scope checked against it as read).
    async fn authorized(
        &self,
        caller: &Caller,
        op: Operation,
        name: &str,
    ) -> Result<PreviewEnvironment, AgentError> {
        self.permit(caller, op, Some(name)).await?;
        let pe = self.fetch(name).await?;
        if let Some(person) = &caller.github {
            person.allows(op, name, &pe.spec.repository)?;
        } else if caller.preview_namespace().is_some() {
            let (namespace, cluster) = self.place_of(&pe);
            self.authority
                .authorize(caller, op, Some((name, &namespace, &cluster)))
                .await?;
        }
        Ok(pe)
    }

    /// Whether `caller` may also run `op` on `pe`, already read and authorized for another
    /// operation.
    async fn also_allowed(
        &self,
        caller: &Caller,
        op: Operation,
        pe: &PreviewEnvironment,
    ) -> Result<(), AgentError> {
        let name = pe.name_any();
        if let Some(person) = &caller.github {
            return person.allows(op, &name, &pe.spec.repository);
        }
        let namespace = view::namespace_of(pe, &self.addresses.namespace_prefix);
        let cluster = view::cluster_of(pe);
        self.authority
            .authorize(caller, op, Some((&name, &namespace, cluster)))
            .await
    }

    fn view(&self, pe: &PreviewEnvironment) -> PreviewView {
        let mut v = view::view(pe, &self.addresses);
        if let Some(place) = view::line_places(&self.previews.state()).get(&v.name) {
            v.queue_position = Some(*place);
        }
        v
    }

    /// What a write by `caller` leaves on the preview for its history and Events.
    fn request(&self, caller: &Caller, op: Operation, note: String) -> Request {
        Request {
            sha: None,
            id: String::new(),
            at: self.clock.now(),
            actor: caller.user.clone(),
            action: format!("{}-{}", caller.via.name(), op.name()),
            note,
        }
    }

    /// The audit line of a write (the history entry and the Event follow from the request).
    fn audit(&self, caller: &Caller, op: Operation, preview: &str, sha: &str, result: &str) {
        tracing::info!(target: "audit", actor = %caller.user, action = op.name(), preview, sha, result, via = caller.via.name(), "preview operation");
    }

    /// Previews `caller` may see that pass `filter`, a page at a time, from the watch cache;
    /// without their history (one preview's view has it).
    pub async fn list(
        &self,
        caller: &Caller,
        filter: &ListFilter,
    ) -> Result<PreviewList, AgentError> {
        self.permit(caller, Operation::List, None).await?;
        let limit = view::page_size(filter)?;
        let own = caller.preview_namespace();
        // The cache's own objects, shared: only the page is turned into views.
        let state = self.previews.state();
        let mut all: Vec<&std::sync::Arc<PreviewEnvironment>> = state
            .iter()
            .filter(|p| view::matches(p, filter))
            .filter(|p| {
                caller
                    .github
                    .as_ref()
                    .is_none_or(|person| person.reads(&p.spec.repository))
            })
            .filter(|p| {
                own.is_none_or(|_| {
                    caller.owns(
                        &view::namespace_of(p, &self.addresses.namespace_prefix),
                        view::cluster_of(p),
                    )
                })
            })
            .filter(|p| {
                filter
                    .after
                    .as_ref()
                    .is_none_or(|a| p.metadata.name.as_deref().unwrap_or_default() > a.as_str())
            })
            .collect();
        all.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let next = (all.len() > limit).then(|| all[limit - 1].name_any());
        all.truncate(limit);
        // Places in the rollout line are counted among every preview, not just this page.
        let places = view::line_places(&self.previews.state());
        Ok(PreviewList {
            items: all
                .iter()
                .map(|p| {
                    let mut v = view::list_view(p, &self.addresses);
                    if let Some(place) = places.get(&v.name) {
                        v.queue_position = Some(*place);
                    }
                    v
                })
                .collect(),
            next,
        })
    }

    /// Whether `caller` may run `op` on preview `name`, changing nothing: the preview as it is
    /// (the first step of a two-step write, such as MCP's `destroy`).
    pub async fn check(
        &self,
        caller: &Caller,
        op: Operation,
        name: &str,
    ) -> Result<PreviewView, AgentError> {
        Ok(self.view(&self.authorized(caller, op, name).await?))
    }

    /// One preview.
    pub async fn get(&self, caller: &Caller, name: &str) -> Result<PreviewView, AgentError> {
        let pe = self.authorized(caller, Operation::Get, name).await?;
        self.read_activity(&pe, Some(caller.via));
        Ok(self.view(&pe))
    }

    /// A read is activity: stamp it, at most once a minute (through the API or MCP, `via`, an
    /// agent's too).
    fn read_activity(&self, pe: &PreviewEnvironment, via: Option<Via>) {
        let now = self.clock.now();
        let agent = via.is_some_and(Via::is_agent);
        let due = stamped_before(pe, now, READ_ACTIVITY_EVERY)
            || (agent && stamped_before_at(pe, AGENT_ACTIVITY, now, READ_ACTIVITY_EVERY));
        if due && pe.spec.teardown.is_none() {
            // In the background: an agent's read does not wait on a write to the API server.
            let (api, name) = (self.api(), pe.name_any());
            tokio::spawn(async move { write::touch(&api, &name, now, agent).await });
        }
    }
}

/// Whether `pe`'s last activity stamp is at least `every` old (or absent): a read or a visit
/// stamps it again only then.
fn stamped_before(pe: &PreviewEnvironment, now: Timestamp, every: Duration) -> bool {
    stamped_before_at(pe, LAST_ACTIVITY, now, every)
}

/// [`stamped_before`] for the stamp under `key`.
fn stamped_before_at(pe: &PreviewEnvironment, key: &str, now: Timestamp, every: Duration) -> bool {
    let last = pe
        .annotations()
        .get(key)
        .and_then(|s| s.parse::<Timestamp>().ok());
    last.is_none_or(|l| Duration::try_from(now.duration_since(l)).unwrap_or_default() >= every)
}
