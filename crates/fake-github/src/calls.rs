//! The stand-in's call log: every request it received, and the bookkeeping that lets a test fail
//! when the code under test made a call the test never looked at.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

use serde_json::Value;

/// How a request authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallAuth {
    /// No `Authorization` header.
    None,
    /// An App JWT; `valid` tells whether the stand-in accepted it.
    Jwt { valid: bool },
    /// An installation token the stand-in issued and still honours. `token` is its serial number
    /// (1 for the first token issued), so tests compare tokens without handling them.
    Installation { installation: u64, token: u32 },
    /// A user-to-server token (a person signed in with the App's OAuth).
    User,
    /// A token the stand-in does not know or that expired.
    BadToken,
}

/// One request, as received.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Order of arrival, from 1.
    pub seq: u64,
    /// When the request arrived.
    pub at: Instant,
    pub method: String,
    /// The path, without the query.
    pub path: String,
    pub query: BTreeMap<String, String>,
    /// The JSON body, if there was a non-empty one.
    pub body: Option<Value>,
    pub auth: CallAuth,
    /// The status answered; 0 when the connection was dropped instead.
    pub status: u16,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {} {}", self.seq, self.method, self.path)?;
        if !self.query.is_empty() {
            let q: Vec<String> = self.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
            write!(f, "?{}", q.join("&"))?;
        }
        write!(f, " [{:?}] -> {}", self.auth, self.status)?;
        if let Some(body) = &self.body {
            let text = body.to_string();
            let short: String = text.chars().take(160).collect();
            write!(f, " {short}")?;
            if short.len() < text.len() {
                f.write_str("…")?;
            }
        }
        Ok(())
    }
}

/// Selects calls by method and path pattern: `"POST /repos/*/*/deployments"`, `"/app/**"`. In
/// the path, `*` matches one segment and `**` any number of segments; a pattern without a method
/// matches every method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    method: Option<String>,
    segments: Vec<String>,
}

impl Matcher {
    pub fn new(pattern: &str) -> Self {
        let pattern = pattern.trim();
        let (method, path) = match pattern.split_once(' ') {
            Some((m, p)) if !m.starts_with('/') => (Some(m.to_ascii_uppercase()), p.trim()),
            _ => (None, pattern),
        };
        Self {
            method: method.filter(|m| m != "*"),
            segments: split(path).map(str::to_owned).collect(),
        }
    }

    pub fn matches(&self, method: &str, path: &str) -> bool {
        if self
            .method
            .as_deref()
            .is_some_and(|m| !m.eq_ignore_ascii_case(method))
        {
            return false;
        }
        let path: Vec<&str> = split(path).collect();
        glob(&self.segments, &path)
    }

    pub fn matches_call(&self, call: &Call) -> bool {
        self.matches(&call.method, &call.path)
    }
}

impl From<&str> for Matcher {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} /{}",
            self.method.as_deref().unwrap_or("*"),
            self.segments.join("/")
        )
    }
}

fn split(path: &str) -> impl Iterator<Item = &str> {
    path.split('?')
        .next()
        .unwrap_or("")
        .split('/')
        .filter(|s| !s.is_empty())
}

fn glob(pattern: &[String], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((p, rest)) if p == "**" => (0..=path.len()).any(|i| glob(rest, &path[i..])),
        Some((p, rest)) => match path.split_first() {
            Some((s, tail)) => (p == "*" || p == s) && glob(rest, tail),
            None => false,
        },
    }
}

/// Calls a test did not look at.
#[derive(Debug, Clone, PartialEq)]
pub struct UncheckedCalls(pub Vec<Call>);

impl fmt::Display for UncheckedCalls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "the GitHub stand-in received {} call(s) the test never checked:",
            self.0.len()
        )?;
        for call in &self.0 {
            writeln!(f, "  {call}")?;
        }
        Ok(())
    }
}

impl std::error::Error for UncheckedCalls {}

#[derive(Debug)]
struct Entry {
    call: Call,
    checked: bool,
}

/// The log itself; lives in the stand-in's state.
#[derive(Debug, Default)]
pub(crate) struct CallLog {
    entries: Vec<Entry>,
    allowed: Vec<Matcher>,
    next_seq: u64,
}

impl CallLog {
    pub fn record(&mut self, mut call: Call) -> u64 {
        self.next_seq += 1;
        call.seq = self.next_seq;
        let checked = self.allowed.iter().any(|m| m.matches_call(&call));
        self.entries.push(Entry { call, checked });
        self.next_seq
    }

    pub fn set_status(&mut self, seq: u64, status: u16) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.call.seq == seq) {
            e.call.status = status;
        }
    }

    pub fn all(&self) -> Vec<Call> {
        self.entries.iter().map(|e| e.call.clone()).collect()
    }

    pub fn take(&mut self) -> Vec<Call> {
        self.entries.drain(..).map(|e| e.call).collect()
    }

    pub fn check(&mut self, m: &Matcher) -> Vec<Call> {
        self.entries
            .iter_mut()
            .filter(|e| m.matches_call(&e.call))
            .map(|e| {
                e.checked = true;
                e.call.clone()
            })
            .collect()
    }

    pub fn allow(&mut self, m: Matcher) {
        self.check(&m);
        self.allowed.push(m);
    }

    pub fn unchecked(&self) -> Vec<Call> {
        self.entries
            .iter()
            .filter(|e| !e.checked)
            .map(|e| e.call.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_glob_over_segments() {
        let m = Matcher::new("POST /repos/*/*/deployments");
        assert!(m.matches("POST", "/repos/acme/shop/deployments"));
        assert!(m.matches("post", "/repos/acme/shop/deployments?x=1"));
        assert!(!m.matches("GET", "/repos/acme/shop/deployments"));
        assert!(!m.matches("POST", "/repos/acme/shop/deployments/1/statuses"));
        let any = Matcher::new("/repos/acme/**");
        assert!(any.matches("DELETE", "/repos/acme/shop/issues/comments/3"));
        assert!(any.matches("GET", "/repos/acme"));
        assert!(!any.matches("GET", "/app/installations"));
        let star = Matcher::new("* /app/installations/*/access_tokens");
        assert!(star.matches("POST", "/app/installations/9/access_tokens"));
        assert_eq!(star.to_string(), "* /app/installations/*/access_tokens");
    }

    fn call(method: &str, path: &str) -> Call {
        Call {
            seq: 0,
            at: Instant::now(),
            method: method.to_owned(),
            path: path.to_owned(),
            query: BTreeMap::new(),
            body: None,
            auth: CallAuth::None,
            status: 200,
        }
    }

    #[test]
    fn log_tracks_what_was_checked() {
        let mut log = CallLog::default();
        log.allow(Matcher::new("POST /app/installations/*/access_tokens"));
        log.record(call("POST", "/app/installations/1/access_tokens"));
        log.record(call("GET", "/repos/a/b/pulls/1"));
        log.record(call("POST", "/repos/a/b/issues/1/comments"));
        assert_eq!(log.unchecked().len(), 2);
        assert_eq!(log.check(&"GET /repos/*/*/pulls/*".into()).len(), 1);
        let left = log.unchecked();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].seq, 3);
        let text = UncheckedCalls(left).to_string();
        assert!(text.contains("POST /repos/a/b/issues/1/comments"), "{text}");
        assert_eq!(log.take().len(), 3);
        assert!(log.unchecked().is_empty());
    }
}
