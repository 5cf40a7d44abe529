//! What Cargo cannot check about the workspace's shape (docs/development.md draws it):
//!
//! - each crate depends only on crates of lower layers — Cargo refuses a cycle between crates,
//!   but would let `sandcastle-controller` depend on `sandcastle-http` beside it;
//! - the server (`sandcastle`) and the crates under it never depend on the GitHub stand-in, the
//!   demo or the test helpers, whatever the kind of dependency;
//! - inside each crate, no module imports another that (directly or not) imports it back: the
//!   modules of a crate read as a tree of layers too.
//!
//! ```text
//! 6  sandcastle                                   (the server: command line, the process)
//! 5  sandcastle-http   sandcastle-mcp   sandcastle-controller
//! 4  sandcastle-agent
//! 3  sandcastle-github   sandcastle-kube   sandcastle-probe   sandcastle-render
//! 2  sandcastle-domain   sandcastle-metrics
//! 1  sandcastle-crd
//! –  sandcastle-fake-github (domain only), sandcastle-demo (the server and the stand-in),
//!    sandcastle-hostile (tests only), and the root package sandcastle-dev (everything)
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Each crate of the product and its layer.
fn layers() -> BTreeMap<&'static str, u8> {
    BTreeMap::from([
        ("sandcastle-crd", 1),
        ("sandcastle-domain", 2),
        ("sandcastle-metrics", 2),
        ("sandcastle-github", 3),
        ("sandcastle-kube", 3),
        ("sandcastle-probe", 3),
        ("sandcastle-render", 3),
        ("sandcastle-agent", 4),
        ("sandcastle-controller", 5),
        ("sandcastle-http", 5),
        ("sandcastle-mcp", 5),
        ("sandcastle", 6),
    ])
}

/// Crates outside the product, which no crate of it may depend on.
const OUTSIDE: [&str; 4] = [
    "sandcastle-fake-github",
    "sandcastle-demo",
    "sandcastle-hostile",
    "sandcastle-dev",
];

/// A crate's manifest: its name and the workspace crates it depends on, by section.
struct Manifest {
    name: String,
    deps: BTreeMap<String, Vec<String>>,
}

/// Read `Cargo.toml` as far as this test needs: `[package] name` and, in each dependency
/// section, the names of the `sandcastle*` crates.
fn manifest(path: &Path) -> Manifest {
    let text = fs::read_to_string(path).unwrap();
    let mut section = String::new();
    let mut name = String::new();
    let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.to_owned();
            continue;
        }
        let key = line.split(['=', '.']).next().unwrap_or_default().trim();
        if section == "package" && key == "name" {
            name = line.split('"').nth(1).unwrap_or_default().to_owned();
        } else if section.ends_with("dependencies") && key.starts_with("sandcastle") {
            deps.entry(section.clone())
                .or_default()
                .push(key.to_owned());
        }
    }
    Manifest { name, deps }
}

fn manifests() -> Vec<Manifest> {
    let mut out: Vec<Manifest> = fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| manifest(&e.unwrap().path().join("Cargo.toml")))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Every dependency that breaks the layering, as a sentence.
