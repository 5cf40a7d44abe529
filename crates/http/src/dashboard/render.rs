//! The dashboard's HTML, rendered on the server with maud from plain view structs: the list of
//! previews (filters, capacity per Blueprint), one preview's page (URL, commit, services, the
//! diagnosis and log tail, Events, history, and the actions the viewer may take, each a form
//! with its CSRF token), and short messages. It works without JavaScript: a page of a preview
//! on its way refreshes itself. No I/O.

use maud::{DOCTYPE, Markup, PreEscaped, html};

use jiff::Timestamp;

use sandcastle_agent::{EventsView, PreviewView};
use sandcastle_crd::Phase;
use sandcastle_github::text::{ago, clock, expiry};

/// Seconds between refreshes of a page showing a preview on its way.
pub const REFRESH_SECS: u32 = 3;

const STYLE: &str = "\
:root{color-scheme:light dark;--fg:#1b1f24;--bg:#fff;--muted:#57606a;--line:#d0d7de;--accent:#0969da;--bad:#cf222e;--ok:#1a7f37}\
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--bg:#0d1117;--muted:#9da7b3;--line:#30363d;--accent:#4493f8;--bad:#f85149;--ok:#3fb950}}\
body{font:16px/1.5 system-ui,sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;padding:1rem;max-width:72rem}\
header{display:flex;flex-wrap:wrap;gap:1rem;align-items:center;justify-content:space-between;border-bottom:1px solid var(--line);margin-bottom:1rem}\
a{color:var(--accent)}a:focus,button:focus,input:focus,select:focus{outline:3px solid var(--accent);outline-offset:2px}\
table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem}th,td{border-bottom:1px solid var(--line);padding:.4rem .5rem;text-align:left;vertical-align:top}\
.wrap{overflow-x:auto}.muted{color:var(--muted)}.Failed{color:var(--bad);font-weight:600}.Ready{color:var(--ok);font-weight:600}.Stopped,.Removed{color:var(--muted);font-weight:600}\
form.inline{display:inline}button{font:inherit;padding:.35rem .8rem;border:1px solid var(--line);border-radius:6px;background:var(--bg);color:var(--fg);cursor:pointer}\
button.danger{border-color:var(--bad);color:var(--bad)}label{margin-right:.5rem}input,select{font:inherit;padding:.25rem}\
pre{white-space:pre-wrap;overflow-wrap:anywhere;border:1px solid var(--line);padding:.5rem;border-radius:6px}\
.actions{display:flex;flex-wrap:wrap;gap:.5rem;margin:1rem 0}\
button.primary{background:var(--accent);border-color:var(--accent);color:#fff;font-weight:600}\
a.button{display:inline-block;padding:.5rem 1rem;border-radius:6px;background:var(--accent);color:#fff;text-decoration:none;font-weight:600}";

/// Who is looking, as the header shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// Signed in with GitHub: the login, and the CSRF token of the sign-out form.
    Person { login: String, csrf: String },
    /// A bearer token (the API's), no session.
    Token { user: String },
    /// Nobody signed in, and pages are public.
    Public { can_sign_in: bool },
    /// Nobody to sign in: Sandcastle is being set up.
    Setup,
}

pub(super) fn layout(title: &str, who: &Who, refresh: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if refresh { meta http-equiv="refresh" content=(REFRESH_SECS); }
                title { (title) " · Sandcastle" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    p { a href="/" { strong { "Sandcastle" } } }
                    div { (who_line(who)) }
                }
                main { h1 { (title) } (body) }
            }
        }
    }
}

fn who_line(who: &Who) -> Markup {
    html! {
        @match who {
            Who::Person { login, csrf } => {
                "Signed in as " strong { "@" (login) } " "
                form.inline method="post" action="/logout" {
                    input type="hidden" name="csrf" value=(csrf);
                    button type="submit" { "Sign out" }
                }
            }
            Who::Token { user } => { "Token of " strong { (user) } }
            Who::Public { can_sign_in: true } => { a href="/login" { "Sign in with GitHub" } }
            Who::Public { can_sign_in: false } => { span.muted { "Read-only" } }
            Who::Setup => { span.muted { "Setup" } }
        }
    }
}

