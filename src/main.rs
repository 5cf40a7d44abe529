//! Process entry: parse configuration, set up logging, run the chosen command.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use sandcastle::config::{Cli, Command, GeneratedArgs, LogFormat, ServeArgs};
use sandcastle::controller::Settings;
use sandcastle::domain::Secret;
use sandcastle::domain::clock::Clock;
use sandcastle::github::client::{ClientSettings, GitHubApp};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
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

fn init_tracing(format: LogFormat, directives: &str) {
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
        #[cfg(feature = "demo")]
        Command::Demo(args) => sandcastle::cli::demo::run(args).await,
        #[cfg(not(feature = "demo"))]
        Command::Demo(_) => anyhow::bail!(
            "this build of Sandcastle has no demo (it was built without the `demo` feature, as \
             shipped builds are); from a checkout, run `cargo run -- demo`"
        ),
        Command::Crds(args) => generated(
            &sandcastle::crd::definitions_yaml()?,
            &args,
            "the CRDs the code generates",
            "crds",
        ),
        Command::Rbac(args) => generated(
            &sandcastle::k8s::rbac::rules_yaml()?,
            &args,
            "the RBAC rules the code needs",
            "rbac",
        ),
        Command::Openapi(args) => generated(
            &sandcastle::http::api::openapi_json(),
            &args,
            "the OpenAPI document the code generates",
            "openapi",
        ),
        Command::Render(args) => sandcastle::cli::render::run(&args).await,
        Command::Previews(args) => sandcastle::cli::previews::run(*args).await,
        Command::Mcp(args) => sandcastle::cli::mcp::run(args).await,
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let client = sandcastle::serve::kube_client(&args.kube).await?;
    let key = std::fs::read_to_string(&args.github.private_key_file).with_context(|| {
        format!(
            "reading the GitHub App key {}",
            args.github.private_key_file.display()
        )
    })?;
    let github = GitHubApp::new(
        args.github.app_id,
        &Secret::new(key),
        &args.github.github_api_url,
        ClientSettings::default(),
    )?;
    let mut settings = Settings::for_namespace(&args.kube.namespace);
    settings.public_url = args.previews.public_url.clone();
    settings.namespace_prefix = args.previews.namespace_prefix.clone();
    settings.default_host = args.previews.default_host.clone();
    settings.ingress_namespace = args.previews.ingress_namespace.clone();
    settings.tombstone_retention = args.previews.tombstone_retention;
    settings.token_lifetime = args.previews.token_max_lifetime;
    settings.api_max_wait = args.previews.api_max_wait;
    settings.mcp_write = args.previews.mcp_write;
    settings.probe_via = args.previews.probe_via.clone();
    settings.delete_github_environments = args.previews.delete_github_environments;
    settings.public_pages = args.previews.public_pages;
    settings.oauth = match (
        &args.github.github_client_id,
        &args.github.github_client_secret,
    ) {
        (Some(id), Some(secret)) => Some(sandcastle::github::user::OAuthApp {
            client_id: id.clone(),
            client_secret: secret.clone(),
            web_url: args.github.github_url.clone(),
            api_url: args.github.github_api_url.clone(),
        }),
        _ => None,
    };
    let lifecycle = &args.lifecycle;
    settings.resync = !lifecycle.resync_interval.is_zero();
    if settings.resync {
        settings.housekeeping_interval = lifecycle.resync_interval;
    }
    settings.orphan_grace = Some(lifecycle.orphan_grace).filter(|g| !g.is_zero());
    settings.leader_election =
        lifecycle
            .leader_election
            .then(|| sandcastle::controller::leader::LeaderElection {
                lease_name: lifecycle.lease_name.clone(),
                identity: lifecycle.identity(),
                lease_duration: lifecycle.lease_duration,
            });
    let running = sandcastle::serve::start(sandcastle::serve::Parts {
        client,
        github,
        settings,
        webhook_secrets: args.github.webhook_secret.clone(),
        listen: args.listen.listen,
        clock: Clock::system(),
        controller: true,
    })
    .await?;
    shutdown_signal().await;
    tracing::info!("shutting down");
    running.shutdown().await;
    Ok(ExitCode::SUCCESS)
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
