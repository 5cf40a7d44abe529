//! The `/preview` commands people write in pull request comments: parsing a comment body into
//! at most one command, and the help text, which is built from an exhaustive match so that a new
//! command cannot compile without its help line.
//!
//! Rules: a command is `/preview` (or `/qovery preview`, `/sandcastle preview`: the same
//! commands under another bot's name) at the start of a line (up to three leading spaces, as
//! Markdown sees it: four or a tab after a blank line make an indented code block), followed by
//! an optional sub-command and its argument, separated by any spaces or tabs; the keyword and
//! sub-command are case-insensitive. Lines inside fenced code (```` ``` ```` or `~~~`), indented
//! code and block quotes (including their lazy continuation lines) do not count, and neither
//! does inline code, since a line starting with a backtick does not start with `/preview`.
//! The **first** command line of a comment wins; later ones are ignored, so a comment has exactly
//! one effect. Words after a complete command on the same line are ignored
//! (`/preview stop for the weekend`).

use std::fmt;
use std::time::Duration;

use sandcastle_crd::BlueprintSpec;
use sandcastle_domain::duration;
use sandcastle_domain::test_runs::TestName;

/// The keyword every command starts with.
pub const KEYWORD: &str = "/preview";

/// What a maintainer asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `/preview`: deploy the head commit (or redeploy it; for a fork, approve it).
    Deploy,
    /// `/preview stop`: scale to zero, keeping data.
    Stop,
    /// `/preview wake`: start a stopped preview.
    Wake,
    /// `/preview extend <duration>`: push the expiry back by this much (never zero).
    Extend(Duration),
    /// `/preview destroy`: remove the preview now.
    Destroy,
    /// `/preview status`: refresh the sticky comment.
    Status,
    /// `/preview test <name>`: run one of the Blueprint's tests in the preview now.
    Test(TestName),
    /// `/preview refresh-data`: a new snapshot of the data of the Blueprints the pull request's
    /// previews come from (maintainers only).
    RefreshData,
    /// `/preview help`: reply with the help text.
    Help,
}

impl Command {
    /// A stable lower-case name for logs, metrics and history entries.
    pub fn name(self) -> &'static str {
        match self {
            Self::Deploy => "deploy",
            Self::Stop => "stop",
            Self::Wake => "wake",
            Self::Extend(_) => "extend",
            Self::Destroy => "destroy",
            Self::Status => "status",
            Self::Test(_) => "test",
            Self::RefreshData => "refresh-data",
            Self::Help => "help",
        }
    }
}

/// The command as someone would type it, e.g. `/preview extend 2d`.
impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deploy => f.write_str(KEYWORD),
            Self::Extend(d) => write!(f, "{KEYWORD} extend {}", compact(*d)),
            Self::Test(name) => write!(f, "{KEYWORD} test {name}"),
            other => write!(f, "{KEYWORD} {}", other.name()),
        }
    }
}

/// A command line that could not be understood. Each variant gets a polite reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The word after `/preview` is not a sub-command (kept as written).
    #[error("`/preview {0}` is not a command")]
    Unknown(String),
    #[error("`/preview extend` needs a duration, such as `/preview extend 2d`")]
    MissingDuration,
    /// The argument of `extend` (kept as written) is not a duration.
    #[error("{0:?} is not a duration; write it like 30m, 4h, 1h30m or 2d")]
    InvalidDuration(String),
    #[error("`/preview extend` needs a duration longer than zero")]
    ZeroDuration,
    #[error("`/preview test` needs the name of a test, such as `/preview test smoke`")]
    MissingTest,
    /// The argument of `test` (kept as written) is not a test's name.
    #[error("{0:?} is not the name of a test")]
    InvalidTest(String),
}

/// The first command in a comment body, if any. `None` means the comment holds no command and
/// deserves no reaction at all.
pub fn parse(body: &str) -> Option<Result<Command, CommandError>> {
    CommandLines::new(body).find_map(parse_line)
}

/// The line of a comment body that holds its command (the one [`parse`] reads), trimmed and
/// cut to at most `max` bytes: what a command record keeps of the comment. Parsing it gives
/// what parsing the whole body gives.
pub fn command_line(body: &str, max: usize) -> Option<String> {
    let line = CommandLines::new(body)
        .find(|l| parse_line(l).is_some())?
        .trim();
    let mut end = line.len().min(max);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Some(line[..end].to_owned())
}

