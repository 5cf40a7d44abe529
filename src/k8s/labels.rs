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
/// Annotation recording a workload's replicas before it was stopped.
pub const STOPPED_REPLICAS: &str = "sandcastle.dev/stopped-replicas";
/// Annotation on Jobs: hash of the applied spec, to tell an unchanged Job from a changed one.
pub const SPEC_HASH: &str = "sandcastle.dev/spec-hash";
/// Field manager for server-side apply.
pub const FIELD_MANAGER: &str = "sandcastle";
/// Finalizer on `PreviewEnvironment`s: the namespace is deleted before the resource goes.
pub const FINALIZER: &str = "sandcastle.dev/teardown";
/// Pod Security admission enforcement label on preview namespaces.
pub const POD_SECURITY_ENFORCE: &str = "pod-security.kubernetes.io/enforce";

/// The repository as a label value: `owner/name` becomes `owner.name`.
pub fn repo_label_value(repo: &crate::domain::RepoName) -> String {
    format!("{}.{}", repo.owner(), repo.name())
}
