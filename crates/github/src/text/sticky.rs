//! The sticky comment: one per preview, edited in place, rendered from its [`StickyView`] — the
//! state, URL, commit, expiry, services, what it waits for, the commands that apply — and ending
//! with the hidden marker (`marker`). Time is passed in; nothing here reads a clock.

use std::time::Duration;

use jiff::Timestamp;

use super::markdown::{ago, cell, code, expiry, html, plain, span};
use super::marker::{marker_data, marker_line};
use super::state::{JobState, LogTail, StickyState, StickyView};
use super::teardown::{Removal, Style, what_happened};
use crate::command_parser::Command;
use sandcastle_crd::TeardownReason;

/// Where the preview's data came from: `snapshot `20261207-031500` of the Blueprint's data
/// (taken 2 h ago)`, or why it started empty.
fn data_line(data: &sandcastle_crd::PreviewData, now: Timestamp) -> String {
    match (&data.snapshot, &data.note) {
        (Some(set), _) => {
            let mut line = format!(
                "restored from snapshot {} of the Blueprint's data",
                code(set)
            );
            if let Some(at) = &data.taken_at {
                line.push_str(&format!(" (taken {})", ago(now, at.0)));
            }
            line
        }
        (None, Some(note)) => note.clone(),
        (None, None) => "empty".to_owned(),
    }
}

/// The Markdown of the sticky comment for `view` as of `now`.
pub fn sticky_comment(view: &StickyView, now: Timestamp) -> String {
    let state = &view.state;
    let removed = matches!(state, StickyState::Removed { .. });
    let mut rows: Vec<(&str, String)> = Vec::new();
    if let Some(status) = status_line(view) {
        rows.push(("Status", status));
    }
    if let StickyState::Failed { .. } = state {
        let mut look = Vec::new();
        if let Some(ns) = &view.namespace {
            look.push(code(&format!("kubectl -n {ns} get events")));
        }
        if let Some(api) = &view.api_url {
            look.push(plain(api));
        }
        if !look.is_empty() {
            rows.push(("Details", look.join(" · ")));
        }
    }
    match (&view.url, state) {
        (Some(url), _) if !removed => rows.push(("URL", plain(url))),
        // Rolled out and still no URL: the Blueprint gives none, and the reader should know.
        (None, StickyState::Ready | StickyState::Stopped) => rows.push((
            "URL",
            format!(
                "none: nothing in Blueprint {} is an Ingress with a host, so the preview has no \
                 address outside the cluster",
                code(&view.blueprint)
            ),
        )),
        _ => {}
    }
    if let Some(sha) = &view.sha {
        let mut commit = code(sha.short());
        if let Some(at) = view.deployed_at {
            commit.push_str(&format!(" (deployed {})", ago(now, at)));
        }
        rows.push(("Commit", commit));
    }
    rows.push(("Blueprint", blueprint_line(&view.blueprint, &view.source)));
    if let (Some(data), false) = (&view.data, removed) {
        rows.push(("Data", data_line(data, now)));
    }
    if let (Some(cluster), false) = (&view.cluster, removed) {
        rows.push(("Cluster", code(cluster)));
    }
    if !removed && let Some(services) = services_line(view) {
        rows.push(("Services", services));
    }
    if let (Some(at), false) = (view.expires_at, removed) {
        let mut expires = expiry(now, at);
        if let (Some(idle), false) = (view.stop_after_idle, *state == StickyState::Stopped) {
            expires.push_str(&format!(" · stops after {} idle", span(idle.as_secs())));
        }
        rows.push(("Expires", expires));
    }
    if let (Some(rule), false) = (&view.rule, removed) {
        rows.push(("Rule", rule.clone()));
    }
    if let Some(running) = &view.running {
        let hours =
            sandcastle_domain::running::hours(sandcastle_domain::running::seconds(running, now));
        let so_far = if removed { "in total" } else { "so far" };
        rows.push(("Environment-hours", format!("{hours} {so_far}")));
    }

    let mut out = format!(
        "### 🏖️ Preview {} — {}\n\n| | |\n|---|---|\n",
        code(&view.preview),
        state.title()
    );
    for (label, value) in rows {
        out.push_str(&format!("| **{label}** | {} |\n", cell(&value)));
    }
    if let StickyState::Failed { reason } = state {
        let rest: Vec<&str> = reason.lines().skip(1).collect();
        if !rest.is_empty() {
            let fence = fence_for(&rest);
            out.push_str(&format!("\n{fence}text\n{}\n{fence}\n", rest.join("\n")));
        }
    }
    if let (Some(tail), StickyState::Failed { .. }) = (&view.log_tail, state) {
        out.push_str(&log_block(tail));
    }
    if !view.tests.is_empty() && !removed {
        out.push_str("\n**Tests** (each a check run `Sandcastle / <test>` on the commit)\n\n");
        for line in &view.tests {
            out.push_str(&super::checks::test_line(line));
            out.push('\n');
        }
    }
    if let (Some(down), false) = (&view.cluster_down, removed) {
        out.push_str(&format!(
            "\n⚠️ {}: the preview may not answer. Sandcastle carries on when the cluster is back.\n",
            cell(down)
        ));
    }
    if view.pinned_fork_note {
        let commit = view
            .sha
            .as_ref()
            .map(|s| format!(" on {}", code(s.short())))
            .unwrap_or_default();
        out.push_str(&format!(
            "\n📌 This pull request comes from a fork, so the preview stays{commit}; later \
             pushes need a maintainer's new `/preview`.\n"
        ));
    }
    let commands = commands_line(state);
    if !commands.is_empty() {
        out.push('\n');
        out.push_str(&commands);
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&marker_line(&marker_data(view)));
    out.push('\n');
    out
}

