//! Hostile blueprints for the clone plan: manifest text (arbitrary, mutated bytes of the
//! fixtures, structured YAML with nasty scalars, anchors, tags and merge keys) through
//! [`Manifests::parse`], fixture objects with nasty values in random places and random host
//! templates through [`plan`], a corpus of YAML bombs, and blueprints of growing size. Every
//! refusal is a [`ManifestError`] variant or a [`Refused`] whose problems each name an object.

use std::fs;
use std::path::PathBuf;
use std::sync::LazyLock;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use sandcastle_hostile::{self as hostile, NASTY_ATOMS, SIZES, nasty_text};

/// A fixture of `fixtures/blueprints/`: its manifest text, objects, Blueprint and context.
struct Fixture {
    name: String,
    text: String,
    objects: Vec<Value>,
    blueprint: BlueprintSpec,
    ctx: PreviewContext,
}

static FIXTURES: LazyLock<Vec<Fixture>> = LazyLock::new(|| {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/blueprints");
    let mut dirs: Vec<PathBuf> = fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let mut files: Vec<PathBuf> = fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
                .collect();
            files.sort();
            let (mut text, mut extra, mut c) = (String::new(), String::new(), ctx());
            c.source_namespace = None;
            for file in files {
                let content = fs::read_to_string(&file).unwrap();
                match file.file_name().and_then(|n| n.to_str()) {
                    Some("blueprint.yaml") => extra = content,
                    Some("source.yaml") => {
                        let v: Value = serde_saphyr::from_str(&content).unwrap();
                        c.source_namespace = v["namespace"].as_str().map(str::to_owned);
                    }
                    _ => text.push_str(&format!("{content}\n---\n")),
                }
            }
            let source = match &c.source_namespace {
                Some(ns) => format!("source: {{namespace: {ns}}}"),
                None => "source: {manifests: {configMap: blueprint}}".to_owned(),
            };
            let spec = format!("{source}\nrepositories: [acme/shop]\n{extra}");
            Fixture {
                name: dir.file_name().unwrap().to_string_lossy().into_owned(),
                objects: parse_manifests(&text).unwrap(),
                text,
                blueprint: serde_saphyr::from_str(&spec).unwrap(),
                ctx: c,
            }
        })
        .collect()
});