/// The bot names that may stand before `preview` (`/qovery preview stop`): the same commands,
/// for people used to Qovery's or who name Sandcastle.
pub const ALIASES: [&str; 2] = ["/qovery", "/sandcastle"];

/// `s` without a leading `word` (any case), or `None` when it does not start with it.
fn strip_word<'a>(s: &'a str, word: &str) -> Option<&'a str> {
    let head = s.get(..word.len())?;
    head.eq_ignore_ascii_case(word).then(|| &s[word.len()..])
}

/// What follows the keyword (`/preview`, or an alias, spaces or tabs, and `preview`) at the
/// start of `line`; `None` when the line does not start with one as a whole word.
fn after_keyword(line: &str) -> Option<&str> {
    let rest = match strip_word(line, KEYWORD) {
        Some(rest) => rest,
        None => {
            let rest = ALIASES.iter().find_map(|a| strip_word(line, a))?;
            let gap = rest.len() - rest.trim_start_matches([' ', '\t']).len();
            if gap == 0 {
                return None; // `/qoverypreview`
            }
            strip_word(&rest[gap..], "preview")?
        }
    };
    if rest.chars().next().is_some_and(|c| !c.is_whitespace()) {
        return None; // `/previewing`, `/preview:`, `/qovery previewer`
    }
    Some(rest)
}

fn parse_line(line: &str) -> Option<Result<Command, CommandError>> {
    let rest = after_keyword(line.trim_start())?;
    let mut words = rest.split_whitespace();
    let Some(sub) = words.next() else {
        return Some(Ok(Command::Deploy));
    };
    Some(match sub.to_ascii_lowercase().as_str() {
        "stop" => Ok(Command::Stop),
        "wake" => Ok(Command::Wake),
        "destroy" => Ok(Command::Destroy),
        "status" => Ok(Command::Status),
        "help" => Ok(Command::Help),
        "refresh-data" => Ok(Command::RefreshData),
        "test" => match words.next() {
            None => Err(CommandError::MissingTest),
            Some(arg) => TestName::new(arg)
                .map(Command::Test)
                .map_err(|_| CommandError::InvalidTest(arg.to_owned())),
        },
        "extend" => match words.next() {
            None => Err(CommandError::MissingDuration),
            Some(arg) => match duration::parse(arg, true) {
                Err(_) => Err(CommandError::InvalidDuration(arg.to_owned())),
                Ok(d) if d.is_zero() => Err(CommandError::ZeroDuration),
                Ok(d) => Ok(Command::Extend(d)),
            },
        },
        _ => Err(CommandError::Unknown(sub.to_owned())),
    })
}

/// What the previous line was, as far as deciding whether this one is ordinary text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prev {
    Blank,
    Text,
    Quote,
    Code,
}

/// The lines of a Markdown comment that are ordinary text (not code, not quoted).
#[derive(Debug)]
struct CommandLines<'a> {
    lines: std::str::Lines<'a>,
    /// The open fence's character and length.
    fence: Option<(char, usize)>,
    prev: Prev,
}

impl<'a> CommandLines<'a> {
    fn new(body: &'a str) -> Self {
        Self {
            lines: body.lines(),
            fence: None,
            prev: Prev::Blank,
        }
    }
}

impl<'a> Iterator for CommandLines<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        loop {
            let line = self.lines.next()?;
            let (indent, rest) = indentation(line);
            if let Some((ch, len)) = self.fence {
                let closes = indent < 4
                    && fence_run(rest).is_some_and(|(c, n)| c == ch && n >= len)
                    && rest.trim_start_matches(ch).trim().is_empty();
                if closes {
                    self.fence = None;
                    self.prev = Prev::Blank;
                }
                continue;
            }
            if rest.trim().is_empty() {
                self.prev = Prev::Blank;
                continue;
            }
            // An indented code block cannot interrupt a paragraph; a quote's paragraph swallows
            // the lines that follow it without a blank line (lazy continuation).
            match self.prev {
                Prev::Quote if !(indent < 4 && rest.starts_with('>')) => continue,
                Prev::Blank | Prev::Code if indent >= 4 => {
                    self.prev = Prev::Code;
                    continue;
                }
                _ => {}
            }
            if indent < 4 && rest.starts_with('>') {
                self.prev = Prev::Quote;
                continue;
            }
            if indent < 4
                && let Some((ch, len)) = fence_run(rest)
                && !(ch == '`' && rest[len..].contains('`'))
            {
                self.fence = Some((ch, len));
                continue;
            }
            self.prev = Prev::Text;
            return Some(line);
        }
    }
}

