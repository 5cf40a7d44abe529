//! Running a parsed command line: logging set up, then the chosen command (`serve` assembled
//! from its flags here).

use std::process::ExitCode;

use crate::config::{Cli, Command, GeneratedArgs, LogFormat, ServeArgs};
use crate::controller::Settings;
use crate::domain::Secret;
use crate::domain::clock::Clock;
use crate::github::client::{ClientSettings, GitHubApp};
use crate::github::user::OAuthApp;
use crate::k8s::app_secret::{self, AppCredentials};
use anyhow::Context;
use std::time::Duration;

/// Set up logging as `cli` asks and run its command.
pub async fn main(cli: Cli) -> ExitCode {
    // The demo narrates on stdout, render prints YAML, previews answers there and mcp speaks
    // MCP there; keep their logs (on stderr) to warnings unless asked.
    let default_level = if matches!(
        cli.command,
        Command::Demo(_) | Command::Render(_) | Command::Previews(_) | Command::Mcp(_)
    ) {
        "warn"
    } else {
        "info"
    };
    init_tracing(cli.log_format, cli.log.as_deref().unwrap_or(default_level));
    match run(cli.command).await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

pub fn init_tracing(format: LogFormat, directives: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(directives).unwrap_or_else(|e| {
        eprintln!("warning: log filter {directives:?} is not valid ({e}); using info");
        tracing_subscriber::EnvFilter::new("info")
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(args) => serve(*args).await,
        Command::Demo(_) => anyhow::bail!(
            "the demo is not part of the server: from a checkout of Sandcastle, run `cargo run -- demo`"
        ),
        Command::Crds(args) => generated(
            &crate::crd::definitions_yaml()?,
            &args,
            "the CRDs the code generates",
            "crds",
        ),
        Command::Rbac(args) if args.target => generated(
            &crate::k8s::rbac::target_yaml()?,
            &args.generated,
            "the RBAC a target cluster needs",
            "rbac --target",
        ),
        Command::Rbac(args) => generated(
            &crate::k8s::rbac::rules_yaml()?,
            &args.generated,
            "the RBAC rules the code needs",
            "rbac",
        ),
        Command::Openapi(args) => generated(
            &crate::http::api::openapi_json(),
            &args,
            "the OpenAPI document the code generates",
            "openapi",
        ),
        Command::Render(args) => crate::cli::render::run(&args).await,
        Command::Previews(args) => crate::cli::previews::run(*args).await,
        Command::Mcp(args) => crate::cli::mcp::run(args).await,
        Command::Setup(args) => crate::cli::setup::run(&args).await,
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
    settings.cluster_check_interval = args.previews.cluster_check_interval;
    settings.oauth = oauth(args, None);
    let lifecycle = &args.lifecycle;
    settings.resync = !lifecycle.resync_interval.is_zero();
    if settings.resync {
        settings.housekeeping_interval = lifecycle.resync_interval;
    }
    settings.orphan_grace = Some(lifecycle.orphan_grace).filter(|g| !g.is_zero());
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

async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
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

/// Print a generated file, or with `--check` compare it with the copy on disk.
fn generated(
    yaml: &str,
    args: &GeneratedArgs,
    what: &str,
    command: &str,
) -> anyhow::Result<ExitCode> {
    let Some(path) = &args.check else {
        print!("{yaml}");
        return Ok(ExitCode::SUCCESS);
    };
    let on_disk =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if on_disk == yaml {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "{} differs from {what}; run `sandcastle {command} > {}`",
            path.display(),
            path.display()
        );
        Ok(ExitCode::FAILURE)
    }
}