/// A DNS name an Ingress accepts, judged apart from the planner.
fn dns_name(host: &str) -> bool {
    host.len() <= 253
        && host.split('.').all(|l| {
            (1..=63).contains(&l.len())
                && l.bytes()
                    .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// What holds of every plan: each object names the preview, and the plan reads back from the
/// YAML `sandcastle render` prints; every Ingress host and route hostname is a DNS name.
fn sound(result: &Result<Plan, Refused>, ctx: &PreviewContext) -> Result<(), TestCaseError> {
    match result {
        Ok(p) => {
            for o in p.objects() {
                prop_assert_eq!(&o["metadata"]["namespace"], &json!(ctx.namespace.as_str()));
                prop_assert_eq!(
                    &o["metadata"]["labels"]["sandcastle.dev/preview"],
                    &json!(ctx.preview.as_str())
                );
            }
            for o in p.objects().filter(|o| o["kind"] == "Ingress") {
                for r in o["spec"]["rules"].as_array().into_iter().flatten() {
                    if let Some(h) = r["host"].as_str().filter(|h| !h.is_empty()) {
                        prop_assert!(dns_name(h), "host {:?}", h);
                    }
                }
            }
            for o in p
                .objects()
                .filter(|o| o["kind"] == "HTTPRoute" || o["kind"] == "GRPCRoute")
            {
                for h in o["spec"]["hostnames"].as_array().into_iter().flatten() {
                    let h = h.as_str().unwrap_or_default();
                    prop_assert!(h.is_empty() || dns_name(h), "hostname {:?}", h);
                }
            }
            if let Some(url) = &p.url {
                let host = url.split_once("://").map(|(_, h)| h).unwrap_or_default();
                prop_assert!(dns_name(host), "url {:?}", url);
            }
            let yaml = p
                .to_yaml()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let back =
                parse_manifests(&yaml).map_err(|e| TestCaseError::fail(format!("{e}\n{yaml}")))?;
            let planned: Vec<Value> = p.objects().chain(&p.pre_delete).cloned().collect();
            prop_assert_eq!(back, planned);
        }
        Err(refused) => {
            prop_assert!(!refused.problems.is_empty());
            for problem in &refused.problems {
                prop_assert!(!problem.kind.is_empty() && !problem.name.is_empty());
                prop_assert!(!problem.reason.is_empty());
            }
        }
    }
    Ok(())
}

/// What holds of every parse: objects are Kubernetes objects, errors count documents from 1.
fn parsed_soundly(result: &Result<Manifests, ManifestError>) -> Result<(), TestCaseError> {
    match result {
        Ok(m) => {
            for o in &m.objects {
                for field in [&o["apiVersion"], &o["kind"], &o["metadata"]["name"]] {
                    prop_assert!(field.as_str().is_some_and(|s| !s.is_empty()), "{o}");
                }
            }
        }
        Err(
            ManifestError::Syntax { document, .. }
            | ManifestError::Object { document, .. }
            | ManifestError::Limit { document, .. },
        ) => prop_assert!(*document >= 1),
    }
    Ok(())
}

/// YAML scalars and nodes that readers treat differently.
fn scalars() -> impl Strategy<Value = String> {
    let fixed = [
        "~",
        "null",
        "Null",
        "NULL",
        "''",
        "\"\"",
        "yes",
        "no",
        "on",
        "off",
        "y",
        "n",
        "true",
        "0x1F",
        "0o17",
        "017",
        "1_000",
        "1e999999",
        "-1e999999",
        ".inf",
        "-.inf",
        ".nan",
        "18446744073709551616",
        "-9223372036854775809",
        "-0",
        "1.0e-400",
        "2001-12-14",
        "!!binary aGVsbG8=",
        "!!str 1",
        "!!int x",
        "!!python/object:os.system ls",
        "!!python/object/apply:os.system [ls]",
        "!custom x",
        "&a x",
        "*a",
        "*undefined",
        "{<<: {a: 1}}",
        "[&b [1, 2], *b]",
        "\"\\u0000\"",
        "\"\\ud800\"",
        "'\u{feff}'",
        "|\n  block",
        ">-\n  folded",
        "\"a\\\nb\"",
        "? complex\n: key",
    ];
    prop_oneof![
        3 => proptest::sample::select(fixed.to_vec()).prop_map(str::to_owned),
        1 => proptest::sample::select(NASTY_ATOMS).prop_map(|s| format!("{s:?}")),
        1 => "[a-zA-Z0-9 ._/-]{0,80}",
        1 => any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
    ]
}

/// A Deployment with nasty scalars in its fields, sometimes anchored and aliased.
fn structured_yaml() -> impl Strategy<Value = String> {
    proptest::collection::vec(scalars(), 8).prop_map(|v| {
        format!(
            "apiVersion: {}\nkind: Deployment\nmetadata:\n  name: {}\n  labels: &labels {{app: {}}}\nspec:\n  replicas: {}\n  selector: {{matchLabels: *labels}}\n  template:\n    metadata: {{labels: *labels}}\n    spec:\n      containers:\n      - name: app\n        image: {}\n        env: [{{name: A, value: {}}}]\n        resources: {{requests: {{cpu: {}}}, limits: {}}}\n",
            v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
        )
    })
}

#[test]
fn proptest_manifest_text_is_read_or_refused_by_name() {
    let text = prop_oneof![
        nasty_text(30),
        any::<String>(),
        structured_yaml(),
        (0..FIXTURES.len()).prop_flat_map(|i| {
            hostile::mutated(FIXTURES[i].text.clone().into_bytes())
                .prop_map(|b| String::from_utf8_lossy(&b).into_owned())
        }),
    ];
    hostile::check(
        "plan: manifest text is read or refused by name",
        text,
        |text| {
            let result = Manifests::parse(&text);
            parsed_soundly(&result)?;
            if let Ok(m) = result {
                let _ = plan(&m.objects, &FIXTURES[0].blueprint, &ctx());
            }
            Ok(())
        },
    );
}

#[test]
fn proptest_structured_manifests_plan_or_are_refused() {
    hostile::check(
        "plan: structured manifests plan or are refused",
        structured_yaml(),
        |text| {
            let result = Manifests::parse(&text);
            parsed_soundly(&result)?;
            if let Ok(m) = result {
                let c = ctx();
                sound(&plan(&m.objects, &blueprint(""), &c), &c)?;
            }
            Ok(())
        },
    );
}

/// JSON values in places the planner reads: wrong types, numbers at the edges, long and
/// non-ASCII text, nesting.
fn values() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        Just(json!(-0.0)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(1e308)),
        Just(json!(0)),
        Just(json!("")),
        Just(json!("ALL")),
        Just(json!("a".repeat(300))),
        Just(json!("\u{e9}".repeat(40))),
        nasty_text(6).prop_map(Value::String),
        "[a-z0-9.-]{0,70}".prop_map(Value::String),
        Just(json!([])),
        Just(json!({})),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-zA-Z]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every place in `v` (each object member and array item), as a chain of keys and indices.
fn places(v: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    let children: Vec<(Value, &Value)> = match v {
        Value::Object(map) => map.iter().map(|(k, v)| (json!(k), v)).collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (json!(i), v))
            .collect(),
        _ => Vec::new(),
    };
    for (seg, child) in children {
        at.push(seg);
        out.push(at.clone());
        places(child, at, out);
        at.pop();
    }
}

fn put(v: &mut Value, path: &[Value], new: Value) {
    let mut at = v;
    for seg in path {
        at = match seg {
            Value::String(k) => &mut at[k.as_str()],
            Value::Number(i) => &mut at[usize::try_from(i.as_u64().unwrap()).unwrap()],
            _ => unreachable!(),
        };
    }
    *at = new;
}

/// Places the planner looks at that random paths rarely reach.
const READ_PLACES: &[&[&str]] = &[
    &["spec", "template"],
    &["spec", "template", "spec"],
    &["spec", "template", "metadata"],
    &["spec", "template", "spec", "containers"],
    &["spec", "jobTemplate"],
    &["spec", "jobTemplate", "spec", "template"],
    &["spec", "rules"],
    &["spec", "tls"],
    &["spec", "selector"],
    &["spec", "ports"],
    &["metadata"],
    &["metadata", "labels"],
    &["metadata", "annotations"],
    &["metadata", "namespace"],
    &["metadata", "ownerReferences"],
    &["data"],
    &["subjects"],
    &["roleRef"],
];

#[test]
fn proptest_fixture_objects_with_nasty_values_plan_or_are_refused() {
    let strategy = (
        0..FIXTURES.len(),
        proptest::collection::vec(
            (
                any::<proptest::sample::Index>(),
                any::<proptest::sample::Index>(),
                0..3u8,
                values(),
            ),
            1..4,
        ),
    );
    hostile::check(
        "plan: fixture objects with nasty values plan or are refused",
        strategy,
        |(f, changes)| {
            let fixture = &FIXTURES[f];
            let mut objects = fixture.objects.clone();
            let mut done = Vec::new();
            for (object, place, how, value) in changes {
                let i = object.index(objects.len());
                let path: Vec<Value> = if how == 0 {
                    let p = READ_PLACES[place.index(READ_PLACES.len())];
                    p.iter().map(|s| json!(s)).collect()
                } else {
                    let mut all = Vec::new();
                    places(&objects[i], &mut Vec::new(), &mut all);
                    if all.is_empty() {
                        continue;
                    }
                    place.get(&all).clone()
                };
                // A path through a value that is not a container makes it one.
                let mut target = objects[i].clone();
                if path.iter().any(|s| s.is_number()) && pointer(&target, &path).is_none() {
                    continue;
                }
                ensure_objects(&mut target, &path);
                done.push(format!(
                    "{} {} at {path:?} = {value}",
                    target["kind"], target["metadata"]["name"]
                ));
                put(&mut target, &path, value);
                objects[i] = target;
            }
            let result =
                std::panic::catch_unwind(|| plan(&objects, &fixture.blueprint, &fixture.ctx))
                    .map_err(|_| {
                        TestCaseError::fail(format!(
                            "{}: plan panicked after {done:?}",
                            fixture.name
                        ))
                    })?;
            sound(&result, &fixture.ctx)
                .map_err(|e| TestCaseError::fail(format!("{}: {e} after {done:?}", fixture.name)))
        },
    );
}

/// A list of nasty values, or a nasty value where a list belongs.
fn lists() -> impl Strategy<Value = Value> {
    prop_oneof![
        values(),
        proptest::collection::vec(values(), 0..4).prop_map(Value::Array),
    ]
}

#[test]
fn proptest_routes_with_nasty_hosts_parents_and_backends_plan_or_are_refused() {
    let strategy = (lists(), lists(), lists(), lists(), any::<bool>());
    hostile::check(
        "plan: routes with nasty hosts, parents and backends plan or are refused",
        strategy,
        |(hostnames, parents, backends, filters, known)| {
            let route = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": {"name": "web"}, "spec": {"hostnames": hostnames, "parentRefs": parents,
                "rules": [{"backendRefs": backends, "filters": filters}]}});
            let mut objects = objects(APP);
            objects.push(route);
            let mut c = ctx();
            if !known {
                c.source_namespace = None;
            }
            let result = std::panic::catch_unwind(|| plan(&objects, &blueprint(""), &c))
                .map_err(|_| TestCaseError::fail("plan panicked"))?;
            sound(&result, &c)
        },
    );
}

