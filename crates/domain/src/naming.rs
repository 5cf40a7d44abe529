//! Names derived from a preview's identity: the `PreviewEnvironment` name, its namespace and its
//! GitHub environment. Pure and stable: the same inputs always give the same names.

use sha2::{Digest, Sha256};

use super::ids::{NamespaceName, PrNumber, RepoName};
pub use super::ids::{is_branch_name, is_invisible_control};

/// Lower-case, map anything outside `[a-z0-9-]` to `-`, collapse runs of `-`, trim them at the ends.
pub fn slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        out.push(c);
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// Fit `name` into a DNS-1123 label: unchanged when it fits, otherwise cut and suffixed with a
/// stable hash of the whole name so that two long names never meet. The cut falls on a char
/// boundary: a name that is not yet label text (a rendered host) is refused by its caller, not
/// split inside a character.
pub fn fit_label(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let hash = hex::encode(Sha256::digest(name.as_bytes()));
    let mut keep = max - 6;
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    let mut head = name[..keep].to_owned();
    while head.ends_with('-') {
        head.pop();
    }
    format!("{head}-{}", &hash[..5])
}

/// The identity of a preview from which every name is derived.
#[derive(Debug, Clone, Copy)]
pub struct PreviewIdentity<'a> {
    pub blueprint: &'a str,
    pub repo: &'a RepoName,
    pub pr: PrNumber,
    /// Whether the blueprint allows another repository with the same name under another owner; the
    /// owner then becomes part of the name so that the two never share a preview.
    pub owner_ambiguous: bool,
}

/// Name of the `PreviewEnvironment`: `<repo>-pr-<n>`, prefixed with the blueprint when the
/// blueprint is not named after the repo, with the owner when the repo name alone is ambiguous.
pub fn preview_name(id: PreviewIdentity<'_>) -> NamespaceName {
    let repo = slug(id.repo.name());
    let mut parts = Vec::new();
    let blueprint = slug(id.blueprint);
    if blueprint != repo {
        parts.push(blueprint);
    }
    if id.owner_ambiguous {
        parts.push(slug(id.repo.owner()));
    }
    parts.push(repo);
    parts.push(format!("pr-{}", id.pr));
    let full = parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    NamespaceName::new(&fit_label(&full, NamespaceName::MAX_LEN))
        .expect("slugged and fitted names are valid labels")
}

/// Namespace of a preview: the configured prefix and the preview name, fitted to 63 characters.
pub fn namespace_name(prefix: &str, preview: &NamespaceName) -> NamespaceName {
    let full = format!("{}{}", slug_prefix(prefix), preview.as_str());
    NamespaceName::new(&fit_label(&full, NamespaceName::MAX_LEN))
        .expect("slugged and fitted names are valid labels")
}

fn slug_prefix(prefix: &str) -> String {
    let s = slug(prefix);
    if s.is_empty() { s } else { format!("{s}-") }
}

/// The GitHub environment of a preview, `preview/<preview name>` (`preview/shop-pr-42`): one per
/// preview, so that a success on one PR never marks another PR's deployment inactive, and two
/// blueprints previewing the same PR never share one.
pub fn github_environment(preview: &str) -> String {
    format!("preview/{preview}")
}

/// The repository as a label value (`sandcastle.dev/repo`): `owner/name` becomes `owner.name`.
pub fn repo_label_value(repo: &RepoName) -> String {
    format!("{}.{}", repo.owner(), repo.name())
}

