//! The `Blueprint` custom resource: what a preview is cloned from, which repositories may use it,
//! how PR images swap in, and the guardrails (TTL, idle stop, cap, isolation).

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::GoDuration;
use super::egress::EgressRule;

/// `owner/name`, or `owner/*` for every repository of an owner.
const REPOSITORY: &str = r"^[A-Za-z0-9-]{1,39}/([A-Za-z0-9._-]{1,100}|\*)$";

/// The Blueprint's duration defaults, the one place they are written.
pub const DEFAULT_TTL: GoDuration = GoDuration::from_secs(24 * 3600);
pub const DEFAULT_MAX_TTL: GoDuration = GoDuration::from_secs(168 * 3600);
pub const DEFAULT_STOP_AFTER_IDLE: GoDuration = GoDuration::from_secs(3600);
pub const DEFAULT_READINESS_TIMEOUT: GoDuration = GoDuration::from_secs(600);
pub const DEFAULT_EXPIRY_WARNING: GoDuration = GoDuration::from_secs(2 * 3600);

fn default_ttl() -> GoDuration {
    DEFAULT_TTL
}
fn default_max_ttl() -> GoDuration {
    DEFAULT_MAX_TTL
}
fn default_stop_after_idle() -> GoDuration {
    DEFAULT_STOP_AFTER_IDLE
}
fn default_expiry_warning() -> GoDuration {
    DEFAULT_EXPIRY_WARNING
}
fn default_readiness_timeout() -> GoDuration {
    DEFAULT_READINESS_TIMEOUT
}
pub const DEFAULT_MAX_PREVIEWS: u32 = 20;

fn default_max_previews() -> u32 {
    DEFAULT_MAX_PREVIEWS
}
fn default_image_tag() -> String {
    "{{sha}}".to_owned()
}

/// A template environment that pull requests get a copy of.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "sandcastle.dev",
    version = "v1alpha1",
    kind = "Blueprint",
    namespaced,
    status = "BlueprintStatus",
    shortname = "bp",
    category = "sandcastle",
    doc = "A template environment that pull requests get an isolated, short-lived copy of.",
    printcolumn = r#"{"name":"Source","type":"string","jsonPath":".status.source"}"#,
    printcolumn = r#"{"name":"Trigger","type":"string","jsonPath":".spec.trigger"}"#,
    printcolumn = r#"{"name":"TTL","type":"string","jsonPath":".spec.ttl"}"#,
    printcolumn = r#"{"name":"Previews","type":"integer","jsonPath":".status.activePreviews"}"#,
    printcolumn = r#"{"name":"Max","type":"integer","jsonPath":".spec.maxPreviews"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new("duration(self.ttl) <= duration(self.maxTtl)").message("ttl must not be longer than maxTtl").field_path(".ttl"))]
#[serde(rename_all = "camelCase")]
pub struct BlueprintSpec {
    /// Where the objects to clone come from: exactly one of `namespace`, `manifests`, `helm` or
    /// `kustomize`.
    pub source: BlueprintSource,

    /// Repositories (`owner/name`, or `owner/*`) whose pull requests may use this blueprint.
    #[schemars(length(min = 1, max = 500), inner(regex(pattern = REPOSITORY)))]
    pub repositories: Vec<String>,

    /// Only pull requests into these base branches get previews (default: any branch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50))]
    pub base_branches: Vec<String>,

    /// `auto`: every non-draft, non-fork PR gets a preview; `comment`: only on `/preview`.
    #[serde(default)]
    pub trigger: Trigger,

    /// Containers whose image repository matches a rule run the PR's build instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub images: Vec<ImageRule>,

    /// Names of workloads (any kind) left out of the copy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,

    /// Extra namespaced kinds (for example a cert-manager `Certificate`) copied as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_kinds: Vec<KindRef>,

