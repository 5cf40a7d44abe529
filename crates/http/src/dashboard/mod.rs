//! The dashboard: every preview the viewer may see (`/`), one preview's page (`/previews/{name}`,
//! GitHub's `log_url`) with its actions, and signing in with GitHub (`signin`: `/login`, `/oauth/callback`,
//! `/logout`). Private by default: a person signed in with the App's OAuth sees the previews of
//! the repositories they can read and acts where they may write (as for PR commands); the API's
//! bearer token works too (RBAC decides); `--public-pages` shows read-only pages to anyone.
//! Every action is a POST carrying the session's CSRF token, carried out by the same operations
//! as the API (audited, recorded in the preview's history).

mod gate;
mod render;
mod session;
pub mod setup;
mod shares;
mod signin;

pub(crate) use gate::signin as gate_signin;
pub(crate) use signin::{callback, login, logout};

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::AppState;
use render::{Action, Capacity, Index, PreviewPage, Who};
use sandcastle_agent::auth::{Answers, recall, remember};
use sandcastle_agent::{AgentError, Caller, GitHubAccess, ListFilter, PreviewView, Via, view};
use sandcastle_crd::Phase;
use sandcastle_domain::Secret;
use sandcastle_github::user::{OAuthApp, SignInError};
use session::{COOKIE, Session, cookie};
pub use session::{Sessions, random_state};

/// How long what GitHub said a person may see is reused.
const ACCESS_FOR: Duration = Duration::from_secs(60);
/// Most previews one list page shows.
const LIST_MAX: usize = 2000;

/// The dashboard's settings and what it remembers.
#[derive(Clone, Debug)]
pub struct Dashboard {
    /// Sign-in with GitHub, when the App's OAuth client is configured.
    pub oauth: Option<OAuthApp>,
    pub sessions: Sessions,
    /// Read-only pages for anyone (`--public-pages`).
    pub public: bool,
    /// What GitHub said each signed-in person may see, by the hash of their token.
    access: Answers<[u8; 32], Arc<GitHubAccess>>,
}

impl Dashboard {
    pub fn new(oauth: Option<OAuthApp>, sessions: Sessions, public: bool) -> Self {
        Self {
            oauth,
            sessions,
            public,
            access: Arc::default(),
        }
    }

    /// What the holder of `token` may see, from GitHub at most once a minute.
    async fn access(
        &self,
        oauth: &OAuthApp,
        token: &str,
    ) -> Result<Arc<GitHubAccess>, SignInError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(a) = recall(&self.access, &key, ACCESS_FOR) {
            return Ok(a);
        }
        let got = oauth.access(&Secret::new(token)).await?;
        let access = Arc::new(GitHubAccess {
            login: got.login,
            read: got.read,
            write: got.write,
        });
        remember(&self.access, key, access.clone());
        Ok(access)
    }
}

/// Who is asking.
enum Viewer {
    Person {
        session: Session,
        caller: Caller,
        access: Arc<GitHubAccess>,
    },
    Token(Caller),
    Public,
    Nobody,
}

impl Viewer {
    fn who(&self, d: &Dashboard) -> Who {
        match self {
            Self::Person { session, .. } => Who::Person {
                login: session.login.clone(),
                csrf: d.sessions.csrf(session),
            },
            Self::Token(c) => Who::Token {
                user: c.user.clone(),
            },
            Self::Public | Self::Nobody => Who::Public {
                can_sign_in: d.oauth.is_some(),
            },
        }
    }

    fn caller(&self) -> Option<&Caller> {
        match self {
            Self::Person { caller, .. } | Self::Token(caller) => Some(caller),
            Self::Public | Self::Nobody => None,
        }
    }
}

fn page(status: StatusCode, html: String) -> Response {
    (status, Html(html)).into_response()
}

async fn viewer(state: &AppState, headers: &HeaderMap) -> Result<Viewer, Response> {
    let d = &state.dashboard;
    if let Some(auth) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let token = sandcastle_agent::auth::bearer(Some(auth)).map_err(|e| refused(d, &e))?;
        let mut caller = state
            .agent
            .authority
            .authenticate(token)
            .await
            .map_err(|e| refused(d, &e))?;
        caller.via = Via::Dashboard;
        return Ok(Viewer::Token(caller));
    }
    if let (Some(oauth), Some(value)) = (&d.oauth, cookie(headers, COOKIE))
        && let Some(session) = d.sessions.open(value)
    {
        match d.access(oauth, &session.token).await {
            Ok(access) => {
                let caller = Caller {
                    user: format!("github:{}", access.login),
                    uid: None,
                    groups: Vec::new(),
                    extra: Default::default(),
                    via: Via::Dashboard,
                    github: Some(access.clone()),
                    cluster: None,
                };
                return Ok(Viewer::Person {
                    session,
                    caller,
                    access,
                });
            }
            Err(SignInError::Refused(_)) => {}
            Err(e @ SignInError::Unavailable(_)) => {
                let who = Who::Public { can_sign_in: true };
                let text = format!("Sandcastle cannot ask GitHub who you are: {e}");
                return Err(page(
                    StatusCode::BAD_GATEWAY,
                    render::message("GitHub unavailable", &who, &text, None),
                ));
            }
        }
    }
    Ok(if d.public {
        Viewer::Public
    } else {
        Viewer::Nobody
    })
}

