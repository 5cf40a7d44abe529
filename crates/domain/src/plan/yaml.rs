//! YAML documents read into JSON values the way kubectl reads them: a key repeated in a mapping
//! is not an error, its last value wins. Each repeated key is remembered with its path and line,
//! so that the reader can be told (YAML requires unique keys; the file is wrong even though it
//! applies).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::options::DuplicateKeyPolicy;
use serde_saphyr::{Options, Spanned};

/// A key found more than once in one mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DuplicateKey {
    /// From the document's root to the key, e.g. `metadata.labels["app.kubernetes.io/name"]`.
    pub path: String,
    /// The line (from 1) of the repeated key.
    pub line: u64,
}

/// One document: its value and the keys it repeats, in the order they appear.
#[derive(Debug)]
pub(crate) struct Document {
    pub value: Value,
    pub duplicates: Vec<DuplicateKey>,
}

/// Aliases may replay at most this many events, or one per byte of the text if that is more.
/// serde-saphyr's own limit (a million) lets a few hundred bytes of nested aliases ("billion
/// laughs") build a million values; tied to the size of the text, the work of a parse is too.
pub(crate) const MIN_REPLAYED_EVENTS: usize = 10_000;

/// Parser options for `yaml`: repeated keys reach [`Document`]'s visitor, which keeps the last
/// value; aliases replay at most as many events as [`MIN_REPLAYED_EVENTS`] or the text's length.
/// The rest of serde-saphyr's default budget stands: nesting 64 deep, 1,024 documents, 250,000
/// nodes, 50,000 aliases.
pub(crate) fn options(yaml: &str) -> Options {
    serde_saphyr::options! {
        duplicate_keys: DuplicateKeyPolicy::PassThrough,
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: yaml.len().max(MIN_REPLAYED_EVENTS),
        },
    }
}

/// Every document of `yaml` (empty ones skipped), with where each starts.
pub(crate) fn documents(yaml: &str) -> Result<Vec<Spanned<Document>>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options(yaml, options(yaml))
}

/// Whether `e` is one of the reader's limits (its budget, the alias replay limits, or the
/// scanner's limit of 255 nested flow collections, which it reports by message only) rather
/// than broken YAML.
pub(crate) fn is_limit(e: &serde_saphyr::Error) -> bool {
    use serde_saphyr::Error;
    let mut e = e;
    while let Error::WithSnippet { error, .. } | Error::AliasError { error, .. } = e {
        e = error;
    }
    match e {
        Error::ExternalMessage { msg, .. } => msg == "recursion limit exceeded",
        _ => matches!(
            e,
            Error::Budget { .. }
                | Error::AliasReplayCounterOverflow { .. }
                | Error::AliasReplayLimitExceeded { .. }
                | Error::AliasExpansionLimitExceeded { .. }
                | Error::AliasReplayStackDepthExceeded { .. }
        ),
    }
}

/// A duplicate found inside a child, seen from its parent (`segment` is the child's place).
#[derive(Debug)]
struct Partial {
    segments: Vec<String>,
    line: u64,
}

/// A value and the duplicates found inside it, paths from that value down.
#[derive(Debug)]
struct Tree {
    value: Value,
    duplicates: Vec<Partial>,
}

impl Tree {
    fn leaf(value: Value) -> Self {
        Self {
            value,
            duplicates: Vec::new(),
        }
    }
}

/// `name`, or `["name"]` when it would not read as one path segment.
fn key_segment(key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if plain {
        key.to_owned()
    } else {
        format!("[{key:?}]")
    }
}

fn path(segments: &[String]) -> String {
    let mut out = String::new();
    for segment in segments.iter().rev() {
        if !out.is_empty() && !segment.starts_with('[') {
            out.push('.');
        }
        out.push_str(segment);
    }
    out
}

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let tree = Tree::deserialize(d)?;
        Ok(Self {
            value: tree.value,
            duplicates: tree
                .duplicates
                .into_iter()
                .map(|p| DuplicateKey {
                    path: path(&p.segments),
                    line: p.line,
                })
                .collect(),
        })
    }
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TreeVisitor)
    }
}