    /// Ingress host template, e.g. `{{pr}}-{{repo}}.preview.example.com`. Variables: `{{pr}}`,
    /// `{{repo}}`, `{{owner}}`, `{{branch}}`, `{{sha}}`, `{{shortSha}}`, `{{preview}}`, `{{host}}`
    /// (the first label of the blueprint's own host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,

    /// The Service (by name) whose ingress host is reported as the preview URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_service: Option<String>,

    /// How long a preview lives after its last deploy unless extended (Go duration).
    #[serde(default = "default_ttl")]
    pub ttl: GoDuration,

    /// The longest a preview may be extended to, counted from its creation.
    #[serde(default = "default_max_ttl")]
    pub max_ttl: GoDuration,

    /// Scale a preview to zero after this long without activity (`0`: never).
    #[serde(default = "default_stop_after_idle")]
    pub stop_after_idle: GoDuration,

    /// Off hours: running previews stop at each `stop` instant and those it stopped wake at
    /// each `wake` instant (cron, in `timeZone`). Unset: Sandcastle's `--schedule-stop`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<super::ScheduleSpec>,

    /// Globs of the files that concern previews (`services/web/**`); empty: every file. A
    /// pull request or push touching none of them gets no new preview and leaves the one it
    /// has where it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub paths: Vec<String>,

    /// Globs of files that never concern previews (`docs/**`, `**/*.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub ignore_paths: Vec<String>,

    /// Rules by pull request author: members, outside contributors, dependency bots and
    /// coding agents, each with its own trigger, cap and times.
    #[serde(default)]
    pub authors: super::AuthorPolicy,

    /// Reply on the pull request this long before its preview expires, saying when and how to
    /// keep it (once per expiry; `0`: never).
    #[serde(default = "default_expiry_warning")]
    pub expiry_warning: GoDuration,

    /// How many previews of this blueprint may exist at once (stopped ones count).
    #[serde(default = "default_max_previews")]
    #[schemars(range(min = 1, max = 10000))]
    pub max_previews: u32,

    /// What happens to a request beyond `maxPreviews`.
    #[serde(default)]
    pub over_capacity: OverCapacity,

    /// Which Secrets of the source are copied.
    #[serde(default)]
    pub secrets: SecretsPolicy,

    /// Walls around every preview namespace.
    #[serde(default)]
    pub isolation: Isolation,

    /// How the plan's phases are applied: `staged` (data tier ready → seed Jobs complete → apps
    /// → Ingresses, docs/cloning.md §7) or `together` (everything at once, as `kubectl apply`
    /// would, for apps and seed Jobs that wait for their peers themselves; Ready when all are).
    #[serde(default)]
    pub order: ApplyOrder,

    /// How long a phase may take to become ready before the preview fails.
    #[serde(default = "default_readiness_timeout")]
    pub readiness_timeout: GoDuration,

    /// What must hold, besides ready workloads, before a preview is Ready (an HTTP probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<super::ReadinessSpec>,

    /// Check runs that must have succeeded on the head commit before deploying (images built).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wait_for_checks: Vec<String>,

    /// Tests run as Jobs inside each preview after its rollout is Ready (or on request), each
    /// reported as the commit's check run `Sandcastle / <name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub tests: Vec<super::TestSpec>,

    /// Who may open the preview's URL: `public`, or `signedIn` (through Sandcastle's gate:
    /// people signed in with GitHub who can read the repository, the preview's own token,
    /// share links). Unset: Sandcastle's `--preview-access`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<super::Access>,

    /// A warm pool: previews cloned ahead of time at the repository's default branch, taken
    /// over by new sandboxes and pull requests' first previews instead of cloning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<super::PoolSpec>,

    /// What each preview's PersistentVolumeClaims start with: empty (seed Jobs fill them), or
    /// restored from snapshots of the source namespace's claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<super::DataSpec>,

    /// Where previews go (default: Sandcastle's own cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
}