/// A Blueprint's use of its cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    pub blueprint: String,
    pub in_use: u32,
    pub cap: u32,
    pub queued: u32,
    /// Running seconds of the previews shown (environment-hours × 3600), torn-down ones kept
    /// as tombstones included.
    pub env_seconds: u64,
}

/// The list page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    pub who: Who,
    pub now: Timestamp,
    pub previews: Vec<PreviewView>,
    pub capacity: Vec<Capacity>,
    /// Filters as given: repository, phase, mine.
    pub repository: String,
    pub phase: Option<Phase>,
    pub mine: bool,
    /// Every repository among the previews the viewer may see, for the filter.
    pub repositories: Vec<String>,
}

/// `Wed 2 Dec 14:46 UTC (3 h ago)` for a time the API gives (RFC 3339).
fn when(now: Timestamp, at: Option<&str>) -> String {
    match at.and_then(|a| a.parse::<Timestamp>().ok()) {
        Some(t) if t <= now => format!("{} ({})", clock(t), ago(now, t)),
        Some(t) => clock(t),
        None => at.unwrap_or("—").to_owned(),
    }
}

/// `in 23 h (Wed 2 Dec 14:46 UTC)`.
pub(super) fn until(now: Timestamp, at: Option<&str>) -> String {
    match at.and_then(|a| a.parse::<Timestamp>().ok()) {
        Some(t) => expiry(now, t),
        None => "—".to_owned(),
    }
}

fn urlencode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

fn pr_link(p: &PreviewView) -> Markup {
    html! {
        @match (&p.links.pull_request, p.pull_request) {
            (Some(url), Some(n)) => { a href=(url) { "#" (n) } }
            (None, Some(n)) => { "#" (n) }
            _ => { span.muted { "sandbox" } }
        }
    }
}

pub fn index(page: &Index) -> String {
    let body = html! {
        form method="get" action="/" aria-label="Filters" {
            label for="repository" { "Repository" }
            select id="repository" name="repository" {
                option value="" { "all" }
                @for r in &page.repositories {
                    option value=(r) selected[*r == page.repository] { (r) }
                }
            }
            " "
            label for="phase" { "Phase" }
            select id="phase" name="phase" {
                option value="" { "all" }
                @for ph in Phase::ALL {
                    option value=(ph.as_str()) selected[page.phase == Some(ph)] { (ph.as_str()) }
                }
            }
            " "
            @if matches!(page.who, Who::Person { .. }) {
                input type="checkbox" id="mine" name="mine" value="true" checked[page.mine];
                label for="mine" { "Mine" }
            }
            button type="submit" { "Filter" }
        }
        h2 { "Previews (" (page.previews.len()) ")" }
        @if page.previews.is_empty() {
            p.muted { "No preview to show." }
        } @else {
            div.wrap { table {
                thead { tr {
                    th scope="col" { "Preview" } th scope="col" { "Phase" } th scope="col" { "Repository" }
                    th scope="col" { "PR" } th scope="col" { "URL" } th scope="col" { "Commit" }
                    th scope="col" { "Created" } th scope="col" { "Expires" } th scope="col" { "Queue" }
                } }
                tbody { @for p in &page.previews { tr {
                    td { a href={ "/previews/" (p.name) } { (p.name) } }
                    td class=(p.phase.as_str()) { (p.phase.as_str()) }
                    td { (p.repository) }
                    td { (pr_link(p)) }
                    td { @if let Some(u) = &p.url { a href=(u) { (u) } } @else { span.muted { "—" } } }
                    td { code { (short(p.commit.deployed.as_deref().unwrap_or(&p.commit.desired))) } }
                    td { (when(page.now, p.created_at.as_deref())) }
                    td { (until(page.now, p.expires_at.as_deref())) }
                    td { @if let Some(q) = p.queue_position { (q) } }
                } } }
            } }
        }
        @if !page.capacity.is_empty() {
            h2 { "Capacity" }
            div.wrap { table {
                thead { tr { th scope="col" { "Blueprint" } th scope="col" { "In use" } th scope="col" { "Queued" } th scope="col" { "Environment-hours" } } }
                tbody { @for c in &page.capacity { tr {
                    td { (c.blueprint) } td { (c.in_use) " / " (c.cap) } td { (c.queued) }
                    td { (sandcastle_domain::running::hours(c.env_seconds)) }
                } } }
            } }
        }
    };
    layout("Previews", &page.who, false, body).into_string()
}

