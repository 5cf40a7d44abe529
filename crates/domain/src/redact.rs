//! Redacting what a log line must not show: the values of the preview namespace's Secrets, and
//! strings shaped like credentials (GitHub tokens, JSON Web Tokens, AWS access keys, bearer
//! tokens) whatever their source. Pure; the patterns are the `regex` crate's.

use regex::Regex;

/// What replaces a redacted value.
pub const MASK: &str = "[redacted]";

/// Secret values shorter than this are not redacted (`true`, `1`, `admin`): masking them
/// would blank ordinary words without protecting anything.
const SHORTEST_SECRET: usize = 6;

/// Token shapes redacted wherever they appear.
const SHAPES: [&str; 5] = [
    // GitHub personal access, OAuth, user, server and refresh tokens; fine-grained tokens.
    r"\bgh[pousr]_[A-Za-z0-9]{30,255}\b",
    r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b",
    // JSON Web Tokens (Kubernetes ServiceAccount tokens among them).
    r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}",
    // AWS access key ids.
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    // `Authorization: Bearer …`, `Bearer …`.
    r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}",
];

/// Redacts one set of secret values and every token shape.
#[derive(Debug, Clone)]
pub struct Redactor {
    /// Longest first, so a value that contains another is masked whole.
    values: Vec<String>,
    shapes: Vec<Regex>,
}

impl Redactor {
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut values: Vec<String> = values
            .into_iter()
            .map(|v| v.trim().to_owned())
            .filter(|v| v.len() >= SHORTEST_SECRET)
            .collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        let shapes = SHAPES
            .iter()
            .map(|p| Regex::new(p).expect("the token shapes are valid patterns"))
            .collect();
        Self { values, shapes }
    }

    /// `line` with every secret value and token shape masked, and how many were.
    pub fn redact(&self, line: &str) -> (String, u32) {
        let mut out = line.to_owned();
        let mut count = 0u32;
        for value in &self.values {
            let n = out.matches(value.as_str()).count();
            if n > 0 {
                count += u32::try_from(n).unwrap_or(u32::MAX);
                out = out.replace(value.as_str(), MASK);
            }
        }
        for shape in &self.shapes {
            let n = shape.find_iter(&out).count();
            if n > 0 {
                count += u32::try_from(n).unwrap_or(u32::MAX);
                out = shape.replace_all(&out, MASK).into_owned();
            }
        }
        (out, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_and_token_shapes_are_masked() {
        let r = Redactor::new(["s3cr3t-passw0rd".to_owned(), "true".to_owned()]);
        let (line, n) = r.redact("connecting with s3cr3t-passw0rd (tls: true)");
        assert_eq!(line, "connecting with [redacted] (tls: true)");
        assert_eq!(n, 1);
        for token in [
            "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlLXBhcnQ",
            "AKIAIOSFODNN7EXAMPLE",
        ] {
            let (line, n) = r.redact(&format!("token={token} end"));
            assert_eq!(line, "token=[redacted] end", "{token}");
            assert_eq!(n, 1);
        }
        let (line, _) = r.redact("Authorization: Bearer abcdefghijklmnop.qrstuv");
        assert_eq!(line, "Authorization: [redacted]");
        assert_eq!(
            r.redact("nothing to hide here"),
            ("nothing to hide here".to_owned(), 0)
        );
    }

    #[test]
    fn a_value_inside_another_is_masked_whole() {
        let r = Redactor::new(["abcdef".to_owned(), "abcdef-123456".to_owned()]);
        assert_eq!(r.redact("key abcdef-123456").0, "key [redacted]");
    }
}
