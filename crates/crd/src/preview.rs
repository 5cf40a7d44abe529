//! The `PreviewEnvironment` custom resource: the desired state of one preview (blueprint, repo,
//! PR, commit, expiry, stopped or torn down) and what Sandcastle observes of it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of one preview environment.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "sandcastle.dev",
    version = "v1alpha1",
    kind = "PreviewEnvironment",
    namespaced,
    status = "PreviewStatus",
    shortname = "preview",
    shortname = "previews",
    shortname = "pe",
    category = "sandcastle",
    doc = "One pull request's isolated, short-lived copy of a blueprint.",
    printcolumn = r#"{"name":"Repo","type":"string","jsonPath":".spec.repository"}"#,
    printcolumn = r#"{"name":"PR","type":"integer","jsonPath":".spec.pullRequest"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"URL","type":"string","jsonPath":".status.url"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Expires","type":"string","jsonPath":".spec.expiresAt"}"#,
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".status.cluster","priority":1}"#,
    printcolumn = r#"{"name":"Namespace","type":"string","jsonPath":".status.namespace","priority":1}"#,
    printcolumn = r#"{"name":"SHA","type":"string","jsonPath":".status.deployedSha","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PreviewEnvironmentSpec {
    /// Name of the Blueprint (in the same namespace) this preview is cloned from.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(max = 63))]
    pub blueprint: String,

    /// The repository `owner/name`.
    #[schemars(regex(pattern = r"^[A-Za-z0-9-]{1,39}/[A-Za-z0-9._-]{1,100}$"))]
    pub repository: String,

    /// The pull request, when the preview is for one (agents may ask for a branch instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub pull_request: Option<u64>,

    /// The branch (head ref) being previewed.
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = 255))]
    pub git_ref: String,

    /// The commit to deploy.
    #[schemars(regex(pattern = r"^[0-9a-f]{40}$"))]
    pub sha: String,

    /// The GitHub App installation that reports on this preview.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installation_id: Option<u64>,

    /// Who asked for the preview.
    pub requested_by: Requester,

    /// When the preview is torn down unless extended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Time>,

    /// Scale every workload to zero, keeping data.
    #[serde(default)]
    pub stopped: bool,

    /// A fork's preview: it runs the commit someone with write access approved with `/preview`,
    /// and pushes to the fork do not move it until someone comments `/preview` again.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pinned: bool,

    /// A pull request from a fork that nobody with write access has approved yet: nothing is
    /// deployed; the sticky comment says a maintainer can comment `/preview`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub awaiting_approval: bool,

    /// Set when the preview should be removed (PR merged or closed, expired, destroyed). The
    /// resource stays as a tombstone for a while so that late or replayed deliveries cannot bring
    /// the preview back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown: Option<Teardown>,

    /// GitHub's `updated_at` of the newest pull request event applied; older events are ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_updated_at: Option<Time>,

    /// A sandbox (a preview made without a pull request) this preview takes over: its namespace
    /// and what runs there become this preview's, with no second clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopts: Option<Adoption>,

    /// How many times the preview came back after a teardown (a reopened pull request, a removed
    /// `no-preview` label, `/preview` after a destroy). Each new incarnation is rolled out from
    /// scratch into a new namespace, whatever the old one had got to.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub incarnation: u32,

    /// Who opened the pull request, as the Blueprint's `authors` rules class them (absent for
    /// sandboxes, and for previews made before classes existed: the Blueprint's own rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author_class: Option<super::AuthorClass>,

    /// Share links handed out for this preview: each opens it without signing in until it
    /// expires; removing one revokes it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50))]
    pub shares: Vec<super::ShareLink>,
}

