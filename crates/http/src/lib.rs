//! The HTTP surface, built by one function ([`app`]): the GitHub webhook (pull request events,
//! `/preview` commands, check runs), health probes, Prometheus metrics, the REST API, how a
//! client discovers what to authenticate with ([`discovery`]) and the dashboard people sign in
//! to (whose preview pages GitHub's `log_url` points at); and, on a listener of its own that the
//! ingress controller reaches (the edge listener), the gate's check of every request to a
//! `signedIn` preview ([`gate`]) and the page a visitor to a stopped preview's host sees
//! ([`wake`]). Every body is bounded by its route: the webhook reads its own under its limit,
//! the API under its own after the caller was allowed the operation, the dashboard's forms
//! under [`FORM_LIMIT`].

mod answer;
pub mod api;
mod comments;
pub mod dashboard;
mod deliveries;
pub mod discovery;
pub mod error;
pub mod gate;
mod health;
mod page;
mod pulls;
mod unread;
pub mod wake;
pub mod webhook;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use kube::Client;
use kube::runtime::reflector::Store;
use tower_http::trace::TraceLayer;

pub use deliveries::Deliveries;

use sandcastle_agent::Agent;
use sandcastle_crd::Blueprint;
use sandcastle_domain::Secret;
use sandcastle_domain::clock::Clock;
use sandcastle_github::client::GitHubApp;
use sandcastle_metrics::Metrics;

/// What every handler shares, behind one `Arc`. axum clones the state for every request (into the
/// route's service, and again for each `State` extractor); cloning the parts themselves copied the
/// Kubernetes and GitHub clients (the App's private key twice, wiped again on every drop), about
/// a tenth of a webhook delivery's time. Fields are read through `Deref`.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct Shared {
    pub client: Client,
    /// Sandcastle's namespace (Blueprints and PreviewEnvironments).
    pub home: String,
    /// Webhook secrets: the current one and any being rotated out.
    pub webhook_secrets: Arc<[Secret]>,
    /// Deliveries already handled by this process.
    pub deliveries: Deliveries,
    /// Blueprints, kept in sync by a watch.
    pub blueprints: Store<Blueprint>,
    pub clock: Clock,
    /// The App's client: its id (to know its own comments) and the configuration files of pull
    /// request deliveries.
    pub github: GitHubApp,
    /// Sandcastle's public base URL (links to preview pages).
    pub public_url: String,
    /// An OAuth authorization server whose tokens the cluster accepts, named in the protected
    /// resource metadata (`--authorization-server`).
    pub authorization_server: Option<String>,
    /// The process's metrics: the webhook counts into them, `/metrics` shows them.
    pub metrics: Metrics,
    /// The operations of the API (and MCP) on previews.
    pub agent: Agent,
    /// The dashboard's sign-in, sessions and whether its pages are public.
    pub dashboard: dashboard::Dashboard,
    /// Set once `/readyz` has seen this replica able to record what the webhook receives.
    pub records_checked: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

/// The most bytes a dashboard form may hold (its largest, an action's, is a few hundred).
pub const FORM_LIMIT: usize = 16 * 1024;

/// The whole HTTP surface.
pub fn app(state: AppState, more: Router) -> Router {
    Router::new()
        // The webhook reads its body itself, under its own limit with a JSON error.
        .route(
            "/github/webhook",
            post(webhook::receive).layer(DefaultBodyLimit::disable()),
        )
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route(discovery::METADATA, get(discovery::whole))
        .route(discovery::MCP_METADATA, get(discovery::mcp))
        .route("/docs/api.md", get(discovery::api_doc))
        .route("/docs/mcp.md", get(discovery::mcp_doc))
        .route("/", get(dashboard::index))
        .route("/previews/{name}", get(dashboard::preview))
        .route(
            "/previews/{name}/{action}",
            post(dashboard::act).layer(DefaultBodyLimit::max(FORM_LIMIT)),
        )
        .route("/gate/signin", get(dashboard::gate_signin))
        .route("/login", get(dashboard::login))
        .route("/oauth/callback", get(dashboard::callback))
        .route(
            "/logout",
            post(dashboard::logout).layer(DefaultBodyLimit::max(FORM_LIMIT)),
        )
        .route("/setup", get(dashboard::setup::configured))
        .merge(api::router())
        .with_state(state.clone())
        .merge(more)
        .layer(middleware::from_fn_with_state(
            state,
            discovery::name_the_metadata,
        ))
        .layer(middleware::from_fn(unread::say_close_when_unread))
        .layer(TraceLayer::new_for_http())
}
