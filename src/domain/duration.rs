//! Durations as people write them: Kubernetes/Go style (`90s`, `10m`, `1h30m`, `168h`) in
//! resources, plus days and weeks (`2d`, `1w`) in commands. Parsing and printing, no I/O.

use std::fmt;
use std::time::Duration;

/// The pattern a duration field of a custom resource must match (Go duration syntax, as CEL's
/// `duration()` understands it, or `0`).
pub const SCHEMA_PATTERN: &str = r"^(0|([0-9]+(h|m|s))+)$";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a duration; write it like 30m, 4h, 1h30m or 2d")]
pub struct DurationError {
    input: String,
}

/// Parse `0`, or a sequence of `<integer><unit>` with units `s`, `m`, `h`, and (when `days` is
/// true) `d` and `w`.
pub fn parse(input: &str, days: bool) -> Result<Duration, DurationError> {
    let err = || DurationError {
        input: input.to_owned(),
    };
    let s = input.trim().to_ascii_lowercase();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' if days => 86_400,
            'w' if days => 7 * 86_400,
            _ => return Err(err()),
        };
        let n: u64 = digits.parse().map_err(|_| err())?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(err)?;
    }
    if !digits.is_empty() {
        return Err(err());
    }
    Ok(Duration::from_secs(total))
}

/// Parse a duration field of a custom resource (no days: CEL cannot compare them).
pub fn parse_field(input: &str) -> Result<Duration, DurationError> {
    parse(input, false)
}

/// Print a duration compactly in the largest fitting units, e.g. `1d 2h`, `45m`, `30s`.
pub fn human(d: Duration) -> Human {
    Human(d)
}

#[derive(Debug, Clone, Copy)]
pub struct Human(Duration);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
        let parts: Vec<String> = [(d, "d"), (h, "h"), (m, "m"), (s, "s")]
            .iter()
            .filter(|(n, _)| *n > 0)
            .take(2)
            .map(|(n, u)| format!("{n}{u}"))
            .collect();
        if parts.is_empty() {
            f.write_str("0s")
        } else {
            f.write_str(&parts.join(" "))
        }
    }
}

/// Print in Go duration syntax (`24h`, `1h30m`), the form stored in resources.
pub fn go_style(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return "0".to_owned();
    }
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_style_and_days() {
        assert_eq!(parse_field("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_field("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_field("0").unwrap(), Duration::ZERO);
        assert_eq!(parse("2d", true).unwrap(), Duration::from_secs(172_800));
        assert_eq!(
            parse("1w1d", true).unwrap(),
            Duration::from_secs(8 * 86_400)
        );
        assert_eq!(parse(" 4H ", true).unwrap(), Duration::from_secs(14_400));
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "h",
            "10",
            "1.5h",
            "-1h",
            "2d",
            "1y",
            "99999999999999999999h",
        ] {
            assert!(parse_field(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse("3x", true).is_err());
    }

    #[test]
    fn prints_both_ways() {
        assert_eq!(go_style(Duration::from_secs(5400)), "1h30m");
        assert_eq!(go_style(Duration::from_secs(168 * 3600)), "168h");
        assert_eq!(human(Duration::from_secs(93_600)).to_string(), "1d 2h");
        assert_eq!(human(Duration::from_secs(45 * 60)).to_string(), "45m");
        assert_eq!(human(Duration::ZERO).to_string(), "0s");
    }
}