fn refused(d: &Dashboard, e: &AgentError) -> Response {
    let who = Who::Public {
        can_sign_in: d.oauth.is_some(),
    };
    page(
        e.status(),
        render::message("Not allowed", &who, &e.to_string(), None),
    )
}

/// A page asking to sign in, whose link comes back to `back` (a path of this site).
fn sign_in_first(d: &Dashboard, back: &str) -> Response {
    let who = Who::Public {
        can_sign_in: d.oauth.is_some(),
    };
    let text = if d.oauth.is_some() {
        "Sign in with GitHub to see the previews of your repositories."
    } else {
        "These pages are private: send the API's bearer token, or start Sandcastle with \
         --public-pages (or configure the App's OAuth client to sign in with GitHub)."
    };
    page(
        StatusCode::UNAUTHORIZED,
        render::message("Sign in", &who, text, d.oauth.is_some().then_some(back)),
    )
}

#[derive(Debug, Deserialize, Default)]
pub(super) struct IndexQuery {
    #[serde(default)]
    repository: String,
    #[serde(default)]
    phase: String,
    #[serde(default)]
    mine: Option<String>,
}

/// Every preview the viewer may see (all of them, for public pages).
async fn visible(state: &AppState, viewer: &Viewer) -> Result<Vec<PreviewView>, AgentError> {
    let Some(caller) = viewer.caller() else {
        let mut all: Vec<PreviewView> = state
            .agent
            .previews
            .state()
            .iter()
            .map(|p| view::view(p, &state.agent.addresses))
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        return Ok(all);
    };
    let mut out = Vec::new();
    // Removed previews too: the page filters by phase itself.
    let mut filter = ListFilter {
        limit: Some(500),
        removed: Some(true),
        ..ListFilter::default()
    };
    loop {
        let page = state.agent.list(caller, &filter).await?;
        out.extend(page.items);
        match page.next {
            Some(next) if out.len() < LIST_MAX => filter.after = Some(next),
            _ => return Ok(out),
        }
    }
}

/// A shown preview's running seconds so far: its ended stretches and the one under way.
fn seconds_so_far(p: &PreviewView, now: jiff::Timestamp) -> u64 {
    let under_way = p
        .running_since
        .as_deref()
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        .map_or(0, |t| {
            u64::try_from(now.duration_since(t).as_secs()).unwrap_or(0)
        });
    p.running_seconds + under_way
}

fn capacity(state: &AppState, previews: &[PreviewView]) -> Vec<Capacity> {
    let shown: BTreeSet<&str> = previews.iter().map(|p| p.blueprint.as_str()).collect();
    let now = state.clock.now();
    let mut out: Vec<Capacity> = state
        .blueprints
        .state()
        .iter()
        .filter(|b| {
            b.metadata
                .name
                .as_deref()
                .is_some_and(|n| shown.contains(n))
        })
        .map(|b| {
            let st = b.status.clone().unwrap_or_default();
            let name = b.metadata.name.clone().unwrap_or_default();
            let env_seconds = previews
                .iter()
                .filter(|p| p.blueprint == name)
                .map(|p| seconds_so_far(p, now))
                .sum();
            Capacity {
                env_seconds,
                blueprint: name,
                in_use: st.active_previews,
                cap: b.spec.max_previews,
                queued: st.queued_previews,
            }
        })
        .collect();
    out.sort_by(|a, b| a.blueprint.cmp(&b.blueprint));
    out
}

