//! What a test's check run (`Sandcastle / <test>`) says on GitHub: a title, a summary table
//! (test, preview, commit, how long, exit) and, once it ended, the tail of its logs (already
//! redacted by whoever read them), fenced so that no line can break out. Also the one line per
//! test the sticky comment shows. Pure.

use std::time::Duration;

use sandcastle_crd::{TestConclusion, TestState};
use sandcastle_domain::duration::human;

use super::markdown::{cell, code, plain};

/// A test run as its check run shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckView {
    pub test: String,
    pub preview: String,
    /// Sandcastle's page of the preview.
    pub page: Option<String>,
    pub sha: String,
    pub job: String,
    pub state: TestState,
    pub conclusion: Option<TestConclusion>,
    /// How long it ran (or has run).
    pub took: Duration,
    pub exit_code: Option<i32>,
    /// Why it ended so, in a few words.
    pub message: Option<String>,
    /// The last lines its container logged, redacted; `None` while it runs.
    pub logs: Option<TestLogs>,
}

/// The last lines of a test's container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestLogs {
    pub pod: String,
    pub container: String,
    pub lines: Vec<String>,
    /// How many values were redacted.
    pub redacted: u32,
}

fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

/// The check run's title: `Passed in 12s`, `Failed (exit 1) after 40s`, `Timed out after 10m`.
pub fn title(v: &CheckView) -> String {
    let took = human(v.took);
    match (v.state, v.conclusion) {
        (TestState::Queued, _) => "Queued: waiting for its pod to start".to_owned(),
        (TestState::Running, _) => "Running".to_owned(),
        (TestState::Completed, Some(TestConclusion::Success)) => format!("Passed in {took}"),
        (TestState::Completed, Some(TestConclusion::Failure)) => match v.exit_code {
            Some(code) => format!("Failed (exit {code}) after {took}"),
            None => match &v.message {
                Some(why) => format!("Failed: {}", one_line(why)),
                None => format!("Failed after {took}"),
            },
        },
        (TestState::Completed, Some(TestConclusion::TimedOut)) => format!("Timed out after {took}"),
        (TestState::Completed, Some(TestConclusion::Cancelled)) => match &v.message {
            Some(why) => format!("Cancelled: {}", one_line(why)),
            None => "Cancelled".to_owned(),
        },
        (TestState::Completed, None) => "Completed".to_owned(),
    }
}

fn one_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or_default();
    line.chars().take(120).collect()
}

/// The Markdown summary: a sentence and a table.
pub fn summary(v: &CheckView) -> String {
    let preview = match &v.page {
        Some(page) => format!("[{}]({})", code(&v.preview), page.replace(')', "%29")),
        None => code(&v.preview),
    };
    let mut rows: Vec<(&str, String)> = vec![
        ("Test", format!("{} (Job {})", code(&v.test), code(&v.job))),
        ("Preview", preview),
        ("Commit", code(short(&v.sha))),
        ("Duration", human(v.took).to_string()),
    ];
    if let Some(code) = v.exit_code {
        rows.push(("Exit", code.to_string()));
    }
    if let Some(why) = &v.message {
        rows.push(("Why", plain(why)));
    }
    let mut out = format!(
        "Test {} in preview {} at {}: {}.\n\n| | |\n|---|---|\n",
        code(&v.test),
        code(&v.preview),
        code(short(&v.sha)),
        title(v).to_lowercase()
    );
    for (label, value) in rows {
        out.push_str(&format!("| **{label}** | {} |\n", cell(&value)));
    }
    out
}

/// The output's text: the tail of the logs, fenced; `None` while it runs.
pub fn text(v: &CheckView) -> Option<String> {
    if v.state != TestState::Completed {
        return None;
    }
    let Some(logs) = &v.logs else {
        return Some("No logs: the test's pod is gone or logged nothing.".to_owned());
    };
    if logs.lines.is_empty() {
        return Some(format!(
            "Container {} of pod {} logged nothing.",
            code(&logs.container),
            code(&logs.pod)
        ));
    }
    let fence = fence_for(&logs.lines);
    let redacted = match logs.redacted {
        0 => String::new(),
        1 => " (1 value redacted)".to_owned(),
        n => format!(" ({n} values redacted)"),
    };
    Some(format!(
        "Last {} of container {} (pod {}), Secret values and tokens redacted{redacted}:\n\n{fence}text\n{}\n{fence}\n",
        match logs.lines.len() {
            1 => "line".to_owned(),
            n => format!("{n} lines"),
        },
        code(&logs.container),
        code(&logs.pod),
        logs.lines.join("\n")
    ))
}

