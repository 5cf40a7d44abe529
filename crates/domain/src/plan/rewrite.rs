//! Rewrite an object for the preview namespace: references to the source namespace, RoleBinding
//! subjects, and the labels and annotation that mark the object as the preview's.
//!
//! Names of the source namespace are rewritten only in DNS form, on label boundaries:
//! `<service>.<source>.svc` (then optionally any cluster domain, e.g. `.cluster.local`) always,
//! and the short `<service>.<source>` when `<service>` is a Service of the blueprint (so that
//! `spring.profiles.default` stays as it is in a namespace called `default`). This applies to
//! every string value of the object (ConfigMap data, env values, args, URLs, annotations…) and
//! to the decoded text of Secret `data`. Besides, a `namespaceSelector` matching the source by
//! its `kubernetes.io/metadata.name` label and pod affinity `namespaces` lists follow the copy.

use crate::preview::{label_pairs, template_labels};
use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value};

use super::kinds::{Builtin, Class};
use super::pods::{get_mut, template_paths};
use super::{Obj, PreviewContext};
use sandcastle_crd::labels;

/// Rewrites names of the source namespace into the target namespace.
#[derive(Debug)]
pub(crate) struct Rewriter<'a> {
    pub source: Option<&'a str>,
    pub target: &'a str,
    /// Names of the blueprint's Services.
    pub services: &'a BTreeSet<String>,
}

fn is_label_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_'
}

impl Rewriter<'_> {
    /// `text` with every DNS-form reference to the source namespace rewritten; `None` when
    /// nothing changed.
    pub(crate) fn dns(&self, text: &str) -> Option<String> {
        let source = self.source?;
        let bytes = text.as_bytes();
        let needle = format!(".{source}");
        let mut out = String::new();
        let mut copied = 0;
        let mut from = 0;
        while let Some(found) = text[from..].find(&needle) {
            let dot = from + found;
            let end = dot + needle.len();
            from = end;
            if dot == 0 || !bytes[dot - 1].is_ascii_alphanumeric() {
                continue;
            }
            let label_start = bytes[..dot]
                .iter()
                .rposition(|&c| !is_label_char(c))
                .map_or(0, |i| i + 1);
            let service = &text[label_start..dot];
            let rest = &bytes[end..];
            let svc_form =
                rest.starts_with(b".svc") && rest.get(4).is_none_or(|&c| !is_label_char(c));
            let short_form = match rest.first() {
                None => true,
                Some(b'.') => rest.get(1).is_none_or(|&c| !is_label_char(c)),
                Some(&c) => !is_label_char(c),
            };
            if svc_form || (short_form && self.services.contains(service)) {
                out.push_str(&text[copied..=dot]);
                out.push_str(self.target);
                copied = end;
            }
        }
        if copied == 0 {
            return None;
        }
        out.push_str(&text[copied..]);
        Some(out)
    }

    fn walk(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Some(new) = self.dns(s) {
                    *s = new;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.walk(v)),
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    match key.as_str() {
                        "namespaceSelector" => self.namespace_selector(v),
                        "podAffinity" | "podAntiAffinity" => self.affinity_namespaces(v),
                        _ => {}
                    }
                    self.walk(v);
                }
            }
            _ => {}
        }
    }

    fn is_source(&self, v: &Value) -> bool {
        self.source.is_some() && v.as_str() == self.source
    }

    fn namespace_selector(&self, selector: &mut Value) {
        let target = Value::String(self.target.to_owned());
        if let Some(v) = selector
            .get_mut("matchLabels")
            .and_then(|m| m.get_mut(labels::NAMESPACE_NAME))
            && self.is_source(v)
        {
            *v = target.clone();
        }
        let Some(expressions) = selector
            .get_mut("matchExpressions")
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        for e in expressions {
            if e["key"].as_str() != Some(labels::NAMESPACE_NAME) {
                continue;
            }
            if let Some(values) = e.get_mut("values").and_then(Value::as_array_mut) {
                for v in values.iter_mut().filter(|v| self.is_source(v)) {
                    *v = target.clone();
                }
            }
        }
    }

    fn affinity_namespaces(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    if key == "namespaces"
                        && let Some(list) = v.as_array_mut()
                    {
                        for n in list.iter_mut().filter(|n| self.is_source(n)) {
                            *n = Value::String(self.target.to_owned());
                        }
                    } else {
                        self.affinity_namespaces(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.affinity_namespaces(v)),
            _ => {}
        }
    }

    /// Secret `data` holds base64; its decoded text is rewritten when it is UTF-8.
    fn secret_data(&self, data: &mut Value) {
        let Some(data) = data.as_object_mut() else {
            return;
        };
        for v in data.values_mut() {
            let Some(text) = v
                .as_str()
                .and_then(|b| BASE64.decode(b).ok())
                .and_then(|raw| String::from_utf8(raw).ok())
            else {
                continue;
            };
            if let Some(new) = self.dns(&text) {
                *v = Value::String(BASE64.encode(new));
            }
        }
    }
}