/// An action on a preview, as its button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Extend,
    Stop,
    Wake,
    Redeploy,
    Destroy,
    /// Mint a share link (in the page's share links section).
    Share,
    /// Revoke one.
    Unshare,
}

impl Action {
    pub const ALL: [Action; 7] = [
        Action::Extend,
        Action::Stop,
        Action::Wake,
        Action::Redeploy,
        Action::Destroy,
        Action::Share,
        Action::Unshare,
    ];

    /// The actions of the bar at the top of the page.
    const BAR: [Action; 5] = [
        Action::Extend,
        Action::Stop,
        Action::Wake,
        Action::Redeploy,
        Action::Destroy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Extend => "extend",
            Self::Stop => "stop",
            Self::Wake => "wake",
            Self::Redeploy => "redeploy",
            Self::Destroy => "destroy",
            Self::Share => "share",
            Self::Unshare => "unshare",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == s)
    }

    /// Whether it applies to a preview in `phase` (stopping a stopped one does nothing).
    pub fn applies(self, phase: Phase) -> bool {
        match self {
            Self::Stop => matches!(phase, Phase::Ready | Phase::Deploying | Phase::Failed),
            Self::Wake => phase == Phase::Stopped,
            Self::Extend | Self::Redeploy | Self::Destroy | Self::Share | Self::Unshare => {
                !matches!(phase, Phase::Terminating | Phase::Removed)
            }
        }
    }
}

/// One preview's page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewPage {
    pub who: Who,
    pub now: Timestamp,
    pub preview: PreviewView,
    pub events: Option<EventsView>,
    /// The actions offered (the viewer may write), with the form's CSRF token.
    pub actions: Option<String>,
    /// What the last action said, when the page is shown after one.
    pub notice: Option<String>,
}

fn action_form(p: &PreviewView, a: Action, csrf: &str) -> Markup {
    let action = format!("/previews/{}/{}", p.name, a.name());
    html! {
        form.inline method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            @match a {
                Action::Extend => {
                    label for="by" { "Extend by" }
                    input id="by" name="duration" value="4h" size="4" pattern="([0-9]+[wdhmsWDHMS])+";
                    " " button type="submit" { "Extend" }
                }
                Action::Destroy => {
                    input type="checkbox" id="confirm" name="confirm" value=(p.name) required;
                    label for="confirm" { "Yes, delete " (p.name) " and its data" }
                    " " button.danger type="submit" { "Destroy" }
                }
                Action::Stop => { button type="submit" { "Stop" } }
                Action::Wake => { button type="submit" { "Wake" } }
                Action::Redeploy => { button type="submit" { "Redeploy" } }
                Action::Share | Action::Unshare => {}
            }
        }
    }
}