fn pointer<'v>(v: &'v Value, path: &[Value]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, seg| match seg {
        Value::String(k) => v.get(k.as_str()),
        Value::Number(i) => v.get(usize::try_from(i.as_u64()?).ok()?),
        _ => None,
    })
}

/// Make every value on the way to the end of `path` (keys only) an object, as YAML written by
/// hand would.
fn ensure_objects(v: &mut Value, path: &[Value]) {
    let mut at = v;
    for seg in path {
        if let Value::String(k) = seg {
            if !at.is_object() {
                *at = json!({});
            }
            at = &mut at[k.as_str()];
        } else if let Value::Number(i) = seg {
            at = &mut at[usize::try_from(i.as_u64().unwrap()).unwrap()];
        }
    }
}

/// Host templates of variables, labels, dots, hyphens, long and non-ASCII runs.
fn host_templates() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        proptest::sample::select(vec![
            "{{pr}}",
            "{{repo}}",
            "{{owner}}",
            "{{branch}}",
            "{{sha}}",
            "{{shortSha}}",
            "{{preview}}",
            "{{host}}",
            "{{nope}}",
            "{{",
            "}}",
            ".",
            "-",
            "--",
            "xn--",
            "A",
            "\u{e9}",
            "\u{fc}\u{fc}\u{fc}\u{fc}\u{fc}\u{fc}\u{fc}\u{fc}\u{fc}\u{fc}",
            "*",
            "_",
            " ",
            "example.com",
            "localhost",
        ])
        .prop_map(str::to_owned),
        "[a-z0-9]{1,70}",
        nasty_text(2),
    ];
    proptest::collection::vec(piece, 1..10).prop_map(|p| p.concat())
}