/// Rewrite references to the source namespace in every field but the object's identity, point
/// RoleBinding ServiceAccount subjects of the source namespace at the target, and a Gateway API
/// route's parents and backends as [`super::routes::rewrite`] says.
pub(crate) fn rewrite(obj: &mut Obj, class: Class, rw: &Rewriter<'_>) {
    let Some(map) = obj.value.as_object_mut() else {
        return;
    };
    for (key, v) in map.iter_mut() {
        match key.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                if let Some(meta) = v.as_object_mut() {
                    for (_, v) in meta.iter_mut().filter(|(k, _)| k.as_str() != "name") {
                        rw.walk(v);
                    }
                }
            }
            "data" if class == Class::Builtin(Builtin::Secret) => rw.secret_data(v),
            _ => rw.walk(v),
        }
    }
    if let Class::Builtin(b) = class
        && b.is_route()
    {
        super::routes::rewrite(&mut obj.value, rw.source);
    }
    if class == Class::Builtin(Builtin::RoleBinding)
        && let Some(subjects) = obj.value["subjects"].as_array_mut()
    {
        for subject in subjects {
            if subject["kind"].as_str() != Some("ServiceAccount") {
                continue;
            }
            let ns = subject["namespace"].as_str().unwrap_or_default();
            if ns.is_empty() || Some(ns) == rw.source {
                subject["namespace"] = Value::String(rw.target.to_owned());
            }
        }
    }
}

