//! The layers of `src/` (docs/development.md): each module imports only the layers below it,
//! never one beside it or above it. Read from the source, so a change that breaks the layering
//! fails here naming the file and line of the import.
//!
//! ```text
//! 8  main.rs lib.rs
//! 7  cli/                                          (render, demo, previews: commands besides serve)
//! 6  serve.rs                                      (assembles a running Sandcastle)
//! 5  config.rs                                     (flags and environment)
//! 4  controller/   http/   mcp/                    (act on previews · answer requests · MCP)
//! 3  agent/                                        (operations on previews for API, MCP, CLI)
//! 2  github/   k8s/   probe/                       (GitHub's API · Kubernetes' API · HTTP probe)
//! 1  domain/   metrics.rs                          (pure rules · counters)
//! 0  crd/                                          (the resources' types; imports nothing)
//!    fake_github/  (the GitHub stand-in, outside the product: imports domain only; only the
//!                   demo in cli/ uses it)
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Each top-level module, its layer, and the modules of lower layers it may not use anyway.
fn layers() -> BTreeMap<&'static str, u8> {
    BTreeMap::from([
        ("crd", 0),
        ("domain", 1),
        ("metrics", 1),
        ("github", 2),
        ("k8s", 2),
        ("probe", 2),
        ("agent", 3),
        ("controller", 4),
        ("http", 4),
        ("mcp", 4),
        ("config", 5),
        ("serve", 6),
        ("cli", 7),
        ("lib", 8),
        ("main", 8),
        ("fake_github", 9),
    ])
}

/// Uses that the layer numbers allow but the design does not.
fn forbidden(from: &str, to: &str) -> Option<&'static str> {
    match (from, to) {
        ("fake_github", t) if t != "domain" => Some("the stand-in is not part of the product"),
        (f, "fake_github") if !matches!(f, "cli" | "lib") => {
            Some("only the demo may use the GitHub stand-in")
        }
        _ => None,
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under src/ (`k8s/previews/mod.rs` → `["k8s", "previews"]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.len() > 1 && parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The paths `code` names that start with `crate::` or `super::`, each with the byte offset it
/// starts at; a `use` tree (`crate::{a::b, c}`) gives one path per branch.
fn paths_in(code: &str) -> Vec<(usize, String)> {
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
                    out.push((at, format!("{path}{branch}")));
                }
            } else {
                out.push((at, path));
            }
        }
    }
    out
}

/// The first path of each branch of the brace group `text` starts with: `{a::b, c}` → `a::b`,
/// `c` (nested groups are left to the paths they start with).
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
            _ if depth == 1 => branches.last_mut().unwrap().push(c),
            _ => {}
        }
    }
    branches
        .into_iter()
        .map(|b| {
            b.trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect::<String>()
                .trim_end_matches(':')
                .to_owned()
        })
        .filter(|b| !b.is_empty() && b != "self")
        .collect()
}

/// The top-level module a path written in module `own` lands in, if any. `super` in a file
/// `a/b.rs` is `a`; in `a/b/mod.rs` it is `a` too.
fn target_of(own: &[String], path: &str) -> Option<String> {
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
    base.into_iter().next()
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

/// Files declared `#[cfg(test)] mod name;`: test code living in a file of its own.
fn test_files(src: &Path, files: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for file in files {
        let text = fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let dir = match file.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs" | "lib.rs" | "main.rs") => file.parent().unwrap().to_path_buf(),
            _ => file.with_extension(""),
        };
        for pair in lines.windows(2) {
            let decl = pair[1].trim();
            if pair[0].trim() == "#[cfg(test)]"
                && let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';'))
            {
                let base = dir.join(name);
                out.extend(
                    files
                        .iter()
                        .filter(|f| f.starts_with(&base) || **f == base.with_extension("rs"))
                        .cloned(),
                );
            }
        }
    }
    let _ = src;
    out
}

/// Every import that breaks the layering, as `file:line: message`.
fn violations(src: &Path) -> Vec<String> {
    let layers = layers();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let tests = test_files(src, &files);
    let mut out = Vec::new();
    for file in &files {
        if tests.contains(file) {
            continue;
        }
        let rel = file.strip_prefix(src).unwrap();
        let own = module_of(rel);
        let top = own[0].clone();
        let Some(&level) = layers.get(top.as_str()) else {
            out.push(format!(
                "src/{}: module {top} has no layer; add it to tests/layers.rs and docs/development.md",
                rel.display()
            ));
            continue;
        };
        let text = fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let in_test = test_regions(&lines);
        // The product code of the file, comments and test items blanked (offsets kept).
        let code: String = lines
            .iter()
            .zip(&in_test)
            .map(|(line, test)| {
                let kept = if *test {
                    ""
                } else {
                    line.split("//").next().unwrap_or_default()
                };
                format!("{kept:<width$}\n", width = line.len())
            })
            .collect();
        for (offset, path) in paths_in(&code) {
            let line = code[..offset].matches('\n').count() + 1;
            let Some(target) = target_of(&own, &path) else {
                continue;
            };
            if target == top {
                continue;
            }
            let Some(&to) = layers.get(target.as_str()) else {
                continue;
            };
            let why = if let Some(why) = forbidden(&top, &target) {
                Some(why.to_owned())
            } else if top == "fake_github" || target == "fake_github" {
                None
            } else if to > level {
                Some(format!("layer {level} imports layer {to} above it"))
            } else if to == level {
                Some(format!("layer {level} imports {target} beside it"))
            } else {
                None
            };
            if let Some(why) = why {
                out.push(format!(
                    "src/{}:{line}: {top} uses {path} ({target}): {why}",
                    rel.display()
                ));
            }
        }
    }
    out
}

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(
        found.is_empty(),
        "{} imports break the layering (docs/development.md):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_reader_finds_the_imports_it_must() {
    let own = vec!["k8s".to_owned(), "previews".to_owned()];
    assert_eq!(
        target_of(&own, "super::crd::Blueprint").as_deref(),
        Some("k8s")
    );
    assert_eq!(
        target_of(&own, "super::super::github::x").as_deref(),
        Some("github")
    );
    assert_eq!(
        target_of(&own, "crate::domain::Sha").as_deref(),
        Some("domain")
    );
    let paths: Vec<String> =
        paths_in("use crate::{github::intent, k8s::{a, b}};\nlet x = super::y::z();")
            .into_iter()
            .map(|(_, p)| p)
            .collect();
    assert_eq!(
        paths,
        ["crate::github::intent", "crate::k8s", "super::y::z"]
    );
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