/// A fence longer than any run of backticks in `lines`, so that no line can close it.
fn fence_for(lines: &[impl AsRef<str>]) -> String {
    let longest_run = lines
        .iter()
        .flat_map(|l| {
            l.as_ref()
                .split(|c| c != '`')
                .map(str::len)
                .collect::<Vec<_>>()
        })
        .max()
        .unwrap_or(0);
    "`".repeat((longest_run + 1).max(3))
}

/// A collapsed block with the log tail, fenced so that no line can close it.
fn log_block(tail: &LogTail) -> String {
    let fence = fence_for(&tail.lines);
    let run = if tail.previous { ", previous run" } else { "" };
    let count = match tail.lines.len() {
        1 => "line".to_owned(),
        n => format!("{n} lines"),
    };
    format!(
        "\n<details><summary>Last {count} of <code>{}</code> (pod <code>{}</code>{run})</summary>\n\n{fence}text\n{}\n{fence}\n\n</details>\n",
        html(&tail.container),
        html(&tail.pod),
        tail.lines.join("\n"),
    )
}

pub(super) fn status_line(view: &StickyView) -> Option<String> {
    Some(match &view.state {
        StickyState::Ready => return None,
        StickyState::Deploying { step, .. } => plain(step),
        StickyState::Stopped => {
            "scaled to zero, data kept; `/preview wake` or push to restart".to_owned()
        }
        StickyState::Queued { reason } => plain(reason),
        StickyState::WaitingForApproval { sha } => format!(
            "pull request from a fork: a maintainer can comment `/preview` to deploy {}",
            code(sha.short())
        ),
        StickyState::WaitingForChecks { checks } if checks.is_empty() => {
            "waiting for the required checks to pass".to_owned()
        }
        StickyState::WaitingForChecks { checks } => {
            let names: Vec<String> = checks.iter().map(|c| code(c)).collect();
            format!("waiting for {} to pass", names.join(", "))
        }
        // A reason of several lines (a renderer's error, many problems): the first here, the
        // rest fenced below the table.
        StickyState::Failed { reason } => plain(reason.lines().next().unwrap_or_default()),
        StickyState::Rejected { reason } => plain(reason),
        StickyState::Removed { reason, actor, via } => {
            let removal = Removal {
                reason: *reason,
                actor: actor.as_deref(),
                via: *via,
            };
            let mut what = what_happened(removal, Style::Markdown);
            if *reason == TeardownReason::Draft {
                what.push_str("; marking it ready for review deploys it again");
            }
            format!("{what}; namespace deleted")
        }
    })
}

