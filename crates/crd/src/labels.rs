//! Every label and annotation key Sandcastle reads or writes, in one place.

/// `app.kubernetes.io/managed-by`; Sandcastle sets it to [`MANAGER`].
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY`] on everything Sandcastle creates.
pub const MANAGER: &str = "sandcastle";
/// Name of the `PreviewEnvironment` an object belongs to.
pub const PREVIEW: &str = "sandcastle.dev/preview";
/// Repository as a label value (`owner.name`: label values cannot hold `/`).
pub const REPO: &str = "sandcastle.dev/repo";
/// Pull request number.
pub const PR: &str = "sandcastle.dev/pr";
/// Commit SHA deployed.
pub const SHA: &str = "sandcastle.dev/sha";
/// Annotation with the repository as `owner/name`.
pub const REPOSITORY_ANNOTATION: &str = "sandcastle.dev/repository";
/// Annotation marking a Job as a lifecycle hook: `seed` or `pre-delete`.
pub const HOOK: &str = "sandcastle.dev/hook";
/// Annotation on pre-delete hook Jobs: how long teardown waits for them (Go duration).
pub const HOOK_TIMEOUT: &str = "sandcastle.dev/hook-timeout";
/// Annotation on pre-delete hook Jobs: when teardown resumed them (RFC 3339).
pub const HOOK_STARTED: &str = "sandcastle.dev/hook-started-at";
/// Annotation recording a workload's replicas before it was stopped.
pub const STOPPED_REPLICAS: &str = "sandcastle.dev/stopped-replicas";
/// Annotation recording whether a CronJob was suspended before its preview was stopped.
pub const STOPPED_SUSPEND: &str = "sandcastle.dev/stopped-suspend";
/// Annotation on a stopped preview's Ingress or HTTPRoute: its own routes (JSON), while they are
/// sent to the waking page.
pub const STOPPED_ROUTES: &str = "sandcastle.dev/stopped-routes";
/// The selector label of the Service a stopped preview's HTTPRoutes are parked on when they wake
/// nothing: no pod carries it, so the Service has no endpoints.
pub const PARKED: &str = "sandcastle.dev/parked";
/// Annotation on a PreviewEnvironment: the last activity (push, command, API call), RFC 3339.
/// Written by the entry points, only read by the controller, so its own writes never count.
pub const LAST_ACTIVITY: &str = "sandcastle.dev/last-activity";
/// Annotation on a PreviewEnvironment: the last activity through the API or MCP (an agent's
/// session; the dashboard, pull requests and visits are people's), RFC 3339. Off-hours schedules
/// leave a preview running while it is recent.
pub const AGENT_ACTIVITY: &str = "sandcastle.dev/agent-activity";
/// Label on a PreviewEnvironment whose pull request carries the `preview-keep` label (as its
/// last event said), `"true"`: an off-hours schedule leaves it running.
pub const KEEP: &str = "sandcastle.dev/keep";
/// Label on preview namespaces: the namespace of the Sandcastle that made them, so that an
/// installation only ever sweeps its own orphans.
pub const HOME: &str = "sandcastle.dev/home";
/// Label on preview namespaces in clusters other than Sandcastle's own: the uid of the
/// Sandcastle namespace that made them. Several installations may share a target cluster (and
/// a home namespace name); each sweeps only what carries its own uid.
pub const INSTALLATION: &str = "sandcastle.dev/installation";
/// Label on a Secret in Sandcastle's namespace that registers a cluster previews may go to (or
/// a Blueprint's source may be read from); its value is the cluster's name.
pub const CLUSTER: &str = "sandcastle.dev/cluster";
/// Annotation on a cluster Secret: how many previews the cluster holds at most (none: no cap).
pub const CLUSTER_MAX_PREVIEWS: &str = "sandcastle.dev/max-previews";
/// Annotation on a cluster Secret: the wake listener as that cluster's ingress controller
/// reaches it (`HOST:PORT`), when it is not the one `--wake-service` names.
pub const CLUSTER_WAKE_SERVICE: &str = "sandcastle.dev/wake-service";
/// Annotation on a preview namespace with no PreviewEnvironment: when that was first seen.
pub const ORPHANED_SINCE: &str = "sandcastle.dev/orphaned-since";
/// Field manager of lifecycle changes (stop, wake) to workloads the rollout applied.
pub const LIFECYCLE_FIELD_MANAGER: &str = "sandcastle-lifecycle";
/// Annotation on Jobs: hash of the applied spec, to tell an unchanged Job from a changed one.
pub const SPEC_HASH: &str = "sandcastle.dev/spec-hash";
/// Annotation on a `PreviewEnvironment`: the delivery of the last `/preview`, which redeploys
/// even an unchanged commit (a new value starts a new rollout).
pub const REDEPLOY: &str = "sandcastle.dev/redeploy";
/// Annotation on a `PreviewEnvironment`: the delivery of the last `/preview status`, which
/// re-renders the sticky comment (and brings it back if it was deleted).
pub const STICKY_REFRESH: &str = "sandcastle.dev/sticky-refresh";
/// Annotation on a `PreviewEnvironment`: the last check run that completed on its commit, a nudge
/// for the controller to look at the checks again (it also looks on its own).
pub const CHECKS_CHANGED: &str = "sandcastle.dev/checks-changed";
/// Annotation on a preview: what an event of its pull request waits for from GitHub (the
/// repository's configuration, the changed files), while it waits; shown wherever the preview is.
pub const WAITING_FOR_GITHUB: &str = "sandcastle.dev/waiting-for-github";
/// The last request written to a preview (who, what, when), for the controller's Events.
pub const LAST_REQUEST: &str = "sandcastle.dev/last-request";
/// Annotation on a preview: the last requests written to it (JSON array, newest last), which
/// the controller records in its history (and so as Events).
pub const REQUESTS: &str = "sandcastle.dev/requests";
/// Label on a preview made through the API without a pull request (`"true"`).
pub const SANDBOX: &str = "sandcastle.dev/sandbox";
/// Label of a warm pool's preview: the Blueprint whose pool it is (kept once claimed).
pub const POOL: &str = "sandcastle.dev/pool";
/// Annotation on a pool's preview taken over: the preview that claimed it.
pub const CLAIMED_BY: &str = "sandcastle.dev/claimed-by";
/// Label on a test's Job and its pods: the Blueprint test it runs.
pub const TEST: &str = "sandcastle.dev/test";
/// Annotation on a `PreviewEnvironment`: tests asked to run (JSON object, test name → a token
/// per request); the controller starts a run for each token it has not taken in.
pub const TEST_REQUESTS: &str = "sandcastle.dev/test-requests";
/// Label on a preview: its Blueprint.
pub const BLUEPRINT: &str = "sandcastle.dev/blueprint";
/// Label on a sandbox created with an `Idempotency-Key`: a hash of the key.
pub const IDEMPOTENCY_KEY: &str = "sandcastle.dev/idempotency-key";
/// Annotation beside it: a hash of the request body the key was first used with.
pub const IDEMPOTENCY_BODY: &str = "sandcastle.dev/idempotency-body";
/// Annotation on a preview: a reset asked for (a token); the controller throws the data away
/// and rolls out again, then records the token in `status.resetDone`.
pub const RESET: &str = "sandcastle.dev/reset";
/// Annotation beside [`RESET`]: `latest` restores the newest snapshot of the Blueprint's data,
/// not the one the preview started from.
pub const RESET_DATA: &str = "sandcastle.dev/reset-data";
/// Value of [`RESET_DATA`].
pub const RESET_LATEST: &str = "latest";
/// Annotation on a Blueprint: a new snapshot of its data asked for (a token); the data keeper
/// takes one and records the token in `status.data.refreshed`.
pub const DATA_REFRESH: &str = "sandcastle.dev/data-refresh";
/// Label on the VolumeSnapshots of a Blueprint's data, and on the objects restoring them: the
/// snapshot set (`20261207-031500`).
pub const DATA_SET: &str = "sandcastle.dev/data-set";
/// Field manager for server-side apply.
pub const FIELD_MANAGER: &str = "sandcastle";
/// Finalizer on `PreviewEnvironment`s: the namespace is deleted before the resource goes.
pub const FINALIZER: &str = "sandcastle.dev/teardown";
/// Pod Security admission enforcement label on preview namespaces.
pub const POD_SECURITY_ENFORCE: &str = "pod-security.kubernetes.io/enforce";
/// Which version of the Pod Security Standards [`POD_SECURITY_ENFORCE`] means.
pub const POD_SECURITY_ENFORCE_VERSION: &str = "pod-security.kubernetes.io/enforce-version";
/// The namespace name label the API server sets on every namespace.
pub const NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";

/// Values of [`HOOK`].
pub const HOOK_SEED: &str = "seed";
pub const HOOK_PRE_DELETE: &str = "pre-delete";

// Keys owned by the API server, controllers or other tools. Cloning strips them: they describe
// the source object's history, not what the copy should be.

/// `kubectl apply`'s record of the last applied object.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// Prefix of the Deployment controller's annotations (`revision`, and `desired-replicas`,
/// `max-replicas` on its ReplicaSets).
pub const DEPLOYMENT_ANNOTATION_PREFIX: &str = "deployment.kubernetes.io/";
/// Annotation marking a Helm hook (`test`, `pre-install`...).
pub const HELM_HOOK: &str = "helm.sh/hook";
/// Helm's ownership annotations.
pub const HELM_RELEASE_NAME: &str = "meta.helm.sh/release-name";
pub const HELM_RELEASE_NAMESPACE: &str = "meta.helm.sh/release-namespace";
/// Prefix of the PersistentVolume binder's annotations (`pv.kubernetes.io/bind-completed`, ...).
pub const PV_ANNOTATION_PREFIX: &str = "pv.kubernetes.io/";
/// Volume provisioning annotations the binder and scheduler add to claims.
pub const STORAGE_PROVISIONER_BETA: &str = "volume.beta.kubernetes.io/storage-provisioner";
pub const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Prefix of the annotations the `autoscaling/v1` API uses to carry v2 fields and status.
pub const AUTOSCALING_ALPHA_PREFIX: &str = "autoscaling.alpha.kubernetes.io/";
/// Job tracking marker the Job controller adds.
pub const JOB_TRACKING: &str = "batch.kubernetes.io/job-tracking";
/// Prefix of external-dns annotations: they would publish the source's own domains.
pub const EXTERNAL_DNS_PREFIX: &str = "external-dns.alpha.kubernetes.io/";
/// Labels the Job controller puts on a Job, its selector and its pod template.
pub const JOB_CONTROLLER_LABELS: [&str; 4] = [
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
];
/// Label the Deployment controller puts on ReplicaSets and their pods.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// Prefix of the legacy per-container AppArmor annotations on pods.
pub const APPARMOR_CONTAINER_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
