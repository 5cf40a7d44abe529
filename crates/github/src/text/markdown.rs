//! Text from elsewhere made safe to show in Markdown and HTML on GitHub: inline code that cannot
//! be broken out of, text that opens no HTML, table cells, and numbers and times in words.

use jiff::Timestamp;
use jiff::tz::TimeZone;

pub(super) fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Inline code for any text: backticks become quotes and line breaks spaces, so the span cannot
/// be broken out of.
pub(super) fn code(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| match c {
            '`' => '\'',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    format!("`{clean}`")
}

/// Text from elsewhere (the cluster, a check name) shown as text: `<` is escaped so that it can
/// open no HTML, in particular no comment that would hide the rest or fake a marker.
pub(super) fn plain(s: &str) -> String {
    s.replace('<', "&lt;")
}

/// A table cell: one line, pipes escaped (GitHub needs that even inside code spans).
pub(super) fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// A length of time for people, coarse on purpose: `under a minute`, `25 min`, `23 h`, `3 d 4 h`.
pub(super) fn span(secs: u64) -> String {
    let (d, h, m) = (secs / 86_400, secs / 3600, secs / 60);
    match secs {
        0..60 => "under a minute".to_owned(),
        60..3600 => format!("{m} min"),
        3600..172_800 => format!("{h} h"),
        _ if h % 24 == 0 => format!("{d} d"),
        _ => format!("{d} d {} h", h % 24),
    }
}

/// `2 min ago`.
pub fn ago(now: Timestamp, at: Timestamp) -> String {
    let secs = now.as_second().saturating_sub(at.as_second()).max(0);
    format!("{} ago", span(secs.unsigned_abs()))
}

/// `Mon 30 Nov 16:00 UTC`.
pub fn clock(at: Timestamp) -> String {
    at.to_zoned(TimeZone::UTC)
        .strftime("%a %-d %b %H:%M UTC")
        .to_string()
}

/// `in 23 h (Mon 30 Nov 16:00 UTC)`, or `expired 5 min ago (…)`.
pub fn expiry(now: Timestamp, at: Timestamp) -> String {
    let left = at.as_second().saturating_sub(now.as_second());
    if left > 0 {
        format!("in {} ({})", span(left.unsigned_abs()), clock(at))
    } else {
        format!("expired {} ({})", ago(now, at), clock(at))
    }
}