/// A cluster's name: a DNS label, as the `sandcastle.dev/cluster` label of its Secret gives it.
pub const CLUSTER_NAME: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// The clusters a Blueprint's previews may be placed in.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// Registered clusters (or `in-cluster`); a new preview goes to the one with the most room
    /// and stays there while it lives. Earlier names win ties.
    #[schemars(length(min = 1, max = 50), inner(regex(pattern = CLUSTER_NAME), length(max = 63)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub clusters: Vec<String>,
}

impl BlueprintSpec {
    /// The clusters its previews may go to, in order of preference.
    pub fn target_clusters(&self) -> Vec<&str> {
        match &self.target {
            Some(t) if !t.clusters.is_empty() => t.clusters.iter().map(String::as_str).collect(),
            _ => vec![IN_CLUSTER],
        }
    }

    /// The cluster its source is read from.
    pub fn source_cluster(&self) -> &str {
        self.source.cluster.as_deref().unwrap_or(IN_CLUSTER)
    }
}

/// The name of Sandcastle's own cluster, always available.
pub const IN_CLUSTER: &str = "in-cluster";

/// Exactly one of `namespace` (clone a live namespace), `manifests` (a ConfigMap of YAML),
/// `helm` or `kustomize` (rendered from the pull request's own commit).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[x_kube(validation = Rule::new("[has(self.__namespace__), has(self.manifests), has(self.helm), has(self.kustomize)].filter(x, x).size() == 1").message("set exactly one of source.namespace, source.manifests, source.helm or source.kustomize"))]
#[x_kube(validation = Rule::new("!has(self.cluster) || has(self.__namespace__)").message("source.cluster applies to source.namespace: a manifests ConfigMap is read from Sandcastle's own namespace").field_path(".cluster"))]
#[serde(rename_all = "camelCase")]
pub struct BlueprintSource {
    /// A live namespace to clone (in `cluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(max = 63))]
    pub namespace: Option<String>,

    /// The cluster `namespace` lives in: a cluster registered with a Secret labelled
    /// `sandcastle.dev/cluster`, or `in-cluster` (the default: Sandcastle's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = CLUSTER_NAME), length(max = 63))]
    pub cluster: Option<String>,

    /// A ConfigMap in Sandcastle's namespace whose keys hold multi-document YAML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifests: Option<ManifestsRef>,

    /// A Helm chart in the pull request's repository, rendered (`helm template`) at the commit
    /// each preview deploys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm: Option<HelmSource>,

    /// A Kustomize overlay in the pull request's repository, built (`kustomize build`) at the
    /// commit each preview deploys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kustomize: Option<KustomizeSource>,
}

impl BlueprintSource {
    /// Whether the objects come from the pull request's own commit (Helm or Kustomize), so
    /// that each commit renders its own.
    pub fn is_rendered(&self) -> bool {
        self.helm.is_some() || self.kustomize.is_some()
    }

    /// How people call it: `namespace shop-staging`, `manifests`, `Helm chart deploy/chart`.
    pub fn describe(&self) -> String {
        match (&self.namespace, &self.helm, &self.kustomize) {
            (Some(ns), _, _) => ns.clone(),
            (_, Some(h), _) => format!("Helm chart {}", h.path),
            (_, _, Some(k)) => format!("Kustomize overlay {}", k.path),
            _ => "manifests".to_owned(),
        }
    }
}

/// A path inside a repository: relative, `/`-separated, no `..`, no empty or `.` segment.
const REPO_PATH: &str = r"^([A-Za-z0-9._-]+/)*[A-Za-z0-9._-]+$";
/// `path`'s rule, said to people.
const REPO_PATH_RULE: &str = "!self.split('/').exists(s, s == '..')";

