//! GitHub's tarball of a commit unpacked into a scratch directory, within bounds: the archive's
//! top directory (`owner-repo-abc1234/`) dropped, no path leaving the directory, no symbolic or
//! hard link made (a link could point a chart's `.Files.Get` at the server's own files), at most
//! so many files and bytes however the archive is compressed. `tar` and `flate2` read the
//! archive; what is by hand is only this policy.

use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use flate2::read::GzDecoder;
use tar::EntryType;

/// How much of a repository is unpacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// Files and directories, together.
    pub files: usize,
    /// Bytes of all files, unpacked.
    pub bytes: u64,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        Self {
            files: 20_000,
            bytes: 256 << 20,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("the repository holds more than {0} files at this commit")]
    TooManyFiles(usize),
    #[error("the repository holds more than {} at this commit", super::size(*.0))]
    TooLarge(u64),
    #[error("the repository's archive is not a gzip-compressed tar: {0}")]
    Corrupt(io::Error),
    #[error("unpacking the repository: {0}")]
    Write(io::Error),
}

/// What was unpacked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unpacked {
    pub files: usize,
    pub bytes: u64,
    /// Links left out, repository-relative.
    pub links: Vec<String>,
}

/// A repository-relative path made of plain segments (no `..`, not absolute), as a relative
/// `PathBuf`; `.` is the top.
pub fn relative(path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in Path::new(path).components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

/// Unpack `tar_gz` into `into` (created), within `limits`.
pub fn unpack(tar_gz: &[u8], into: &Path, limits: ArchiveLimits) -> Result<Unpacked, ArchiveError> {
    fs::create_dir_all(into).map_err(ArchiveError::Write)?;
    let mut archive = tar::Archive::new(GzDecoder::new(tar_gz));
    let mut done = Unpacked::default();
    for entry in archive.entries().map_err(ArchiveError::Corrupt)? {
        let mut entry = entry.map_err(ArchiveError::Corrupt)?;
        let kind = entry.header().entry_type();
        let path = entry.path().map_err(ArchiveError::Corrupt)?.into_owned();
        // GitHub's archives hold everything under one top directory.
        let Some(rel) = below_top(&path) else {
            continue;
        };
        match kind {
            EntryType::Directory | EntryType::Regular | EntryType::Continuous => {}
            EntryType::Symlink | EntryType::Link => {
                done.links.push(rel.to_string_lossy().into_owned());
                continue;
            }
            // pax and GNU headers, devices, FIFOs: nothing a render reads.
            _ => continue,
        }
        done.files += 1;
        if done.files > limits.files {
            return Err(ArchiveError::TooManyFiles(limits.files));
        }
        let target = into.join(&rel);
        if kind == EntryType::Directory {
            fs::create_dir_all(&target).map_err(ArchiveError::Write)?;
            continue;
        }
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(ArchiveError::Write)?;
        }
        let left = limits.bytes - done.bytes;
        let mut file = fs::File::create(&target).map_err(ArchiveError::Write)?;
        let copied = io::copy(&mut (&mut entry).take(left + 1), &mut file).map_err(|e| {
            if e.kind() == io::ErrorKind::InvalidData || e.kind() == io::ErrorKind::UnexpectedEof {
                ArchiveError::Corrupt(e)
            } else {
                ArchiveError::Write(e)
            }
        })?;
        if copied > left {
            return Err(ArchiveError::TooLarge(limits.bytes));
        }
        done.bytes += copied;
    }
    Ok(done)
}

/// `path` without its first segment, when the rest is a plain relative path; `None` for the
/// top directory itself and for anything that would leave it.
fn below_top(path: &Path) -> Option<PathBuf> {
    let mut parts = path.components();
    match parts.next()? {
        Component::Normal(_) => {}
        _ => return None,
    }
    let rest = relative(parts.as_path().to_str()?)?;
    (!rest.as_os_str().is_empty()).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;

    /// A GitHub-like archive: everything under `acme-shop-abc1234/`.
    fn archive(entries: &[(&str, EntryType, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
        for (path, kind, body) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*kind);
            header.set_size(body.len() as u64);
            header.set_mode(0o644);
            if *kind == EntryType::Symlink {
                header
                    .set_link_name(std::str::from_utf8(body).unwrap())
                    .unwrap();
                header.set_size(0);
            }
            // Written by hand so that `..` reaches the archive as a hostile one would hold it.
            let name = format!("acme-shop-abc1234/{path}");
            header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            header.set_cksum();
            let data: &[u8] = if *kind == EntryType::Symlink {
                &[]
            } else {
                body
            };
            builder.append(&header, data).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn files_land_below_the_top_directory_and_links_are_left_out() {
        let tgz = archive(&[
            ("chart/", EntryType::Directory, b""),
            ("chart/Chart.yaml", EntryType::Regular, b"name: shop\n"),
            ("chart/token", EntryType::Symlink, b"/var/run/secrets/token"),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let done = unpack(&tgz, dir.path(), ArchiveLimits::default()).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("chart/Chart.yaml")).unwrap(),
            "name: shop\n"
        );
        assert_eq!(done.links, ["chart/token"]);
        assert!(!dir.path().join("chart/token").exists());
        assert_eq!((done.files, done.bytes), (2, 11));
    }

    #[test]
    fn paths_that_leave_the_directory_are_not_written() {
        let tgz = archive(&[("../../escaped", EntryType::Regular, b"x")]);
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("a/b");
        let done = unpack(&tgz, &inner, ArchiveLimits::default()).unwrap();
        assert_eq!(done.files, 0);
        assert!(!dir.path().join("escaped").exists());
        assert!(!dir.path().join("a/escaped").exists());
    }

    #[test]
    fn bounds_hold_however_the_archive_is_compressed() {
        let zeros = vec![0u8; 4096];
        let tgz = archive(&[("big", EntryType::Regular, &zeros)]);
        let dir = tempfile::tempdir().unwrap();
        let small = ArchiveLimits {
            files: 10,
            bytes: 1000,
        };
        assert!(matches!(
            unpack(&tgz, dir.path(), small),
            Err(ArchiveError::TooLarge(1000))
        ));
        let many: Vec<(String, EntryType, &[u8])> = (0..5)
            .map(|i| (format!("f{i}"), EntryType::Regular, &b"x"[..]))
            .collect();
        let refs: Vec<(&str, EntryType, &[u8])> =
            many.iter().map(|(p, k, b)| (p.as_str(), *k, *b)).collect();
        let few = ArchiveLimits {
            files: 3,
            bytes: 1000,
        };
        assert!(matches!(
            unpack(&archive(&refs), dir.path(), few),
            Err(ArchiveError::TooManyFiles(3))
        ));
        assert!(matches!(
            unpack(b"not gzip at all", dir.path(), few),
            Err(ArchiveError::Corrupt(_))
        ));
    }

    #[test]
    fn relative_paths_are_plain_segments() {
        assert_eq!(
            relative("deploy/chart"),
            Some(PathBuf::from("deploy/chart"))
        );
        assert_eq!(relative("."), Some(PathBuf::new()));
        assert_eq!(relative("../x"), None);
        assert_eq!(relative("/etc"), None);
    }
}