/// Leading whitespace in columns (a tab advances to the next multiple of 4) and the rest.
fn indentation(line: &str) -> (usize, &str) {
    let mut cols = 0;
    for (i, c) in line.char_indices() {
        match c {
            ' ' => cols += 1,
            '\t' => cols += 4 - cols % 4,
            _ => return (cols, &line[i..]),
        }
    }
    (cols, "")
}

/// A run of at least three backticks or tildes at the start of `s`.
fn fence_run(s: &str) -> Option<(char, usize)> {
    let ch = s.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = s.chars().take_while(|c| *c == ch).count();
    (len >= 3).then_some((ch, len))
}

/// A duration as `extend` accepts it back: `2d`, `1d12h`, `90m`.
fn compact(d: Duration) -> String {
    let secs = d.as_secs();
    let parts = [
        (secs / 86_400, 'd'),
        (secs / 3600 % 24, 'h'),
        (secs / 60 % 60, 'm'),
        (secs % 60, 's'),
    ];
    let out: String = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect();
    if out.is_empty() { "0".to_owned() } else { out }
}

/// The limits the help text quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelpLimits {
    /// How long a new preview lives.
    pub ttl: Duration,
    /// The longest a preview may live, counted from its creation (`extend` stops there).
    pub max_ttl: Duration,
    /// Idle time after which a preview is stopped, if any.
    pub stop_after_idle: Option<Duration>,
    /// How many previews may run at once, if capped.
    pub max_previews: Option<u32>,
}

impl HelpLimits {
    /// The limits of a Blueprint (or the defaults, without one).
    pub fn of(spec: Option<&BlueprintSpec>) -> Self {
        use sandcastle_crd::{
            DEFAULT_MAX_PREVIEWS, DEFAULT_MAX_TTL, DEFAULT_STOP_AFTER_IDLE, DEFAULT_TTL,
        };
        Self {
            ttl: spec.map_or(DEFAULT_TTL, |s| s.ttl).get(),
            max_ttl: spec.map_or(DEFAULT_MAX_TTL, |s| s.max_ttl).get(),
            stop_after_idle: Some(
                spec.map_or(DEFAULT_STOP_AFTER_IDLE, |s| s.stop_after_idle)
                    .get(),
            )
            .filter(|d| !d.is_zero()),
            max_previews: Some(spec.map_or(DEFAULT_MAX_PREVIEWS, |s| s.max_previews)),
        }
    }
}

/// One command per row, in the order the help shows them.
fn every_command() -> [Command; 9] {
    use Command::*;
    // A new variant breaks this match: list it below as well.
    let _listed = |c: Command| match c {
        Deploy | Stop | Wake | Extend(_) | Destroy | Status | Test(_) | RefreshData | Help => {}
    };
    let example = TestName::new("smoke").expect("a test name");
    [
        Deploy,
        Stop,
        Wake,
        Extend(Duration::from_secs(2 * 86_400)),
        Destroy,
        Status,
        Test(example),
        RefreshData,
        Help,
    ]
}

/// How a command is written and what it does. Exhaustive on purpose: a new command does not
/// compile until it has a help line (add it to `every_command` too).
fn help_entry(command: Command, limits: &HelpLimits) -> (String, String) {
    let max = duration::human(limits.max_ttl);
    let (usage, what) = match command {
        Command::Deploy => (
            KEYWORD.to_owned(),
            "Deploy the pull request's head commit, or redeploy it. On a pull request from a \
             fork, deploys the commit that is the head right now."
                .to_owned(),
        ),
        Command::Stop => (
            format!("{command}"),
            "Scale the preview to zero; its data is kept.".to_owned(),
        ),
        Command::Wake => (
            format!("{command}"),
            "Start a stopped preview again.".to_owned(),
        ),
        Command::Extend(example) => (
            format!("{KEYWORD} extend <duration>"),
            format!(
                "Push the expiry back, e.g. `{}` or `4h`; a preview lives at most {max} in all.",
                compact(example)
            ),
        ),
        Command::Destroy => (
            format!("{command}"),
            "Delete the preview and its data now.".to_owned(),
        ),
        Command::RefreshData => (
            format!("{command}"),
            "Take a new snapshot of the Blueprint's data (where it restores previews' data from \
             snapshots): previews made from then on start from it. Maintainers only."
                .to_owned(),
        ),
        Command::Status => (
            format!("{command}"),
            "Refresh the status comment.".to_owned(),
        ),
        Command::Test(_) => (
            format!("{KEYWORD} test <name>"),
            "Run one of the Blueprint's tests in the preview now; its result is the check run \
             `Sandcastle / <name>`."
                .to_owned(),
        ),
        Command::Help => (format!("{command}"), "Show this help.".to_owned()),
    };
    (usage, what)
}

