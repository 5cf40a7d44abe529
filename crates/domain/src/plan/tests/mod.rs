//! Table tests of `plan()` through the public API, one module per group of rules.

mod copied;
mod data;
mod hostile;
mod hosts;
mod namespaces;
mod refused;
mod routes;
mod security;
mod workloads;

use serde_json::Value;

use super::*;
use crate::{NamespaceName, PrNumber, RepoName, Sha};

pub(super) const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

pub(super) fn ctx() -> PreviewContext {
    PreviewContext {
        preview: NamespaceName::new("shop-pr-42").unwrap(),
        namespace: NamespaceName::new("shop-pr-42").unwrap(),
        source_namespace: Some("shop-staging".to_owned()),
        blueprint: "shop".to_owned(),
        repo: RepoName::new("acme/shop").unwrap(),
        pr: Some(PrNumber::new(42).unwrap()),
        sha: Sha::new(SHA).unwrap(),
        branch: "feature/Login".to_owned(),
        default_host: "{{host}}-{{preview}}.preview.localhost".to_owned(),
        edge: Default::default(),
        pool_member: None,
        data: Default::default(),
    }
}

/// A Blueprint with defaults, plus the given YAML fields.
pub(super) fn blueprint(extra: &str) -> BlueprintSpec {
    let yaml = format!("source: {{namespace: shop-staging}}\nrepositories: [acme/shop]\n{extra}");
    serde_saphyr::from_str(&yaml).unwrap()
}

pub(super) fn objects(yaml: &str) -> Vec<Value> {
    parse_manifests(yaml).unwrap()
}

pub(super) fn run(yaml: &str, extra: &str) -> Result<Plan, Refused> {
    plan(&objects(yaml), &blueprint(extra), &ctx())
}

/// The refusal text for objects that must be refused.
pub(super) fn refusal(yaml: &str, extra: &str) -> String {
    match run(yaml, extra) {
        Ok(p) => panic!("expected a refusal, got a plan:\n{}", p.to_yaml().unwrap()),
        Err(r) => r.to_string(),
    }
}

/// The planned object of this kind and name.
pub(super) fn find<'p>(plan: &'p Plan, kind: &str, name: &str) -> &'p Value {
    plan.objects()
        .chain(&plan.pre_delete)
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} not in the plan"))
}

/// The reason an object was left out, if it was.
pub(super) fn left_out<'p>(plan: &'p Plan, kind: &str, name: &str) -> Option<&'p str> {
    plan.left_out
        .iter()
        .find(|l| l.kind == kind && l.name == name)
        .map(|l| l.reason.as_str())
}

/// A minimal Deployment, for tests of other objects: a blueprint with nothing to run is refused.
pub(super) const APP: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app}\nspec:\n  selector: {matchLabels: {app: app}}\n  template:\n    metadata: {labels: {app: app}}\n    spec: {containers: [{name: app, image: app}]}\n";

/// `yaml` and [`APP`].
pub(super) fn with_app(yaml: &str) -> String {
    if yaml.is_empty() {
        return APP.to_owned();
    }
    format!("{yaml}\n---\n{APP}")
}

/// A Deployment `name` whose pod spec is `pod` (YAML, indented for the place it goes).
pub(super) fn deployment(name: &str, pod: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n{pod}"
    )
}
