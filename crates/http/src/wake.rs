//! The edge listener (called the wake listener in its flags): what a visitor to a stopped
//! preview's host sees, whatever the path, and the gate's check ([`super::gate`]). The
//! ingress controller sends a stopped preview's hosts here (see `domain::wake`); the `Host`
//! header says which preview, and only that preview is ever looked at or woken. A host no live
//! preview has gets 404. The page reloads itself until the app answers in its place: the
//! Ingress points back at the app once the preview is Ready, so the reload lands on it. It
//! works without JavaScript and shows no workload names or messages: the host is public.
//!
//! This listener serves nothing else (no API, no webhook, no dashboard), so exposing it to the
//! ingress controller exposes nothing else.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use maud::Markup;
use serde_json::json;

use super::AppState;
use sandcastle_agent::Visited;
use sandcastle_domain::wake::Visit;

/// Seconds between the page's reloads while the preview starts.
pub const RELOAD_SECS: u32 = 2;

/// The edge listener's whole surface: the gate's check (`/.sandcastle/gate/{preview}`, asked
/// by the ingress controller), and the waking page on every other path.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/.sandcastle/gate/{preview}",
            axum::routing::any(super::gate::check),
        )
        .fallback(visit)
        .with_state(state)
        .layer(axum::middleware::from_fn(
            super::unread::say_close_when_unread,
        ))
}

/// The host a request names: its `Host` header, or the authority of an absolute URI.
fn host_of(headers: &HeaderMap, uri: &Uri) -> String {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| uri.authority().map(|a| a.to_string()))
        .unwrap_or_default()
}

async fn visit(State(state): State<AppState>, headers: HeaderMap, uri: Uri) -> Response {
    let visited = state.agent.visit(&host_of(&headers, &uri)).await;
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("application/json") && !a.contains("text/html"));
    answer(&visited, wants_json)
}

/// The state's name in the JSON answer.
fn state_name(visit: &Visit) -> &'static str {
    match visit {
        Visit::Unknown => "unknown",
        Visit::Wake => "waking",
        Visit::StoppedOnRequest => "stopped",
        Visit::Starting(_) => "starting",
        Visit::Ready => "ready",
        Visit::Failed(_) => "failed",
    }
}

/// The answer to a visit: its status, headers and body (JSON or the page).
pub fn answer(visited: &Visited, json: bool) -> Response {
    let status = match visited.visit {
        Visit::Unknown => StatusCode::NOT_FOUND,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    let reload = reload_after(&visited.visit);
    let mut response = if json {
        let body = match visited.visit {
            Visit::Unknown => json!({"error": {"code": "unknown_host",
                "message": "no preview is served at this host"}}),
            _ => json!({"preview": visited.preview, "state": state_name(&visited.visit)}),
        };
        (status, axum::Json(body)).into_response()
    } else {
        (status, Html(page(&visited.visit, reload).into_string())).into_response()
    };
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(secs) = reload {
        h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if let Some(name) = visited
        .preview
        .as_deref()
        .and_then(|n| HeaderValue::from_str(n).ok())
    {
        h.insert("x-sandcastle-preview", name);
    }
    response
}

/// How soon the page loads itself again; `None` when waiting would change nothing.
fn reload_after(visit: &Visit) -> Option<u32> {
    match visit {
        Visit::Wake | Visit::Starting(_) => Some(RELOAD_SECS),
        Visit::Ready => Some(1),
        Visit::Unknown | Visit::StoppedOnRequest | Visit::Failed(_) => None,
    }
}

fn page(visit: &Visit, reload: Option<u32>) -> Markup {
    let (title, line) = match visit {
        Visit::Unknown => (
            "No preview here",
            "No preview is served at this address. It may have been removed when its pull request closed or expired.",
        ),
        Visit::Wake => (
            "Waking up this preview",
            "It was stopped after a while without activity, and your visit is starting it again. This page reloads into it once it is ready.",
        ),
        Visit::Starting(_) => (
            "Starting this preview",
            "Its services are starting. This page reloads into it once it is ready.",
        ),
        Visit::Ready => ("Ready", "The preview is ready; loading it."),
        Visit::StoppedOnRequest => (
            "This preview is stopped",
            "Someone stopped it on purpose, so a visit does not start it. Comment /preview wake on its pull request to start it again.",
        ),
        Visit::Failed(_) => (
            "This preview could not start",
            "Its pull request says why, and a push or /preview deploys it again.",
        ),
    };
    super::page::shell(title, line, reload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visited(preview: Option<&str>, visit: Visit) -> Visited {
        Visited {
            preview: preview.map(str::to_owned),
            visit,
        }
    }

    async fn body(r: Response) -> String {
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn an_unknown_host_gets_404_and_names_no_preview() {
        let r = answer(&visited(None, Visit::Unknown), false);
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert!(r.headers().get("x-sandcastle-preview").is_none());
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
        let text = body(r).await;
        assert!(text.contains("No preview here"), "{text}");
        assert!(!text.contains("http-equiv"), "no reload: {text}");
        let r = answer(&visited(None, Visit::Unknown), true);
        assert_eq!(
            body(r).await,
            r#"{"error":{"code":"unknown_host","message":"no preview is served at this host"}}"#
        );
    }

    #[tokio::test]
    async fn a_waking_page_reloads_itself_and_is_never_cached() {
        let r = answer(&visited(Some("shop-pr-1"), Visit::Wake), false);
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], "2");
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-store");
        assert_eq!(r.headers()["x-sandcastle-preview"], "shop-pr-1");
        let text = body(r).await;
        assert!(
            text.contains(r#"<meta http-equiv="refresh" content="2">"#),
            "{text}"
        );
        assert!(text.contains("Waking up this preview"), "{text}");
    }

    #[tokio::test]
    async fn the_page_shows_no_message_of_the_preview() {
        let secret_ish = "job seed failed: psql -U admin".to_owned();
        for v in [
            Visit::Failed(secret_ish.clone()),
            Visit::Starting(secret_ish.clone()),
        ] {
            let text = body(answer(&visited(Some("p"), v), false)).await;
            assert!(!text.contains("psql"), "{text}");
        }
        let r = answer(&visited(Some("p"), Visit::StoppedOnRequest), true);
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
        assert_eq!(body(r).await, r#"{"preview":"p","state":"stopped"}"#);
    }
}