#[test]
fn proptest_host_templates_give_dns_names_or_a_named_refusal() {
    let with_ingress: Vec<usize> = (0..FIXTURES.len())
        .filter(|i| {
            FIXTURES[*i].objects.iter().any(|o| o["kind"] == "Ingress")
                && plan(
                    &FIXTURES[*i].objects,
                    &FIXTURES[*i].blueprint,
                    &FIXTURES[*i].ctx,
                )
                .is_ok()
        })
        .collect();
    assert!(!with_ingress.is_empty());
    let strategy = (
        proptest::sample::select(with_ingress),
        host_templates(),
        nasty_text(4),
    );
    hostile::check(
        "plan: host templates give DNS names or a named refusal",
        strategy,
        |(f, template, branch)| {
            let fixture = &FIXTURES[f];
            let mut bp = fixture.blueprint.clone();
            bp.host = Some(template);
            let mut c = fixture.ctx.clone();
            c.branch = branch;
            let result = plan(&fixture.objects, &bp, &c);
            if let Err(refused) = &result {
                prop_assert!(
                    refused
                        .problems
                        .iter()
                        .all(|p| p.kind == "Blueprint" && p.field.as_deref() == Some("spec.host")),
                    "{refused}"
                );
            }
            sound(&result, &c)
        },
    );
}

