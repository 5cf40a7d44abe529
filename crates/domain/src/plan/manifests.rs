//! Blueprint manifests: multi-document YAML as users write it, parsed into objects. Empty
//! documents are skipped, `kind: List` (and `*List`) documents are flattened into their items
//! (one level), and every error names the document (counted from 1 as the file shows them,
//! empty ones included) and, for syntax errors, the line. A key repeated in a mapping is
//! accepted as kubectl accepts it (the last value wins), with a warning naming document, line
//! and key.

use std::fmt;

use serde_json::Value;

use super::yaml;

/// Why manifests cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("document {document} (line {line}, column {column}): {message}")]
    Syntax {
        document: usize,
        line: u64,
        column: u64,
        message: String,
    },
    /// Past one of the reader's limits (nesting 64 deep, 255 deep in flow style, 1,024
    /// documents, 250,000 nodes, 50,000 aliases, aliases replaying more events than the text
    /// has bytes): refused before it is
    /// built, so that a small text cannot make a large amount of work.
    #[error("document {document} (line {line}, column {column}): {message}")]
    Limit {
        document: usize,
        line: u64,
        column: u64,
        message: String,
    },
    #[error("document {document}{}: {message}", item.map(|i| format!(", item {i}")).unwrap_or_default())]
    Object {
        document: usize,
        /// The item (from 1) of a `List` document.
        item: Option<usize>,
        message: String,
    },
}

/// Something in the manifests that kubectl accepts but is probably a mistake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManifestWarning {
    /// A key repeated in one mapping: the last value is used.
    DuplicateKey {
        document: usize,
        line: u64,
        /// From the document's root, e.g. `metadata.labels.app`.
        key: String,
    },
}

impl fmt::Display for ManifestWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateKey {
                document,
                line,
                key,
            } => write!(
                f,
                "document {document} (line {line}): duplicate key {key}: the last value is used, as kubectl does"
            ),
        }
    }
}

/// The objects of some manifests, and what is suspicious about them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifests {
    pub objects: Vec<Value>,
    pub warnings: Vec<ManifestWarning>,
}

/// Parse multi-document YAML into Kubernetes objects (each with `apiVersion`, `kind` and
/// `metadata.name`). Warnings are dropped: use [`Manifests::parse`] where people can read them.
pub fn parse_manifests(yaml: &str) -> Result<Vec<Value>, ManifestError> {
    Manifests::parse(yaml).map(|m| m.objects)
}

impl Manifests {
    /// Parse multi-document YAML into Kubernetes objects (each with `apiVersion`, `kind` and
    /// `metadata.name`), with a warning for each repeated key.
    pub fn parse(yaml: &str) -> Result<Self, ManifestError> {
        parse(yaml)
    }
}

fn parse(yaml: &str) -> Result<Manifests, ManifestError> {
    let starts = document_starts(yaml);
    let docs = yaml::documents(yaml).map_err(|e| {
        let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
        let (document, message) = (document_of(&starts, line), syntax_message(&e.to_string()));
        if yaml::is_limit(&e) {
            ManifestError::Limit {
                document,
                line,
                column,
                message,
            }
        } else {
            ManifestError::Syntax {
                document,
                line,
                column,
                message,
            }
        }
    })?;
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for doc in docs {
        let document = document_of(&starts, doc.referenced.line());
        let yaml::Document { value, duplicates } = doc.value;
        warnings.extend(
            duplicates
                .into_iter()
                .map(|d| ManifestWarning::DuplicateKey {
                    document,
                    line: d.line,
                    key: d.path,
                }),
        );
        if value.is_null() {
            continue;
        }
        let fail = |item, message: String| ManifestError::Object {
            document,
            item,
            message,
        };
        let is_list = value["kind"].as_str().is_some_and(|k| k.ends_with("List"))
            && value.get("items").is_some();
        if !is_list {
            check_object(&value).map_err(|m| fail(None, m))?;
            out.push(value);
            continue;
        }
        let Some(items) = value["items"].as_array() else {
            return Err(fail(None, "items of a List must be a sequence".to_owned()));
        };
        for (i, item) in items.iter().enumerate() {
            check_object(item).map_err(|m| fail(Some(i + 1), m))?;
            out.push(item.clone());
        }
    }
    Ok(Manifests {
        objects: out,
        warnings,
    })
}

/// The parser's message without its own `error: line L column C: ` prefix (the error carries
/// the location separately).
fn syntax_message(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default().trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let without_location = first
        .strip_prefix("line ")
        .and_then(|rest| rest.split_once(": "))
        .map_or(first, |(_, text)| text);
    without_location.to_owned()
}

/// What kind of value `v` is, as a message says it.
pub(super) fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

