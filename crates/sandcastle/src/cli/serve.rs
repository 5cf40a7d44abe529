//! `sandcastle serve`: its flags, and a running Sandcastle made from them — the App from flags or
//! the one `/setup` stored (taken up again when it changes), until SIGTERM or Ctrl-C.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use super::args::{GitHubArgs, KubeArgs, ListenArgs, PreviewArgs, duration_arg};
use crate::controller::Settings;
use crate::domain::Secret;
use crate::domain::clock::Clock;
use crate::github::client::{ClientSettings, GitHubApp};
use crate::github::user::OAuthApp;
use crate::k8s::app_secret::{self, AppCredentials};

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub listen: ListenArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub github: GitHubArgs,
    #[command(flatten)]
    pub previews: PreviewArgs,
    #[command(flatten)]
    pub lifecycle: LifecycleArgs,
    #[command(flatten)]
    pub render: super::args::RenderToolArgs,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
}

/// Previews worked on at once by default (`--max-concurrent-reconciles`).
const DEFAULT_CONCURRENCY: u16 = 0;
const DEFAULT_ROLLOUTS: u16 = sandcastle_controller::context::DEFAULT_ROLLOUTS;

/// Housekeeping and leader election.
#[derive(Debug, Clone, Args)]
pub struct LifecycleArgs {
    /// How often the catch-up resync compares open pull requests with previews (it also runs at
    /// start-up); `0` turns it off. Orphan namespaces are swept at the same pace.
    #[arg(long, env = "SANDCASTLE_RESYNC_INTERVAL", default_value = "10m", value_parser = duration_arg)]
    pub resync_interval: Duration,

    /// How long a namespace Sandcastle made may stay without a PreviewEnvironment before it is
    /// deleted; `0` never deletes.
    #[arg(long, env = "SANDCASTLE_ORPHAN_GRACE", default_value = "1h", value_parser = duration_arg)]
    pub orphan_grace: Duration,

    /// Elect one leader among replicas with a Lease: all serve HTTP, only the leader runs the
    /// controller and housekeeping. Turn off only when exactly one replica runs.
    #[arg(long, env = "SANDCASTLE_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,

    /// Name of the leader Lease in Sandcastle's namespace.
    #[arg(
        long,
        env = "SANDCASTLE_LEASE_NAME",
        default_value = "sandcastle-leader"
    )]
    pub lease_name: String,

    /// How long the leader's Lease lasts without renewal; another replica takes over within
    /// about this long after the leader dies.
    #[arg(long, env = "SANDCASTLE_LEASE_DURATION", default_value = "15s", value_parser = duration_arg)]
    pub lease_duration: Duration,

    /// How many previews (and pull request events) the controller works on at once; the rest
    /// wait in the order they came (`0`: no limit).
    #[arg(long, env = "SANDCASTLE_MAX_CONCURRENT_RECONCILES", default_value_t = DEFAULT_CONCURRENCY)]
    pub max_concurrent_reconciles: u16,

    /// How many new rollouts run at once; the rest wait `Pending`, in the order they were asked
    /// for, showing their place in line (`0`: no limit).
    #[arg(long, env = "SANDCASTLE_MAX_CONCURRENT_ROLLOUTS", default_value_t = DEFAULT_ROLLOUTS)]
    pub max_concurrent_rollouts: u16,

    /// This replica's identity in the Lease (default: the host name, which is the pod name in
    /// Kubernetes, plus a random suffix).
    #[arg(long, env = "SANDCASTLE_IDENTITY")]
    pub identity: Option<String>,
}

/// Sandcastle's off-hours schedule, for Blueprints that set no `schedule`.
#[derive(Debug, Clone, Args)]
pub struct ScheduleArgs {
    /// When running previews of Blueprints without a `schedule` stop: a cron expression of five
    /// fields (`0 20 * * 1-5`: 20:00 on weekdays). Unset: no default schedule.
    #[arg(long, env = "SANDCASTLE_SCHEDULE_STOP", value_parser = cron_arg)]
    pub schedule_stop: Option<String>,

