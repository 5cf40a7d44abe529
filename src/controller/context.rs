//! What every reconcile needs: clients, settings and the clock.

use std::time::Duration;

use kube::Client;

use super::clock::Clock;
use crate::github::client::GitHubApp;
use crate::k8s::apply::Resolver;

/// Controller settings, from configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Sandcastle's own namespace: Blueprints and PreviewEnvironments live here.
    pub home: String,
    /// Prefix of preview namespace names (may be empty).
    pub namespace_prefix: String,
    /// Host template for previews whose Blueprint sets none.
    pub default_host: String,
    /// Public base URL of Sandcastle (for `log_url` links to its preview pages).
    pub public_url: String,
    /// Namespace of the ingress controller, allowed through previews' NetworkPolicies.
    pub ingress_namespace: String,
    /// How long a torn-down preview stays as a tombstone before the resource is deleted.
    pub tombstone_retention: Duration,
    /// How often a Ready preview is re-applied to repair drift.
    pub drift_interval: Duration,
    /// How soon to look again while a rollout is in progress (watches usually wake it sooner).
    pub progress_interval: Duration,
}

impl Settings {
    /// Settings suitable for tests and the demo: home namespace `home`, short intervals.
    pub fn for_namespace(home: &str) -> Self {
        Self {
            home: home.to_owned(),
            namespace_prefix: String::new(),
            default_host: "{{host}}-{{preview}}.preview.localhost".to_owned(),
            public_url: "http://localhost:8080".to_owned(),
            ingress_namespace: "ingress-nginx".to_owned(),
            tombstone_retention: Duration::from_secs(72 * 3600),
            drift_interval: Duration::from_secs(600),
            progress_interval: Duration::from_secs(2),
        }
    }
}

/// Shared state of the controller.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    pub resolver: Resolver,
    pub github: GitHubApp,
    pub settings: Settings,
    pub clock: Clock,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Context {
    pub fn new(client: Client, github: GitHubApp, settings: Settings, clock: Clock) -> Self {
        Self {
            resolver: Resolver::new(client.clone()),
            client,
            github,
            settings,
            clock,
        }
    }
}