/// Builds the values `serde_json::Value`'s own visitor builds, and remembers repeated keys.
struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Tree, E> {
        Ok(Tree::leaf(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Tree, E> {
        Ok(Tree::leaf(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Tree, E> {
        Ok(Tree::leaf(v.into()))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Tree, E> {
        Number::from_i128(v)
            .map(|n| Tree::leaf(Value::Number(n)))
            .ok_or_else(|| E::custom(format!("number {v} is out of range")))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Tree, E> {
        Number::from_u128(v)
            .map(|n| Tree::leaf(Value::Number(n)))
            .ok_or_else(|| E::custom(format!("number {v} is out of range")))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Tree, E> {
        Ok(Tree::leaf(
            Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }

    fn visit_str<E>(self, v: &str) -> Result<Tree, E> {
        Ok(Tree::leaf(Value::String(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Tree, E> {
        Ok(Tree::leaf(Value::String(v)))
    }

    fn visit_unit<E>(self) -> Result<Tree, E> {
        Ok(Tree::leaf(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Tree, E> {
        Ok(Tree::leaf(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Tree, D::Error> {
        Tree::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut items = Vec::new();
        let mut duplicates = Vec::new();
        while let Some(item) = seq.next_element::<Tree>()? {
            let segment = format!("[{}]", items.len());
            duplicates.extend(item.duplicates.into_iter().map(|mut p| {
                p.segments.push(segment.clone());
                p
            }));
            items.push(item.value);
        }
        Ok(Tree {
            value: Value::Array(items),
            duplicates,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut out = Map::new();
        let mut duplicates = Vec::new();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let segment = key_segment(&key.value);
            // A repeated key replaces the earlier value (what was repeated inside the earlier
            // one was in the file all the same, and stays reported).
            if out.contains_key(&key.value) {
                duplicates.push(Partial {
                    segments: vec![segment.clone()],
                    line: key.referenced.line(),
                });
            }
            let value: Tree = map.next_value()?;
            duplicates.extend(value.duplicates.into_iter().map(|mut p| {
                p.segments.push(segment.clone());
                p
            }));
            out.insert(key.value, value.value);
        }
        Ok(Tree {
            value: Value::Object(out),
            duplicates,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_as_plain_yaml_reads_them() {
        let yaml = "a: 1\nb: -2\nc: 1.5\nd: true\ne: null\nf: ~\ng: \"7\"\nh: [1, x, {i: j}]\n1: k\nbig: 18446744073709551615\nanchor: &x {p: 1}\nalias: *x\nmerged:\n  <<: *x\n  q: 2\nyes: no\nempty:\n---\n- 1\n- two\n---\nplain\n";
        let want: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap();
        let got: Vec<Value> = documents(yaml)
            .unwrap()
            .into_iter()
            .map(|d| d.value.value)
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn repeated_keys_keep_the_last_value_and_are_named_by_path() {
        let yaml = "a: 1\nb:\n  c: [{d: 1, d: 2}]\n  \"x.y\": 1\n  \"x.y\": 2\na: {e: 1, e: 2}\n";
        let docs = documents(yaml).unwrap();
        let doc = &docs[0].value;
        assert_eq!(
            doc.value,
            serde_json::json!({"a": {"e": 2}, "b": {"c": [{"d": 2}], "x.y": 2}})
        );
        let found: Vec<(&str, u64)> = doc
            .duplicates
            .iter()
            .map(|d| (d.path.as_str(), d.line))
            .collect();
        assert_eq!(
            found,
            [("b.c[0].d", 3), ("b[\"x.y\"]", 5), ("a", 6), ("a.e", 6)]
        );
    }

    /// "Billion laughs": `levels` levels of ten aliases of the level below.
    fn laughs(levels: usize) -> String {
        let mut yaml = "l0: &l0 lol\n".to_owned();
        for i in 1..=levels {
            let aliases = vec![format!("*l{}", i - 1); 10].join(", ");
            yaml.push_str(&format!("l{i}: &l{i} [{aliases}]\n"));
        }
        yaml
    }

    fn strings(v: &Value) -> usize {
        match v {
            Value::String(_) => 1,
            Value::Array(items) => items.iter().map(strings).sum(),
            Value::Object(map) => map.values().map(strings).sum(),
            _ => 0,
        }
    }

    #[test]
    fn aliases_replay_no_more_events_than_the_text_has_bytes() {
        let yaml = laughs(5);
        // serde-saphyr's own limits let these 307 bytes build 111,111 strings.
        let unbounded: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        assert_eq!((yaml.len(), strings(&unbounded[0])), (307, 111_111));
        let err = documents(&yaml).unwrap_err();
        assert!(is_limit(&err), "{err}");
        assert!(
            err.to_string().contains("alias replay limit exceeded"),
            "{err}"
        );
        // Aliases within the limit read as before.
        let docs = documents(&laughs(3)).unwrap();
        assert_eq!(strings(&docs[0].value.value), 1_111);
    }
}
