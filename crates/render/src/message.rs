//! A render tool's error output made readable on a pull request: the scratch directory's paths
//! made repository-relative (Helm and Kustomize name files by their full path), the CLI's own
//! prefixes and hints dropped, and the whole bounded. Pure.

use std::path::Path;

/// Lines kept of a tool's error.
const LINES: usize = 30;
/// Characters kept of a tool's error.
const CHARS: usize = 3000;

/// The tool's error output, cleaned; `root` is where the repository was unpacked.
pub fn clean(stderr: &str, root: &Path) -> String {
    let root = root.display().to_string();
    let with_slash = format!("{root}/");
    let mut lines: Vec<String> = Vec::new();
    for line in stderr.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with("Use --debug flag") || line.starts_with("# Warning:")
        {
            continue;
        }
        let line = line.strip_prefix("Error: ").unwrap_or(line);
        let line = line.replace(&with_slash, "").replace(&root, ".");
        lines.push(line);
        if lines.len() == LINES {
            lines.push("…".to_owned());
            break;
        }
    }
    let mut text = lines.join("\n");
    if text.chars().count() > CHARS {
        text = text.chars().take(CHARS).collect::<String>() + "…";
    }
    if text.is_empty() {
        "it exited without saying why".to_owned()
    } else {
        text
    }
}

/// Whether the tool (a Go program) died for want of memory.
pub fn out_of_memory(stderr: &str) -> bool {
    stderr.lines().any(|l| {
        l.starts_with("fatal error:") && l.contains("out of memory")
            || l.starts_with("runtime: out of memory")
    })
}

/// The first `file:line` a message names (`deploy/chart/templates/api.yaml:12`), as people
/// look for it: Helm names template files `<chart>/templates/x.yaml:12:20`.
pub fn location(message: &str) -> Option<&str> {
    let words = message.split(|c: char| c.is_whitespace() || "()'\"".contains(c));
    words.map(|w| w.trim_end_matches(':')).find(|word| {
        let mut parts = word.splitn(3, ':');
        let file = parts.next().unwrap_or("");
        let line = parts.next().unwrap_or("");
        (file.ends_with(".yaml") || file.ends_with(".yml") || file.ends_with(".tpl"))
            && !line.is_empty()
            && line.bytes().all(|b| b.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_errors_keep_the_chart_file_and_line() {
        let err = "Error: podinfo/templates/service.yaml:5:18\n  executing \"podinfo/templates/service.yaml\" at <.Values.nope.deeper>:\n    nil pointer evaluating interface {}.deeper\n\nUse --debug flag to render out invalid YAML\n";
        let m = clean(err, Path::new("/tmp/sandcastle-render-x/repo"));
        assert_eq!(
            m,
            "podinfo/templates/service.yaml:5:18\n  executing \"podinfo/templates/service.yaml\" at <.Values.nope.deeper>:\n    nil pointer evaluating interface {}.deeper"
        );
        assert_eq!(location(&m), Some("podinfo/templates/service.yaml:5:18"));
        let m = "execution error at (podinfo/templates/service.yaml:5:11): no name for you";
        assert_eq!(location(m), Some("podinfo/templates/service.yaml:5:11"));
    }

    #[test]
    fn kustomize_paths_become_repository_relative() {
        let err = "Error: accumulating resources: accumulation err='accumulating resources from 'missing.yaml': evalsymlink failure on '/tmp/s/repo/deploy/missing.yaml' : lstat /tmp/s/repo/deploy/missing.yaml: no such file or directory'\n";
        let m = clean(err, Path::new("/tmp/s/repo"));
        assert!(!m.contains("/tmp/s"), "{m}");
        assert!(m.contains("'deploy/missing.yaml'"), "{m}");
    }

    #[test]
    fn errors_are_bounded_and_never_empty() {
        let long = "x\n".repeat(500);
        let m = clean(&long, Path::new("/r"));
        assert_eq!(m.lines().count(), LINES + 1);
        assert_eq!(clean("", Path::new("/r")), "it exited without saying why");
        assert!(out_of_memory("fatal error: runtime: out of memory\n"));
        assert!(out_of_memory(
            "fatal error: out of memory allocating heap arena map"
        ));
        assert!(!out_of_memory("Error: out of memory in a message\n"));
    }
}
