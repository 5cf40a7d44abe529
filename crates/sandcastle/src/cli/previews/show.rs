//! How `sandcastle previews` prints answers for people: kubectl-style tables (upper-case
//! headers, columns padded with spaces, no borders), a `describe`-like page for one preview, log
//! lines prefixed with their pod and container. Pure. The tables are written here: kubectl's
//! plain columns are a few lines, and table crates draw borders and wrap cells we would turn off.

use std::fmt::Write as _;

use jiff::Timestamp;

use crate::agent::{EventsView, LogLines, PreviewView, WaitResult};
use crate::crd::Phase;
use crate::domain::{duration, running};

/// Columns padded to their widest cell, three spaces apart; the last one is not padded.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                let pad = w - cell.chars().count();
                let _ = write!(out, "{cell}{}   ", " ".repeat(pad));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// `in 3h 12m`, `5m ago`, `now` (within the second), or `-` for no time.
fn relative(at: Option<&str>, now: Timestamp) -> String {
    let Some(at) = at.and_then(|a| a.parse::<Timestamp>().ok()) else {
        return "-".to_owned();
    };
    let secs = at.as_second() - now.as_second();
    let span = std::time::Duration::from_secs(secs.unsigned_abs());
    match secs {
        0 => "now".to_owned(),
        1.. => format!("in {}", duration::human(span)),
        _ => format!("{} ago", duration::human(span)),
    }
}

/// When something happened: `5m ago`, or `just now` for this second — and for a time a little
/// ahead of this machine's clock, since what happened cannot be in the future.
fn past(at: &str, now: Timestamp) -> String {
    match at.parse::<Timestamp>() {
        Ok(t) if t.as_second() >= now.as_second() => "just now".to_owned(),
        _ => relative(Some(at), now),
    }
}

/// When the preview expires: `-` once it is removed.
fn expires(p: &PreviewView, now: Timestamp) -> String {
    if p.phase == Phase::Removed {
        return "-".to_owned();
    }
    relative(p.expires_at.as_deref(), now)
}

/// What `refresh-data` prints: what was asked, and the sets so far.
pub fn refresh_asked(r: &sandcastle_agent::DataRefreshView) -> String {
    let mut out = format!(
        "Asked for a new snapshot of Blueprint {}'s data: previews made once it is ready start \
         from it (status.data.refreshed becomes {}).\n",
        r.blueprint, r.asked
    );
    if let Some(m) = &r.message {
        out.push_str(&format!("The last attempt said: {m}\n"));
    }
    if let Some(newest) = r.snapshots.first() {
        out.push_str(&format!(
            "Newest snapshot so far: {} (taken {}, {}).\n",
            newest.id,
            newest.taken_at,
            if newest.ready { "ready" } else { "not ready" }
        ));
    }
    out
}

/// `snapshot 20261207-031500 (taken 2h ago)`, or why the preview started empty.
fn data_line(data: &sandcastle_agent::view::DataView, now: Timestamp) -> String {
    match (&data.snapshot, &data.note) {
        (Some(set), _) => format!(
            "snapshot {set} (taken {})",
            data.taken_at
                .as_deref()
                .map_or("-".into(), |t| past(t, now))
        ),
        (None, Some(note)) => note.clone(),
        (None, None) => "empty".to_owned(),
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(7)]
}

fn or_dash(s: Option<&str>) -> String {
    s.filter(|s| !s.is_empty()).unwrap_or("-").to_owned()
}

/// The list of previews.
pub fn previews(items: &[PreviewView], now: Timestamp) -> String {
    if items.is_empty() {
        return "No previews.\n".to_owned();
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|p| {
            vec![
                p.name.clone(),
                p.phase.as_str().to_owned(),
                format!("{}/{}", p.services_ready, p.services_total),
                p.pull_request
                    .map_or_else(|| format!("sandbox:{}", p.branch), |n| format!("#{n}")),
                short(&p.commit.desired).to_owned(),
                or_dash(p.url.as_deref()),
                expires(p, now),
            ]
        })
        .collect();
    table(
        &[
            "NAME", "PHASE", "READY", "SOURCE", "COMMIT", "URL", "EXPIRES",
        ],
        &rows,
    )
}

