//! Container image references and the Blueprint's `images` rules that swap in the PR's build.
//!
//! A reference is `[registry[:port]/]path[:tag][@digest]`; its *repository* is everything
//! before the tag and digest, exactly as written. Rules compare repositories as written, with
//! no Docker Hub normalisation: `redis`, `library/redis` and `docker.io/library/redis` are three
//! different repositories, so a rule matches the spelling the blueprint uses.

use serde_json::Value;

use super::{PreviewContext, Problem};
use crate::template::{self, Value as Var};
use sandcastle_crd::{BlueprintSpec, ImageRule};

/// A parsed image reference. All parts borrow from the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRef<'a> {
    /// The registry host (and port) when the first path component names one: it holds a `.` or
    /// a `:`, or is `localhost`.
    pub registry: Option<&'a str>,
    /// Everything before the tag and digest, registry included.
    pub repository: &'a str,
    pub tag: Option<&'a str>,
    pub digest: Option<&'a str>,
}

impl<'a> ImageRef<'a> {
    /// Parse a reference; `None` when it is not one (empty parts, bad tag, spaces).
    pub fn parse(image: &'a str) -> Option<Self> {
        if image.is_empty() || image.chars().any(char::is_whitespace) {
            return None;
        }
        let (name, digest) = match image.split_once('@') {
            Some((name, digest)) if digest.contains(':') => (name, Some(digest)),
            Some(_) => return None,
            None => (image, None),
        };
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match name[last_slash..].rfind(':') {
            Some(colon) => {
                let at = last_slash + colon;
                (&name[..at], Some(&name[at + 1..]))
            }
            None => (name, None),
        };
        if tag.is_some_and(|t| !valid_tag(t)) {
            return None;
        }
        if repository.is_empty() || repository.split('/').any(str::is_empty) {
            return None;
        }
        let registry = repository.split_once('/').and_then(|(first, _)| {
            (first.contains('.') || first.contains(':') || first == "localhost").then_some(first)
        });
        Some(Self {
            registry,
            repository,
            tag,
            digest,
        })
    }
}

