//! The gate's check on the edge listener, `/.sandcastle/gate/{preview}`: the ingress
//! controller (Traefik's forwardAuth) asks it about every request to a `signedIn` preview's
//! routes, sending the request's headers and `X-Forwarded-Host`, `-Uri` and `-Proto`. A 2xx
//! lets the request through with the headers this answer sets (who came in; the request's own
//! `Authorization` and `Cookie` without Sandcastle's credentials); anything else is what the
//! visitor gets: a redirect (to sign in, or in with a cookie) or a refusal saying why — a
//! page for a browser, the one JSON error shape for a program. The decision is
//! `agent::gate`'s.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use super::AppState;
use super::error::ApiError;
use sandcastle_agent::{Entry, Knock};
use sandcastle_domain::edge::{self, SECRET_HEADER, TOKEN_HEADER, USER_HEADER};

fn text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The request the ingress controller asks about, read from its headers.
fn knock<'a>(preview: &'a str, headers: &'a HeaderMap) -> Knock<'a> {
    Knock {
        preview,
        host: text(headers, "x-forwarded-host").unwrap_or_default(),
        uri: text(headers, "x-forwarded-uri").unwrap_or("/"),
        proto: text(headers, "x-forwarded-proto").unwrap_or("http"),
        authorization: text(headers, header::AUTHORIZATION.as_str()),
        token: text(headers, TOKEN_HEADER),
        secret: text(headers, SECRET_HEADER),
        cookies: headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect(),
        wants_page: edge::wants_page(text(headers, header::ACCEPT.as_str())),
    }
}

fn no_store(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn redirect(location: &str, cookie: Option<&str>) -> Response {
    let mut r = StatusCode::FOUND.into_response();
    let h = r.headers_mut();
    if let Ok(l) = HeaderValue::from_str(location) {
        h.insert(header::LOCATION, l);
    }
    if let Some(c) = cookie.and_then(|c| HeaderValue::from_str(c).ok()) {
        h.insert(header::SET_COOKIE, c);
    }
    r
}

/// Asked by the ingress controller about one request to `preview`.
pub(crate) async fn check(
    State(state): State<AppState>,
    Path(preview): Path<String>,
    headers: HeaderMap,
) -> Response {
    let knock = knock(&preview, &headers);
    let wants_page = knock.wants_page;
    let entry = state.agent.enter(&knock).await;
    no_store(answer(entry, wants_page))
}

/// The HTTP form of the gate's decision.
pub fn answer(entry: Entry, wants_page: bool) -> Response {
    match entry {
        Entry::In {
            user,
            authorization,
            cookie,
        } => {
            let mut r = StatusCode::OK.into_response();
            let h = r.headers_mut();
            let mut set = |name: HeaderName, value: Option<String>| {
                if let Some(v) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
                    h.insert(name, v);
                }
            };
            set(HeaderName::from_static(USER_HEADER), Some(user));
            set(header::AUTHORIZATION, authorization);
            set(header::COOKIE, cookie);
            r
        }
        Entry::Go { location, cookie } => redirect(&location, Some(&cookie)),
        Entry::SignIn { location } => redirect(&location, None),
        Entry::Out {
            status,
            code,
            message,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
            if wants_page {
                let page = super::page::shell(title_of(code), &message, None);
                (status, Html(page.into_string())).into_response()
            } else {
                ApiError::new(status, code, message).into_response()
            }
        }
    }
}

fn title_of(code: &str) -> &'static str {
    match code {
        "unknown_preview" | "not_found" => "No preview here",
        "share_link_invalid" => "This link no longer opens the preview",
        "ticket_invalid" => "Sign in again",
        _ => "You cannot open this preview",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_read_from_what_the_ingress_controller_forwards() {
        let mut h = HeaderMap::new();
        h.insert(
            "x-forwarded-host",
            HeaderValue::from_static("42-shop.preview.localhost"),
        );
        h.insert("x-forwarded-uri", HeaderValue::from_static("/a?b=1"));
        h.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        h.append(header::COOKIE, HeaderValue::from_static("a=1"));
        h.append(
            header::COOKIE,
            HeaderValue::from_static("sandcastle_preview=x"),
        );
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        let k = knock("shop-pr-42", &h);
        assert_eq!(k.host, "42-shop.preview.localhost");
        assert_eq!(k.uri, "/a?b=1");
        assert_eq!(k.proto, "https");
        assert_eq!(k.cookies, vec!["a=1", "sandcastle_preview=x"]);
        assert!(k.wants_page);
        assert!(k.token.is_none() && k.secret.is_none());
    }

    #[test]
    fn a_pass_sets_the_forwarded_headers_and_only_those_given() {
        let r = answer(
            Entry::In {
                user: "github:alice".to_owned(),
                authorization: None,
                cookie: Some("a=1".to_owned()),
            },
            false,
        );
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[USER_HEADER], "github:alice");
        assert_eq!(r.headers()[header::COOKIE], "a=1");
        assert!(r.headers().get(header::AUTHORIZATION).is_none());
    }

    #[test]
    fn refusals_are_pages_for_browsers_and_json_for_programs() {
        let out = || Entry::Out {
            status: 401,
            code: "sign_in_required",
            message: "preview x is open to …".to_owned(),
        };
        let r = answer(out(), false);
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        let r = answer(out(), true);
        assert!(
            r.headers()[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        let r = answer(
            Entry::Go {
                location: "/".to_owned(),
                cookie: "sandcastle_preview=v; Path=/".to_owned(),
            },
            true,
        );
        assert_eq!(r.status(), StatusCode::FOUND);
        assert_eq!(r.headers()[header::LOCATION], "/");
        assert!(
            r.headers()[header::SET_COOKIE]
                .to_str()
                .unwrap()
                .starts_with("sandcastle_preview=")
        );
    }
}
