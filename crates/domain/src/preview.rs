//! A preview as the clone plan and the guardrails both see it: who it is for and where it goes
//! (`PreviewContext`), the labels every object of it carries (pod templates fewer), the name of
//! the ConfigMap of built-in variables, and a reason a Blueprint cannot be cloned (`Problem`).

use std::collections::BTreeMap;
use std::fmt;

use super::ids::{NamespaceName, PrNumber, RepoName, Sha};
use sandcastle_crd::labels;

/// Name of the ConfigMap holding the built-in variables.
pub const ENV_CONFIG_MAP: &str = "sandcastle-env";

/// Who the preview is for and where it goes: everything the plan needs besides the objects and
/// the Blueprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewContext {
    /// Name of the `PreviewEnvironment`, e.g. `shop-pr-42`.
    pub preview: NamespaceName,
    /// The namespace the copy goes to.
    pub namespace: NamespaceName,
    /// The Blueprint's namespace when it clones a live namespace; `None` for manifests.
    pub source_namespace: Option<String>,
    /// Name of the Blueprint.
    pub blueprint: String,
    pub repo: RepoName,
    pub pr: Option<PrNumber>,
    pub sha: Sha,
    /// The branch previewed (the PR's head ref).
    pub branch: String,
    /// Host template used when the Blueprint sets none, e.g.
    /// `{{host}}-{{preview}}.preview.localhost`.
    pub default_host: String,
    /// The front door: the certificate its hosts are served with, who may open it, the gate.
    pub edge: crate::edge::Edge,
    /// A warm pool's preview (`pool-1a2b3c4d`), which has no pull request yet and shares its
    /// branch with every other member: in its hosts, `{{pr}}` and `{{branch}}` are this, so
    /// each member has hosts of its own and none is ever a claimant's.
    pub pool_member: Option<String>,
    /// The claims restored from a snapshot of the Blueprint's data: claim name → the
    /// VolumeSnapshot in the preview's namespace (`crate::data`). Empty: they start empty.
    pub data: BTreeMap<String, String>,
}

/// One reason a blueprint cannot be cloned, naming the object and, when there is one, the field.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    pub kind: String,
    pub name: String,
    pub field: Option<String>,
    pub reason: String,
}

impl Problem {
    pub(crate) fn object(kind: &str, name: &str, reason: impl Into<String>) -> Self {
        Self {
            kind: kind.to_owned(),
            name: name.to_owned(),
            field: None,
            reason: reason.into(),
        }
    }

    pub(crate) fn field(
        kind: &str,
        name: &str,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            kind: kind.to_owned(),
            name: name.to_owned(),
            field: Some(field.into()),
            reason: reason.into(),
        }
    }
}

/// The labels every object of a preview carries: `app.kubernetes.io/managed-by: sandcastle`,
/// `sandcastle.dev/preview`, `sandcastle.dev/repo`, `sandcastle.dev/pr` (with a PR) and
/// `sandcastle.dev/sha`. Pod templates carry fewer ([`template_labels`]).
pub fn preview_labels(ctx: &PreviewContext) -> BTreeMap<String, String> {
    label_pairs(ctx)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
}
/// [`preview_labels`], as pairs.
pub(crate) fn label_pairs(ctx: &PreviewContext) -> Vec<(&'static str, String)> {
    let mut out = template_labels(ctx);
    out.push((labels::PREVIEW, ctx.preview.to_string()));
    if let Some(pr) = ctx.pr {
        out.push((labels::PR, pr.to_string()));
    }
    out.push((labels::SHA, ctx.sha.to_string()));
    out
}

/// The labels pod templates carry: only those that stay the same for the pods' whole life. A
/// label that changes with every commit (`sandcastle.dev/sha`) would restart every pod — the
/// databases too — on every push, where only the pods whose image changed need to; one naming
/// the preview or its pull request would restart them all when a pull request takes a sandbox
/// over. Those belong on the objects, which change in place.
pub(crate) fn template_labels(ctx: &PreviewContext) -> Vec<(&'static str, String)> {
    vec![
        (labels::MANAGED_BY, labels::MANAGER.to_owned()),
        (labels::REPO, crate::naming::repo_label_value(&ctx.repo)),
    ]
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{} {}: {}: {}", self.kind, self.name, field, self.reason),
            None => write!(
                f,
                "{} {} is not allowed: {}",
                self.kind, self.name, self.reason
            ),
        }
    }
}