fn crate_violations(manifests: &[Manifest]) -> Vec<String> {
    let layers = layers();
    let mut out = Vec::new();
    for m in manifests {
        let Some(&level) = layers.get(m.name.as_str()) else {
            if !OUTSIDE.contains(&m.name.as_str()) {
                out.push(format!(
                    "crate {} has no layer: add it to tests/layers.rs and docs/development.md",
                    m.name
                ));
            }
            continue;
        };
        for (section, deps) in &m.deps {
            for dep in deps {
                if OUTSIDE.contains(&dep.as_str()) && section == "dependencies" {
                    out.push(format!(
                        "{} depends on {dep}, which is not part of the server",
                        m.name
                    ));
                    continue;
                }
                let Some(&to) = layers.get(dep.as_str()) else {
                    continue;
                };
                if section == "dependencies" && to >= level {
                    out.push(format!(
                        "{} (layer {level}) depends on {dep} (layer {to}): only lower layers",
                        m.name
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let found = crate_violations(&manifests());
    assert!(
        found.is_empty(),
        "the crates break the layering (docs/development.md):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_layer_check_refuses_what_it_must() {
    let m = |name: &str, deps: &[&str]| Manifest {
        name: name.to_owned(),
        deps: BTreeMap::from([(
            "dependencies".to_owned(),
            deps.iter().map(|d| (*d).to_owned()).collect(),
        )]),
    };
    let found = crate_violations(&[
        m(
            "sandcastle-controller",
            &["sandcastle-http", "sandcastle-kube"],
        ),
        m("sandcastle", &["sandcastle-fake-github"]),
        m("sandcastle-new", &[]),
        m("sandcastle-demo", &["sandcastle", "sandcastle-fake-github"]),
    ]);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].contains("depends on sandcastle-http (layer 5)"));
    assert!(found[1].contains("not part of the server"));
    assert!(found[2].contains("has no layer"));
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under a crate's `src/` (`previews/mod.rs` → `["previews"]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    parts
}

/// The paths `code` names that start with `crate::` or `super::`; a `use` tree
/// (`crate::{a::b, c}`) gives one path per branch.
fn paths_in(code: &str) -> Vec<String> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            let boundary =
                at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
            if !boundary || (start == "super::" && code[..at].ends_with("::")) {
                continue;
            }
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let after = at + path.len();
            if path.ends_with("::") && code[after..].starts_with('{') {
                for branch in tree_branches(&code[after..]) {
                    out.push(format!("{path}{branch}"));
                }
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// The paths of each branch of the brace group `text` starts with, nested groups expanded:
/// `{a::b, c::{d, e}}` → `a::b`, `c::d`, `c::e`.
fn tree_branches(text: &str) -> Vec<String> {
    let mut depth = 0;
    let mut branches = vec![String::new()];
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => branches.push(String::new()),
            _ => {}
        }
        if depth >= 1 && !(c == '{' && depth == 1) && !(c == ',' && depth == 1) {
            branches.last_mut().unwrap().push(c);
        }
    }
    let mut out = Vec::new();
    for b in branches {
        let b: String = b.chars().filter(|c| !c.is_whitespace()).collect();
        if let Some(open) = b.find('{') {
            let head = &b[..open];
            for tail in tree_branches(&b[open..]) {
                out.push(format!("{head}{tail}"));
            }
            continue;
        }
        let path: String = b
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let path = path.trim_end_matches(':').to_owned();
        if !path.is_empty() && path != "self" {
            out.push(path);
        }
    }
    out
}

/// The module of `modules` a path written in module `own` lands in (the longest that exists).
fn target_of(own: &[String], path: &str, modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let (mut base, rest): (Vec<String>, &[&str]) = match segments.first() {
        Some(&"crate") => (Vec::new(), &segments[1..]),
        Some(&"super") => {
            let mut base = own.to_vec();
            base.pop();
            let mut rest = &segments[1..];
            while rest.first() == Some(&"super") {
                base.pop();
                rest = &rest[1..];
            }
            (base, rest)
        }
        _ => return None,
    };
    base.extend(rest.iter().map(|s| (*s).to_owned()));
    (0..=base.len())
        .rev()
        .map(|n| base[..n].to_vec())
        .find(|m| modules.contains(m))
}

/// Whether line `i` of `lines` is inside a `#[cfg(test)]` item (tests may use what they like).
fn test_regions(lines: &[&str]) -> Vec<bool> {
    let mut inside = vec![false; lines.len()];
    let mut depth: i32 = 0;
    let mut test_from: Option<i32> = None;
    let mut pending = false;
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        if test_from.is_none() && line.trim_start().starts_with("#[cfg(test)]") {
            pending = true;
        }
        let opens = i32::try_from(code.matches('{').count()).unwrap();
        let closes = i32::try_from(code.matches('}').count()).unwrap();
        if pending && test_from.is_none() && !line.trim_start().starts_with("#[") {
            if code.trim_end().ends_with(';') && opens == 0 {
                pending = false;
                inside[i] = true;
                continue;
            }
            if opens > 0 {
                test_from = Some(depth);
                pending = false;
            }
        }
        depth += opens - closes;
        if let Some(d) = test_from {
            inside[i] = true;
            if depth <= d {
                test_from = None;
            }
        }
    }
    inside
}

/// Modules declared `#[cfg(test)] mod name;`: test code in files of its own.
fn test_modules(files: &[(Vec<String>, String)]) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    for (module, text) in files {
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.windows(2) {
            if pair[0].trim() == "#[cfg(test)]"
                && let Some(name) = pair[1]
                    .trim()
                    .strip_prefix("mod ")
                    .and_then(|d| d.strip_suffix(';'))
            {
                let mut m = module.clone();
                m.push(name.to_owned());
                out.insert(m);
            }
        }
    }
    out
}

/// The import graph of the crate whose sources are in `src`: module → modules it uses (not its
/// own ancestors: a module may use what its parent holds), product code only.
fn import_graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let files: Vec<(Vec<String>, String)> = paths
        .iter()
        .map(|p| {
            (
                module_of(p.strip_prefix(src).unwrap()),
                fs::read_to_string(p).unwrap(),
            )
        })
        .collect();
    let tests = test_modules(&files);
    let is_test = |m: &[String]| (1..=m.len()).any(|n| tests.contains(&m[..n]));
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .map(|(m, _)| m.clone())
        .filter(|m| !is_test(m))
        .collect();
    let mut graph = BTreeMap::new();
    for (own, text) in files.iter().filter(|(m, _)| !is_test(m)) {
        let lines: Vec<&str> = text.lines().collect();
        let in_test = test_regions(&lines);
        let code: String = lines
            .iter()
            .zip(&in_test)
            .filter(|(_, t)| !**t)
            .map(|(l, _)| format!("{}\n", l.split("//").next().unwrap_or_default()))
            .collect();
        // `super` names the parent module, whichever file style the module has.
        let used: BTreeSet<Vec<String>> = paths_in(&code)
            .iter()
            .filter_map(|p| target_of(own, p, &modules))
            .filter(|t| t != own && !own.starts_with(t))
            .collect();
        graph.insert(own.clone(), used);
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        graph: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a [String], usize>,
        low: BTreeMap<&'a [String], usize>,
        stack: Vec<&'a [String]>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a [String]) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_slice();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.stack.contains(&w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    comp.push(w.join("::"));
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.found.push(comp);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_slice()) {
            t.visit(v);
        }
    }
    t.found
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let mut found = Vec::new();
    let mut sources: Vec<(String, PathBuf)> = fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| {
            let dir = e.unwrap().path();
            (manifest(&dir.join("Cargo.toml")).name, dir.join("src"))
        })
        .collect();
    sources.push(("sandcastle-dev".to_owned(), root().join("src")));
    for (name, src) in sources {
        for cycle in cycles(&import_graph(&src)) {
            found.push(format!("{name}: {}", cycle.join(" ↔ ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules that import each other (make one a layer below the other):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reader_finds_the_imports_and_cycles_it_must() {
    let m = |s: &str| -> Vec<String> {
        s.split("::")
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let modules: BTreeSet<Vec<String>> = ["", "a", "a::b", "c"].iter().map(|s| m(s)).collect();
    let own = m("a::b");
    assert_eq!(target_of(&own, "super::x", &modules), Some(m("a")));
    assert_eq!(
        target_of(&own, "super::super::c::y", &modules),
        Some(m("c"))
    );
    assert_eq!(target_of(&own, "crate::a::b::z", &modules), Some(m("a::b")));
    assert_eq!(target_of(&own, "crate::q", &modules), Some(m("")));
    assert_eq!(
        paths_in("use crate::{github::intent, k8s::{a, b}};\nlet x = super::y::z();"),
        [
            "crate::github::intent",
            "crate::k8s::a",
            "crate::k8s::b",
            "super::y::z"
        ]
    );
    let graph = BTreeMap::from([
        (m("a"), BTreeSet::from([m("b")])),
        (m("b"), BTreeSet::from([m("c")])),
        (m("c"), BTreeSet::from([m("a")])),
        (m("d"), BTreeSet::from([m("a")])),
    ]);
    assert_eq!(cycles(&graph), [vec!["a", "b", "c"]]);
    let lines = [
        "fn a() {}",
        "#[cfg(test)]",
        "mod tests {",
        "  use crate::x;",
        "}",
        "fn b() {}",
    ];
    assert_eq!(
        test_regions(&lines),
        [false, false, true, true, true, false]
    );
}