/// A sandbox taken over by a pull request's preview.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Adoption {
    /// The sandbox's PreviewEnvironment.
    #[schemars(length(min = 1, max = 63))]
    pub preview: String,
    /// Its namespace, which becomes this preview's.
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Requester {
    pub kind: RequesterKind,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RequesterKind {
    GithubUser,
    ServiceAccount,
    /// Another Kubernetes user, as TokenReview named them.
    KubernetesUser,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Teardown {
    pub reason: TeardownReason,
    /// Who caused it, when someone did: a GitHub login (through the pull request or a command,
    /// `github:<login>` from the dashboard), a Kubernetes user or ServiceAccount (through the
    /// API, MCP or the dashboard), or the pull request that took a sandbox over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Through what it was asked for (absent on teardowns recorded before this was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Interface>,
    pub at: Time,
}

/// The interface a change to a preview came through: what its actor is, and how people are
/// told about it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Interface {
    /// The pull request on GitHub: an event (closed, merged, labelled, converted to draft), or
    /// its state as the catch-up resync read it. The actor is a GitHub login.
    PullRequest,
    /// A `/preview` command on the pull request; the actor is its author's GitHub login.
    Command,
    /// The REST API; the actor is the Kubernetes user or ServiceAccount.
    Api,
    /// The MCP server; the actor is the Kubernetes user or ServiceAccount.
    Mcp,
    /// The dashboard; the actor is `github:<login>` or a Kubernetes user.
    Dashboard,
    /// Sandcastle itself: expiry, a pull request's preview taking a sandbox over.
    Sandcastle,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum TeardownReason {
    Merged,
    Closed,
    Expired,
    Destroyed,
    /// The pull request was labelled `no-preview`.
    NoPreview,
    /// The pull request was converted to a draft.
    Draft,
    /// A pull request's preview took this sandbox over (its namespace lives on there).
    Adopted,
}

/// What Sandcastle observes of a preview.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PreviewStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The preview namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The cluster the preview was placed in (a Blueprint's `target.clusters`): set once, before
    /// anything is created, and never changed while the preview lives. None on a preview placed
    /// before clusters were recorded: Sandcastle's own (`in-cluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// While not placed yet: why no target cluster can take the preview now (all full, away or
    /// being checked), e.g. `b is full (2/2 previews)`. Cleared once it is placed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for_cluster: Option<String>,
    /// The preview URL (behind GitHub's "View deployment").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The commit currently running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed_sha: Option<String>,
    /// The GitHub deployment of the current commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github_deployment_id: Option<u64>,
    /// The commit that `githubDeploymentId` belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github_deployment_sha: Option<String>,
    /// The last deployment status state reported to GitHub, so a transition is posted once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github_reported: Option<Reported>,
    /// The deployment of the previous commit, marked inactive once the new one succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github_previous_deployment_id: Option<u64>,
    /// Progress of the current rollout through the plan's phases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Workloads and their readiness.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceStatus>,
    /// One sentence for people: what is happening or what went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// While deploying: what the rollout is stuck on that will not pass by itself, in the
    /// cluster's words (a pod the scheduler cannot place, an image that cannot be pulled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck_on: Option<String>,
    /// While deploying or failed: why the preview is not Ready, classified, with the failing
    /// container's last log lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<super::Diagnosis>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<Time>,
    /// The commit whose required check runs (the Blueprint's `waitForChecks`) have all passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks_passed_sha: Option<String>,
    /// Required check runs that have not passed yet on the commit to deploy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for_checks: Vec<String>,
    /// The Blueprint's tests: the last run of each (and older runs until GitHub has heard how
    /// they ended).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<super::TestRun>,
    /// The preview's sticky comment on the pull request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticky: Option<StickyComment>,
    /// The last 50 actions on this preview.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// The incarnation (`spec.incarnation`) the namespace, rollout and GitHub deployment
    /// recorded here belong to; an older one is taken down before the new one is rolled out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub incarnation: u32,
    /// When the teardown finished (phase `Removed`): the tombstone's retention counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_at: Option<Time>,
    /// The ids of the last requests recorded in the history (from the `requests` annotation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded_requests: Vec<String>,
    /// The last reset carried out (the token of the `reset` annotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_done: Option<String>,
    /// The last redeploy taken in (the token of the `redeploy` annotation when this status was
    /// written): with `observedGeneration`, what says that a status is not from before a write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_redeploy: Option<String>,

    // Lifecycle guardrails (TTL, idle stop, caps).
    /// Where the preview stands against its Blueprint's `maxPreviews`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<SlotStatus>,
    /// While waiting in line to start a rollout (`--max-concurrent-rollouts`): when the change
    /// was asked for, which orders the line (the place is counted from it when shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_line: Option<InLine>,
    /// How long the preview's workloads have run (its environment-hours): namespace made and not
    /// stopped or torn down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<RunningTime>,
    /// The expiry the pull request was last warned of (`expiryWarning`): one reply per expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_warned: Option<Time>,
    /// The hosts of the preview's Ingresses and HTTPRoutes, read when it was stopped: a visit to
    /// one of them while it is stopped reaches Sandcastle's waking page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Whether the preview's Ingresses and HTTPRoutes are parked (stopped, or woken and not Ready
    /// yet): on Sandcastle's waking page, or on a Service with no endpoints where no wake listener
    /// is configured.
    #[serde(default, skip_serializing_if = "is_false")]
    pub wake_page: bool,
    /// What the Blueprint's off-hours schedule last did to the preview: stopped it, or woke it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<super::ScheduleRecord>,
    /// Which snapshot of the Blueprint's data the preview's claims were restored from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<super::PreviewData>,
}

/// Running time: the finished stretches, and the one under way.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RunningTime {
    /// Seconds of the stretches that ended (stopped, torn down).
    #[serde(default)]
    pub seconds: u64,
    /// When the stretch under way began; absent while not running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

/// A preview's place under its Blueprint's `maxPreviews`: holding a slot, waiting for one in
/// request order, or refused (`overCapacity: reject`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SlotStatus {
    pub state: SlotState,
    /// While queued: the place in line (1 = next to start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u32>,
    /// Slots in use when this was decided, of `cap`.
    pub in_use: u32,
    pub cap: u32,
    /// When refused: the generation refused (a new commit asks again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// When the preview got into this state.
    pub since: Time,
}