/// Whether `s` is a DNS label (RFC 1123, lower case): `[a-z0-9-]`, 1 to 63 characters, not
/// starting or ending with `-` — a namespace name, or one label of a host name.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && !s.starts_with('-')
        && !s.ends_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Whether `s` can name a Kubernetes object (a DNS-1123 subdomain: dot-separated labels, at
/// most 253 characters). Names that cannot are answered "not found" without asking the API
/// server, which would refuse the request itself.
pub fn is_object_name(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(|label| NamespaceName::new(label).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_follow_git() {
        for good in [
            "main",
            "feature/cart",
            "agent/fix-1.2",
            "v1.0",
            "a@b",
            "UPPER_case",
        ] {
            assert!(is_branch_name(good), "{good}");
        }
        let long = "b".repeat(256);
        for bad in [
            "",
            "@",
            "a..b",
            "a@{1}",
            "a//b",
            "/a",
            "a/",
            "a.",
            ".a",
            "a/.b",
            "a.lock",
            "a/b.lock/c",
            "a b",
            "a~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[b",
            "a\\b",
            "a\tb",
            "a\u{7f}b",
            "fix/\u{202e}gnp.exe",
            "a\u{202a}b",
            "a\u{202b}b",
            "a\u{202c}b",
            "a\u{202d}b",
            "a\u{2066}b\u{2069}",
            "a\u{2067}b",
            "a\u{2068}b",
            "a\u{200e}b",
            "a\u{200f}b",
            "a\u{061c}b",
            "a\u{2028}b",
            "a\u{2029}b",
            &long,
        ] {
            assert!(!is_branch_name(bad), "{bad:?}");
        }
    }

    fn id<'a>(blueprint: &'a str, repo: &'a RepoName, pr: u64) -> PreviewIdentity<'a> {
        PreviewIdentity {
            blueprint,
            repo,
            pr: PrNumber::new(pr).unwrap(),
            owner_ambiguous: false,
        }
    }

    #[test]
    fn slug_cleans_names() {
        assert_eq!(slug("Shop.Web__API"), "shop-web-api");
        assert_eq!(slug("--a--b--"), "a-b");
        assert_eq!(slug("..."), "");
    }

    #[test]
    fn preview_names_read_well() {
        let shop = RepoName::new("acme/shop").unwrap();
        assert_eq!(preview_name(id("shop", &shop, 42)).as_str(), "shop-pr-42");
        assert_eq!(
            preview_name(id("staging", &shop, 42)).as_str(),
            "staging-shop-pr-42"
        );
        let mut ambiguous = id("staging", &shop, 7);
        ambiguous.owner_ambiguous = true;
        assert_eq!(preview_name(ambiguous).as_str(), "staging-acme-shop-pr-7");
        let dotted = RepoName::new("acme/web.site").unwrap();
        assert_eq!(
            preview_name(id("web", &dotted, 1)).as_str(),
            "web-web-site-pr-1"
        );
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let repo =
            RepoName::new(&format!("acme/{}", "very-long-repository-name".repeat(4))).unwrap();
        let a = preview_name(id("bp", &repo, 1));
        let b = preview_name(id("bp", &repo, 2));
        assert_eq!(a.as_str().len(), 63);
        assert_ne!(a, b, "truncated names must still differ");
        assert_eq!(a, preview_name(id("bp", &repo, 1)), "names must be stable");
        assert!(!a.as_str().contains("--"));
    }

    #[test]
    fn namespace_gets_the_prefix_and_still_fits() {
        let p = NamespaceName::new("shop-pr-42").unwrap();
        assert_eq!(namespace_name("", &p).as_str(), "shop-pr-42");
        assert_eq!(namespace_name("preview", &p).as_str(), "preview-shop-pr-42");
        let long = NamespaceName::new(&"a".repeat(63)).unwrap();
        assert_eq!(namespace_name("preview-", &long).as_str().len(), 63);
    }

    #[test]
    fn environment_is_per_preview() {
        let shop = RepoName::new("acme/shop").unwrap();
        let name = preview_name(id("shop", &shop, 42));
        assert_eq!(github_environment(name.as_str()), "preview/shop-pr-42");
    }

    #[test]
    fn object_names_are_dns_subdomains() {
        assert!(is_object_name("shop-pr-42"));
        assert!(is_object_name("web.v2"));
        for bad in [
            "",
            "Shop",
            "a..b",
            "-a",
            "a/b",
            "\u{e9}t\u{e9}",
            &"a".repeat(254),
        ] {
            assert!(!is_object_name(bad), "{bad:?}");
        }
    }
}

#[cfg(test)]
mod hostile {
    use proptest::prelude::*;

    use super::*;
    use sandcastle_hostile::{self as hostile, nasty_text};

    /// A DNS-1123 label, judged apart from `NamespaceName`.
    fn is_label(s: &str) -> bool {
        (1..=63).contains(&s.len())
            && s.bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
            && !s.starts_with('-')
            && !s.ends_with('-')
    }

    fn names() -> impl Strategy<Value = String> {
        prop_oneof![
            nasty_text(10),
            any::<String>(),
            "[a-zA-Z0-9._-]{0,300}",
            "[a-z0-9-]{55,70}",
        ]
    }

    fn repos() -> impl Strategy<Value = RepoName> {
        ("[A-Za-z0-9_-]{1,39}", "[A-Za-z0-9._-]{1,100}")
            .prop_filter_map("a repository name", |(owner, name)| {
                RepoName::new(&format!("{owner}/{name}")).ok()
            })
    }

    #[test]
    fn proptest_slugs_are_label_text() {
        hostile::check("naming: slugs are label text", names(), |s| {
            let slugged = slug(&s);
            prop_assert!(
                slugged
                    .bytes()
                    .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
            );
            prop_assert!(!slugged.starts_with('-') && !slugged.ends_with('-'));
            prop_assert!(!slugged.contains("--"), "{slugged}");
            prop_assert_eq!(slug(&slugged), slugged);
            Ok(())
        });
    }

    #[test]
    fn proptest_fitted_labels_fit() {
        hostile::check("naming: fitted labels fit", names(), |s| {
            let fitted = fit_label(&s, 63);
            prop_assert!(fitted.len() <= 63, "{fitted}");
            if s.len() <= 63 {
                prop_assert_eq!(&fitted, &s);
            }
            let slugged = slug(&s);
            if !slugged.is_empty() {
                prop_assert!(is_label(&fit_label(&slugged, 63)), "{slugged}");
            }
            Ok(())
        });
    }

    #[test]
    fn proptest_preview_and_namespace_names_are_labels() {
        let strategy = (
            names(),
            repos(),
            1..=i32::MAX as u64,
            any::<bool>(),
            names(),
        );
        hostile::check(
            "naming: preview and namespace names are labels",
            strategy,
            |(blueprint, repo, pr, owner_ambiguous, prefix)| {
                let id = PreviewIdentity {
                    blueprint: &blueprint,
                    repo: &repo,
                    pr: PrNumber::new(pr).unwrap(),
                    owner_ambiguous,
                };
                let preview = preview_name(id);
                prop_assert!(is_label(preview.as_str()), "{preview}");
                prop_assert_eq!(&preview, &preview_name(id));
                let namespace = namespace_name(&prefix, &preview);
                prop_assert!(is_label(namespace.as_str()), "{namespace}");
                prop_assert!(is_object_name(preview.as_str()));
                prop_assert!(github_environment(preview.as_str()).starts_with("preview/"));
                Ok(())
            },
        );
    }

    #[test]
    fn proptest_object_and_branch_names_are_judged_without_panic() {
        hostile::check("naming: object and branch names", names(), |s| {
            if is_object_name(&s) {
                prop_assert!(s.len() <= 253);
                prop_assert!(s.split('.').all(is_label), "{s}");
            }
            if is_branch_name(&s) {
                prop_assert!(!s.is_empty() && s.len() <= 255 && !s.contains(".."));
                prop_assert!(!s.chars().any(char::is_control));
            }
            Ok(())
        });
    }

    #[test]
    fn corpus_nasty_names() {
        let label = |n: usize| "a".repeat(n);
        let dotted = |n: usize| {
            let mut s = String::new();
            while s.len() < n {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(&"b".repeat((n - s.len()).min(63)));
            }
            s
        };
        let cases: Vec<(String, bool, bool)> = vec![
            // (name, a namespace/label, an object name)
            (label(63), true, true),
            (label(64), false, false),
            (dotted(253), false, true),
            (dotted(254), false, false),
            ("Shop".into(), false, false),
            ("shop.web".into(), false, true),
            ("9lives".into(), true, true),
            ("-shop".into(), false, false),
            ("shop-".into(), false, false),
            ("xn--bcher-kva".into(), true, true),
            ("b\u{fc}cher".into(), false, false),
            ("".into(), false, false),
            (".".into(), false, false),
            ("a..b".into(), false, false),
            ("a\0b".into(), false, false),
            ("\u{ff53}hop".into(), false, false),
        ];
        hostile::corpus(
            "naming: nasty names",
            cases,
            |(name, label_ok, object_ok)| {
                assert_eq!(NamespaceName::new(&name).is_ok(), label_ok, "{name:?}");
                assert_eq!(is_label(&name), label_ok, "{name:?}");
                assert_eq!(is_object_name(&name), object_ok, "{name:?}");
                let fitted = fit_label(&slug(&name), 63);
                assert!(fitted.is_empty() || is_label(&fitted), "{fitted:?}");
            },
        );
        // Long names that differ only past the cut still get different labels.
        let a = fit_label(&format!("{}-a", label(70)), 63);
        let b = fit_label(&format!("{}-b", label(70)), 63);
        assert_ne!(a, b);
        assert_eq!((a.len(), b.len()), (63, 63));
    }
}