/// A Helm chart in the repository being previewed.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HelmSource {
    /// The chart's directory in the repository (`deploy/chart`; `.` for the top).
    #[schemars(regex(pattern = REPO_PATH), length(min = 1, max = 1000))]
    #[x_kube(validation = Rule::new(REPO_PATH_RULE).message("path must stay inside the repository (no ..)"))]
    pub path: String,

    /// The release name the chart sees (`.Release.Name`), templated (default: the preview's
    /// name, `{{preview}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200))]
    pub release_name: Option<String>,

    /// Values files, relative to `path`, in order (later ones win); a missing one is an error
    /// naming it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20), inner(regex(pattern = REPO_PATH), length(max = 1000)))]
    #[x_kube(validation = Rule::new("self.all(f, !f.split('/').exists(s, s == '..'))").message("values files must stay inside the repository (no ..)"))]
    pub values_files: Vec<String>,

    /// Values merged last, over the files. Strings are templated with the preview's variables
    /// (`{{sha}}`, `{{shortSha}}`, `{{pr}}`, `{{branch}}`, `{{preview}}`, `{{repo}}`,
    /// `{{owner}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::any_object")]
    pub values: Option<serde_json::Value>,
}

/// A Kustomize overlay (a directory with a `kustomization.yaml`) in the repository being
/// previewed.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KustomizeSource {
    /// The overlay's directory in the repository (`deploy/overlays/preview`).
    #[schemars(regex(pattern = REPO_PATH), length(min = 1, max = 1000))]
    #[x_kube(validation = Rule::new(REPO_PATH_RULE).message("path must stay inside the repository (no ..)"))]
    pub path: String,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestsRef {
    /// Name of the ConfigMap.
    #[schemars(length(min = 1, max = 253))]
    pub config_map: String,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum Trigger {
    #[default]
    Auto,
    Comment,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageRule {
    /// Image repository to match, without tag or digest, e.g. `ghcr.io/acme/api`.
    #[schemars(
        regex(pattern = r"^[a-z0-9]([a-z0-9._/:-]*[a-z0-9])?$"),
        length(max = 255)
    )]
    pub repository: String,
    /// Tag template for the PR's build: `{{sha}}`, `{{shortSha}}`, `{{pr}}`, `{{branch}}`.
    #[serde(default = "default_image_tag")]
    #[schemars(length(min = 1, max = 128))]
    pub tag: String,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KindRef {
    /// e.g. `cert-manager.io/v1`.
    #[schemars(length(min = 1))]
    pub api_version: String,
    /// e.g. `Certificate`.
    #[schemars(length(min = 1))]
    pub kind: String,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ApplyOrder {
    /// Each phase once the one before is ready: an app never starts before its seed Job has
    /// completed, nor a seed Job before the data tier is ready.
    #[default]
    Staged,
    /// The data tier, seed Jobs, apps and Ingresses at once, after the config phase; the
    /// preview is Ready once all of them are (seed Jobs complete).
    Together,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum OverCapacity {
    /// Keep the request pending and start it when a slot frees, in request order.
    #[default]
    Queue,
    /// Refuse the request with a clear message.
    Reject,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[x_kube(validation = Rule::new("self.mode == 'allowlist' || size(self.allowlist) == 0").message("secrets.allowlist is only used with mode: allowlist"))]
#[serde(rename_all = "camelCase")]
pub struct SecretsPolicy {
    /// `copy`: Opaque and dockerconfigjson Secrets; `allowlist`: only the listed names; `none`.
    #[serde(default)]
    pub mode: SecretsMode,
    /// Secret names copied in `allowlist` mode.
    #[serde(default)]
    pub allowlist: Vec<String>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum SecretsMode {
    #[default]
    Copy,
    Allowlist,
    None,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Isolation {
    #[serde(default)]
    pub network_policy: NetworkIsolation,
    #[serde(default)]
    pub pod_security: PodSecurityLevel,
    #[serde(default)]
    pub quota: Quota,
    #[serde(default)]
    pub limit_range: LimitRange,
    /// Destinations beyond the namespace its pods may reach, whatever the `networkPolicy` mode
    /// (with `strict`: these and nothing else). Not allowed with `networkPolicy: off`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub egress: Vec<EgressRule>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum NetworkIsolation {
    /// Traffic within the namespace, from the ingress controller, and DNS.
    #[default]
    Namespace,
    /// As `namespace`, and no other egress (but what `egress` lists).
    Strict,
    /// No NetworkPolicy added.
    Off,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum PodSecurityLevel {
    #[default]
    Baseline,
    Restricted,
}

fn q(s: &str) -> String {
    s.to_owned()
}

/// The ResourceQuota of each preview namespace. Values are Kubernetes quantities.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Quota {
    #[serde(default = "quota_cpu")]
    pub cpu: String,
    #[serde(default = "quota_memory")]
    pub memory: String,
    #[serde(default = "quota_pods")]
    pub pods: u32,
    #[serde(default = "quota_storage")]
    pub storage: String,
    #[serde(default = "quota_pvcs")]
    pub persistent_volume_claims: u32,
}

fn quota_cpu() -> String {
    q("8")
}
fn quota_memory() -> String {
    q("16Gi")
}
fn quota_pods() -> u32 {
    50
}
fn quota_storage() -> String {
    q("50Gi")
}
fn quota_pvcs() -> u32 {
    20
}

impl Default for Quota {
    fn default() -> Self {
        Self {
            cpu: quota_cpu(),
            memory: quota_memory(),
            pods: quota_pods(),
            storage: quota_storage(),
            persistent_volume_claims: quota_pvcs(),
        }
    }
}

/// Defaults for containers that set no requests or limits.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LimitRange {
    #[serde(default = "lr_request_cpu")]
    pub default_request_cpu: String,
    #[serde(default = "lr_request_memory")]
    pub default_request_memory: String,
    #[serde(default = "lr_limit_cpu")]
    pub default_limit_cpu: String,
    #[serde(default = "lr_limit_memory")]
    pub default_limit_memory: String,
}

fn lr_request_cpu() -> String {
    q("50m")
}
fn lr_request_memory() -> String {
    q("64Mi")
}
fn lr_limit_cpu() -> String {
    q("1")
}
fn lr_limit_memory() -> String {
    q("1Gi")
}

impl Default for LimitRange {
    fn default() -> Self {
        Self {
            default_request_cpu: lr_request_cpu(),
            default_request_memory: lr_request_memory(),
            default_limit_cpu: lr_limit_cpu(),
            default_limit_memory: lr_limit_memory(),
        }
    }
}

/// What Sandcastle observes about a blueprint.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BlueprintStatus {
    /// `namespace/<name>` or `configmap/<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Previews of this blueprint that hold a slot (deploying, ready, stopped or failed).
    #[serde(default)]
    pub active_previews: u32,
    /// Requests waiting for a slot.
    #[serde(default)]
    pub queued_previews: u32,
    /// Why the blueprint cannot be used, when it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Its warm pool, apart from `activePreviews` (which the pool's previews do not count in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<super::PoolStatus>,
    /// Its data's snapshots (`spec.data.from: snapshot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<super::DataStatus>,
}

#[cfg(test)]
mod hostile {
    use proptest::prelude::*;

    use super::*;
    use sandcastle_hostile::{self as hostile, NASTY_ATOMS};

    const BASE: &str = "source: {namespace: shop-staging}\nrepositories: [acme/shop]\n";

    /// YAML values of every kind, edge numbers, durations and text that no field should take.
    fn scalars() -> impl Strategy<Value = String> {
        let fixed = vec![
            "~",
            "''",
            "yes",
            "0",
            "-0",
            "1",
            "-1",
            "4294967296",
            "1e999999",
            "1.5",
            ".nan",
            "18446744073709551616",
            "99999999999h",
            "1e3s",
            "-1s",
            "1h-1m",
            "0s",
            "24h",
            "2d",
            "auto",
            "AUTO",
            "comment",
            "queue",
            "reject",
            "copy",
            "allowlist",
            "none",
            "strict",
            "off",
            "restricted",
            "baseline",
            "[]",
            "{}",
            "[acme/*]",
            "['{{pr}}.x']",
            "{{pr}}",
            "!!python/object:os.system ls",
            "!!binary aGk=",
            "&x 1",
            "*x",
            "{<<: {namespace: a}}",
            "\"\\u0000\"",
            "'\u{feff}'",
        ];
        prop_oneof![
            3 => proptest::sample::select(fixed).prop_map(str::to_owned),
            1 => proptest::sample::select(NASTY_ATOMS).prop_map(|s| format!("{s:?}")),
            1 => any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
        ]
    }

    fn fields() -> impl Strategy<Value = String> {
        let names = vec![
            "ttl",
            "maxTtl",
            "stopAfterIdle",
            "readinessTimeout",
            "maxPreviews",
            "trigger",
            "overCapacity",
            "host",
            "primaryService",
            "skip",
            "baseBranches",
            "waitForChecks",
            "images",
            "allowKinds",
            "secrets",
            "isolation",
            "readiness",
            "source",
            "repositories",
        ];
        proptest::collection::vec((proptest::sample::select(names), scalars()), 0..6).prop_map(
            |fields| {
                fields
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}\n"))
                    .collect::<String>()
            },
        )
    }

    #[test]
    fn proptest_blueprint_specs_are_read_or_refused_and_round_trip() {
        hostile::check(
            "blueprint: specs are read or refused, and round-trip",
            fields(),
            |extra| {
                // Repeated keys are an error to serde-saphyr's defaults, as everywhere else.
                let yaml = format!("{BASE}{extra}");
                if let Ok(spec) = serde_saphyr::from_str::<BlueprintSpec>(&yaml) {
                    let json = serde_json::to_value(&spec).unwrap();
                    prop_assert_eq!(
                        &serde_json::from_value::<BlueprintSpec>(json).unwrap(),
                        &spec
                    );
                    let back = serde_saphyr::to_string(&spec).unwrap();
                    let read: BlueprintSpec = serde_saphyr::from_str(&back)
                        .map_err(|e| TestCaseError::fail(format!("{e}\n{back}")))?;
                    prop_assert_eq!(&read, &spec);
                }
                // What the API server holds arrives as JSON.
                if let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(&yaml) {
                    let _ = serde_json::from_value::<BlueprintSpec>(value);
                }
                Ok(())
            },
        );
    }

    #[test]
    fn corpus_nasty_blueprint_specs() {
        let cases: &[(&str, bool)] = &[
            // (extra fields, read)
            ("ttl: 99999999999h\n", true),
            ("ttl: 1e3s\n", false),
            ("ttl: -1s\n", false),
            ("ttl: 1h-1m\n", false),
            ("ttl: ''\n", false),
            ("ttl: 2d\n", false),
            ("maxPreviews: 1e999999\n", false),
            ("maxPreviews: 4294967296\n", false),
            ("maxPreviews: -1\n", false),
            ("trigger: AUTO\n", false),
            ("trigger: !!python/object:os.system ls\n", false),
            (
                "repositories: !!python/object/apply:os.system [ls]\n",
                false,
            ),
            ("ttl: 1h\nttl: 2h\n", false),
            ("defaults: &d {ttl: 2h}\n<<: *d\n", true),
            ("host: \"{{pr}}\\u0000.example.com\"\n", true),
            ("skip: [a, &s b, *s]\n", true),
        ];
        hostile::corpus("blueprint: nasty specs", cases, |(extra, read)| {
            let yaml = format!("{BASE}{extra}");
            let got = serde_saphyr::from_str::<BlueprintSpec>(&yaml);
            assert_eq!(got.is_ok(), *read, "{extra:?}: {got:?}");
        });
        let merged: BlueprintSpec =
            serde_saphyr::from_str(&format!("{BASE}defaults: &d {{ttl: 2h}}\n<<: *d\n")).unwrap();
        assert_eq!(merged.ttl, GoDuration::from_secs(7200));
    }
}