pub(super) async fn index(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<IndexQuery>,
) -> Response {
    let viewer = match viewer(&state, &headers).await {
        Ok(Viewer::Nobody) => return sign_in_first(&state.dashboard, "/"),
        Ok(v) => v,
        Err(r) => return r,
    };
    let all = match visible(&state, &viewer).await {
        Ok(all) => all,
        Err(e) => return refused(&state.dashboard, &e),
    };
    let repositories: Vec<String> = all
        .iter()
        .map(|p| p.repository.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let phase = Phase::named(&q.phase);
    let mine = q.mine.is_some() && matches!(viewer, Viewer::Person { .. });
    let login = match &viewer {
        Viewer::Person { session, .. } => session.login.clone(),
        _ => String::new(),
    };
    let previews: Vec<PreviewView> = all
        .into_iter()
        .filter(|p| q.repository.is_empty() || p.repository.eq_ignore_ascii_case(&q.repository))
        .filter(|p| phase.is_none_or(|ph| p.phase == ph))
        .filter(|p| !mine || p.requested_by.eq_ignore_ascii_case(&login))
        .collect();
    let capacity = capacity(&state, &previews);
    let html = render::index(&Index {
        who: viewer.who(&state.dashboard),
        now: state.clock.now(),
        previews,
        capacity,
        repository: q.repository,
        phase,
        mine,
        repositories,
    });
    page(StatusCode::OK, html)
}

#[derive(Debug, Deserialize, Default)]
pub(super) struct PreviewQuery {
    #[serde(default)]
    done: Option<String>,
}

pub(super) async fn preview(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<PreviewQuery>,
) -> Response {
    let d = &state.dashboard;
    let viewer = match viewer(&state, &headers).await {
        Ok(Viewer::Nobody) => return sign_in_first(d, &format!("/previews/{name}")),
        Ok(v) => v,
        Err(r) => return r,
    };
    let found = match viewer.caller() {
        Some(caller) => state.agent.preview_page(caller, &name).await,
        None => state
            .agent
            .previews
            .state()
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name.as_str()))
            .map(|p| (view::view(p, &state.agent.addresses), None))
            .ok_or_else(|| AgentError::NotFound(name.clone())),
    };
    let (preview, events) = match found {
        Ok(p) => p,
        Err(AgentError::NotFound(_)) => {
            let text = format!("No preview named {name} that you may see.");
            return page(
                StatusCode::NOT_FOUND,
                render::message("Not found", &viewer.who(d), &text, None),
            );
        }
        Err(e) => return refused(d, &e),
    };
    let actions = match &viewer {
        Viewer::Person {
            session, access, ..
        } if access
            .write
            .contains(&preview.repository.to_ascii_lowercase()) =>
        {
            Some(d.sessions.csrf(session))
        }
        _ => None,
    };
    let notice = q
        .done
        .as_deref()
        .and_then(Action::parse)
        .map(|a| format!("Done: {}.", a.name()));
    let html = render::preview(&PreviewPage {
        who: viewer.who(d),
        now: state.clock.now(),
        preview,
        events,
        actions,
        notice,
    });
    page(StatusCode::OK, html)
}

#[derive(Debug, Deserialize, Default)]
pub(super) struct ActionForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    duration: Option<String>,
    #[serde(default)]
    confirm: Option<String>,
    /// A share link's label (`share`), or which link (`unshare`).
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    id: Option<String>,
}

pub(super) async fn act(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((name, action)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Response {
    let d = &state.dashboard;
    let Some(action) = Action::parse(&action) else {
        let text = format!("There is no action {action:?}.");
        return page(
            StatusCode::NOT_FOUND,
            render::message(
                "Not found",
                &Who::Public { can_sign_in: false },
                &text,
                None,
            ),
        );
    };
    let viewer = match viewer(&state, &headers).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let caller = match &viewer {
        Viewer::Person {
            session, caller, ..
        } => {
            if !d.sessions.csrf_ok(session, &form.csrf) {
                let text = "This form is out of date or was not sent from Sandcastle's page; \
                            reload the page and try again.";
                return page(
                    StatusCode::FORBIDDEN,
                    render::message("Refused", &viewer.who(d), text, None),
                );
            }
            caller
        }
        Viewer::Token(caller) => caller,
        Viewer::Public | Viewer::Nobody => return sign_in_first(d, &format!("/previews/{name}")),
    };
    let agent = &state.agent;
    let done = match action {
        Action::Extend => {
            let by = form.duration.as_deref().unwrap_or("4h");
            agent.extend(caller, &name, by).await.map(|e| e.preview)
        }
        Action::Stop => agent.stop(caller, &name).await,
        Action::Wake => agent.wake(caller, &name).await,
        Action::Redeploy => agent.redeploy(caller, &name, None).await,
        Action::Destroy if form.confirm.as_deref() != Some(name.as_str()) => {
            Err(AgentError::invalid(
                "not_confirmed",
                "confirm",
                format!("tick the box to confirm that {name} and its data go"),
            ))
        }
        Action::Destroy => agent.delete(caller, &name).await,
        Action::Share => {
            let body = sandcastle_agent::ShareBody {
                expires_in: form.duration.clone(),
                label: form.label.clone(),
            };
            return match agent.share(caller, &name, &body).await {
                Ok(made) => page(StatusCode::OK, shares::made(&made, &name, &viewer.who(d))),
                Err(e) => page(
                    e.status(),
                    render::message("Not done", &viewer.who(d), &e.to_string(), None),
                ),
            };
        }
        Action::Unshare => {
            let id = form.id.as_deref().unwrap_or_default();
            agent.unshare(caller, &name, id).await
        }
    };
    match done {
        Ok(_) if action == Action::Destroy => Redirect::to("/").into_response(),
        Ok(_) => Redirect::to(&format!("/previews/{name}?done={}", action.name())).into_response(),
        Err(e) => page(
            e.status(),
            render::message("Not done", &viewer.who(d), &e.to_string(), None),
        ),
    }
}