/// The top-level fields of a `kustomization.yaml` (Kustomize's `Kustomization` and
/// `Component`), which is often written without `apiVersion` and `kind`.
const KUSTOMIZE_FIELDS: [&str; 24] = [
    "resources",
    "bases",
    "components",
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
    "images",
    "namePrefix",
    "nameSuffix",
    "commonLabels",
    "labels",
    "commonAnnotations",
    "replicas",
    "helmCharts",
    "generators",
    "transformers",
    "crds",
    "vars",
    "replacements",
    "buildMetadata",
    "sortOptions",
];

/// Whether `v` is a Kustomize file rather than an object: `kustomize.config.k8s.io`'s
/// `Kustomization` or `Component`, or, with neither `apiVersion` nor `kind`, a mapping of
/// Kustomize's fields.
fn is_kustomization(v: &Value) -> bool {
    let kustomize_api = v["apiVersion"]
        .as_str()
        .is_some_and(|a| a.starts_with("kustomize.config.k8s.io/"));
    let kind = v["kind"].as_str();
    if kustomize_api && matches!(kind, Some("Kustomization" | "Component")) {
        return true;
    }
    let Value::Object(fields) = v else {
        return false;
    };
    v["apiVersion"].is_null()
        && kind.is_none()
        && fields
            .keys()
            .any(|k| KUSTOMIZE_FIELDS.contains(&k.as_str()))
}

/// What to say of a Kustomize file met among manifests.
pub(super) const KUSTOMIZE: &str = "a Kustomize file (kustomization.yaml), not a Kubernetes \
     object: Sandcastle takes rendered manifests here; name the overlay in the Blueprint's \
     `source.kustomize` (built at each pull request's commit), render it with \
     `sandcastle render --kustomize DIR`, or build it first (`kustomize build DIR > \
     manifests.yaml`) and give Sandcastle that file";

fn check_object(v: &Value) -> Result<(), String> {
    if !v.is_object() {
        return Err(format!(
            "expected a Kubernetes object (a mapping), found {}",
            describe(v)
        ));
    }
    if is_kustomization(v) {
        return Err(KUSTOMIZE.to_owned());
    }
    for field in ["apiVersion", "kind"] {
        match &v[field] {
            Value::String(s) if !s.is_empty() => {}
            Value::Null => return Err(format!("{field} is missing")),
            other => {
                return Err(format!(
                    "{field} must be a non-empty string, found {}",
                    describe(other)
                ));
            }
        }
    }
    match &v["metadata"]["name"] {
        Value::String(s) if !s.is_empty() => Ok(()),
        Value::Null if v["metadata"]["generateName"].is_string() => Err(
            "metadata.name is missing (generateName is not supported: a preview needs stable names)"
                .to_owned(),
        ),
        Value::Null => Err("metadata.name is missing".to_owned()),
        other => Err(format!(
            "metadata.name must be a non-empty string, found {}",
            describe(other)
        )),
    }
}

fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
}

/// The line (from 1) each document starts on. Every `---` marker starts a document, except a
/// first one with only comments, blank lines and directives before it (which opens the first
/// document); content after a `...` end marker starts a new document too.
fn document_starts(yaml: &str) -> Vec<u64> {
    let mut starts = vec![1];
    let mut content = false;
    let mut ended = false;
    let mut marked = false;
    for (n, line) in (1u64..).zip(yaml.lines()) {
        let trimmed = line.trim_start();
        if is_marker(line, "---") {
            if content || ended || marked {
                starts.push(n);
            } else if let Some(last) = starts.last_mut() {
                *last = n;
            }
            marked = true;
            let rest = line[3..].trim_start();
            content = !rest.is_empty() && !rest.starts_with('#');
            ended = false;
        } else if is_marker(line, "...") {
            ended = true;
            content = false;
        } else if !trimmed.is_empty() && !trimmed.starts_with('#') && !line.starts_with('%') {
            if ended {
                starts.push(n);
                ended = false;
            }
            content = true;
        }
    }
    starts
}

