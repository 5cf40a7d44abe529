//! Snapshot tests of `plan()` over every blueprint in `fixtures/blueprints/<name>/`: the plan as
//! `sandcastle render` prints it, or the refusal. A folder holds YAML documents (every `*.yaml`
//! file but these two, in name order), and optionally `blueprint.yaml` (Blueprint spec fields
//! besides `source` and `repositories`) and `source.yaml` (`namespace:` of the live namespace the
//! objects were read from; without it they are manifests).

use std::fs;
use std::path::{Path, PathBuf};

use super::tests::ctx;
use super::*;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/blueprints");

#[derive(serde::Deserialize)]
struct Source {
    namespace: String,
}

fn fixtures() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(DIR)
        .expect("fixtures/blueprints exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn render(dir: &Path) -> String {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("readable fixture")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut objects = Vec::new();
    let mut extra = String::new();
    let mut c = ctx();
    c.source_namespace = None;
    for file in &files {
        let text = fs::read_to_string(file).expect("readable YAML");
        match file.file_name().and_then(|n| n.to_str()) {
            Some("blueprint.yaml") => extra = text,
            Some("source.yaml") => {
                let source: Source = serde_saphyr::from_str(&text).expect("source.yaml");
                c.source_namespace = Some(source.namespace);
            }
            _ => objects.extend(parse_manifests(&text).expect("fixture parses")),
        }
    }
    assert!(!objects.is_empty(), "{} holds no objects", dir.display());
    let source = match &c.source_namespace {
        Some(ns) => format!("source: {{namespace: {ns}}}"),
        None => "source: {manifests: {configMap: blueprint}}".to_owned(),
    };
    let yaml = format!("{source}\nrepositories: [acme/shop]\n{extra}");
    let blueprint: BlueprintSpec = serde_saphyr::from_str(&yaml).expect("blueprint.yaml");
    match plan(&objects, &blueprint, &c) {
        Ok(p) => {
            let yaml = p.to_yaml().expect("plan renders");
            let read_back = parse_manifests(&yaml).expect("rendered plans parse");
            let planned: Vec<Value> = p.objects().chain(&p.pre_delete).cloned().collect();
            assert_eq!(read_back, planned, "{} does not round-trip", dir.display());
            yaml
        }
        Err(refused) => format!("refused:\n{refused}\n"),
    }
}

#[test]
fn every_fixture_plans_as_its_snapshot() {
    let dirs = fixtures();
    assert!(dirs.len() >= 11, "fixtures missing: {dirs:?}");
    for dir in dirs {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .expect("fixture names are text")
            .to_owned();
        insta::assert_snapshot!(name.clone(), render(&dir), &name);
    }
}

#[test]
fn plans_do_not_depend_on_input_order() {
    let dir = Path::new(DIR).join("kitchen-sink");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("kitchen-sink")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            !matches!(
                p.file_name().and_then(|n| n.to_str()),
                Some("blueprint.yaml" | "source.yaml")
            )
        })
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        objects.extend(parse_manifests(&fs::read_to_string(file).expect("yaml")).expect("parses"));
    }
    let bp = super::tests::blueprint(&fs::read_to_string(dir.join("blueprint.yaml")).expect("bp"));
    let render = |objects: &[Value]| {
        plan(objects, &bp, &ctx())
            .expect("plans")
            .to_yaml()
            .expect("renders")
    };
    let want = render(&objects);
    let n = objects.len();
    for shift in [1, 7, n / 2] {
        let mut shuffled = objects.clone();
        shuffled.rotate_left(shift);
        shuffled.reverse();
        // Interleave the halves, a different permutation again.
        let (a, b) = shuffled.split_at(n / 2);
        let mixed: Vec<Value> = b
            .iter()
            .zip(a)
            .flat_map(|(x, y)| [x.clone(), y.clone()])
            .chain(b.get(a.len()..).into_iter().flatten().cloned())
            .collect();
        assert_eq!(mixed.len(), n);
        assert_eq!(render(&shuffled), want, "rotated by {shift} and reversed");
        assert_eq!(
            render(&mixed),
            want,
            "interleaved after rotating by {shift}"
        );
    }
}