/// Whether `tag` is a valid image tag: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
pub(crate) fn valid_tag(tag: &str) -> bool {
    let mut bytes = tag.bytes();
    let Some(first) = bytes.next() else {
        return false;
    };
    tag.len() <= 128
        && (first.is_ascii_alphanumeric() || first == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A branch name as tag text: characters a tag cannot hold become `-` (`feature/Login` →
/// `feature-Login`; tags are case-sensitive, so case is kept).
fn tag_text(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The tag each rule gives this preview (`None` where the template fails; a problem naming
/// `spec.images[i].tag` is recorded).
pub(crate) fn render_tags(
    blueprint: &BlueprintSpec,
    ctx: &PreviewContext,
    problems: &mut Vec<Problem>,
) -> Vec<Option<String>> {
    let pr = ctx.pr.map(|p| p.to_string());
    let branch = tag_text(&ctx.branch);
    let vars = [
        ("sha", Var::Text(ctx.sha.as_str())),
        ("shortSha", Var::Text(ctx.sha.short())),
        (
            "pr",
            pr.as_deref()
                .map_or(Var::Missing("this preview has no pull request"), Var::Text),
        ),
        ("branch", Var::Text(&branch)),
    ];
    blueprint
        .images
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let field = format!("spec.images[{i}].tag");
            let fail = |reason: String| Problem::field("Blueprint", &ctx.blueprint, &field, reason);
            match template::render(&rule.tag, &vars) {
                Ok(tag) if valid_tag(&tag) => Some(tag),
                Ok(tag) => {
                    problems.push(fail(format!(
                        "renders to {tag:?}, which is not a valid image tag ([A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})"
                    )));
                    None
                }
                Err(e) => {
                    problems.push(fail(e.to_string()));
                    None
                }
            }
        })
        .collect()
}

/// Point a container at the PR's build when its image repository matches a rule (the first
/// matching rule wins; any digest is dropped, it pinned the old build).
pub(crate) fn apply(container: &mut Value, rules: &[ImageRule], tags: &[Option<String>]) {
    let Some(image) = container["image"].as_str() else {
        return;
    };
    let Some(reference) = ImageRef::parse(image) else {
        return;
    };
    let Some(i) = rules
        .iter()
        .position(|r| r.repository == reference.repository)
    else {
        return;
    };
    if let Some(Some(tag)) = tags.get(i) {
        let new = format!("{}:{tag}", rules[i].repository);
        container["image"] = Value::String(new);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    type Parts<'a> = (Option<&'a str>, &'a str, Option<&'a str>, Option<&'a str>);

    fn parts(image: &str) -> Option<Parts<'_>> {
        ImageRef::parse(image).map(|r| (r.registry, r.repository, r.tag, r.digest))
    }

    #[test]
    fn references_parse_into_parts() {
        let d = "sha256:0123456789abcdef";
        let table = [
            ("redis", Some((None, "redis", None, None))),
            ("redis:7", Some((None, "redis", Some("7"), None))),
            (
                "library/redis:7",
                Some((None, "library/redis", Some("7"), None)),
            ),
            (
                "ghcr.io/acme/api:1.2@sha256:0123456789abcdef",
                Some((Some("ghcr.io"), "ghcr.io/acme/api", Some("1.2"), Some(d))),
            ),
            (
                "ghcr.io/acme/api@sha256:0123456789abcdef",
                Some((Some("ghcr.io"), "ghcr.io/acme/api", None, Some(d))),
            ),
            (
                "localhost:5000/api",
                Some((Some("localhost:5000"), "localhost:5000/api", None, None)),
            ),
            (
                "localhost:5000/team/api:dev",
                Some((
                    Some("localhost:5000"),
                    "localhost:5000/team/api",
                    Some("dev"),
                    None,
                )),
            ),
            (
                "localhost/api",
                Some((Some("localhost"), "localhost/api", None, None)),
            ),
            ("acme/api:v1", Some((None, "acme/api", Some("v1"), None))),
            ("", None),
            ("ghcr.io//api", None),
            ("api:", None),
            ("api:-x", None),
            ("api@latest", None),
            ("api latest", None),
        ];
        for (image, want) in table {
            assert_eq!(parts(image), want, "{image}");
        }
    }

    #[test]
    fn tags_are_validated() {
        assert!(valid_tag("abc1234"));
        assert!(valid_tag("_x.y-z"));
        assert!(valid_tag(&"a".repeat(128)));
        assert!(!valid_tag(&"a".repeat(129)));
        assert!(!valid_tag(""));
        assert!(!valid_tag(".x"));
        assert!(!valid_tag("-x"));
        assert!(!valid_tag("a/b"));
        assert_eq!(tag_text("feature/Login #2"), "feature-Login--2");
    }

    #[test]
    fn matching_containers_get_the_tag_and_lose_the_digest() {
        let rules = vec![
            ImageRule {
                repository: "ghcr.io/acme/api".to_owned(),
                tag: "{{sha}}".to_owned(),
            },
            ImageRule {
                repository: "redis".to_owned(),
                tag: "pr-{{pr}}".to_owned(),
            },
        ];
        let tags = vec![Some("abc".to_owned()), Some("pr-42".to_owned())];
        let table = [
            ("ghcr.io/acme/api:1.0@sha256:00ff", "ghcr.io/acme/api:abc"),
            ("ghcr.io/acme/api", "ghcr.io/acme/api:abc"),
            ("ghcr.io/acme/api-worker:1.0", "ghcr.io/acme/api-worker:1.0"),
            ("redis:7", "redis:pr-42"),
            ("docker.io/library/redis:7", "docker.io/library/redis:7"),
            ("not an image", "not an image"),
        ];
        for (image, want) in table {
            let mut c = json!({"name": "c", "image": image});
            apply(&mut c, &rules, &tags);
            assert_eq!(c["image"], want, "{image}");
        }
    }
}