fn facts(p: &PreviewView, now: Timestamp) -> Markup {
    html! {
        table { tbody {
            tr { th scope="row" { "Phase" } td class=(p.phase.as_str()) { (p.phase.as_str()) } }
            @if let Some(r) = &p.reason { tr { th scope="row" { "Status" } td { (r) } } }
            @if let Some(w) = &p.waiting_for_github { tr { th scope="row" { "GitHub" } td { (w) } } }
            tr { th scope="row" { "URL" } td { @if let Some(u) = &p.url { a href=(u) { (u) } } @else { span.muted { "none yet" } } } }
            tr { th scope="row" { "Repository" } td { (p.repository) " " (pr_link(p)) " · " (p.branch) } }
            tr { th scope="row" { "Commit" } td {
                code { (short(&p.commit.desired)) }
                @if let Some(d) = &p.commit.deployed { @if d != &p.commit.desired { " (running " code { (short(d)) } ")" } }
            } }
            tr { th scope="row" { "Services" } td { (p.services_ready) " / " (p.services_total) " ready" } }
            tr { th scope="row" { "Expires" } td { (until(now, p.expires_at.as_deref())) } }
            @if let Some(q) = p.queue_position { tr { th scope="row" { "Queue" } td { (q) " in line" } } }
            tr { th scope="row" { "Namespace" } td { code { (p.namespace) } } }
            tr { th scope="row" { "Cluster" } td { (p.cluster.as_deref().unwrap_or("not placed yet")) } }
            @if let Some(d) = &p.data { tr { th scope="row" { "Data" } td {
                @if let Some(set) = &d.snapshot {
                    "snapshot " code { (set) } " of the Blueprint's data, taken " (when(now, d.taken_at.as_deref()))
                } @else { (d.note.as_deref().unwrap_or("empty")) }
            } } }
            tr { th scope="row" { "Requested by" } td { (p.requested_by) " · " (when(now, p.created_at.as_deref())) } }
        } }
    }
}

fn diagnosis(p: &PreviewView) -> Markup {
    html! {
        @if let Some(d) = &p.diagnosis {
            section aria-labelledby="diagnosis" {
                h2 id="diagnosis" { "Diagnosis" }
                p { strong { (d.summary) } " " span.muted { "(" (d.reason.as_str()) ")" } }
                @if !d.log_tail.is_empty() {
                    details open {
                        summary {
                            "Last log lines"
                            @if let (Some(c), Some(pod)) = (&d.container, &d.pod) { " of " code { (c) } " in " code { (pod) } }
                            @if d.previous { " (previous run)" }
                        }
                        pre { (d.log_tail.join("\n")) }
                    }
                }
            }
        }
    }
}

fn events(e: &EventsView, now: Timestamp) -> Markup {
    let all: Vec<_> = e.preview.iter().chain(e.namespace.iter()).collect();
    html! {
        h2 { "Events" }
        @if all.is_empty() { p.muted { "No Events." } } @else {
            div.wrap { table {
                thead { tr { th scope="col" { "Time" } th scope="col" { "Type" } th scope="col" { "Reason" } th scope="col" { "Object" } th scope="col" { "Message" } } }
                tbody { @for ev in all { tr {
                    td { (when(now, ev.time.as_deref())) } td { (ev.type_.as_deref().unwrap_or("")) }
                    td { (ev.reason.as_deref().unwrap_or("")) } td { (ev.object) } td { (ev.note.as_deref().unwrap_or("")) }
                } } }
            } }
        }
    }
}