fn blueprint_line(blueprint: &str, source: &str) -> String {
    let source = source.trim();
    let from = match source.rsplit_once(' ') {
        _ if source.is_empty() => return code(blueprint),
        Some((kind, name)) => format!("{kind} {}", code(name)),
        None => code(source),
    };
    format!("{} — cloned from {from}", code(blueprint))
}

fn services_line(view: &StickyView) -> Option<String> {
    let mut parts = Vec::new();
    if !view.services.is_empty() {
        let total = view.services.len();
        if view.state == StickyState::Stopped {
            parts.push(format!("{total} scaled to zero"));
        } else {
            let ready = view
                .services
                .iter()
                .filter(|s| s.ready >= s.desired)
                .count();
            let mut line = format!("{ready}/{total} ready");
            let waiting: Vec<String> = view
                .services
                .iter()
                .filter(|s| s.ready < s.desired)
                .map(|s| format!("{} {}/{}", code(&s.name), s.ready, s.desired))
                .collect();
            if !waiting.is_empty() {
                line.push_str(&format!(" (waiting: {})", waiting.join(", ")));
            }
            parts.push(line);
        }
    }
    for job in &view.jobs {
        let state = match job.state {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
        };
        parts.push(format!("seed job {} {state}", code(&job.name)));
    }
    (!parts.is_empty()).then(|| parts.join(" · "))
}