/// The document (from 1) holding `line`.
fn document_of(starts: &[u64], line: u64) -> usize {
    starts.iter().filter(|s| **s <= line).count().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_parsed_and_empty_ones_skipped() {
        let yaml = "# header\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n# only a comment\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n";
        let objects = parse_manifests(yaml).unwrap();
        let names: Vec<&str> = objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(parse_manifests("").unwrap(), Vec::<Value>::new());
    }

    #[test]
    fn lists_are_flattened() {
        let yaml = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n---\napiVersion: v1\nkind: ConfigMapList\nitems: []\n";
        let objects = parse_manifests(yaml).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1]["metadata"]["name"], "b");
    }

    #[test]
    fn errors_name_the_document() {
        let ok = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n";
        let table = [
            (
                format!("{ok}---\nkind: ConfigMap\nmetadata: {{name: b}}\n"),
                "document 2: apiVersion is missing",
            ),
            (
                format!("{ok}---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{}}\n"),
                "document 3: metadata.name is missing",
            ),
            (
                format!("{ok}---\n- a\n- b\n"),
                "document 2: expected a Kubernetes object (a mapping), found a sequence",
            ),
            (
                format!(
                    "{ok}---\napiVersion: v1\nkind: List\nitems:\n- {{apiVersion: v1, kind: X}}\n"
                ),
                "document 2, item 1: metadata.name is missing",
            ),
            (
                format!("{ok}---\napiVersion: v1\nkind: 7\nmetadata: {{name: x}}\n"),
                "document 2: kind must be a non-empty string, found a number",
            ),
            (
                format!("{ok}---\napiVersion: v1\nkind: Pod\nmetadata: {{generateName: x-}}\n"),
                "document 2: metadata.name is missing (generateName is not supported: a preview needs stable names)",
            ),
        ];
        for (yaml, want) in table {
            assert_eq!(parse_manifests(&yaml).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn kustomize_files_are_named_as_such() {
        for yaml in [
            "resources:\n- deployment.yaml\n",
            "namePrefix: dev-\nimages: [{name: web, newTag: v2}]\n",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\n",
            "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
        ] {
            assert_eq!(
                parse_manifests(yaml).unwrap_err().to_string(),
                format!("document 1: {KUSTOMIZE}"),
                "{yaml}"
            );
        }
        // Objects that merely share a field name are objects, judged as such.
        for (yaml, want) in [
            (
                "kind: ConfigMap\nresources: []\nmetadata: {name: a}\n",
                "document 1: apiVersion is missing",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nimages: []\n",
                "document 1: metadata.name is missing",
            ),
            ("metadata: {name: a}\n", "document 1: apiVersion is missing"),
        ] {
            assert_eq!(parse_manifests(yaml).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn duplicate_keys_are_accepted_with_a_warning_and_the_last_value() {
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  labels:\n    app: one\n    app.kubernetes.io/name: first\n    app: two\n    app.kubernetes.io/name: second\ndata:\n  k: v\nitems: [{x: 1, x: 2}]\ndata:\n  k: w\n";
        let parsed = Manifests::parse(yaml).unwrap();
        assert_eq!(parsed.objects.len(), 2);
        let b = &parsed.objects[1];
        assert_eq!(b["metadata"]["labels"]["app"], "two");
        assert_eq!(b["metadata"]["labels"]["app.kubernetes.io/name"], "second");
        assert_eq!(b["data"]["k"], "w");
        let warnings: Vec<String> = parsed.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [
                "document 2 (line 12): duplicate key metadata.labels.app: the last value is used, as kubectl does",
                "document 2 (line 13): duplicate key metadata.labels[\"app.kubernetes.io/name\"]: the last value is used, as kubectl does",
                "document 2 (line 16): duplicate key items[0].x: the last value is used, as kubectl does",
                "document 2 (line 17): duplicate key data: the last value is used, as kubectl does",
            ]
        );
        assert_eq!(parse_manifests(yaml).unwrap(), parsed.objects);
    }

    #[test]
    fn syntax_errors_name_document_and_line() {
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: [unclosed\n";
        let err = parse_manifests(yaml).unwrap_err();
        assert_eq!(
            err.to_string(),
            "document 2 (line 6, column 7): unclosed bracket '['"
        );
        let ManifestError::Syntax { document, line, .. } = err else {
            panic!("expected a syntax error, got {err:?}");
        };
        assert_eq!((document, line), (2, 6));
    }

    #[test]
    fn the_readers_limits_are_named_apart_from_syntax_errors() {
        let ok = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n";
        let deep = format!("{ok}---\na: {}{}\n", "[".repeat(100), "]".repeat(100));
        let err = parse_manifests(&deep).unwrap_err();
        assert!(
            matches!(
                err,
                ManifestError::Limit {
                    document: 2,
                    line: 5,
                    ..
                }
            ),
            "{err:?}"
        );
        let flow = format!("a: {}{}\n", "[".repeat(300), "]".repeat(300));
        assert!(
            matches!(
                parse_manifests(&flow),
                Err(ManifestError::Limit { document: 1, .. })
            ),
            "{:?}",
            parse_manifests(&flow)
        );
        let many = "---\na: 1\n".repeat(1_025);
        assert!(matches!(
            parse_manifests(&many),
            Err(ManifestError::Limit { .. })
        ));
        assert!(matches!(
            parse_manifests("a: *nowhere\n"),
            Err(ManifestError::Syntax { .. })
        ));
    }

    #[test]
    fn document_starts_follow_markers() {
        let yaml = "# c\n---\na: 1\n---\nb: 2\n...\nc: 3\n--- \nd: 4\n";
        assert_eq!(document_starts(yaml), vec![2, 4, 7, 8]);
        assert_eq!(document_starts("---\n---\na: 1\n"), vec![1, 2]);
        assert_eq!(document_of(&[2, 4, 7, 8], 5), 2);
        assert_eq!(document_of(&[2, 4], 1), 1);
    }
}