fn limit(result: Result<Manifests, ManifestError>) -> String {
    match result {
        Err(ManifestError::Limit { message, .. }) => message,
        other => panic!("expected a limit, got {other:?}"),
    }
}

/// Billion laughs: nine levels of ten aliases each, 10^9 strings if expanded.
fn laughs(levels: usize) -> String {
    let mut yaml =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\nl0: &l0 \"lol\"\n".to_owned();
    for i in 1..=levels {
        let aliases = vec![format!("*l{}", i - 1); 10].join(", ");
        yaml.push_str(&format!("l{i}: &l{i} [{aliases}]\n"));
    }
    yaml
}

#[test]
fn corpus_yaml_bombs_are_refused_by_a_limit() {
    let block_deep: String = (0..10_000)
        .map(|i| format!("{}a:\n", " ".repeat(i)))
        .collect();
    let nodes: String = (0..130_000).map(|i| format!("k{i}: v\n")).collect();
    let cases: Vec<(&str, String, &str)> = vec![
        ("billion laughs", laughs(9), "alias replay limit exceeded"),
        ("a million laughs", laughs(6), "alias replay limit exceeded"),
        (
            "flow nesting 10,000 deep",
            format!("a: {}{}", "[".repeat(10_000), "]".repeat(10_000)),
            "recursion limit exceeded",
        ),
        (
            "block nesting 10,000 deep",
            block_deep,
            "budget breached: Depth",
        ),
        (
            "2,000 documents",
            "---\na: 1\n".repeat(2_000),
            "budget breached: Documents",
        ),
        ("260,000 nodes", nodes, "budget breached: Nodes"),
        (
            "1,000 aliases of one anchor",
            format!("a: &a 1\nb: [{}]\n", vec!["*a"; 1_000].join(", ")),
            "budget breached: AliasAnchorRatio",
        ),
    ];
    hostile::corpus(
        "plan: YAML bombs are refused by a limit",
        cases,
        |(what, yaml, want)| {
            let message = limit(Manifests::parse(&yaml));
            assert!(message.starts_with(want), "{what}: {message}");
        },
    );
    // An anchor cannot hold an alias of itself.
    let itself = Manifests::parse("a: &a [*a]\n").unwrap_err();
    assert!(matches!(itself, ManifestError::Syntax { .. }), "{itself:?}");
}

#[test]
fn corpus_yaml_features_kubectl_users_write() {
    // Duplicate keys: the last wins, with a warning.
    let dup = Manifests::parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, name: b}\n")
        .unwrap();
    assert_eq!(dup.objects[0]["metadata"]["name"], "b");
    assert_eq!(dup.warnings.len(), 1);
    // Merge keys merge; anchors and aliases copy.
    let merged = Manifests::parse("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: &m {name: a}, data: {<<: {x: '1'}, y: '2'}}\n- {apiVersion: v1, kind: Secret, metadata: *m}\n").unwrap();
    assert_eq!(merged.objects[0]["data"], json!({"x": "1", "y": "2"}));
    assert_eq!(merged.objects[1]["metadata"]["name"], "a");
    // Anchors do not reach across documents.
    let across = Manifests::parse("a: &m 1\n---\nb: *m\n").unwrap_err();
    assert!(
        matches!(across, ManifestError::Syntax { document: 2, .. }),
        "{across:?}"
    );
    // Tags run nothing: a Python tag is a tag on a plain value.
    let tagged = Manifests::parse(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: !!python/object:os.system ls}\n",
    );
    assert_eq!(tagged.unwrap().objects[0]["data"]["x"], "ls");
    // A byte order mark, NUL, invalid escapes.
    let bom =
        Manifests::parse("\u{feff}apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n").unwrap();
    assert_eq!(bom.objects.len(), 1);
    for bad in ["apiVersion: v1\0\n", "a: \"\\ud800\"\n", "a: [\n"] {
        let err = Manifests::parse(bad).unwrap_err();
        assert!(
            matches!(err, ManifestError::Syntax { document: 1, .. }),
            "{bad:?}: {err:?}"
        );
    }
}