/// One preview, as `kubectl describe` would show it.
pub fn preview(p: &PreviewView, now: Timestamp) -> String {
    let mut out = String::new();
    let mut field = |k: &str, v: String| {
        let _ = writeln!(out, "{:<14}{v}", format!("{k}:"));
    };
    field("Name", p.name.clone());
    let phase = match &p.reason {
        Some(r) => format!("{} ({r})", p.phase.as_str()),
        None => p.phase.as_str().to_owned(),
    };
    field("Phase", phase);
    if let Some(stuck) = &p.stuck_on {
        field("Stuck on", stuck.clone());
    }
    if let Some(waiting) = &p.waiting_for_github {
        field("GitHub", waiting.clone());
    }
    if let Some(d) = &p.diagnosis {
        field(
            "Diagnosis",
            format!("{} ({})", d.summary, d.reason.as_str()),
        );
    }
    field("URL", or_dash(p.url.as_deref()));
    field("Repository", p.repository.clone());
    field(
        "Source",
        p.pull_request.map_or_else(
            || format!("sandbox of branch {}", p.branch),
            |n| format!("pull request #{n} ({})", p.branch),
        ),
    );
    let deployed = p.commit.deployed.as_deref().map_or("none", short);
    field(
        "Commit",
        format!("{} (deployed: {deployed})", short(&p.commit.desired)),
    );
    field("Blueprint", p.blueprint.clone());
    field("Namespace", p.namespace.clone());
    field(
        "Cluster",
        p.cluster.clone().unwrap_or_else(|| "not placed yet".into()),
    );
    field("Expires", expires(p, now));
    if let Some(data) = &p.data {
        field("Data", data_line(data, now));
    }
    if let Some(hours) = environment_hours(p, now) {
        field("Env-hours", hours);
    }
    if let Some(q) = p.queue_position {
        field("Queue", format!("{q} in line"));
    }
    field("Requested by", p.requested_by.clone());
    field("Page", p.links.page.clone());
    if let Some(pr) = &p.links.pull_request {
        field("Pull request", pr.clone());
    }
    if !p.services.is_empty() {
        out.push_str("\nServices:\n");
        let rows: Vec<Vec<String>> = p
            .services
            .iter()
            .map(|s| {
                vec![
                    format!("  {}", s.name),
                    s.kind.clone(),
                    format!("{}/{}", s.ready, s.desired),
                ]
            })
            .collect();
        out.push_str(&table(&["  NAME", "KIND", "READY"], &rows));
    }
    if !p.history.is_empty() {
        out.push_str("\nHistory:\n");
        let rows: Vec<Vec<String>> = p
            .history
            .iter()
            .map(|h| {
                vec![
                    format!("  {}", past(&h.time, now)),
                    h.actor.clone(),
                    h.action.clone(),
                    or_dash(h.result.as_deref()),
                ]
            })
            .collect();
        out.push_str(&table(&["  WHEN", "ACTOR", "ACTION", "RESULT"], &rows));
    }
    if let Some(d) = p.diagnosis.as_ref().filter(|d| !d.log_tail.is_empty()) {
        let whose = match (&d.container, &d.pod) {
            (Some(c), Some(pod)) => format!(" of {c} in {pod}"),
            _ => String::new(),
        };
        let run = if d.previous { ", previous run" } else { "" };
        let _ = writeln!(out, "\nLast log lines{whose}{run}:");
        for line in &d.log_tail {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// The preview's Events, then its namespace's.
pub fn events(e: &EventsView, now: Timestamp) -> String {
    let rows: Vec<Vec<String>> = e
        .preview
        .iter()
        .chain(&e.namespace)
        .map(|e| {
            vec![
                e.time
                    .as_deref()
                    .map_or_else(|| "-".to_owned(), |t| past(t, now)),
                or_dash(e.type_.as_deref()),
                or_dash(e.reason.as_deref()),
                e.object.clone(),
                or_dash(e.note.as_deref()),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "No events.\n".to_owned();
    }
    table(&["WHEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], &rows)
}

/// Log lines; prefixed `[pod/container]` when they come from more than one container.
pub fn logs(l: &LogLines) -> String {
    let prefixed = l.entries.len() > 1;
    let mut out = String::new();
    for e in &l.entries {
        for line in &e.lines {
            if prefixed {
                let _ = writeln!(out, "[{}/{}] {line}", e.pod, e.container);
            } else {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    out
}

/// What follows the logs on stderr: that some were cut or masked.
pub fn logs_note(l: &LogLines) -> Option<String> {
    let mut notes = Vec::new();
    if l.truncated {
        notes.push("cut at the server's bound (use --tail, --since, --workload)".to_owned());
    }
    if l.redacted > 0 {
        notes.push(format!("{} secret value(s) redacted", l.redacted));
    }
    for e in &l.entries {
        if let Some(why) = &e.unavailable {
            notes.push(format!("no logs from {}/{}: {why}", e.pod, e.container));
        }
    }
    let read = l.entries.iter().filter(|e| e.unavailable.is_none()).count();
    if l.entries.iter().all(|e| e.lines.is_empty()) {
        notes.insert(
            0,
            match (l.entries.len(), read) {
                (0, _) if l.pods == 0 => {
                    "no log lines: no pod of the preview (or of --workload) to read from".to_owned()
                }
                (0, _) if l.pods == 1 => {
                    "no log lines yet: 1 pod, which has written none".to_owned()
                }
                (0, _) => format!("no log lines yet: {} pods, none has written any", l.pods),
                (_, 0) => "no log lines".to_owned(),
                (_, 1) => "no log lines: 1 container logged nothing (within --tail and --since)"
                    .to_owned(),
                (_, n) => format!(
                    "no log lines: {n} containers logged nothing (within --tail and --since)"
                ),
            },
        );
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// A write the controller carries out after the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    Redeploy,
    Stop,
    Wake,
    Reset,
    Delete,
}

impl Asked {
    /// The verb, and what `sandcastle previews wait --for` waits for once it is done.
    fn words(self) -> (&'static str, &'static str, Phase) {
        match self {
            Self::Redeploy => ("redeploy", "ready", Phase::Ready),
            Self::Stop => ("stop", "stopped", Phase::Stopped),
            Self::Wake => ("wake", "ready", Phase::Ready),
            Self::Reset => ("reset", "ready", Phase::Ready),
            Self::Delete => ("delete", "removed", Phase::Removed),
        }
    }
}

/// What a write the controller carries out later prints: the answer holds the preview as it
/// was before, so say what was asked, that it is under way, and how to wait for it.
pub fn asked(what: Asked, p: &PreviewView) -> String {
    let (verb, wait_for, done) = what.words();
    let at = match what {
        Asked::Redeploy => format!(" at {}", short(&p.commit.desired)),
        _ => String::new(),
    };
    let phase = p.phase.as_str();
    // Stopping or deleting is done once there; a redeploy, a wake and a reset start anew.
    if p.phase == done && matches!(what, Asked::Stop | Asked::Delete) {
        return format!("Asked to {verb} {}: it is {phase} already.\n", p.name);
    }
    format!(
        "Asked to {verb} {name}{at}: under way (it is {phase} now).\n\
         Wait for it: sandcastle previews wait {name} --for {wait_for}\n",
        name = p.name
    )
}

/// How a wait ended, in one line.
pub fn waited(w: &WaitResult) -> String {
    let outcome = serde_json::to_value(w.outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    match &w.preview {
        Some(p) => {
            let why = p
                .reason
                .as_deref()
                .map_or(String::new(), |r| format!(": {r}"));
            let url = p.url.as_deref().map_or(String::new(), |u| format!(" {u}"));
            format!("{} {outcome} ({}{why}){url}\n", p.name, p.phase.as_str())
        }
        None => format!("{outcome}: the preview is gone\n"),
    }
}

/// The preview's environment-hours as of `now` (`1.5 so far`, `3.0 in total`), if it ever ran.
fn environment_hours(p: &PreviewView, now: Timestamp) -> Option<String> {
    let since = p
        .running_since
        .as_deref()
        .and_then(|s| s.parse::<Timestamp>().ok());
    if p.running_seconds == 0 && since.is_none() {
        return None;
    }
    let open = since.map_or(0, |s| running::seconds_between(s, now));
    let so_far = if p.phase == Phase::Removed {
        "in total"
    } else {
        "so far"
    };
    Some(format!(
        "{} {so_far}",
        running::hours(p.running_seconds + open)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::view::{Commits, HistoryView, Links, ServiceView};
    use crate::agent::{LogEntry, WaitOutcome};
    use crate::crd::Phase;

    fn now() -> Timestamp {
        "2026-12-01T12:00:00Z".parse().unwrap()
    }

    fn view(name: &str, pr: Option<u64>) -> PreviewView {
        PreviewView {
            name: name.into(),
            blueprint: "shop".into(),
            repository: "acme/shop".into(),
            pull_request: pr,
            branch: "feature/login".into(),
            phase: Phase::Ready,
            reason: Some("2/2 services ready".into()),
            stuck_on: None,
            waiting_for_github: None,
            diagnosis: None,
            url: Some(format!("http://{name}.preview.example.com")),
            commit: Commits {
                desired: "0123456789abcdef0123456789abcdef01234567".into(),
                deployed: Some("0123456789abcdef0123456789abcdef01234567".into()),
            },
            services: vec![ServiceView {
                name: "web".into(),
                kind: "Deployment".into(),
                ready: 1,
                desired: 1,
            }],
            services_ready: 2,
            services_total: 2,
            expires_at: Some("2026-12-01T15:30:00Z".into()),
            queue_position: None,
            stopped: false,
            running_seconds: 0,
            running_since: None,
            sandbox: pr.is_none(),
            pool: false,
            namespace: name.into(),
            cluster: Some("in-cluster".into()),
            requested_by: "@maria".into(),
            created_at: None,
            history: vec![HistoryView {
                time: "2026-12-01T11:55:00Z".into(),
                actor: "@maria".into(),
                action: "Ready".into(),
                commit: None,
                result: Some("2/2 services ready".into()),
            }],
            shares: Vec::new(),
            tests: Vec::new(),
            data: None,
            links: Links {
                self_: format!("https://sandcastle.example.com/api/v1/previews/{name}"),
                page: format!("https://sandcastle.example.com/previews/{name}"),
                pull_request: None,
                deployment: None,
            },
        }
    }

    #[test]
    fn previews_print_as_a_table() {
        let out = previews(
            &[view("shop-pr-42", Some(42)), view("shop-agent", None)],
            now(),
        );
        insta::assert_snapshot!(out, @r"
        NAME         PHASE   READY   SOURCE                  COMMIT    URL                                     EXPIRES
        shop-pr-42   Ready   2/2     #42                     0123456   http://shop-pr-42.preview.example.com   in 3h 30m
        shop-agent   Ready   2/2     sandbox:feature/login   0123456   http://shop-agent.preview.example.com   in 3h 30m
        ");
        assert_eq!(previews(&[], now()), "No previews.\n");
    }

    #[test]
    fn environment_hours_count_the_stretch_under_way() {
        let mut p = view("shop-agent", None);
        assert_eq!(environment_hours(&p, now()), None, "never ran");
        p.running_seconds = 3600;
        assert_eq!(environment_hours(&p, now()).as_deref(), Some("1.0 so far"));
        p.running_since = Some("2026-12-01T11:00:00Z".into());
        assert_eq!(environment_hours(&p, now()).as_deref(), Some("2.0 so far"));
        p.phase = Phase::Removed;
        p.running_since = None;
        assert_eq!(
            environment_hours(&p, now()).as_deref(),
            Some("1.0 in total")
        );
    }

    #[test]
    fn one_preview_prints_as_a_page() {
        insta::assert_snapshot!(preview(&view("shop-agent", None), now()), @r"
        Name:         shop-agent
        Phase:        Ready (2/2 services ready)
        URL:          http://shop-agent.preview.example.com
        Repository:   acme/shop
        Source:       sandbox of branch feature/login
        Commit:       0123456 (deployed: 0123456)
        Blueprint:    shop
        Namespace:    shop-agent
        Cluster:      in-cluster
        Expires:      in 3h 30m
        Requested by: @maria
        Page:         https://sandcastle.example.com/previews/shop-agent

        Services:
          NAME   KIND         READY
          web    Deployment   1/1

        History:
          WHEN     ACTOR    ACTION   RESULT
          5m ago   @maria   Ready    2/2 services ready
        ");
    }

    #[test]
    fn a_failed_preview_shows_its_diagnosis_and_log_tail() {
        let mut p = view("shop-pr-7", Some(7));
        p.phase = Phase::Failed;
        p.diagnosis = Some(crate::crd::Diagnosis {
            reason: crate::crd::DiagnosisReason::CrashLoop,
            summary: "deployment/api: container api keeps crashing (OOMKilled, exit 137)".into(),
            workload: Some("deployment/api".into()),
            pod: Some("api-1".into()),
            container: Some("api".into()),
            log_tail: vec!["starting".into(), "out of memory".into()],
            previous: true,
        });
        let page = preview(&p, now());
        assert!(
            page.contains("Diagnosis:    deployment/api: container api keeps crashing (OOMKilled, exit 137) (crashLoop)"),
            "{page}"
        );
        assert!(
            page.ends_with(
                "\nLast log lines of api in api-1, previous run:\n  starting\n  out of memory\n"
            ),
            "{page}"
        );
    }

    #[test]
    fn logs_are_prefixed_only_when_they_mix_containers() {
        let entry = |pod: &str, c: &str, lines: &[&str]| LogEntry {
            pod: pod.into(),
            container: c.into(),
            lines: lines.iter().map(|l| (*l).to_owned()).collect(),
            unavailable: None,
        };
        let one = LogLines {
            entries: vec![entry("web-1", "web", &["a", "b"])],
            pods: 1,
            truncated: false,
            redacted: 0,
        };
        assert_eq!(logs(&one), "a\nb\n");
        assert_eq!(logs_note(&one), None);
        let two = LogLines {
            entries: vec![
                entry("web-1", "web", &["a"]),
                entry("web-1", "proxy", &["b"]),
            ],
            pods: 1,
            truncated: true,
            redacted: 2,
        };
        assert_eq!(logs(&two), "[web-1/web] a\n[web-1/proxy] b\n");
        assert_eq!(
            logs_note(&two).unwrap(),
            "cut at the server's bound (use --tail, --since, --workload); 2 secret value(s) redacted"
        );
    }

    #[test]
    fn a_wait_says_how_it_ended() {
        let w = WaitResult {
            outcome: WaitOutcome::Timeout,
            preview: Some(view("shop-agent", None)),
            test: None,
        };
        assert_eq!(
            waited(&w),
            "shop-agent timeout (Ready: 2/2 services ready) http://shop-agent.preview.example.com\n"
        );
        let gone = WaitResult {
            outcome: WaitOutcome::Removed,
            preview: None,
            test: None,
        };
        assert_eq!(waited(&gone), "removed: the preview is gone\n");
    }

    #[test]
    fn times_are_relative() {
        assert_eq!(relative(Some("2026-12-01T11:58:00Z"), now()), "2m ago");
        assert_eq!(relative(Some("2026-12-02T13:00:00Z"), now()), "in 1d 1h");
        assert_eq!(relative(None, now()), "-");
        assert_eq!(relative(Some("soon"), now()), "-");
        assert_eq!(relative(Some("2026-12-01T12:00:00Z"), now()), "now");
        assert_eq!(relative(Some("2026-12-01T12:00:00.400Z"), now()), "now");
    }

    #[test]
    fn what_happened_is_never_in_the_future() {
        let mut p = view("shop-agent", None);
        // Written this very second, and by a server whose clock is a little ahead.
        for time in [
            "2026-12-01T12:00:00Z",
            "2026-12-01T12:00:00.300Z",
            "2026-12-01T12:00:02Z",
        ] {
            p.history[0].time = time.into();
            let page = preview(&p, now());
            assert!(page.contains("  just now   @maria"), "{time}: {page}");
            assert!(!page.contains("in 0s") && !page.contains("in 2s"), "{page}");
        }
    }

    #[test]
    fn the_data_line_says_which_snapshot_and_how_old() {
        let mut p = view("shop-pr-42", Some(42));
        p.data = Some(sandcastle_agent::view::DataView {
            snapshot: Some("20261129-150000".into()),
            taken_at: Some("2026-11-29T15:00:00Z".into()),
            claims: vec!["data-db-0".into()],
            note: None,
        });
        let page = preview(&p, now());
        assert!(
            page.contains("\nData:         snapshot 20261129-150000 (taken "),
            "{page}"
        );
        assert!(!preview(&view("shop-pr-42", Some(42)), now()).contains("Data:"));
    }

    #[test]
    fn a_removed_preview_shows_no_expiry() {
        let mut p = view("shop-agent", None);
        p.phase = Phase::Removed;
        let page = preview(&p, now());
        assert!(page.contains("\nExpires:      -\n"), "{page}");
        let list = previews(&[p], now());
        assert!(list.lines().nth(1).unwrap().ends_with("   -"), "{list}");
        assert!(!list.contains("in 3h"), "{list}");
    }

    #[test]
    fn a_write_carried_out_later_says_it_is_under_way() {
        let p = view("shop-agent", None);
        assert_eq!(
            asked(Asked::Stop, &p),
            "Asked to stop shop-agent: under way (it is Ready now).\n\
             Wait for it: sandcastle previews wait shop-agent --for stopped\n"
        );
        assert_eq!(
            asked(Asked::Delete, &p),
            "Asked to delete shop-agent: under way (it is Ready now).\n\
             Wait for it: sandcastle previews wait shop-agent --for removed\n"
        );
        assert!(asked(Asked::Wake, &p).ends_with("wait shop-agent --for ready\n"));
        assert!(
            asked(Asked::Redeploy, &p).starts_with("Asked to redeploy shop-agent at 0123456: ")
        );
        assert!(asked(Asked::Reset, &p).ends_with("wait shop-agent --for ready\n"));
        let mut gone = p;
        gone.phase = Phase::Removed;
        assert_eq!(
            asked(Asked::Delete, &gone),
            "Asked to delete shop-agent: it is Removed already.\n"
        );
    }

    #[test]
    fn no_log_lines_is_said() {
        let empty = LogLines {
            entries: vec![LogEntry {
                pod: "web-1".into(),
                container: "web".into(),
                lines: vec![],
                unavailable: None,
            }],
            pods: 1,
            truncated: false,
            redacted: 0,
        };
        assert_eq!(logs(&empty), "");
        assert_eq!(
            logs_note(&empty).unwrap(),
            "no log lines: 1 container logged nothing (within --tail and --since)"
        );
        let mut none = LogLines {
            entries: vec![],
            pods: 0,
            truncated: false,
            redacted: 0,
        };
        assert_eq!(
            logs_note(&none).unwrap(),
            "no log lines: no pod of the preview (or of --workload) to read from"
        );
        // Pods that have written nothing (their containers not started, or silent): not "no pod".
        none.pods = 8;
        assert_eq!(
            logs_note(&none).unwrap(),
            "no log lines yet: 8 pods, none has written any"
        );
    }
}
