//! Judging one answer of a preview's HTTP readiness probe: an accepted status and, when the
//! Blueprint asks, the deployed commit in a header, a JSON field or the body. What the probe saw
//! is said in a few words (`GET /healthz → 502`), for the status, the sticky comment and, past
//! the deadline, the failure. No I/O.

use crate::Sha;
use sandcastle_crd::{CommitCheck, HttpReadiness};

/// The most of a body the probe reads (a commit check looks no further).
pub const BODY_LIMIT: usize = 64 * 1024;

/// One answer, as the probe received it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// Header names in lower case, values as sent (non-UTF-8 values are left out).
    pub headers: Vec<(String, String)>,
    /// Up to [`BODY_LIMIT`] bytes of the body.
    pub body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Whether `code` is among `statuses` (codes like `204` and ranges like `200-399`). Entries
/// that do not parse accept nothing (the CRD schema refuses them).
pub fn accepts(statuses: &[String], code: u16) -> bool {
    statuses.iter().any(|s| {
        let (from, to) = s.split_once('-').unwrap_or((s, s));
        match (from.trim().parse::<u16>(), to.trim().parse::<u16>()) {
            (Ok(from), Ok(to)) => (from..=to).contains(&code),
            _ => false,
        }
    })
}

/// Whether `value` names `sha`: the full sha, or an abbreviation of at least 7 hex digits.
pub fn names_commit(value: &str, sha: &Sha) -> bool {
    let v = value.trim().to_ascii_lowercase();
    v.len() >= 7 && v.bytes().all(|b| b.is_ascii_hexdigit()) && sha.as_str().starts_with(&v)
}

/// `GET /healthz`: what the probe asks, as people read it.
pub fn request_line(spec: &HttpReadiness) -> String {
    format!("GET {}", spec.path)
}

/// `Ok` when the answer passes; otherwise what it showed, e.g. `GET / → 502` or
/// `GET / → 200, X-Commit 1234567 is not abc1234`.
pub fn judge(spec: &HttpReadiness, sha: &Sha, answer: &Answer) -> Result<(), String> {
    let seen = format!("{} → {}", request_line(spec), answer.status);
    if !accepts(&spec.statuses, answer.status) {
        return Err(seen);
    }
    match &spec.commit {
        None => Ok(()),
        Some(check) => commit_shown(check, sha, answer).map_err(|why| format!("{seen}, {why}")),
    }
}

/// Whether the answer shows `sha` where `check` says; otherwise what it showed instead.
fn commit_shown(check: &CommitCheck, sha: &Sha, answer: &Answer) -> Result<(), String> {
    let short = sha.short();
    if let Some(name) = &check.header {
        return match answer.header(name) {
            Some(v) if names_commit(v, sha) => Ok(()),
            Some(v) => Err(format!("{name} {} is not {short}", shorten(v))),
            None => Err(format!("no {name} header")),
        };
    }
    if let Some(path) = &check.json_field {
        let Ok(json) = serde_json::from_slice::<serde_json::Value>(&answer.body) else {
            return Err(format!("not JSON, so no {path}"));
        };
        let field = path.split('.').try_fold(&json, |v, key| v.get(key));
        return match field {
            Some(serde_json::Value::String(v)) if names_commit(v, sha) => Ok(()),
            Some(serde_json::Value::String(v)) => {
                Err(format!("{path} {} is not {short}", shorten(v)))
            }
            Some(other) => Err(format!(
                "{path} {} is not {short}",
                shorten(&other.to_string())
            )),
            None => Err(format!("no {path} in the JSON")),
        };
    }
    let body = String::from_utf8_lossy(&answer.body).to_ascii_lowercase();
    if body.contains(sha.as_str()) || body.contains(short) {
        Ok(())
    } else {
        Err(format!("the body does not show {short}"))
    }
}

/// A value from the answer, cut short for a one-line message.
fn shorten(v: &str) -> String {
    let one_line: String = v.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= 40 {
        return one_line;
    }
    let cut: String = one_line.chars().take(39).collect();
    format!("{cut}…")
}

/// An answer that did not pass as the `n`th of a row of `row` that must: after good answers it
/// says so (`GET / → timed out (answer 2 of 3 in a row)`), since the earlier ones came from
/// another backend.
pub fn in_row(last: &str, n: u32, row: u32) -> String {
    if n <= 1 {
        last.to_owned()
    } else {
        format!("{last} (answer {n} of {row} in a row)")
    }
}

