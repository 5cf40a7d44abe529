//! `/gate/signin`: where a preview's gate sends a person who has not signed in. Signed in to
//! the dashboard (with GitHub, the App's OAuth) and able to read the preview's repository, they
//! are sent back to the preview's host with a one-time ticket the gate turns into its cookie;
//! not signed in, they sign in first and come back here; unable to read the repository, they
//! get a page saying why. GitHub is asked here (at most once a minute per person, as the
//! dashboard does), never by the gate afterwards.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::render::{self, Who};
use super::session::{COOKIE, cookie};
use super::{page, sign_in_first};
use crate::AppState;
use sandcastle_domain::edge;
use sandcastle_github::user::SignInError;

#[derive(Debug, Deserialize, Default)]
pub(crate) struct SignInQuery {
    #[serde(default)]
    preview: String,
    /// The URL the person was going to (on the preview's host).
    #[serde(default)]
    rd: String,
}

/// Where the person was going, when it is one of the preview's hosts: scheme, host, path.
fn destination<'a>(rd: &'a str, url: Option<&str>) -> Option<(&'a str, &'a str, &'a str)> {
    let (scheme, rest) = rd.split_once("://")?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let url_host = url?.split_once("://")?.1.trim_end_matches('/');
    let bare = |h: &str| h.split(':').next().unwrap_or_default().to_ascii_lowercase();
    edge::sibling_host(&bare(host), &bare(url_host)).then_some((scheme, host, path))
}

fn refusal(status: StatusCode, title: &str, text: &str) -> Response {
    let who = Who::Public { can_sign_in: true };
    page(status, render::message(title, &who, text, None))
}

pub(crate) async fn signin(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<SignInQuery>,
) -> Response {
    let d = &state.dashboard;
    let Some(pe) = state.agent.live(&q.preview) else {
        let text = "No preview of that name is live: it may have been removed.";
        return refusal(StatusCode::NOT_FOUND, "No such preview", text);
    };
    let url = pe.status.as_ref().and_then(|s| s.url.as_deref());
    let Some((scheme, host, path)) = destination(&q.rd, url) else {
        let text = "That address is not one of this preview's; open the preview's link again.";
        return refusal(StatusCode::BAD_REQUEST, "Not this preview", text);
    };
    let Some(oauth) = &d.oauth else {
        let text = "This preview is open to people who sign in with GitHub, and this Sandcastle \
                    has no GitHub sign-in configured; ask for a share link, or use its token.";
        return refusal(StatusCode::SERVICE_UNAVAILABLE, "Sign-in unavailable", text);
    };
    let back = format!(
        "/gate/signin?{}",
        serde_urlencoded::to_string([("preview", q.preview.as_str()), ("rd", q.rd.as_str())])
            .unwrap_or_default()
    );
    let Some(session) = cookie(&headers, COOKIE).and_then(|v| d.sessions.open(v)) else {
        return Redirect::to(&format!(
            "/login?{}",
            serde_urlencoded::to_string([("next", back.as_str())]).unwrap_or_default()
        ))
        .into_response();
    };
    let access = match d.access(oauth, &session.token).await {
        Ok(a) => a,
        Err(SignInError::Refused(_)) => return sign_in_first(d, &back),
        Err(e) => {
            let text = format!("Sandcastle cannot ask GitHub what you may read: {e}");
            return refusal(StatusCode::BAD_GATEWAY, "GitHub unavailable", &text);
        }
    };
    if !access.reads(&pe.spec.repository) {
        tracing::info!(target: "audit", actor = %format!("github:{}", access.login), action = "enter", preview = %q.preview, result = "refused", via = "sign-in", "preview entry");
        let text = format!(
            "You are signed in as @{}, who cannot read {}, so you cannot open its preview. Ask \
             someone who can for access to the repository, or for a share link.",
            access.login, pe.spec.repository
        );
        return refusal(StatusCode::FORBIDDEN, "No access to this preview", &text);
    }
    let host_only = host
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let ticket = state.agent.gate_keys.ticket(
        &pe,
        &access.login,
        &host_only,
        path,
        state.agent.now_seconds(),
    );
    let to = format!(
        "{scheme}://{host}{}callback?{}",
        edge::GATE_PREFIX,
        serde_urlencoded::to_string([("ticket", ticket.as_str())]).unwrap_or_default()
    );
    Redirect::to(&to).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn people_are_sent_back_only_to_the_previews_hosts() {
        let url = Some("https://42-shop.preview.example.com");
        assert_eq!(
            destination("https://42-shop.preview.example.com/orders?x=1", url),
            Some(("https", "42-shop.preview.example.com", "/orders?x=1"))
        );
        assert_eq!(
            destination("http://admin-42-shop.preview.example.com:8443", url),
            Some(("http", "admin-42-shop.preview.example.com:8443", "/"))
        );
        assert_eq!(destination("https://evil.example.com/", url), None);
        assert_eq!(
            destination("javascript://42-shop.preview.example.com/", url),
            None
        );
        assert_eq!(
            destination("https://42-shop.preview.example.com/", None),
            None
        );
        assert_eq!(destination("no scheme", url), None);
    }
}