    /// When the previews it stopped wake (`0 7 * * 1-5`). Unset: they stay stopped until a
    /// visit or other activity wakes them.
    #[arg(long, env = "SANDCASTLE_SCHEDULE_WAKE", requires = "schedule_stop", value_parser = cron_arg)]
    pub schedule_wake: Option<String>,

    /// The IANA time zone those expressions are read in (`Europe/Paris`).
    #[arg(long, env = "SANDCASTLE_SCHEDULE_TIME_ZONE", default_value = "UTC", value_parser = zone_arg)]
    pub schedule_time_zone: String,
}

fn cron_arg(s: &str) -> Result<String, String> {
    crate::domain::schedule::CronExpr::parse(s).map(|c| c.as_str().to_owned())
}

fn zone_arg(s: &str) -> Result<String, String> {
    crate::domain::schedule::Zone::parse(s).map(|z| z.name().to_owned())
}

impl ScheduleArgs {
    /// The default schedule, when `--schedule-stop` names one (each part was read by its flag's
    /// parser already).
    pub fn schedule(&self) -> anyhow::Result<Option<crate::domain::schedule::Schedule>> {
        let Some(stop) = &self.schedule_stop else {
            return Ok(None);
        };
        let schedule = crate::domain::schedule::Schedule::new(
            stop,
            self.schedule_wake.as_deref(),
            Some(&self.schedule_time_zone),
        )
        .map_err(|e| anyhow::anyhow!("{}: {}", e.field.flag(), e.reason))?;
        Ok(Some(schedule))
    }
}

impl LifecycleArgs {
    /// The Lease holder identity: `--identity`, or the host name with a random suffix so that a
    /// restarted process never mistakes the previous one's lease for its own.
    pub fn identity(&self) -> String {
        self.identity.clone().unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "sandcastle".to_owned());
            format!("{host}-{:08x}", rand::random::<u32>())
        })
    }
}
/// Controller settings from the flags (all but the App's own credentials).
fn settings_of(args: &ServeArgs) -> Settings {
    let mut settings = Settings::for_namespace(&args.kube.namespace);
    settings.public_url = args.previews.public_url.clone();
    settings.namespace_prefix = args.previews.namespace_prefix.clone();
    settings.default_host = args.previews.default_host.clone();
    settings.ingress_namespace = args.previews.ingress_namespace.clone();
    settings.tombstone_retention = args.previews.tombstone_retention;
    settings.token_lifetime = args.previews.token_max_lifetime;
    settings.api_max_wait = args.previews.api_max_wait;
    settings.mcp_write = args.previews.mcp_write;
    settings.authorization_server = args.previews.authorization_server.clone();
    settings.probe_via = args.previews.probe_via.clone();
    settings.delete_github_environments = args.previews.delete_github_environments;
    settings.public_pages = args.previews.public_pages;
    settings.wake = args.previews.wake_service.clone();
    settings.wake_route = args.previews.wake_route_service.clone();
    settings.cluster_check_interval = args.previews.cluster_check_interval;
    settings.render = args.render.renderer();
    settings.preview_tls = args.previews.edge.preview_tls_secret.clone();
    settings.default_access = args.previews.edge.preview_access;
    settings.gate = args.previews.edge.gate();
    settings.share_lifetime = args.previews.edge.share_max_lifetime;
    settings.oauth = oauth(args, None);
    // Each flag's parser read its part; together they cannot fail.
    settings.schedule = args.schedule.schedule().unwrap_or_default();
    let lifecycle = &args.lifecycle;
    settings.resync = !lifecycle.resync_interval.is_zero();
    if settings.resync {
        settings.housekeeping_interval = lifecycle.resync_interval;
    }
    settings.orphan_grace = Some(lifecycle.orphan_grace).filter(|g| !g.is_zero());
    settings.max_concurrent_reconciles = lifecycle.max_concurrent_reconciles;
    settings.max_concurrent_rollouts = lifecycle.max_concurrent_rollouts;
    settings.leader_election =
        lifecycle
            .leader_election
            .then(|| crate::controller::leader::LeaderElection {
                lease_name: lifecycle.lease_name.clone(),
                identity: lifecycle.identity(),
                lease_duration: lifecycle.lease_duration,
            });
    settings
}

