//! The namespace a blueprint is cloned from, and its own Namespace object.
//!
//! A live source is a namespace. Manifests often declare theirs: many upstream apps ship a
//! Namespace and set `metadata.namespace` on every object. Without a namespace from the
//! Blueprint (or `render --source-namespace`), the source of manifests is the one Namespace they
//! declare, or else the one namespace all objects naming a namespace name. Objects naming it
//! are the preview's; objects naming any other namespace are refused.
//!
//! The source's own Namespace object is left out (Sandcastle creates the preview namespace).
//! Of its labels, the preview namespace keeps only the Pod Security ones that are at least as
//! strict as the Blueprint's `isolation.podSecurity` (privileged < baseline < restricted), and
//! their versions only when `latest` (a pinned version checks less): a blueprint can tighten its
//! previews, never loosen them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::kinds::group_of;
use sandcastle_crd::PodSecurityLevel;

/// Why the source's Namespace object is not copied.
pub(crate) const OWN: &str = "the preview's own namespace; Sandcastle creates it";

const POD_SECURITY: &str = "pod-security.kubernetes.io/";
const MODES: [&str; 3] = ["enforce", "audit", "warn"];

/// Where a blueprint's objects come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Source {
    /// The source namespace, when there is one.
    pub name: Option<String>,
    /// Without one: every namespace the manifests declare or name (sorted), for the refusals.
    several: Vec<String>,
}

/// Whether `value` is a Namespace object.
pub(crate) fn is_namespace(value: &Value) -> bool {
    value["kind"] == "Namespace" && value["apiVersion"].as_str().map(group_of) == Some("")
}

fn name_of(value: &Value) -> Option<&str> {
    value["metadata"]["name"].as_str().filter(|n| !n.is_empty())
}

/// The namespace an object names in `metadata.namespace`, if any.
pub(crate) fn named(value: &Value) -> Option<&str> {
    value["metadata"]["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
}

/// The source namespace: `given` (a live namespace, or `render --source-namespace`), else the
/// one Namespace the objects declare, else the one namespace all objects naming one name.
pub(crate) fn source(given: Option<&str>, objects: &[Value]) -> Source {
    if let Some(ns) = given {
        return Source {
            name: Some(ns.to_owned()),
            several: Vec::new(),
        };
    }
    let declared: BTreeSet<&str> = objects
        .iter()
        .filter(|v| is_namespace(v))
        .filter_map(name_of)
        .collect();
    let in_use: BTreeSet<&str> = objects
        .iter()
        .filter(|v| !is_namespace(v))
        .filter_map(named)
        .collect();
    for candidates in [&declared, &in_use] {
        if let [only] = candidates.iter().collect::<Vec<_>>()[..] {
            return Source {
                name: Some((*only).to_owned()),
                several: Vec::new(),
            };
        }
    }
    Source {
        name: None,
        several: declared.union(&in_use).map(|n| (*n).to_owned()).collect(),
    }
}

impl Source {
    fn one_namespace(&self) -> String {
        match &self.name {
            Some(src) => format!("a preview clones one namespace (the source is {src})"),
            None => format!(
                "a preview clones one namespace, and these manifests name several ({})",
                self.several.join(", ")
            ),
        }
    }

    /// Why an object whose `metadata.namespace` is `ns` is refused, or `None` when `ns` is the
    /// source's.
    pub(crate) fn other(&self, ns: &str) -> Option<String> {
        (self.name.as_deref() != Some(ns))
            .then(|| format!("names namespace {ns}; {}", self.one_namespace()))
    }

    /// What happens to a Namespace object named `name`: `Ok` with why it is left out when it is
    /// the source's, `Err` with why it is refused otherwise.
    pub(crate) fn decide(&self, name: &str, labels: &Labels) -> Result<String, String> {
        if self.name.as_deref() != Some(name) {
            return Err(self.one_namespace());
        }
        if labels.dropped.is_empty() {
            return Ok(OWN.to_owned());
        }
        Ok(format!("{OWN} (not kept: {})", labels.dropped.join("; ")))
    }
}

/// The Pod Security labels the preview namespace takes from the source's Namespace object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Labels {
    pub kept: BTreeMap<String, String>,
    /// The Pod Security labels not kept, each with why.
    dropped: Vec<String>,
}

/// How strict a Pod Security level is; `None` for what is not a level.
fn rank(level: &str) -> Option<u8> {
    match level {
        "privileged" => Some(0),
        "baseline" => Some(1),
        "restricted" => Some(2),
        _ => None,
    }
}

fn level_name(level: PodSecurityLevel) -> &'static str {
    match level {
        PodSecurityLevel::Baseline => "baseline",
        PodSecurityLevel::Restricted => "restricted",
    }
}