/// A fence longer than any run of backticks in `lines`.
fn fence_for(lines: &[String]) -> String {
    let longest = lines
        .iter()
        .flat_map(|l| l.split(|c| c != '`').map(str::len).collect::<Vec<_>>())
        .max()
        .unwrap_or(0);
    "`".repeat((longest + 1).max(3))
}

/// A test's last run, as the sticky comment lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestLine {
    pub test: String,
    pub state: TestState,
    pub conclusion: Option<TestConclusion>,
    pub sha: String,
    pub took: Duration,
    pub exit_code: Option<i32>,
}

impl TestLine {
    /// What the comment must be edited for: the state and conclusion, and the commit.
    pub fn key(&self) -> String {
        format!(
            "{}={:?}/{:?}@{}",
            self.test,
            self.state,
            self.conclusion,
            short(&self.sha)
        )
    }
}

/// `- ✅ `smoke` passed in 12s at `abc1234``.
pub fn test_line(line: &TestLine) -> String {
    let took = human(line.took);
    let (icon, what) = match (line.state, line.conclusion) {
        (TestState::Queued, _) => ("🕒", "queued".to_owned()),
        (TestState::Running, _) => ("⏳", "running".to_owned()),
        (_, Some(TestConclusion::Success)) => ("✅", format!("passed in {took}")),
        (_, Some(TestConclusion::Failure)) => match line.exit_code {
            Some(c) => ("❌", format!("failed (exit {c}) after {took}")),
            None => ("❌", "failed".to_owned()),
        },
        (_, Some(TestConclusion::TimedOut)) => ("⌛", format!("timed out after {took}")),
        (_, Some(TestConclusion::Cancelled)) => ("⏹️", "cancelled".to_owned()),
        (_, None) => ("❔", "completed".to_owned()),
    };
    format!(
        "- {icon} {} {what} at {}",
        code(&line.test),
        code(short(&line.sha))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(state: TestState, conclusion: Option<TestConclusion>) -> CheckView {
        CheckView {
            test: "smoke".into(),
            preview: "shop-pr-42".into(),
            page: Some("https://sandcastle.example.com/previews/shop-pr-42".into()),
            sha: "abc1234def5678abc1234def5678abc1234def56".into(),
            job: "test-smoke-1".into(),
            state,
            conclusion,
            took: Duration::from_secs(12),
            exit_code: None,
            message: None,
            logs: None,
        }
    }

    #[test]
    fn titles_and_summaries_say_how_it_went() {
        let mut v = view(TestState::Completed, Some(TestConclusion::Success));
        v.exit_code = Some(0);
        assert_eq!(title(&v), "Passed in 12s");
        let s = summary(&v);
        assert!(s.starts_with("Test `smoke` in preview `shop-pr-42` at `abc1234`: passed in 12s."));
        assert!(s.contains("| **Exit** | 0 |"), "{s}");
        assert!(s.contains("[`shop-pr-42`](https://sandcastle.example.com/previews/shop-pr-42)"));
        v.conclusion = Some(TestConclusion::Failure);
        v.exit_code = Some(3);
        assert_eq!(title(&v), "Failed (exit 3) after 12s");
        v.conclusion = Some(TestConclusion::TimedOut);
        v.took = Duration::from_secs(600);
        assert_eq!(title(&v), "Timed out after 10m");
        v.conclusion = Some(TestConclusion::Cancelled);
        v.message = Some("superseded by fedcba9".into());
        assert_eq!(title(&v), "Cancelled: superseded by fedcba9");
        assert_eq!(title(&view(TestState::Running, None)), "Running");
        assert_eq!(text(&view(TestState::Running, None)), None);
    }

    #[test]
    fn the_log_tail_is_fenced_so_no_line_escapes() {
        let mut v = view(TestState::Completed, Some(TestConclusion::Failure));
        v.logs = Some(TestLogs {
            pod: "test-smoke-1-abcde".into(),
            container: "t".into(),
            lines: vec!["```".into(), "password [redacted]".into()],
            redacted: 1,
        });
        let t = text(&v).unwrap();
        assert!(
            t.contains("````text\n```\npassword [redacted]\n````"),
            "{t}"
        );
        assert!(t.contains("(1 value redacted)"));
    }

    #[test]
    fn the_sticky_line_is_short() {
        let line = TestLine {
            test: "smoke".into(),
            state: TestState::Completed,
            conclusion: Some(TestConclusion::Failure),
            sha: "abc1234def5678abc1234def5678abc1234def56".into(),
            took: Duration::from_secs(40),
            exit_code: Some(1),
        };
        assert_eq!(
            test_line(&line),
            "- ❌ `smoke` failed (exit 1) after 40s at `abc1234`"
        );
        assert_eq!(line.key(), "smoke=Completed/Some(Failure)@abc1234");
    }
}