/// Set `labels` on `meta`, first removing the keys in `remove`.
fn set_labels(meta: &mut Value, labels: &[(&'static str, String)], remove: &[&str]) {
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let entry = &mut meta["labels"];
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    if let Some(map) = entry.as_object_mut() {
        for key in remove {
            map.remove(*key);
        }
        for (k, v) in labels {
            map.insert((*k).to_owned(), Value::String(v.clone()));
        }
    }
}

/// Put the object in the preview namespace and label it (and its pod templates) as the
/// preview's; selectors are never touched.
pub(crate) fn identify_as_preview(obj: &mut Obj, class: Class, ctx: &PreviewContext) {
    let paths = template_paths(obj, class);
    let stale: &[&str] = if ctx.pr.is_none() { &[labels::PR] } else { &[] };
    let meta = &mut obj.value["metadata"];
    set_labels(meta, &label_pairs(ctx), stale);
    meta["namespace"] = Value::String(ctx.namespace.to_string());
    let annotations = &mut meta["annotations"];
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    annotations[labels::REPOSITORY_ANNOTATION] = Value::String(ctx.repo.to_string());
    if class == Class::Extra {
        return;
    }
    let template_labels = template_labels(ctx);
    let not_in_templates = [labels::PREVIEW, labels::PR, labels::SHA];
    if class == Class::Builtin(Builtin::CronJob)
        && let Some(job_meta) = get_mut(&mut obj.value, &["spec", "jobTemplate"])
    {
        set_labels(
            &mut job_meta["metadata"],
            &template_labels,
            &not_in_templates,
        );
    }
    for path in paths {
        if let Some(template) = get_mut(&mut obj.value, path) {
            set_labels(
                &mut template["metadata"],
                &template_labels,
                &not_in_templates,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rewriter(services: &BTreeSet<String>) -> Rewriter<'_> {
        Rewriter {
            source: Some("shop-staging"),
            target: "shop-pr-42",
            services,
        }
    }

    #[test]
    fn dns_names_of_the_source_namespace_follow_the_copy() {
        let services: BTreeSet<String> = ["db", "zk-hs"].map(str::to_owned).into();
        let rw = rewriter(&services);
        let table = [
            ("db.shop-staging", Some("db.shop-pr-42")),
            ("db.shop-staging.svc", Some("db.shop-pr-42.svc")),
            (
                "db.shop-staging.svc.cluster.local",
                Some("db.shop-pr-42.svc.cluster.local"),
            ),
            (
                "postgres://u:p@db.shop-staging.svc.cluster.local:5432/app",
                Some("postgres://u:p@db.shop-pr-42.svc.cluster.local:5432/app"),
            ),
            (
                "http://db.shop-staging:8080/x,http://db.shop-staging/y",
                Some("http://db.shop-pr-42:8080/x,http://db.shop-pr-42/y"),
            ),
            (
                "zk-0.zk-hs.shop-staging.svc.cluster.local:2181",
                Some("zk-0.zk-hs.shop-pr-42.svc.cluster.local:2181"),
            ),
            (
                "connect to db.shop-staging.",
                Some("connect to db.shop-pr-42."),
            ),
            ("cache.shop-staging.svc", Some("cache.shop-pr-42.svc")),
            ("cache.shop-staging", None),
            ("db.shop-staging.example.com", None),
            ("db.shop-staging-old.svc", None),
            ("db.shop-staging.svcx", None),
            ("shop-staging", None),
            (".shop-staging.svc", None),
            ("-.shop-staging.svc", None),
            ("db.shop-stagingx", None),
            ("nothing here", None),
        ];
        for (text, want) in table {
            assert_eq!(rw.dns(text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn nothing_is_rewritten_without_a_source_namespace() {
        let services = BTreeSet::new();
        let rw = Rewriter {
            source: None,
            target: "x",
            services: &services,
        };
        assert_eq!(rw.dns("db.shop-staging.svc"), None);
    }

    #[test]
    fn namespace_selectors_and_affinity_follow_the_copy() {
        let services = BTreeSet::new();
        let rw = rewriter(&services);
        let mut v = json!({
            "ingress": [{"from": [
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shop-staging"}}},
                {"namespaceSelector": {"matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["shop-staging", "monitoring"]}
                ]}},
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
            ]}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"namespaces": ["shop-staging", "other"], "topologyKey": "x"}
            ]}},
            "other": {"namespaces": ["shop-staging"]}
        });
        rw.walk(&mut v);
        assert_eq!(
            v,
            json!({
                "ingress": [{"from": [
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shop-pr-42"}}},
                    {"namespaceSelector": {"matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["shop-pr-42", "monitoring"]}
                    ]}},
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
                ]}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"namespaces": ["shop-pr-42", "other"], "topologyKey": "x"}
                ]}},
                "other": {"namespaces": ["shop-staging"]}
            })
        );
    }

    #[test]
    fn secret_data_is_rewritten_inside_base64() {
        let services = BTreeSet::new();
        let rw = rewriter(&services);
        let mut data = json!({
            "url": BASE64.encode("postgres://db.shop-staging.svc:5432/app"),
            "binary": BASE64.encode([0xff, 0xfe]),
            "plain": BASE64.encode("hello"),
        });
        let before = data.clone();
        rw.secret_data(&mut data);
        assert_eq!(
            data["url"],
            json!(BASE64.encode("postgres://db.shop-pr-42.svc:5432/app"))
        );
        assert_eq!(data["binary"], before["binary"]);
        assert_eq!(data["plain"], before["plain"]);
    }
}