/// The Markdown reply to `/preview help` (and to a command that was not understood).
pub fn help_text(limits: &HelpLimits) -> String {
    let mut out = String::from(
        "**Sandcastle commands.** Comment one at the start of a line; only the first command \
         in a comment counts.\n\n| Command | What it does |\n|---|---|\n",
    );
    for command in every_command() {
        let (usage, what) = help_entry(command, limits);
        out.push_str(&format!("| `{usage}` | {what} |\n"));
    }
    let mut limits_line = format!(
        "\nPreviews live {} after their last deploy unless extended (at most {} in all)",
        duration::human(limits.ttl),
        duration::human(limits.max_ttl)
    );
    if let Some(idle) = limits.stop_after_idle {
        limits_line.push_str(&format!(", stop after {} idle", duration::human(idle)));
    }
    if let Some(cap) = limits.max_previews {
        limits_line.push_str(&format!(
            ", and at most {cap} run at once; further previews wait in line"
        ));
    }
    out.push_str(&limits_line);
    out.push_str(".\nOnly people with write access to the repository can run these commands.\n");
    out.push_str(
        "`/qovery preview …` and `/sandcastle preview …` work as `/preview …`, with the same \
         sub-commands.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3600;
    const D: u64 = 86_400;

    fn ok(c: Command) -> Option<Result<Command, CommandError>> {
        Some(Ok(c))
    }

    fn err(e: CommandError) -> Option<Result<Command, CommandError>> {
        Some(Err(e))
    }

    fn extend(secs: u64) -> Option<Result<Command, CommandError>> {
        ok(Command::Extend(Duration::from_secs(secs)))
    }

    fn test(name: &str) -> Option<Result<Command, CommandError>> {
        ok(Command::Test(TestName::new(name).unwrap()))
    }

    #[test]
    fn the_command_line_kept_parses_as_the_comment_does() {
        for body in [
            "Thanks!\n\n  /preview extend 2d please\nmore text",
            "```\n/preview destroy\n```\n/preview stop",
            "/PREVIEW   wake",
            "/preview extend",
        ] {
            let line = command_line(body, 500).unwrap();
            assert_eq!(parse(&line), parse(body), "{body:?} kept as {line:?}");
        }
        assert_eq!(command_line("no command here", 500), None);
        assert_eq!(command_line("/preview é", 10).unwrap(), "/preview ");
        assert_eq!(
            command_line(&format!("/preview {}", "x".repeat(600)), 500)
                .unwrap()
                .len(),
            500
        );
    }

    #[test]
    fn commands_table() {
        use Command::*;
        let cases: &[(&str, Option<Result<Command, CommandError>>)] = &[
            ("/preview", ok(Deploy)),
            ("/preview stop", ok(Stop)),
            ("/preview wake", ok(Wake)),
            ("/preview destroy", ok(Destroy)),
            ("/preview status", ok(Status)),
            ("/preview help", ok(Help)),
            ("/preview extend 2d", extend(2 * D)),
            ("/preview extend 1h30m", extend(90 * 60)),
            ("/preview extend 1w", extend(7 * D)),
            ("/preview test smoke", test("smoke")),
            ("/PREVIEW TEST e2e-1 now please", test("e2e-1")),
            ("/qovery preview test smoke", test("smoke")),
            ("/preview test", err(CommandError::MissingTest)),
            (
                "/preview test Smoke",
                err(CommandError::InvalidTest("Smoke".into())),
            ),
            (
                "/preview test ../x",
                err(CommandError::InvalidTest("../x".into())),
            ),
            // Spacing and case.
            ("   /preview stop", ok(Stop)),
            ("   /preview   stop", ok(Stop)),
            ("note:\n\t/preview stop", ok(Stop)),
            ("/preview \t  stop   ", ok(Stop)),
            ("/PREVIEW Stop", ok(Stop)),
            ("/Preview EXTEND 4H", extend(4 * H)),
            ("/preview\textend\t2d", extend(2 * D)),
            // Line endings and position in the comment.
            ("/preview stop\r\n", ok(Stop)),
            ("thanks!\r\n/preview wake\r\nbye", ok(Wake)),
            ("LGTM\n\n/preview", ok(Deploy)),
            ("LGTM\n/preview destroy", ok(Destroy)),
            // Trailing text on the line is ignored; the first command wins.
            ("/preview stop for the weekend", ok(Stop)),
            ("/preview extend 2d please", extend(2 * D)),
            ("/preview stop\n/preview destroy", ok(Stop)),
            (
                "/preview nope\n/preview stop",
                err(CommandError::Unknown("nope".into())),
            ),
            // Errors.
            (
                "/preview please",
                err(CommandError::Unknown("please".into())),
            ),
            (
                "/preview Deploy",
                err(CommandError::Unknown("Deploy".into())),
            ),
            ("/preview extend", err(CommandError::MissingDuration)),
            ("/preview extend   \n2d", err(CommandError::MissingDuration)),
            ("/preview extend 0", err(CommandError::ZeroDuration)),
            ("/preview extend 0h", err(CommandError::ZeroDuration)),
            (
                "/preview extend soon",
                err(CommandError::InvalidDuration("soon".into())),
            ),
            (
                "/preview extend 2 d",
                err(CommandError::InvalidDuration("2".into())),
            ),
            (
                "/preview extend -1h",
                err(CommandError::InvalidDuration("-1h".into())),
            ),
            (
                "/preview extend 1.5h",
                err(CommandError::InvalidDuration("1.5h".into())),
            ),
            // Not commands at all.
            ("", None),
            ("LGTM", None),
            ("/previewing the change", None),
            ("/preview: stop", None),
            ("please run /preview", None),
            ("- /preview", None),
            ("`/preview`", None),
            ("Run `/preview stop` when done", None),
            ("<!-- /preview -->", None),
            ("/build", None),
            ("/ preview", None),
        ];
        for (body, want) in cases {
            assert_eq!(&parse(body), want, "{body:?}");
        }
    }

    #[test]
    fn qovery_and_sandcastle_prefixes_are_aliases_of_preview() {
        use Command::*;
        let cases: &[(&str, Option<Result<Command, CommandError>>)] = &[
            ("/qovery preview", ok(Deploy)),
            ("/qovery preview stop", ok(Stop)),
            ("/qovery preview wake", ok(Wake)),
            ("/qovery preview destroy", ok(Destroy)),
            ("/qovery preview status", ok(Status)),
            ("/qovery preview help", ok(Help)),
            ("/qovery preview extend 2d", extend(2 * D)),
            ("/sandcastle preview", ok(Deploy)),
            ("/sandcastle preview stop", ok(Stop)),
            ("/sandcastle preview extend 4h", extend(4 * H)),
            ("  /QOVERY   Preview\tSTOP", ok(Stop)),
            ("/Sandcastle\tpreview wake", ok(Wake)),
            ("LGTM\n/qovery preview stop for the weekend", ok(Stop)),
            (
                "/qovery preview nope",
                err(CommandError::Unknown("nope".into())),
            ),
            ("/qovery preview extend", err(CommandError::MissingDuration)),
            // Not commands: other words, no space, or the alias alone.
            ("/qovery previewer", None),
            ("/qovery previewer stop", None),
            ("/sandcastle previews", None),
            ("/qoverypreview", None),
            ("/qovery", None),
            ("/qovery deploy", None),
            ("/qovery\npreview", None),
            ("/sandcastle", None),
            ("/sandcastle help", None),
            ("please /qovery preview", None),
            ("> /qovery preview", None),
            ("```\n/sandcastle preview stop\n```", None),
        ];
        for (body, want) in cases {
            assert_eq!(&parse(body), want, "{body:?}");
        }
        // The line a record keeps parses the same.
        let line = command_line("thanks\n/qovery preview extend 1d", 500).unwrap();
        assert_eq!(line, "/qovery preview extend 1d");
        assert_eq!(
            parse(&line),
            Some(Ok(Command::Extend(Duration::from_secs(D))))
        );
    }

    #[test]
    fn help_names_the_aliases() {
        let text = help_text(&HelpLimits::of(None));
        assert!(
            text.contains("`/qovery preview …` and `/sandcastle preview …`"),
            "{text}"
        );
    }

    #[test]
    fn code_and_quotes_do_not_count() {
        let cases = [
            "```\n/preview\n```",
            "```sh\n/preview stop\n```",
            "  ```\n/preview\n  ```",
            "~~~\n/preview\n~~~",
            "````\n```\n/preview\n````",
            "```\n/preview", // an unclosed fence runs to the end
            "> /preview",
            ">/preview stop",
            "  > /preview",
            "> quoted\n/preview", // lazy continuation of the quote
            "> a\n> b\n/preview stop",
            "    /preview", // indented code
            "\t/preview\n",
            "text\n\n    /preview",
            "~~~\n/preview\n```\n/preview", // a ``` does not close a ~~~ fence
        ];
        for body in cases {
            assert_eq!(parse(body), None, "{body:?}");
        }
    }

    #[test]
    fn commands_after_code_and_quotes_count() {
        let cases = [
            ("```\n/preview stop\n```\n/preview wake", Command::Wake),
            (
                "~~~\n/preview stop\n~~~\r\n/preview wake\r\n",
                Command::Wake,
            ),
            ("> /preview stop\n\n/preview wake", Command::Wake),
            ("    /preview stop\n/preview wake", Command::Wake),
            // Indentation inside a paragraph is not code.
            ("deploy it:\n    /preview wake", Command::Wake),
            // ``` with a backtick in its info string is inline code, not a fence.
            ("```inline``` text\n/preview wake", Command::Wake),
        ];
        for (body, want) in cases {
            assert_eq!(parse(body), Some(Ok(want)), "{body:?}");
        }
    }

    #[test]
    fn commands_print_as_typed_and_parse_back() {
        let all = [
            Command::Deploy,
            Command::Stop,
            Command::Wake,
            Command::Extend(Duration::from_secs(D + 12 * H)),
            Command::Extend(Duration::from_secs(90 * 60)),
            Command::Destroy,
            Command::Status,
            Command::Help,
        ];
        for c in all {
            assert_eq!(parse(&c.to_string()), Some(Ok(c)), "{c}");
        }
        assert_eq!(
            Command::Extend(Duration::from_secs(2 * D)).to_string(),
            "/preview extend 2d"
        );
    }

    #[test]
    fn errors_read_well() {
        assert_eq!(
            CommandError::InvalidDuration("soon".into()).to_string(),
            "\"soon\" is not a duration; write it like 30m, 4h, 1h30m or 2d"
        );
        assert_eq!(
            CommandError::Unknown("deploy".into()).to_string(),
            "`/preview deploy` is not a command"
        );
    }

    #[test]
    fn help_lists_every_command_and_the_limits() {
        let limits = HelpLimits {
            ttl: Duration::from_secs(D),
            max_ttl: Duration::from_secs(7 * D),
            stop_after_idle: Some(Duration::from_secs(4 * H)),
            max_previews: Some(20),
        };
        insta::assert_snapshot!(help_text(&limits));
        let bare = HelpLimits {
            stop_after_idle: None,
            max_previews: None,
            ..limits
        };
        let text = help_text(&bare);
        assert!(text.contains(
            "Previews live 1d after their last deploy unless extended (at most 7d in all).\n"
        ));
        assert!(!text.contains("idle"));
    }
}

#[cfg(test)]
mod hostile {
    use proptest::prelude::*;

    use super::*;
    use sandcastle_hostile::{self as hostile, SIZES, nasty_text};

    fn commands() -> impl Strategy<Value = Command> {
        prop_oneof![
            Just(Command::Deploy),
            Just(Command::Stop),
            Just(Command::Wake),
            Just(Command::Destroy),
            Just(Command::Status),
            Just(Command::Help),
            (1..=10_000_000_000u64).prop_map(|s| Command::Extend(Duration::from_secs(s))),
        ]
    }

    /// `text` with each ASCII letter's case chosen by `mask` (cycled).
    fn recase(text: &str, mask: &[bool]) -> String {
        text.chars()
            .zip(mask.iter().cycle())
            .map(|(c, up)| if *up { c.to_ascii_uppercase() } else { c })
            .collect()
    }

    #[test]
    fn proptest_comment_bodies_parse_or_name_what_is_wrong() {
        hostile::check(
            "command: any comment body parses, is no command, or names what is wrong",
            prop_oneof![nasty_text(24), any::<String>()],
            |body| {
                let parsed = parse(&body);
                let line = command_line(&body, usize::MAX);
                prop_assert_eq!(parsed.is_some(), line.is_some());
                if let Some(line) = &line {
                    prop_assert_eq!(&parse(line), &parsed, "kept line {:?}", line);
                    prop_assert!(after_keyword(line).is_some(), "kept line {:?}", line);
                }
                // Look-alikes of the keyword never make a command: only ASCII `preview` does.
                if !body.to_ascii_lowercase().contains("preview") {
                    prop_assert_eq!(&parsed, &None);
                }
                match parsed {
                    Some(Err(CommandError::Unknown(word))) => {
                        prop_assert!(
                            body.contains(&word) && !word.chars().any(char::is_whitespace)
                        );
                    }
                    Some(Err(CommandError::InvalidDuration(arg))) => {
                        prop_assert!(duration::parse(&arg, true).is_err());
                    }
                    Some(Ok(Command::Extend(d))) => prop_assert!(!d.is_zero()),
                    _ => {}
                }
                Ok(())
            },
        );
    }

    #[test]
    fn proptest_kept_lines_are_cut_on_char_boundaries() {
        hostile::check(
            "command: kept lines are cut on char boundaries",
            (nasty_text(24), 0..600usize),
            |(body, max)| {
                let Some(cut) = command_line(&body, max) else {
                    return Ok(());
                };
                let whole = command_line(&body, usize::MAX).unwrap();
                prop_assert!(cut.len() <= max);
                prop_assert!(whole.starts_with(&cut));
                if whole.len() <= max {
                    prop_assert_eq!(cut, whole);
                } else {
                    // Cut at the last char boundary at or before `max`.
                    prop_assert!(cut.len() + 4 > max, "{} of {}", cut.len(), max);
                }
                Ok(())
            },
        );
    }

    #[test]
    fn proptest_valid_commands_with_any_suffix() {
        let strategy = (
            commands(),
            proptest::collection::vec(any::<bool>(), 1..16),
            0..4usize,
            "[ \t]{1,4}",
            "[^\n]{0,40}",
            proptest::collection::vec("[A-Za-z0-9 ,.!?]{0,30}", 0..3),
        );
        hostile::check(
            "command: valid commands with random case, spacing, suffix and text before",
            strategy,
            |(command, mask, indent, gap, suffix, before)| {
                let typed = recase(&command.to_string(), &mask).replacen(' ', &gap, 1);
                let mut body = before.join("\n");
                if !body.is_empty() {
                    body.push_str("\n\n");
                }
                body.push_str(&" ".repeat(indent));
                body.push_str(&typed);
                // Words after a bare `/preview` would be its sub-command.
                if command != Command::Deploy {
                    body.push(' ');
                    body.push_str(&suffix);
                }
                prop_assert_eq!(parse(&body), Some(Ok(command)), "{:?}", body);
                Ok(())
            },
        );
    }

    #[test]
    fn proptest_aliases_parse_as_preview() {
        let strategy = (
            commands(),
            prop_oneof![Just("/qovery"), Just("/sandcastle")],
            proptest::collection::vec(any::<bool>(), 1..16),
            "[ \t]{1,4}",
        );
        hostile::check(
            "command: `/qovery preview …` and `/sandcastle preview …` parse as `/preview …`",
            strategy,
            |(command, alias, mask, gap)| {
                let typed = command.to_string().replacen(
                    KEYWORD,
                    &recase(&format!("{alias}{gap}preview"), &mask),
                    1,
                );
                prop_assert_eq!(parse(&typed), Some(Ok(command)), "{:?}", typed);
                Ok(())
            },
        );
    }

    #[test]
    fn proptest_commands_print_as_typed_and_parse_back() {
        hostile::check(
            "command: commands print as typed and parse back",
            commands(),
            |command| {
                prop_assert_eq!(parse(&command.to_string()), Some(Ok(command)));
                Ok(())
            },
        );
    }

    /// The scanner reads each line once and keeps one open fence: at every size, a command after
    /// N bytes of fenced code, quotes or indented code is found (or not) as it is in a short
    /// comment, and the line a command record keeps stays within its limit.
    #[test]
    fn corpus_comments_of_growing_size() {
        hostile::corpus("command: comments of growing size", SIZES, |n| {
            let fences = "```\n/preview destroy\n```\n".repeat(n / 24);
            assert_eq!(
                parse(&format!("{fences}/preview stop")),
                Some(Ok(Command::Stop))
            );
            let unclosed = format!("````\n{}", "```\n/preview\n".repeat(n / 13));
            assert_eq!(parse(&unclosed), None);
            let quotes = format!("> q\n{}", "lazy /preview\n".repeat(n / 14));
            assert_eq!(parse(&format!("{quotes}/preview")), None);
            let indented = format!("\n{}", "    /preview destroy\n".repeat(n / 21));
            assert_eq!(
                parse(&format!("{indented}\n/preview wake")),
                Some(Ok(Command::Wake))
            );
            let spaces = format!("/preview{}stop", " ".repeat(n));
            assert_eq!(parse(&spaces), Some(Ok(Command::Stop)));
            let word = "x".repeat(n);
            let long = format!("/preview {word}");
            assert_eq!(parse(&long), Some(Err(CommandError::Unknown(word))));
            assert_eq!(command_line(&long, 500).unwrap().len(), 500);
            let endless = format!("/preview extend {}h", "9".repeat(n));
            assert!(matches!(
                parse(&endless),
                Some(Err(CommandError::InvalidDuration(_)))
            ));
            let ticks = format!("{}\n/preview", "`".repeat(n));
            assert_eq!(parse(&ticks), None);
        });
    }

    #[test]
    fn corpus_look_alikes_and_control_characters() {
        let stop = Some(Ok(Command::Stop));
        let cases: Vec<(&str, Option<Result<Command, CommandError>>)> = vec![
            ("\u{ff0f}preview", None),
            ("\u{2215}preview", None),
            ("\u{2044}preview stop", None),
            ("/prev\u{200d}iew", None),
            ("/preview\u{200d}", None),
            ("\u{200b}/preview", None),
            ("\u{202e}/preview", None),
            ("\u{202e}weiverp/", None),
            ("\u{2066}/preview\u{2069}", None),
            (
                "/\u{ff30}\u{ff32}\u{ff25}\u{ff36}\u{ff29}\u{ff25}\u{ff37}",
                None,
            ),
            ("/pr\u{0435}view", None), // Cyrillic е
            ("\u{feff}/preview", None),
            ("/preview\0stop", None),
            ("\0/preview", None),
            (
                "/preview stop\0",
                Some(Err(CommandError::Unknown("stop\0".into()))),
            ),
            ("/preview\u{a0}stop", stop.clone()),
            ("/preview\u{2028}stop", stop.clone()),
            ("/preview \u{3000}stop", stop.clone()),
            (
                "/preview \u{202e}pots",
                Some(Err(CommandError::Unknown("\u{202e}pots".into()))),
            ),
            (
                "/preview st\u{200b}op",
                Some(Err(CommandError::Unknown("st\u{200b}op".into()))),
            ),
            (
                "/preview \u{17f}top",
                Some(Err(CommandError::Unknown("\u{17f}top".into()))),
            ),
            (
                "/preview extend \u{ff12}d",
                Some(Err(CommandError::InvalidDuration("\u{ff12}d".into()))),
            ),
            (
                "/preview extend 99999999999h",
                Some(Ok(Command::Extend(Duration::from_secs(
                    359_999_999_996_400,
                )))),
            ),
            (
                "/preview extend 1e3s",
                Some(Err(CommandError::InvalidDuration("1e3s".into()))),
            ),
            (
                "/preview extend -1s",
                Some(Err(CommandError::InvalidDuration("-1s".into()))),
            ),
            (
                "/preview extend 1h-1m",
                Some(Err(CommandError::InvalidDuration("1h-1m".into()))),
            ),
            (
                "/preview extend 0s0m",
                Some(Err(CommandError::ZeroDuration)),
            ),
            ("\r\r/preview stop", stop),
            ("text\r/preview stop", None),
            // U+2028 is whitespace to Rust, not a line break to the scanner: an indent.
            ("\u{2028}/preview", Some(Ok(Command::Deploy))),
            // An alias's gap is spaces or tabs; its `preview` is ASCII.
            ("/qovery\u{a0}preview", None),
            ("/qovery \u{200b}preview stop", None),
            ("/qovery pr\u{0435}view", None),
            ("/\u{ff51}overy preview", None),
            ("/sandcastle\u{202e} preview", None),
            ("/qovery preview\u{a0}stop", Some(Ok(Command::Stop))),
        ];
        hostile::corpus(
            "command: look-alikes and control characters",
            cases,
            |(body, want)| {
                assert_eq!(parse(body), want, "{body:?}");
            },
        );
    }
}