/// Colliding hosts get `-2`, `-3`… in one pass each (a set of the hosts taken and the next free
/// suffix of each base), so at every size every host is planned and distinct. Aliases never
/// replay more events than the manifests have bytes (and 10,000 besides), so the work of a
/// parse is bounded by the size of its text.
#[test]
fn corpus_blueprints_of_growing_size() {
    hostile::corpus("plan: blueprints of growing size", SIZES, |n| {
        let count = n / 25;
        let rules: String = (0..count)
            .map(|i| format!("  - host: a.h{i}.example.com\n"))
            .collect();
        let yaml = format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: web}}\nspec:\n  rules:\n{rules}---\n{APP}"
        );
        let p = run(&yaml, "").unwrap();
        let ingress = find(&p, "Ingress", "web");
        let hosts: std::collections::BTreeSet<&str> = ingress["spec"]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["host"].as_str().unwrap())
            .collect();
        assert_eq!(hosts.len(), count);
        assert!(hosts.iter().all(|h| dns_name(h)));
        // An anchor of n/50 items aliased 50 times (under the budget's ratio of ten aliases
        // an anchor past 100 aliases) replays n events: past one replayed event per byte of
        // text, refused once that is past the floor of 10,000.
        let items = vec!["x"; n / 50].join(", ");
        let aliases = vec!["*a"; 50].join(", ");
        let yaml = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\nitems0: &a [{items}]\nmany: [{aliases}]\n"
        );
        let result = Manifests::parse(&yaml);
        if n / 50 * 50 > yaml.len().max(10_000) {
            assert!(limit(result).contains("alias"), "{n}");
        } else {
            assert!(result.is_ok(), "{n}: {result:?}");
        }
    });
}

/// Parts of objects of the wrong type (pod templates, resources, labels, Ingress rules and TLS
/// blocks): refused naming the field, or planned as they are for the API server to refuse;
/// never a panic.
#[test]
fn corpus_parts_of_the_wrong_type() {
    let cases: Vec<String> = ["false", "[]", "'x'", "7", "[{}]"]
        .iter()
        .flat_map(|v| {
            [
                format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: w}}\nspec: {{template: {v}}}\n"),
                format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: w}}\nspec: {{template: {{metadata: {v}, spec: {{containers: [{{name: a, image: a}}]}}}}}}\n"),
                format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: w}}\nspec: {{template: {{spec: {v}}}}}\n"),
                format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: w}}\nspec: {{template: {{spec: {{containers: {v}}}}}}}\n"),
                format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: w}}\nspec: {{template: {{spec: {{containers: [{{name: a, image: a, resources: {{requests: {{cpu: '2'}}, limits: {v}}}}}]}}}}}}\n"),
                format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: w}}\nspec: {{template: {{spec: {{containers: [{{name: a, image: a, resources: {v}}}]}}}}}}\n"),
                format!("apiVersion: batch/v1\nkind: CronJob\nmetadata: {{name: c}}\nspec: {{schedule: '* * * * *', jobTemplate: {v}}}\n"),
                format!("apiVersion: batch/v1\nkind: CronJob\nmetadata: {{name: c}}\nspec: {{schedule: '* * * * *', jobTemplate: {{metadata: {v}, spec: {{template: {{spec: {{containers: [{{name: a, image: a}}]}}}}}}}}}}\n"),
                format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: m, labels: {v}, annotations: {v}}}\n"),
                format!("apiVersion: v1\nkind: Service\nmetadata: {{name: s}}\nspec: {v}\n"),
                format!("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i}}\nspec: {{rules: {v}, tls: {v}}}\n"),
                format!("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i}}\nspec: {{rules: [{{host: a.example.com, http: {v}}}]}}\n"),
                format!("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i}}\nspec: {v}\n"),
                format!("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i}}\nspec: {{rules: [{v}, {{host: a.example.com}}], tls: [{v}, {{hosts: {v}}}, {{hosts: [{v}, a.example.com]}}]}}\n"),
            ]
        })
        .collect();
    hostile::corpus("plan: parts of the wrong type", cases, |yaml| {
        let yaml = with_app(&yaml);
        let objects = parse_manifests(&yaml).unwrap();
        let c = ctx();
        let result = std::panic::catch_unwind(|| plan(&objects, &blueprint(""), &c))
            .unwrap_or_else(|_| panic!("plan panicked on\n{yaml}"));
        if let Err(e) = sound(&result, &c) {
            panic!("{e}\n{yaml}");
        }
    });
}
