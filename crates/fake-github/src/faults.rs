//! Faults a test can inject into the stand-in's next answers: server errors, both kinds of rate
//! limit, slowness and a dropped connection.

use std::time::Duration;

use super::calls::Matcher;

/// What to do instead of (or before) answering normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this 5xx status (500, 502, 503…).
    ServerError(u16),
    /// 403 with `retry-after` and GitHub's secondary-rate-limit message.
    SecondaryRateLimit { retry_after_secs: u64 },
    /// 403 with `x-ratelimit-remaining: 0` and a reset this far in the future.
    PrimaryRateLimit { reset_in_secs: u64 },
    /// Answer normally, after this delay.
    Slow(Duration),
    /// Close the connection without answering.
    Down,
    /// Answer as if the request's query held only its paging (`per_page`, `page`): a list
    /// endpoint that ignores its filters, which a client must not simply trust.
    IgnoreFilters,
}

#[derive(Debug)]
pub(crate) struct FaultRule {
    pub matcher: Matcher,
    pub remaining: u32,
    pub fault: Fault,
}

/// Takes the fault for a request, if a rule with uses left matches it (first rule wins).
pub(crate) fn take(rules: &mut Vec<FaultRule>, method: &str, path: &str) -> Option<Fault> {
    let i = rules
        .iter()
        .position(|r| r.remaining > 0 && r.matcher.matches(method, path))?;
    let fault = rules[i].fault;
    rules[i].remaining -= 1;
    if rules[i].remaining == 0 {
        rules.remove(i);
    }
    Some(fault)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_used_up_in_order() {
        let mut rules = vec![
            FaultRule {
                matcher: Matcher::new("GET /a"),
                remaining: 2,
                fault: Fault::ServerError(500),
            },
            FaultRule {
                matcher: Matcher::new("/a"),
                remaining: 1,
                fault: Fault::Down,
            },
        ];
        assert_eq!(take(&mut rules, "GET", "/a"), Some(Fault::ServerError(500)));
        assert_eq!(take(&mut rules, "POST", "/a"), Some(Fault::Down));
        assert_eq!(take(&mut rules, "GET", "/a"), Some(Fault::ServerError(500)));
        assert_eq!(take(&mut rules, "GET", "/a"), None);
        assert!(rules.is_empty());
    }
}