/// The commands that make sense in each state, as they would be typed.
fn commands_line(state: &StickyState) -> String {
    let extend = Command::Extend(Duration::from_secs(2 * 86_400));
    let entries: Vec<(Command, &str)> = match state {
        StickyState::Ready => vec![
            (extend, ""),
            (Command::Stop, ""),
            (Command::Destroy, ""),
            (Command::Help, ""),
        ],
        StickyState::Deploying { .. } | StickyState::Queued { .. } => vec![
            (Command::Status, ""),
            (Command::Destroy, ""),
            (Command::Help, ""),
        ],
        StickyState::Stopped => vec![
            (Command::Wake, ""),
            (extend, ""),
            (Command::Destroy, ""),
            (Command::Help, ""),
        ],
        StickyState::WaitingForApproval { .. } => {
            vec![(Command::Deploy, " to deploy"), (Command::Help, "")]
        }
        StickyState::WaitingForChecks { .. } => vec![(Command::Status, ""), (Command::Help, "")],
        StickyState::Failed { .. } => vec![
            (Command::Deploy, " to retry"),
            (Command::Destroy, ""),
            (Command::Help, ""),
        ],
        StickyState::Removed {
            reason:
                TeardownReason::Expired
                | TeardownReason::Destroyed
                | TeardownReason::NoPreview
                | TeardownReason::Draft,
            ..
        } => vec![(Command::Deploy, " to deploy again"), (Command::Help, "")],
        StickyState::Removed { .. } => vec![],
        StickyState::Rejected { .. } => vec![(Command::Help, "")],
    };
    entries
        .iter()
        .map(|(c, suffix)| format!("`{c}`{suffix}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

#[cfg(test)]
mod tests {
    use super::super::marker::{MARKER_PREFIX, parse_marker};
    use super::super::state::JobView;
    use super::*;
    use sandcastle_crd::{Interface, Phase, RunningTime, ServiceStatus};
    use sandcastle_domain::Sha;

    const SHA: &str = "abc1234def5678abc1234def5678abc1234def56";

    fn now() -> Timestamp {
        "2026-11-29T17:00:00Z".parse().unwrap()
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn svc(name: &str, ready: i32, desired: i32) -> ServiceStatus {
        ServiceStatus {
            name: name.to_owned(),
            kind: "Deployment".to_owned(),
            ready,
            desired,
        }
    }

    fn ready_view() -> StickyView {
        StickyView {
            preview: "shop-pr-42".to_owned(),
            state: StickyState::Ready,
            url: Some("https://42-shop.preview.example.com".to_owned()),
            sha: Some(Sha::new(SHA).unwrap()),
            deployed_at: Some(at("2026-11-29T16:58:00Z")),
            blueprint: "shop".to_owned(),
            source: "namespace shop-staging".to_owned(),
            services: ["web", "api", "worker", "db", "cache", "search"]
                .iter()
                .map(|n| svc(n, 1, 1))
                .collect(),
            jobs: vec![JobView {
                name: "db-seed".to_owned(),
                state: JobState::Completed,
            }],
            expires_at: Some(at("2026-11-30T16:00:00Z")),
            stop_after_idle: Some(Duration::from_secs(4 * 3600)),
            api_url: Some("https://sandcastle.example.com/api/v1/previews/shop-pr-42".to_owned()),
            namespace: Some("shop-pr-42".to_owned()),
            pinned_fork_note: false,
            cluster: None,
            cluster_down: None,
            log_tail: None,
            running: None,
            rule: None,
            tests: Vec::new(),
            data: None,
        }
    }

    #[test]
    fn environment_hours_so_far_while_it_lives_and_in_total_once_removed() {
        let now = at("2026-11-29T18:00:00Z");
        let running = RunningTime {
            seconds: 3600,
            since: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(
                "2026-11-29T17:30:00Z",
            ))),
        };
        let view = StickyView {
            running: Some(running),
            ..ready_view()
        };
        let md = sticky_comment(&view, now);
        assert!(
            md.contains("| **Environment-hours** | 1.5 so far |"),
            "{md}"
        );

        let removed = StickyView {
            running: Some(RunningTime {
                seconds: 9000,
                since: None,
            }),
            ..with(StickyState::Removed {
                reason: TeardownReason::Merged,
                actor: Some("octocat".into()),
                via: Some(Interface::PullRequest),
            })
        };
        let md = sticky_comment(&removed, now);
        assert!(
            md.contains("| **Environment-hours** | 2.5 in total |"),
            "{md}"
        );
        assert!(
            !sticky_comment(&ready_view(), now).contains("Environment-hours"),
            "a preview that never ran shows none"
        );
    }

    #[test]
    fn the_data_row_says_which_snapshot_and_how_old() {
        let data = sandcastle_crd::PreviewData {
            snapshot: Some("20261129-160000".into()),
            taken_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(
                "2026-11-29T16:00:00Z",
            ))),
            claims: vec!["data-db-0".into()],
            note: None,
        };
        let view = StickyView {
            data: Some(data),
            ..ready_view()
        };
        let md = sticky_comment(&view, at("2026-11-29T18:00:00Z"));
        assert!(
            md.contains(
                "| **Data** | restored from snapshot `20261129-160000` of the Blueprint's data (taken 2 h ago) |"
            ),
            "{md}"
        );
        let empty = StickyView {
            data: Some(sandcastle_crd::PreviewData {
                note: Some("started empty and seeded: snapshots do not cross clusters".into()),
                ..Default::default()
            }),
            ..ready_view()
        };
        let md = sticky_comment(&empty, now());
        assert!(
            md.contains("| **Data** | started empty and seeded: snapshots do not cross clusters |"),
            "{md}"
        );
        assert!(!sticky_comment(&ready_view(), now()).contains("**Data**"));
    }

    fn with(state: StickyState) -> StickyView {
        StickyView {
            state,
            ..ready_view()
        }
    }

    #[test]
    fn sticky_ready() {
        insta::assert_snapshot!(sticky_comment(&ready_view(), now()));
    }

    #[test]
    fn a_preview_without_a_url_says_why() {
        for state in [StickyState::Ready, StickyState::Stopped] {
            let view = StickyView {
                url: None,
                ..with(state)
            };
            let body = sticky_comment(&view, now());
            assert!(
                body.contains(
                    "| **URL** | none: nothing in Blueprint `shop` is an Ingress with a host, so \
                     the preview has no address outside the cluster |"
                ),
                "{body}"
            );
        }
        let deploying = StickyView {
            url: None,
            ..with(StickyState::Deploying {
                step: "applying: config".into(),
                stuck_on: None,
            })
        };
        assert!(
            !sticky_comment(&deploying, now()).contains("**URL**"),
            "not known yet while it deploys"
        );
        assert!(
            sticky_comment(&ready_view(), now())
                .contains("| **URL** | https://42-shop.preview.example.com |")
        );
    }

    #[test]
    fn sticky_deploying() {
        let mut view = with(StickyState::Deploying {
            step: "seeding: db-seed running".to_owned(),
            stuck_on: None,
        });
        view.deployed_at = None;
        view.services = vec![svc("web", 1, 1), svc("api", 0, 2)];
        view.jobs[0].state = JobState::Running;
        insta::assert_snapshot!(sticky_comment(&view, now()));
    }

    #[test]
    fn sticky_stopped() {
        let mut view = with(StickyState::Stopped);
        view.services.iter_mut().for_each(|s| s.ready = 0);
        insta::assert_snapshot!(sticky_comment(&view, now()));
    }

    #[test]
    fn sticky_queued() {
        let view = StickyView {
            url: None,
            sha: Some(Sha::new(SHA).unwrap()),
            deployed_at: None,
            services: vec![],
            jobs: vec![],
            expires_at: None,
            ..with(StickyState::Queued {
                reason: "3rd in line; 20/20 previews of shop in use".to_owned(),
            })
        };
        insta::assert_snapshot!(sticky_comment(&view, now()));
    }

    #[test]
    fn sticky_waiting_for_approval() {
        let view = StickyView {
            url: None,
            sha: None,
            deployed_at: None,
            services: vec![],
            jobs: vec![],
            expires_at: None,
            namespace: None,
            ..with(StickyState::WaitingForApproval {
                sha: Sha::new(SHA).unwrap(),
            })
        };
        insta::assert_snapshot!(sticky_comment(&view, now()));
    }

    #[test]
    fn sticky_waiting_for_checks() {
        let view = StickyView {
            url: None,
            deployed_at: None,
            services: vec![],
            jobs: vec![],
            expires_at: None,
            ..with(StickyState::WaitingForChecks {
                checks: vec!["ci / build".to_owned(), "ci / test".to_owned()],
            })
        };
        insta::assert_snapshot!(sticky_comment(&view, now()));
    }

    #[test]
    fn sticky_failed() {
        let mut view = with(StickyState::Failed {
            reason: "seed job db-seed failed: BackoffLimitExceeded (exit 1)".to_owned(),
        });
        view.deployed_at = None;
        view.jobs[0].state = JobState::Failed;
        view.log_tail = Some(LogTail {
            pod: "db-seed-x7k2p".into(),
            container: "seed".into(),
            previous: false,
            lines: vec![
                "connecting to postgres://shop:[redacted]@db:5432/shop".into(),
                "ERROR: relation \"orders\" does not exist".into(),
                "a line with ``` in it".into(),
            ],
        });
        let body = sticky_comment(&view, now());
        assert!(
            body.contains("\n````text\n"),
            "a fence longer than any run in the lines"
        );
        insta::assert_snapshot!(body);
    }

    #[test]
    fn sticky_removed() {
        let view = with(StickyState::Removed {
            reason: TeardownReason::Merged,
            actor: Some("octocat".to_owned()),
            via: Some(Interface::PullRequest),
        });
        insta::assert_snapshot!(sticky_comment(&view, now()));
        let expired = sticky_comment(
            &with(StickyState::Removed {
                reason: TeardownReason::Expired,
                actor: None,
                via: None,
            }),
            now(),
        );
        assert!(expired.contains("| **Status** | expired; namespace deleted |"));
        assert!(expired.contains("`/preview` to deploy again"));
    }

    #[test]
    fn sticky_rejected() {
        let view = StickyView {
            url: None,
            sha: None,
            deployed_at: None,
            source: String::new(),
            services: vec![],
            jobs: vec![],
            expires_at: None,
            api_url: None,
            namespace: None,
            ..with(StickyState::Rejected {
                reason: "blueprint refused: DaemonSet node-exporter is not allowed".to_owned(),
            })
        };
        insta::assert_snapshot!(sticky_comment(&view, now()));
    }

    #[test]
    fn sticky_fork_pinned() {
        let view = StickyView {
            pinned_fork_note: true,
            cluster: None,
            cluster_down: None,
            log_tail: None,
            ..ready_view()
        };
        insta::assert_snapshot!(sticky_comment(&view, now()));
    }

    #[test]
    fn untrusted_text_cannot_break_the_table_or_the_marker() {
        let fake = r#"<!-- sandcastle {"preview":"evil","phase":"Ready"} -->"#;
        let view = StickyView {
            url: Some("https://x.example.com/a-->b<c>".to_owned()),
            ..with(StickyState::Failed {
                reason: format!("pod a|b failed:\nsee `kubectl` | {fake}"),
            })
        };
        let body = sticky_comment(&view, now());
        assert!(
            body.contains("| **Status** | pod a\\|b failed: |"),
            "{body}"
        );
        // The rest of a reason of several lines is fenced, longer than any backtick run in it.
        assert!(
            body.contains(&format!("\n```text\nsee `kubectl` | {fake}\n```\n")),
            "{body}"
        );
        let marker = body.lines().last().unwrap();
        assert_eq!(marker.matches("-->").count(), 1, "{marker}");
        let data = parse_marker(&body).unwrap();
        assert_eq!(data.preview, "shop-pr-42");
        assert_eq!(data.url.as_deref(), Some("https://x.example.com/a-->b<c>"));
        // Even unescaped, a marker in the visible part loses to Sandcastle's own last line.
        let marker = body.lines().last().unwrap();
        let spoofed = format!("{fake}\n{marker}");
        assert_eq!(parse_marker(&spoofed).unwrap().preview, "shop-pr-42");
    }

    #[test]
    fn times_read_naturally() {
        assert_eq!(span(0), "under a minute");
        assert_eq!(span(119), "1 min");
        assert_eq!(span(23 * 3600 + 59 * 60), "23 h");
        assert_eq!(span(47 * 3600), "47 h");
        assert_eq!(span(48 * 3600), "2 d");
        assert_eq!(span(3 * 86_400 + 4 * 3600 + 5), "3 d 4 h");
        assert_eq!(
            expiry(now(), at("2026-11-29T16:55:00Z")),
            "expired 5 min ago (Sun 29 Nov 16:55 UTC)"
        );
        assert_eq!(ago(now(), at("2026-11-29T17:00:30Z")), "under a minute ago");
    }

    #[test]
    fn the_marker_finds_the_comment_again() {
        let view = ready_view();
        let body = sticky_comment(&view, now());
        let data = parse_marker(&body).unwrap();
        assert_eq!(data, marker_data(&view));
        assert_eq!(data.phase, Phase::Ready);
        assert_eq!(data.sha.unwrap().as_str(), SHA);

        // Someone edits the visible part: still found.
        let marker = body.lines().last().unwrap();
        let edited = format!("my notes\r\n\r\n{marker}\r\n");
        assert_eq!(parse_marker(&edited), Some(marker_data(&view)));

        // The marker is removed or damaged: not Sandcastle's comment any more.
        let without: String = body.lines().filter(|l| !l.starts_with("<!--")).collect();
        assert_eq!(parse_marker(&without), None);
        assert_eq!(parse_marker("<!-- sandcastle {\"preview\": -->"), None);
        assert_eq!(parse_marker("<!-- sandcastle {} -->"), None);
        assert_eq!(parse_marker("LGTM"), None);

        // A damaged marker before an intact one.
        assert_eq!(
            parse_marker(&format!("<!-- sandcastle oops -->\n{marker}")),
            Some(marker_data(&view))
        );
        // Older or hand-written markers may omit optional keys.
        let minimal = parse_marker(r#"<!-- sandcastle {"preview":"p","phase":"Pending"} -->"#);
        assert_eq!(minimal.unwrap().phase, Phase::Pending);
    }

    #[test]
    fn the_marker_line_matches_the_ux_sketch() {
        let line = marker_line(&marker_data(&ready_view()));
        assert!(line.starts_with(MARKER_PREFIX));
        assert_eq!(
            line,
            format!(
                "<!-- sandcastle {{\"preview\":\"shop-pr-42\",\"namespace\":\"shop-pr-42\",\
                 \"url\":\"https://42-shop.preview.example.com\",\"sha\":\"{SHA}\",\
                 \"phase\":\"Ready\",\"state\":\"ready\",\
                 \"api\":\"https://sandcastle.example.com/api/v1/previews/shop-pr-42\"}} -->"
            )
        );
    }
}