/// Sign-in with GitHub: the OAuth client from the flags, else the stored App's.
fn oauth(args: &ServeArgs, stored: Option<&AppCredentials>) -> Option<OAuthApp> {
    let (id, secret) = match (
        &args.github.github_client_id,
        &args.github.github_client_secret,
    ) {
        (Some(id), Some(secret)) => (id.clone(), secret.clone()),
        _ => {
            let c = stored.filter(|c| !c.client_id.is_empty())?;
            (c.client_id.clone(), c.client_secret.clone())
        }
    };
    Some(OAuthApp {
        client_id: id,
        client_secret: secret,
        web_url: args.github.github_url.clone(),
        api_url: args.github.github_api_url.clone(),
    })
}

/// How often a Sandcastle on a stored App looks for new credentials.
const CREDENTIALS_POLL: Duration = Duration::from_secs(3);

/// Run Sandcastle until SIGTERM or Ctrl-C.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let client = crate::serve::kube_client(&args.kube).await?;
    let settings = settings_of(&args);
    let parts = |github, settings, webhook_secrets| crate::serve::Parts {
        client: client.clone(),
        github,
        settings,
        webhook_secrets,
        listen: args.listen.listen,
        wake_listen: Some(args.listen.wake_listen),
        clock: Clock::system(),
        controller: true,
    };
    if let (Some(app_id), Some(key_file)) = (args.github.app_id, &args.github.private_key_file) {
        let key = std::fs::read_to_string(key_file)
            .with_context(|| format!("reading the GitHub App key {}", key_file.display()))?;
        let github = GitHubApp::new(
            app_id,
            &Secret::new(key),
            &args.github.github_api_url,
            ClientSettings::default(),
        )?;
        let running =
            crate::serve::start(parts(github, settings, args.github.webhook_secret.clone()))
                .await?;
        shutdown_signal().await;
        tracing::info!("shutting down");
        running.shutdown().await;
        return Ok(ExitCode::SUCCESS);
    }

    // The App stored by /setup, or the setup pages until there is one; a changed App is taken
    // up without restarting the process.
    let home = args.kube.namespace.clone();
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        let stored = app_secret::read(&client, &home)
            .await
            .context("reading the stored GitHub App")?;
        let (running, seen) = match &stored {
            None => {
                let setup = crate::serve::SetupParts {
                    client: client.clone(),
                    settings: settings.clone(),
                    web_url: args.github.github_url.clone(),
                    api_url: args.github.github_api_url.clone(),
                    listen: args.listen.listen,
                };
                (crate::serve::start_setup(setup).await?, None)
            }
            Some((creds, version)) => {
                let github = GitHubApp::new(
                    creds.app_id,
                    &creds.private_key,
                    &args.github.github_api_url,
                    ClientSettings::default(),
                )?;
                let mut settings = settings.clone();
                settings.oauth = oauth(&args, Some(creds));
                tracing::info!(app_id = creds.app_id, slug = %creds.slug, "using the stored GitHub App");
                let running = crate::serve::start(parts(
                    github,
                    settings,
                    vec![creds.webhook_secret.clone()],
                ))
                .await?;
                (running, Some(version.clone()))
            }
        };
        tokio::select! {
            () = &mut stop => {
                tracing::info!("shutting down");
                running.shutdown().await;
                return Ok(ExitCode::SUCCESS);
            }
            () = app_secret::changed(&client, &home, seen.as_deref(), CREDENTIALS_POLL) => {
                tracing::info!("the GitHub App's credentials changed: starting again with them");
                running.shutdown().await;
            }
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
