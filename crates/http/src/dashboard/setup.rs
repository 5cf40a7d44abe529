//! `/setup`: creating Sandcastle's GitHub App in three clicks with GitHub's manifest flow. A
//! Sandcastle started without an App serves only these pages (and health; its webhook answers
//! 503): choose the account or organization, post the manifest filled with this Sandcastle's
//! public URL to GitHub, and come back with a code that is converted into the App's credentials
//! and stored in a Secret, which `sandcastle serve` then starts using. A `state` cookie guards
//! the way back; a configured Sandcastle refuses a second setup, saying how to replace its App.

use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use kube::Client;
use maud::html;
use serde::Deserialize;
use serde_json::json;

use super::render::{Who, layout};
use super::session::{Sessions, cookie, random_state};
use sandcastle_github::manifest::{self, ManifestError};
use sandcastle_kube::app_secret::{self, AdoptError, AppCredentials, StoreError};

const STATE_COOKIE: &str = "sandcastle_setup_state";

/// What the setup pages need.
#[derive(Clone)]
pub struct SetupState {
    pub client: Client,
    /// Sandcastle's namespace, where the Secret goes.
    pub home: String,
    pub public_url: String,
    /// GitHub's web pages (`https://github.com`) and API.
    pub web_url: String,
    pub api_url: String,
    /// Cookie attributes (only the `Secure` flag matters here).
    pub sessions: Sessions,
}

impl std::fmt::Debug for SetupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetupState")
            .field("home", &self.home)
            .field("public_url", &self.public_url)
            .finish_non_exhaustive()
    }
}

const NOBODY: Who = Who::Setup;

fn page(status: StatusCode, title: &str, body: maud::Markup) -> Response {
    (
        status,
        Html(layout(title, &NOBODY, false, body).into_string()),
    )
        .into_response()
}

/// The pages of a Sandcastle that has no App yet.
pub fn router(state: SetupState) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/setup") }))
        .route("/setup", get(start))
        .route("/setup/manifest", get(manifest_form))
        .route("/setup/callback", get(callback))
        .route(
            "/healthz",
            get(|| async { axum::Json(json!({"status": "ok"})) }),
        )
        .route(
            "/readyz",
            get(|| async { axum::Json(json!({"status": "setup"})) }),
        )
        .route("/github/webhook", post(not_configured))
        .with_state(state)
        .layer(axum::middleware::from_fn(
            crate::unread::say_close_when_unread,
        ))
}

/// How to replace the App of a Sandcastle that has one (its id, when known): the command shown
/// as code.
fn already_set_up(app_id: Option<u64>) -> maud::Markup {
    html! {
        p {
            @if let Some(id) = app_id {
                "Sandcastle is GitHub App " (id) " already. "
            } @else {
                "An App is configured already (Secret " code { (app_secret::NAME) } "). "
            }
            "To replace it, an administrator runs " code { "sandcastle setup --force" }
            " (or deletes Secret " code { (app_secret::NAME) } " and restarts the setup)."
        }
    }
}

/// `/setup` on a Sandcastle that has its App: refused, saying how to replace it.
pub(crate) async fn configured(State(state): State<crate::AppState>) -> Response {
    page(
        StatusCode::CONFLICT,
        "Already set up",
        already_set_up(Some(state.github.app_id())),
    )
}

async fn not_configured() -> Response {
    let body = json!({"error": {"code": "not_configured",
        "message": "Sandcastle has no GitHub App yet: open /setup to create it"}});
    (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
}

async fn start() -> Response {
    page(
        StatusCode::OK,
        "Set up Sandcastle",
        html! {
            p { "Sandcastle needs a GitHub App of its own. GitHub makes it from Sandcastle's manifest: \
                 which permissions and events it needs, and where its webhook goes." }
            form method="get" action="/setup/manifest" {
                p {
                    label for="organization" { "Organization" }
                    input id="organization" name="organization" placeholder="acme" autocomplete="off";
                    " " span.muted { "(leave empty to create it on your personal account)" }
                }
                p {
                    label for="name" { "App name" }
                    input id="name" name="name" value="Sandcastle" required;
                }
                button.primary type="submit" id="continue" { "Continue" }
            }
        },
    )
}

#[derive(Debug, Deserialize, Default)]
pub(super) struct ManifestQuery {
    #[serde(default)]
    organization: String,
    #[serde(default)]
    name: String,
}

async fn manifest_form(
    State(state): State<SetupState>,
    Query(q): Query<ManifestQuery>,
) -> Response {
    let name = Some(q.name.trim()).filter(|n| !n.is_empty());
    let manifest = match manifest::manifest(&state.public_url, name) {
        Ok(m) => m,
        Err(e) => {
            return page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Setup",
                html! { p { (e.to_string()) } },
            );
        }
    };
    let nonce = random_state();
    let org = Some(q.organization.trim()).filter(|o| !o.is_empty());
    let action = manifest::new_app_url(&state.web_url, org, &nonce);
    let cookie = state
        .sessions
        .cookie(STATE_COOKIE, &nonce, Duration::from_secs(3600));
    let whose = org.map_or_else(
        || "your personal account".to_owned(),
        |o| format!("organization {o}"),
    );
    let body = html! {
        p { "GitHub will create the App on " strong { (whose) } ", then send you back here." }
        details { summary { "The manifest" } pre { (serde_json::to_string_pretty(&manifest).unwrap_or_default()) } }
        form method="post" action=(action) {
            input type="hidden" name="manifest" value=(manifest.to_string());
            button.primary type="submit" id="create" { "Create the App on GitHub" }
        }
    };
    (
        [(header::SET_COOKIE, cookie)],
        page(StatusCode::OK, "Create the GitHub App", body),
    )
        .into_response()
}