/// What the probe has seen so far: `GET / → 502, 6 tries`.
pub fn progress(last: &str, tries: u32) -> String {
    match tries {
        1 => format!("{last}, 1 try"),
        n => format!("{last}, {n} tries"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_after_good_answers_says_where_in_the_row_it_came() {
        assert_eq!(in_row("GET / → 502", 1, 3), "GET / → 502");
        assert_eq!(
            in_row("GET / → timed out", 2, 3),
            "GET / → timed out (answer 2 of 3 in a row)"
        );
        assert_eq!(
            progress(&in_row("GET / → 502", 3, 3), 4),
            "GET / → 502 (answer 3 of 3 in a row), 4 tries"
        );
    }

    fn sha() -> Sha {
        Sha::new("abc1234def5678abc1234def5678abc1234def56").unwrap()
    }

    fn spec(commit: Option<CommitCheck>) -> HttpReadiness {
        HttpReadiness {
            commit,
            ..HttpReadiness::default()
        }
    }

    fn answer(status: u16, headers: &[(&str, &str)], body: &str) -> Answer {
        Answer {
            status,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), (*v).to_owned()))
                .collect(),
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn statuses_are_codes_and_ranges() {
        let s = vec!["200-399".to_owned(), "418".to_owned()];
        assert!(accepts(&s, 200) && accepts(&s, 399) && accepts(&s, 418));
        assert!(!accepts(&s, 199) && !accepts(&s, 400) && !accepts(&s, 502));
        assert!(!accepts(&["nonsense".to_owned()], 200));
    }

    #[test]
    fn a_commit_is_named_in_full_or_by_seven_digits_or_more() {
        assert!(names_commit(
            "abc1234def5678abc1234def5678abc1234def56",
            &sha()
        ));
        assert!(names_commit(" ABC1234\n", &sha()));
        assert!(names_commit("abc1234def", &sha()));
        assert!(!names_commit("abc123", &sha()), "too short to name it");
        assert!(!names_commit("abc1235", &sha()));
        assert!(!names_commit("abc1234-dirty", &sha()));
    }

    #[test]
    fn a_bad_status_is_said_with_the_request() {
        let s = spec(None);
        assert_eq!(
            judge(&s, &sha(), &answer(502, &[], "")),
            Err("GET / → 502".into())
        );
        assert_eq!(judge(&s, &sha(), &answer(302, &[], "")), Ok(()));
    }

    #[test]
    fn the_commit_header_must_name_the_deployed_commit() {
        let s = spec(Some(CommitCheck {
            header: Some("X-Commit".into()),
            ..CommitCheck::default()
        }));
        assert_eq!(
            judge(&s, &sha(), &answer(200, &[("x-commit", "1234567")], "")),
            Err("GET / → 200, X-Commit 1234567 is not abc1234".into())
        );
        assert_eq!(
            judge(&s, &sha(), &answer(200, &[], "")),
            Err("GET / → 200, no X-Commit header".into())
        );
        assert_eq!(
            judge(&s, &sha(), &answer(200, &[("X-Commit", "abc1234")], "")),
            Ok(())
        );
        assert_eq!(
            judge(&s, &sha(), &answer(503, &[("X-Commit", "abc1234")], "")),
            Err("GET / → 503".into()),
            "the status comes first"
        );
    }

    #[test]
    fn the_commit_field_is_found_by_its_dotted_path() {
        let s = spec(Some(CommitCheck {
            json_field: Some("build.commit".into()),
            ..CommitCheck::default()
        }));
        let ok = answer(200, &[], r#"{"build": {"commit": "abc1234def5678"}}"#);
        assert_eq!(judge(&s, &sha(), &ok), Ok(()));
        let old = answer(200, &[], r#"{"build": {"commit": "0000000"}}"#);
        assert_eq!(
            judge(&s, &sha(), &old),
            Err("GET / → 200, build.commit 0000000 is not abc1234".into())
        );
        let number = answer(200, &[], r#"{"build": {"commit": 1234567}}"#);
        assert!(judge(&s, &sha(), &number).is_err());
        let missing = answer(200, &[], r#"{"build": {}}"#);
        assert_eq!(
            judge(&s, &sha(), &missing),
            Err("GET / → 200, no build.commit in the JSON".into())
        );
        let html = answer(200, &[], "<html>");
        assert_eq!(
            judge(&s, &sha(), &html),
            Err("GET / → 200, not JSON, so no build.commit".into())
        );
    }

    #[test]
    fn the_body_may_show_the_commit_anywhere() {
        let s = spec(Some(CommitCheck {
            body: Some(true),
            ..CommitCheck::default()
        }));
        let ok = answer(200, &[], "<footer>build ABC1234</footer>");
        assert_eq!(judge(&s, &sha(), &ok), Ok(()));
        let old = answer(200, &[], "<footer>build 1234567</footer>");
        assert_eq!(
            judge(&s, &sha(), &old),
            Err("GET / → 200, the body does not show abc1234".into())
        );
    }

    #[test]
    fn long_values_are_cut_and_progress_counts_tries() {
        let s = spec(Some(CommitCheck {
            header: Some("X-Commit".into()),
            ..CommitCheck::default()
        }));
        let long = "x".repeat(200);
        let why = judge(&s, &sha(), &answer(200, &[("x-commit", &long)], "")).unwrap_err();
        assert!(why.chars().count() < 100, "{why}");
        assert_eq!(progress("GET / → 502", 1), "GET / → 502, 1 try");
        assert_eq!(progress("GET / → 502", 6), "GET / → 502, 6 tries");
    }
}