/// The Pod Security labels of the source's Namespace objects (a file may declare it more than
/// once; the strictest value of each label counts) that are at least as strict as `level`.
pub(crate) fn labels(objects: &[Value], source: &Source, level: PodSecurityLevel) -> Labels {
    let Some(src) = source.name.as_deref() else {
        return Labels::default();
    };
    let floor = rank(level_name(level)).unwrap_or_default();
    // Per mode: the strictest level declared, and whether every declaration that pins a version
    // pins `latest`.
    let mut levels: BTreeMap<&str, (u8, &str)> = BTreeMap::new();
    let mut versions: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut dropped = BTreeSet::new();
    let declarations = objects
        .iter()
        .filter(|v| is_namespace(v) && name_of(v) == Some(src));
    for ns in declarations {
        let Some(map) = ns["metadata"]["labels"].as_object() else {
            continue;
        };
        for (key, value) in map {
            let (Some(suffix), Some(value)) = (key.strip_prefix(POD_SECURITY), value.as_str())
            else {
                continue;
            };
            if let Some(mode) = MODES.iter().find(|m| **m == suffix) {
                match rank(value) {
                    Some(r) if r >= floor => {
                        let entry = levels.entry(mode).or_insert((r, value));
                        if r > entry.0 {
                            *entry = (r, value);
                        }
                    }
                    Some(_) => {
                        dropped.insert(format!(
                            "{key} {value}, looser than the Blueprint's {}",
                            level_name(level)
                        ));
                    }
                    None => {
                        dropped.insert(format!("{key} {value}, not a Pod Security level"));
                    }
                }
            } else if let Some(mode) = suffix
                .strip_suffix("-version")
                .and_then(|m| MODES.iter().find(|x| **x == m))
            {
                versions.entry(mode).or_default().insert(value);
            }
        }
    }
    let mut kept = BTreeMap::new();
    for (mode, (_, value)) in &levels {
        kept.insert(format!("{POD_SECURITY}{mode}"), (*value).to_owned());
    }
    for (mode, pinned) in versions {
        let key = format!("{POD_SECURITY}{mode}-version");
        if levels.contains_key(mode) && pinned.iter().all(|v| *v == "latest") {
            kept.insert(key, "latest".to_owned());
        } else {
            for v in pinned.into_iter().filter(|v| *v != "latest") {
                dropped.insert(format!("{key} {v}, only latest"));
            }
        }
    }
    Labels {
        kept,
        dropped: dropped.into_iter().collect(),
    }
}

/// The level pods are checked at: the Blueprint's, or the namespace's `enforce` label when that
/// is stricter.
pub(crate) fn enforced(level: PodSecurityLevel, labels: &Labels) -> PodSecurityLevel {
    let key = format!("{POD_SECURITY}enforce");
    match labels.kept.get(&key).map(String::as_str) {
        Some("restricted") => PodSecurityLevel::Restricted,
        _ => level,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ns(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    }

    fn cm(namespace: Option<&str>) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": namespace}})
    }

    #[test]
    fn the_source_is_given_declared_or_named() {
        let name = |given, objects: &[Value]| source(given, objects).name;
        assert_eq!(name(Some("live"), &[ns("shop")]).as_deref(), Some("live"));
        assert_eq!(
            name(None, &[ns("shop"), cm(Some("billing"))]).as_deref(),
            Some("shop")
        );
        assert_eq!(
            name(None, &[ns("shop"), ns("shop")]).as_deref(),
            Some("shop")
        );
        assert_eq!(
            name(None, &[ns("a"), ns("b"), cm(Some("b")), cm(None)]).as_deref(),
            Some("b")
        );
        assert_eq!(
            name(None, &[cm(Some("shop")), cm(None)]).as_deref(),
            Some("shop")
        );
        assert_eq!(name(None, &[cm(None)]), None);
        let several = source(None, &[ns("a"), ns("d"), cm(Some("c")), cm(Some("b"))]);
        assert_eq!(several.name, None);
        assert_eq!(several.several, ["a", "b", "c", "d"]);
        assert_eq!(
            several.other("c").as_deref(),
            Some(
                "names namespace c; a preview clones one namespace, and these manifests name several (a, b, c, d)"
            )
        );
        assert_eq!(source(Some("shop"), &[]).other("shop"), None);
    }

    #[test]
    fn enforcement_only_ever_tightens() {
        let with = |enforce: &str| Labels {
            kept: [(format!("{POD_SECURITY}enforce"), enforce.to_owned())].into(),
            dropped: Vec::new(),
        };
        use PodSecurityLevel::{Baseline, Restricted};
        assert_eq!(enforced(Baseline, &with("restricted")), Restricted);
        assert_eq!(enforced(Baseline, &with("baseline")), Baseline);
        assert_eq!(enforced(Restricted, &with("baseline")), Restricted);
        assert_eq!(enforced(Restricted, &Labels::default()), Restricted);
    }
}