#[derive(Debug, Deserialize, Default)]
pub(super) struct CallbackQuery {
    #[serde(default)]
    code: String,
    #[serde(default)]
    state: String,
}

async fn callback(
    State(state): State<SetupState>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let expected = cookie(&headers, STATE_COOKIE).unwrap_or_default();
    if expected.is_empty() || expected != q.state || q.code.is_empty() {
        let body = html! {
            p { "This setup was not started here, or took too long." }
            p { a href="/setup" { "Start again" } }
        };
        return page(StatusCode::BAD_REQUEST, "Setup refused", body);
    }
    let made = make_app(&state.client, &state.home, &state.api_url, &q.code, false).await;
    let (app, install) = match made {
        Ok(made) => made,
        Err(AdoptError::Store(StoreError::Exists)) => {
            return page(StatusCode::CONFLICT, "Already set up", already_set_up(None));
        }
        Err(AdoptError::Store(StoreError::Api(e))) => {
            let text = format!(
                "storing the App's credentials in Secret {}: {e}",
                app_secret::NAME
            );
            return page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Setup failed",
                html! { p { (text) } },
            );
        }
        Err(AdoptError::Convert(e @ (ManifestError::Refused(_) | ManifestError::BadUrl(_)))) => {
            return page(
                StatusCode::BAD_REQUEST,
                "Setup failed",
                html! { p { (e.to_string()) } },
            );
        }
        Err(AdoptError::Convert(e)) => {
            return page(
                StatusCode::BAD_GATEWAY,
                "Setup failed",
                html! { p { (e.to_string()) } },
            );
        }
    };
    let install = install.as_str();
    let clear = state.sessions.cookie(STATE_COOKIE, "", Duration::ZERO);
    let body = html! {
        p { "Sandcastle is now the GitHub App " strong { (app.slug) } " (id " (app.app_id) "); it starts using it in a few seconds." }
        p { a.button href=(install) id="install" { "Install it on your repositories" } }
    };
    (
        [(header::SET_COOKIE, clear)],
        page(StatusCode::OK, "GitHub App created", body),
    )
        .into_response()
}

/// Make the App from GitHub's manifest `code` and store it in Sandcastle's namespace (refused
/// before the code is spent when one is stored and `force` is not given); the App and where to
/// install it. `/setup/callback` and `sandcastle setup --code` both come here.
pub async fn make_app(
    client: &Client,
    namespace: &str,
    api_url: &str,
    code: &str,
    force: bool,
) -> Result<(AppCredentials, String), AdoptError<ManifestError>> {
    app_secret::adopt(client, namespace, force, || async {
        let app = manifest::convert(api_url, code).await?;
        let install = format!("{}/installations/new", app.html_url.trim_end_matches('/'));
        let creds = AppCredentials {
            app_id: app.id,
            slug: app.slug,
            private_key: app.pem,
            webhook_secret: app.webhook_secret,
            client_id: app.client_id,
            client_secret: app.client_secret,
        };
        tracing::info!(target: "audit", action = "setup", app_id = creds.app_id, slug = %creds.slug, "GitHub App created");
        Ok((creds, install))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_that_replaces_the_app_is_code() {
        for html in [already_set_up(Some(42)), already_set_up(None)].map(|m| m.into_string()) {
            assert!(
                html.contains("<code>sandcastle setup --force</code>"),
                "{html}"
            );
            assert!(!html.contains('`'), "{html}");
        }
        assert!(
            already_set_up(Some(42))
                .into_string()
                .contains("GitHub App 42 already")
        );
    }
}