/// A preview waiting in line to start a rollout.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct InLine {
    /// When the change it waits to roll out was asked for, in nanoseconds since the epoch (many
    /// arrive within one second).
    pub asked_ns: i64,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Admitted: counts against `maxPreviews` until torn down (stopped and failed ones too).
    Held,
    /// Waiting for a free slot.
    Queued,
    /// Refused because every slot was in use.
    Rejected,
}

/// What GitHub was last told of the preview's current deployment: its deployment status
/// states, and `stopped` (posted as `inactive` with how to wake it, so that waking reports on
/// the same deployment).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Reported {
    Queued,
    Pending,
    InProgress,
    Success,
    Failure,
    Error,
    Inactive,
    Stopped,
}

/// Where a rollout of one plan (one commit and blueprint version) has got to.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// Hash of the planned objects; a different plan starts a new rollout.
    pub plan_hash: String,
    pub sha: String,
    /// How many of the plan's steps have been applied.
    pub applied_steps: u32,
    /// How many steps have become ready.
    pub ready_steps: u32,
    /// Total steps in the plan.
    pub total_steps: u32,
    /// Objects in the plan (guardrails included).
    pub objects: u32,
    pub started_at: Time,
    /// When the step now being waited on was applied (its readiness timeout counts from here).
    pub step_started_at: Time,
    /// The uid of the namespace this rollout applied to: a namespace made anew (deleted behind
    /// Sandcastle's back, or after a teardown) starts the rollout over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_uid: Option<String>,
    /// This rollout failed (the reason is the status message): it is not retried, and GitHub
    /// hears nothing more of it, until the plan changes (a new commit, a Blueprint change, a
    /// `/preview`) or the preview is woken.
    #[serde(default, skip_serializing_if = "is_false")]
    pub failed: bool,
    /// The Blueprint's HTTP readiness probe of this rollout, once its workloads are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeState>,
}

/// What a rollout's HTTP readiness probe has seen.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProbeState {
    /// Requests made so far.
    pub tries: u32,
    /// What the last one saw, e.g. `GET / → 502`.
    pub last: String,
    /// The first try: the probe's deadline counts from here.
    pub started_at: Time,
    pub last_at: Time,
    /// The probe passed: the rollout's commit is served.
    #[serde(default, skip_serializing_if = "is_false")]
    pub passed: bool,
}

/// The one comment Sandcastle keeps on the pull request for this preview.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StickyComment {
    /// GitHub's id of the comment.
    pub comment_id: u64,
    /// What the comment last showed (state, commit, URL, expiry…): it is edited only when this
    /// changes, not on every reconcile.
    pub shown: String,
    /// The last `/preview status` refresh request served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refreshed: Option<String>,
}

#[derive(
    JsonSchema, utoipa::ToSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq,
)]
pub enum Phase {
    Pending,
    Deploying,
    Ready,
    Stopped,
    Failed,
    Terminating,
    /// Torn down; the resource remains only as a tombstone.
    Removed,
}

impl Phase {
    /// Every phase, in the order of a preview's life.
    pub const ALL: [Phase; 7] = [
        Phase::Pending,
        Phase::Deploying,
        Phase::Ready,
        Phase::Stopped,
        Phase::Failed,
        Phase::Terminating,
        Phase::Removed,
    ];

    /// The phase named `name` (as [`Phase::as_str`] writes it).
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Deploying => "Deploying",
            Self::Ready => "Ready",
            Self::Stopped => "Stopped",
            Self::Failed => "Failed",
            Self::Terminating => "Terminating",
            Self::Removed => "Removed",
        }
    }
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    pub name: String,
    pub kind: String,
    pub ready: i32,
    pub desired: i32,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    pub time: Time,
    pub actor: String,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

/// How many history entries a preview keeps.
pub const HISTORY_LIMIT: usize = 50;
