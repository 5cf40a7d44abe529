//! The project speaks of itself only: no tracked file names a package registry's host (examples
//! and tests use neutral hosts such as `api.payments.example.com`; scripts read the Go module
//! proxy from `go env GOPROXY`). Lock files, which record where each package came from, are the
//! exception. The hosts are spelled in parts here so that this file does not name them either.

use std::process::Command;

/// Package registries' hosts, in parts.
fn hosts() -> Vec<String> {
    [
        ("registry", "npmjs.org"),
        ("pypi", "org"),
        ("files.pythonhosted", "org"),
        ("crates", "io"),
        ("static.crates", "io"),
        ("proxy", "golang.org"),
        ("sum", "golang.org"),
        ("repo1.maven", "org"),
        ("repo.maven.apache", "org"),
        ("rubygems", "org"),
        ("api.nuget", "org"),
        ("deb.debian", "org"),
    ]
    .iter()
    .map(|(a, b)| format!("{a}.{b}"))
    .collect()
}

#[test]
fn no_tracked_file_names_a_package_registrys_host() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .expect("git lists the tracked files");
    assert!(out.status.success(), "git ls-files failed");
    let hosts = hosts();
    let mut found = Vec::new();
    for path in out.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = String::from_utf8_lossy(path);
        let lock = path.ends_with("Cargo.lock")
            || path.ends_with("go.sum")
            || path.ends_with("package-lock.json");
        if lock {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(format!("{root}/{path}")) else {
            continue;
        };
        let lower = text.to_ascii_lowercase();
        for host in &hosts {
            if let Some(at) = lower.find(host.as_str()) {
                let line = lower[..at].matches('\n').count() + 1;
                found.push(format!("{path}:{line}: {host}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "registry hosts named:\n{}",
        found.join("\n")
    );
}
