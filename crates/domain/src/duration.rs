//! Durations as people write and read them: commands and flags take days and weeks besides Go
//! syntax (`2d`, `1w`, `90m`; the parser is the resources' own, `crd::duration`), and people
//! read them compactly (`1d 2h`). No I/O.

use std::fmt;
use std::time::Duration;

pub use sandcastle_crd::duration::{DurationError, SCHEMA_PATTERN, go_style, parse};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_for_people() {
        assert_eq!(human(Duration::from_secs(93_600)).to_string(), "1d 2h");
        assert_eq!(human(Duration::from_secs(45 * 60)).to_string(), "45m");
        assert_eq!(human(Duration::ZERO).to_string(), "0s");
    }
}
