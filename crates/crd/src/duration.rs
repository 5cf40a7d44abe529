//! Durations as resources hold them: Go syntax (`90s`, `10m`, `1h30m`, `168h`) or `0`, the form
//! CEL's `duration()` reads, parsed once when a resource is read ([`GoDuration`]); plus the
//! parser itself, which also takes days and weeks (`2d`, `1w`) where people type durations.
//! Written by hand: the grammar is five lines, and it must be exactly the one the CRD's pattern
//! and CEL accept.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The pattern a duration field of a custom resource must match.
pub const SCHEMA_PATTERN: &str = r"^(0|([0-9]+(h|m|s))+)$";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{:?} is not a duration; write it like 30m, 4h, 1h30m or 2d", super::quote::short(.input))]
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

/// A duration field of a custom resource (`ttl: 24h`): validated by the API server against
/// [`SCHEMA_PATTERN`], parsed once on reading, written back in Go syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(Duration);

impl GoDuration {
    pub const fn from_secs(secs: u64) -> Self {
        Self(Duration::from_secs(secs))
    }

    pub const fn get(self) -> Duration {
        self.0
    }

    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

impl From<Duration> for GoDuration {
    fn from(d: Duration) -> Self {
        Self(Duration::from_secs(d.as_secs()))
    }
}

impl std::str::FromStr for GoDuration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s, false).map(Self)
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&go_style(self.0))
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&go_style(self.0))
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for GoDuration {
    fn schema_name() -> Cow<'static, str> {
        "GoDuration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": SCHEMA_PATTERN,
            "maxLength": 16,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_style_and_days() {
        let field = |s| parse(s, false);
        assert_eq!(field("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(field("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(field("0").unwrap(), Duration::ZERO);
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
            assert!(parse(bad, false).is_err(), "{bad:?} accepted");
            assert!(bad.parse::<GoDuration>().is_err(), "{bad:?} accepted");
        }
        assert!(parse("3x", true).is_err());
    }

    #[test]
    fn fields_read_and_write_go_syntax() {
        let d: GoDuration = serde_json::from_value(serde_json::json!("90m")).unwrap();
        assert_eq!(d.get(), Duration::from_secs(5400));
        assert_eq!(serde_json::to_value(d).unwrap(), "1h30m");
        assert_eq!(go_style(Duration::from_secs(168 * 3600)), "168h");
        let err = serde_json::from_value::<GoDuration>(serde_json::json!("2d")).unwrap_err();
        assert!(err.to_string().contains("is not a duration"), "{err}");
    }
}

#[cfg(test)]
mod hostile {
    use proptest::prelude::*;

    use super::*;
    use sandcastle_hostile::{self as hostile, SIZES, nasty_text};

    /// What the grammar gives for `s`, worked out apart from `parse`: the CRD's pattern (with
    /// `d` and `w` when `days`), then the sum in 128 bits; `None` when it does not match or the
    /// sum does not fit in a `u64` of seconds.
    fn oracle(s: &str, days: bool) -> Option<u64> {
        let pattern = if days {
            r"^(0|([0-9]+(h|m|s|d|w))+)$"
        } else {
            SCHEMA_PATTERN
        };
        if !regex::Regex::new(pattern).unwrap().is_match(s) {
            return None;
        }
        let mut total: u128 = 0;
        let mut number = String::new();
        for c in s.chars() {
            if c.is_ascii_digit() {
                number.push(c);
                continue;
            }
            let unit: u128 = match c {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                'd' => 86_400,
                _ => 604_800,
            };
            let digits = number.trim_start_matches('0');
            let n: u128 = if digits.is_empty() {
                0
            } else {
                digits.parse().ok()?
            };
            total = total.checked_add(n.checked_mul(unit)?)?;
            number.clear();
        }
        u64::try_from(total).ok()
    }

    fn near_durations() -> impl Strategy<Value = String> {
        prop_oneof![
            "[0-9hmsdw]{0,20}",
            "[0-9hmsdw.+eE -]{0,20}",
            "([0-9]{1,21}[hmsdw]){1,4}",
            nasty_text(6),
        ]
    }

    #[test]
    fn proptest_durations_parse_exactly_what_the_pattern_matches() {
        hostile::check(
            "duration: parse accepts exactly what the pattern matches",
            (near_durations(), any::<bool>()),
            |(s, days)| {
                let got = parse(&s, days);
                // parse trims and lower-cases; the pattern is for what resources hold.
                if s.trim() == s && s.to_ascii_lowercase() == s {
                    prop_assert_eq!(got.clone().ok(), oracle(&s, days).map(Duration::from_secs));
                }
                if let Err(e) = got {
                    prop_assert_eq!(e.input, s);
                }
                Ok(())
            },
        );
    }

    #[test]
    fn proptest_what_fits_the_schema_always_parses() {
        // The CRD holds at most 16 characters: no such duration overflows.
        hostile::check(
            "duration: what fits the schema always parses",
            "0|([0-9]{1,5}[hms]){1,3}".prop_filter("maxLength 16", |s| s.len() <= 16),
            |s| {
                prop_assert!(parse(&s, false).is_ok(), "{s}");
                prop_assert!(s.parse::<GoDuration>().is_ok(), "{s}");
                Ok(())
            },
        );
    }

    #[test]
    fn proptest_go_style_parses_back_to_itself() {
        hostile::check(
            "duration: go_style parses back to itself",
            prop_oneof![any::<u64>(), 0..1_000_000u64],
            |secs| {
                let d = Duration::from_secs(secs);
                let text = go_style(d);
                prop_assert!(
                    regex::Regex::new(SCHEMA_PATTERN).unwrap().is_match(&text),
                    "{text}"
                );
                prop_assert_eq!(parse(&text, false), Ok(d));
                prop_assert_eq!(parse(&text, true), Ok(d));
                let field: GoDuration = serde_json::from_value(serde_json::json!(text)).unwrap();
                prop_assert_eq!(
                    serde_json::to_value(field).unwrap(),
                    serde_json::json!(text)
                );
                Ok(())
            },
        );
    }

    /// The parser is one pass over the characters, stopping at the first that does not fit.
    /// At every size the outcome is the same: a sum of many parts parses, an endless number is
    /// refused as soon as it overflows, leading zeros do not count.
    #[test]
    fn corpus_durations_of_growing_size() {
        hostile::corpus("duration: durations of growing size", SIZES, |n| {
            let many = "1s".repeat(n / 2);
            assert_eq!(parse(&many, false), Ok(Duration::from_secs((n / 2) as u64)));
            let endless = format!("{}h", "9".repeat(n));
            assert!(parse(&endless, false).is_err());
            let zeros = format!("{}1h", "0".repeat(n));
            assert_eq!(parse(&zeros, false), Ok(Duration::from_secs(3600)));
            let junk = "\u{ff11}h".repeat(n / 4);
            assert!(parse(&junk, true).is_err());
        });
    }

    #[test]
    fn corpus_nasty_durations() {
        let cases: &[(&str, Option<u64>)] = &[
            ("99999999999h", Some(359_999_999_996_400)),
            ("18446744073709551615s", Some(u64::MAX)),
            ("18446744073709551616s", None),
            ("5124095576030431h", Some(5_124_095_576_030_431 * 3600)),
            ("5124095576030432h", None),
            ("1e3s", None),
            ("-1s", None),
            ("+1s", None),
            ("1h-1m", None),
            ("1.5h", None),
            ("", None),
            (" ", None),
            ("0", Some(0)),
            ("00", None),
            ("0s", Some(0)),
            ("1h1h", Some(7200)),
            ("1H", Some(3600)),
            (" 1h ", Some(3600)),
            ("\u{feff}1h", None),
            ("1h\0", None),
            ("\u{ff11}h", None),
            ("1\u{ff48}", None),
            ("1d", None),
            ("1w", None),
            ("h", None),
            ("10", None),
        ];
        hostile::corpus("duration: nasty durations", cases, |(input, want)| {
            assert_eq!(
                parse(input, false).ok(),
                want.map(Duration::from_secs),
                "{input:?}"
            );
            if want.is_none() {
                let e = parse(input, false).unwrap_err();
                assert!(e.to_string().contains("is not a duration"), "{e}");
            }
        });
        assert_eq!(parse("1w1d", true), Ok(Duration::from_secs(8 * 86_400)));
        assert!(parse("999999999999999999w", true).is_err());
    }
}