pub fn preview(page: &PreviewPage) -> String {
    let p = &page.preview;
    let on_its_way = matches!(
        p.phase,
        Phase::Pending | Phase::Deploying | Phase::Terminating
    );
    let body = html! {
        @if let Some(n) = &page.notice { p role="status" { strong { (n) } } }
        (facts(p, page.now))
        (diagnosis(p))
        @if let Some(csrf) = &page.actions {
            section.actions aria-label="Actions" {
                @for a in Action::BAR { @if a.applies(p.phase) { (action_form(p, a, csrf)) } }
            }
        }
        (shares(p, page.actions.as_deref(), page.now))
        @if !p.services.is_empty() {
            h2 { "Services" }
            table {
                thead { tr { th scope="col" { "Name" } th scope="col" { "Kind" } th scope="col" { "Ready" } } }
                tbody { @for s in &p.services { tr { td { (s.name) } td { (s.kind) } td { (s.ready) " / " (s.desired) } } } }
            }
        }
        @if let Some(e) = &page.events { (events(e, page.now)) }
        h2 { "History" }
        div.wrap { table {
            thead { tr { th scope="col" { "Time" } th scope="col" { "Who" } th scope="col" { "What" } th scope="col" { "Commit" } th scope="col" { "Result" } } }
            tbody { @for h in p.history.iter().rev() { tr {
                td { (when(page.now, Some(&h.time))) } td { (h.actor) } td { (h.action) }
                td { @if let Some(c) = &h.commit { code { (short(c)) } } }
                td { (h.result.as_deref().unwrap_or("")) }
            } } }
        } }
    };
    layout(&format!("Preview {}", p.name), &page.who, on_its_way, body).into_string()
}

/// The share links section of `p`'s page: the live links (who made them, what for, until
/// when); with `csrf` (the viewer may write), a form to mint one and a button to revoke each.
fn shares(p: &PreviewView, csrf: Option<&str>, now: Timestamp) -> Markup {
    let live = Action::Share.applies(p.phase);
    html! {
        section aria-labelledby="shares" {
            h2 id="shares" { "Share links" }
            p.muted {
                "A share link opens this preview without a GitHub account until it expires or is \
                 revoked, for previews only signed-in people may open."
            }
            @if p.shares.is_empty() { p.muted { "None." } } @else {
                div.wrap { table {
                    thead { tr {
                        th scope="col" { "Link" } th scope="col" { "For" } th scope="col" { "Made by" }
                        th scope="col" { "Expires" } @if csrf.is_some() { th scope="col" { "" } }
                    } }
                    tbody { @for s in &p.shares { tr {
                        td { code { (s.id) } }
                        td { (s.label.as_deref().unwrap_or("")) }
                        td { (s.created_by) }
                        td { (until(now, Some(&s.expires_at))) }
                        @if let Some(csrf) = csrf { td {
                            form.inline method="post" action=(format!("/previews/{}/unshare", p.name)) {
                                input type="hidden" name="csrf" value=(csrf);
                                input type="hidden" name="id" value=(s.id);
                                button type="submit" { "Revoke" }
                            }
                        } }
                    } } }
                } }
            }
            @if let (Some(csrf), true) = (csrf, live) {
                form.inline method="post" action=(format!("/previews/{}/share", p.name)) {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="expires" { "Valid for" }
                    input id="expires" name="duration" value="24h" size="4" pattern="([0-9]+[wdhmsWDHMS])+";
                    " " label for="label" { "for" }
                    input id="label" name="label" placeholder="the design review" maxlength="100";
                    " " button type="submit" { "Make a share link" }
                }
            }
        }
    }
}

