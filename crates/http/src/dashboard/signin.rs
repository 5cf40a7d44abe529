//! Signing in to the dashboard with GitHub (the App's OAuth): `/login` sends the browser to
//! GitHub with a `state` cookie, `/oauth/callback` turns GitHub's code into a sealed session,
//! `/logout` ends it (a POST carrying the session's CSRF token).

use std::time::Duration;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::render::{self, Who};
use super::session::random_state;
use super::session::{COOKIE, LIFETIME, STATE_COOKIE, cookie};
use super::{page, sign_in_first};
use crate::AppState;
use sandcastle_github::user::SignInError;

#[derive(Debug, Deserialize, Default)]
pub(crate) struct LoginQuery {
    #[serde(default)]
    next: Option<String>,
}

/// A path on this site to go back to after signing in (never another site).
fn local(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.to_owned(),
        _ => "/".to_owned(),
    }
}

fn callback_url(state: &AppState) -> String {
    format!("{}/oauth/callback", state.public_url.trim_end_matches('/'))
}

pub(crate) async fn login(State(state): State<AppState>, Query(q): Query<LoginQuery>) -> Response {
    let d = &state.dashboard;
    let Some(oauth) = &d.oauth else {
        return sign_in_first(d, "/");
    };
    let nonce = random_state();
    let next = local(q.next.as_deref());
    let remembered = format!(
        "{nonce}|{}",
        percent_encoding::utf8_percent_encode(&next, percent_encoding::NON_ALPHANUMERIC)
    );
    let cookie = d
        .sessions
        .cookie(STATE_COOKIE, &remembered, Duration::from_secs(600));
    let to = oauth.authorize_url(&callback_url(&state), &nonce);
    ([(header::SET_COOKIE, cookie)], Redirect::to(&to)).into_response()
}

#[derive(Debug, Deserialize, Default)]
pub(crate) struct CallbackQuery {
    #[serde(default)]
    code: String,
    #[serde(default)]
    state: String,
}

pub(crate) async fn callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let d = &state.dashboard;
    let Some(oauth) = &d.oauth else {
        return sign_in_first(d, "/");
    };
    let who = Who::Public { can_sign_in: true };
    let remembered = cookie(&headers, STATE_COOKIE).unwrap_or_default();
    let (nonce, next) = remembered.split_once('|').unwrap_or(("", ""));
    if nonce.is_empty() || nonce != q.state || q.code.is_empty() {
        let text = "This sign-in was not started here, or took too long; sign in again.";
        return page(
            StatusCode::BAD_REQUEST,
            render::message("Sign-in refused", &who, text, Some("/")),
        );
    }
    let next = percent_encoding::percent_decode_str(next).decode_utf8_lossy();
    let signed_in = async {
        let token = oauth.exchange(&q.code, &callback_url(&state)).await?;
        let access = d.access(oauth, token.expose()).await?;
        Ok::<_, SignInError>(d.sessions.start(&access.login, &token))
    };
    match signed_in.await {
        Ok(session) => {
            let set = d
                .sessions
                .cookie(COOKIE, &d.sessions.seal(&session), LIFETIME);
            let clear = d.sessions.cookie(STATE_COOKIE, "", Duration::ZERO);
            tracing::info!(target: "audit", actor = %format!("github:{}", session.login), action = "sign-in", via = "dashboard", "signed in");
            (
                axum::response::AppendHeaders([
                    (header::SET_COOKIE, set),
                    (header::SET_COOKIE, clear),
                ]),
                Redirect::to(&local(Some(&next))),
            )
                .into_response()
        }
        Err(e) => page(
            StatusCode::BAD_GATEWAY,
            render::message("Sign-in failed", &who, &e.to_string(), Some("/")),
        ),
    }
}

#[derive(Debug, Deserialize, Default)]
pub(crate) struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

pub(crate) async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Response {
    let d = &state.dashboard;
    let session = cookie(&headers, COOKIE).and_then(|v| d.sessions.open(v));
    if let Some(s) = &session
        && !d.sessions.csrf_ok(s, &form.csrf)
    {
        let text = "This form is out of date; reload the page and try again.";
        return page(
            StatusCode::FORBIDDEN,
            render::message("Refused", &Who::Public { can_sign_in: true }, text, None),
        );
    }
    let clear = d.sessions.cookie(COOKIE, "", Duration::ZERO);
    ([(header::SET_COOKIE, clear)], Redirect::to("/")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_sign_in_people_go_back_only_to_this_site() {
        assert_eq!(local(Some("/previews/shop-pr-1")), "/previews/shop-pr-1");
        assert_eq!(local(Some("//evil.example.com/")), "/");
        assert_eq!(local(Some("https://evil.example.com/")), "/");
        assert_eq!(local(Some("/\\evil.example.com")), "/");
        assert_eq!(local(None), "/");
    }
}