/// A short page saying `text` (not found, sign in, refused); `sign_in`: with a link to sign in
/// that comes back to this path.
pub fn message(title: &str, who: &Who, text: &str, sign_in: Option<&str>) -> String {
    let body = html! {
        p { (text) }
        @if let Some(back) = sign_in {
            p { a.button href={ "/login?next=" (urlencode(back)) } { "Sign in with GitHub" } }
        }
    };
    layout(title, who, false, body).into_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandcastle_agent::view::{Commits, Links};

    fn view(phase: Phase) -> PreviewView {
        PreviewView {
            name: "shop-pr-1".into(),
            blueprint: "shop".into(),
            repository: "acme/shop".into(),
            pull_request: Some(1),
            branch: "feature".into(),
            phase,
            reason: Some("<script>alert(1)</script>".into()),
            stuck_on: None,
            waiting_for_github: None,
            diagnosis: None,
            url: Some("http://1-shop.preview.example.com".into()),
            commit: Commits {
                desired: "0123456789abcdef0123456789abcdef01234567".into(),
                deployed: None,
            },
            services: Vec::new(),
            shares: Vec::new(),
            services_ready: 0,
            services_total: 0,
            expires_at: None,
            queue_position: None,
            stopped: false,
            running_seconds: 0,
            running_since: None,
            sandbox: false,
            pool: false,
            namespace: "shop-pr-1".into(),
            cluster: Some("in-cluster".into()),
            requested_by: "alice".into(),
            created_at: None,
            history: Vec::new(),
            tests: Vec::new(),
            data: None,
            links: Links {
                self_: "/api/v1/previews/shop-pr-1".into(),
                page: "/previews/shop-pr-1".into(),
                pull_request: Some("https://github.com/acme/shop/pull/1".into()),
                deployment: None,
            },
        }
    }

    fn page(phase: Phase, actions: Option<&str>) -> String {
        preview(&PreviewPage {
            now: "2026-12-01T12:00:00Z".parse().unwrap(),
            who: Who::Person {
                login: "alice".into(),
                csrf: "t".into(),
            },
            preview: view(phase),
            events: None,
            actions: actions.map(str::to_owned),
            notice: None,
        })
    }

    #[test]
    fn text_from_the_cluster_is_escaped() {
        let html = page(Phase::Failed, None);
        assert!(!html.contains("<script>alert(1)"), "{html}");
        assert!(html.contains("&lt;script&gt;"));
    }

    #[test]
    fn actions_follow_the_phase_and_carry_the_token() {
        let ready = page(Phase::Ready, Some("tok"));
        for a in ["extend", "stop", "redeploy", "destroy"] {
            assert!(
                ready.contains(&format!("action=\"/previews/shop-pr-1/{a}\"")),
                "{a}"
            );
        }
        assert!(!ready.contains("/wake\""));
        assert!(ready.contains("name=\"csrf\" value=\"tok\""));
        let stopped = page(Phase::Stopped, Some("tok"));
        assert!(stopped.contains("/wake\"") && !stopped.contains("/stop\""));
        let reader = page(Phase::Ready, None);
        assert!(
            !reader.contains("/stop\""),
            "no buttons without write access"
        );
    }

    #[test]
    fn the_data_row_names_the_snapshot_and_its_age_or_why_it_started_empty() {
        let page_with = |data| {
            let mut v = view(Phase::Ready);
            v.data = Some(data);
            preview(&PreviewPage {
                now: "2026-12-01T12:00:00Z".parse().unwrap(),
                who: Who::Person {
                    login: "alice".into(),
                    csrf: "t".into(),
                },
                preview: v,
                events: None,
                actions: None,
                notice: None,
            })
        };
        let restored = page_with(sandcastle_agent::view::DataView {
            snapshot: Some("20261201-100000".into()),
            taken_at: Some("2026-12-01T10:00:00Z".into()),
            claims: vec!["data-db-0".into()],
            note: None,
        });
        assert!(
            restored.contains(
                "<th scope=\"row\">Data</th><td>snapshot <code>20261201-100000</code> of the Blueprint's data, taken "
            ),
            "{restored}"
        );
        assert!(restored.contains("2 h ago)</td>"), "{restored}");
        let seeded = page_with(sandcastle_agent::view::DataView {
            snapshot: None,
            taken_at: None,
            claims: Vec::new(),
            note: Some("started empty and seeded: snapshots do not cross clusters".into()),
        });
        assert!(
            seeded.contains("<td>started empty and seeded: snapshots do not cross clusters</td>"),
            "{seeded}"
        );
        assert!(!page(Phase::Ready, None).contains(">Data</th>"));
    }

    #[test]
    fn a_preview_on_its_way_refreshes_itself_and_has_a_title() {
        let deploying = page(Phase::Deploying, None);
        assert!(deploying.contains("http-equiv=\"refresh\""));
        assert!(deploying.contains("<title>Preview shop-pr-1 · Sandcastle</title>"));
        assert!(!page(Phase::Ready, None).contains("http-equiv=\"refresh\""));
    }
}
