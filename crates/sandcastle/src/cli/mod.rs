//! Sandcastle's command line, the only reader of flags and environment: the global flags, and
//! one subcommand per job, each with its flags beside its `run` — `serve`, the generated files
//! (`generated`: crds, rbac, openapi), `render`, `previews`, `mcp` and `setup` — over the flag
//! groups they share (`args`). Every setting is a flag with an environment fallback; the
//! README's configuration table mirrors their doc comments.

pub mod args;
pub mod generated;
pub mod mcp;
pub mod previews;
pub mod render;
pub mod serve;
pub mod setup;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Args, Parser, Subcommand, ValueEnum};

use generated::{GeneratedArgs, RbacArgs};

#[derive(Debug, Parser)]
#[command(
    name = "sandcastle",
    version,
    about = "Preview environments for every pull request, on Kubernetes"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,

    #[command(subcommand)]
    pub command: Command,
}

/// The flags every command takes.
#[derive(Debug, Clone, Args)]
pub struct Global {
    /// Log format.
    #[arg(long, env = "SANDCASTLE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    /// Log filter in `tracing` syntax (e.g. `info`, `sandcastle=debug`); by default `info`, or
    /// `warn` for the commands that print their own output (`render`, `previews`, `mcp`, `demo`).
    #[arg(long, env = "SANDCASTLE_LOG", global = true)]
    pub log: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run Sandcastle: the webhook receiver, health probes and the controller.
    Serve(Box<serve::ServeArgs>),
    /// Print Sandcastle's CustomResourceDefinitions as YAML.
    Crds(GeneratedArgs),
    /// Print the RBAC rules Sandcastle needs, as the Helm chart's `files/rbac.yaml` holds them
    /// (`--target`: what to apply in another cluster, `files/target-cluster.yaml`).
    Rbac(RbacArgs),
    /// Print the OpenAPI document of the REST API, as `docs/openapi.json` holds it.
    Openapi(GeneratedArgs),
    /// Print the objects a pull request's preview would get, as YAML in apply order (pipe it into
    /// `kubectl diff -f -`). Applies nothing; exits non-zero when the blueprint is refused.
    Render(Box<render::RenderArgs>),
    /// Operate previews through a Sandcastle server's API, as an agent or a person would.
    Previews(Box<previews::args::PreviewsArgs>),
    /// An MCP server on stdin/stdout for a local agent (Claude Code, Cursor, Codex), calling a
    /// Sandcastle server's API with a token.
    Mcp(mcp::McpArgs),
    /// Create Sandcastle's GitHub App with GitHub's manifest flow: print the manifest and where to
    /// post it, or, with `--code`, turn GitHub's code into the App and store it for `serve`.
    Setup(Box<setup::SetupArgs>),
}

impl Command {
    /// Whether the command prints its own output on stdout (its logs stay at warnings).
    pub fn prints(&self) -> bool {
        matches!(self, Self::Render(_) | Self::Previews(_) | Self::Mcp(_))
    }

    /// Run the command.
    pub async fn run(self) -> anyhow::Result<ExitCode> {
        match self {
            Self::Serve(args) => serve::run(*args).await,
            Self::Crds(args) => generated::crds(&args),
            Self::Rbac(args) => generated::rbac(&args),
            Self::Openapi(args) => generated::openapi(&args),
            Self::Render(args) => render::run(&args).await,
            Self::Previews(args) => previews::run(*args).await,
            Self::Mcp(args) => mcp::run(args).await,
            Self::Setup(args) => setup::run(&args).await,
        }
    }
}

/// The server's process: parse the command line, set up logging, run the command.
pub async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e)
            if e.kind() == ErrorKind::InvalidSubcommand
                && std::env::args().nth(1).as_deref() == Some("demo") =>
        {
            eprintln!(
                "error: the demo is not part of the server people deploy: from a checkout of \
                 Sandcastle, run `cargo run -- demo`"
            );
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    init_tracing(&cli.global, cli.command.prints());
    finish(cli.command.run().await)
}

/// Set up logging as `global` asks: by default `info`, `warn` for a command that `prints`.
pub fn init_tracing(global: &Global, prints: bool) {
    let directives = global
        .log
        .as_deref()
        .unwrap_or(if prints { "warn" } else { "info" });
    let filter = tracing_subscriber::EnvFilter::try_new(directives).unwrap_or_else(|e| {
        eprintln!("warning: log filter {directives:?} is not valid ({e}); using info");
        tracing_subscriber::EnvFilter::new("info")
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match global.log_format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

/// A command's outcome as the process's exit code (an error printed first).
pub fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::args::{duration_arg, issuer_arg};
    use super::*;
    use crate::domain::Secret;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "[redacted]");
        assert!(!format!("{s:?}").contains("hunter2"));
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn a_short_webhook_secret_is_refused() {
        let serve = |secret: &str| {
            Cli::try_parse_from([
                "sandcastle",
                "serve",
                "--app-id",
                "1",
                "--private-key-file",
                "k.pem",
                "--webhook-secret",
                secret,
            ])
        };
        let refused = serve("current-is-long-enough,short")
            .unwrap_err()
            .to_string();
        assert!(refused.contains("at least 16 characters"), "{refused}");
        assert!(serve("").is_err());
        assert!(serve("0123456789abcdef").is_ok());
    }

    #[test]
    fn an_authorization_server_is_an_issuer_url() {
        assert_eq!(
            issuer_arg("https://login.example.com/realms/dev/").as_deref(),
            Ok("https://login.example.com/realms/dev")
        );
        assert!(issuer_arg("http://127.0.0.1:5556").is_ok());
        for bad in [
            "login.example.com",
            "https://",
            "https://x?y=1",
            "https://x#f",
            "ftp://x",
        ] {
            assert!(issuer_arg(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cli_parses() {
        let cli = Cli::try_parse_from(["sandcastle", "crds"]).unwrap();
        assert!(matches!(cli.command, Command::Crds(_)));
        let cli = Cli::try_parse_from([
            "sandcastle",
            "render",
            "--blueprint",
            "a.yaml",
            "--blueprint",
            "b.yaml",
            "--repo",
            "acme/shop",
            "--pr",
            "42",
            "--sha",
            "0123456789abcdef0123456789abcdef01234567",
        ])
        .unwrap();
        let Command::Render(args) = cli.command else {
            panic!("render parses as render")
        };
        assert_eq!(args.blueprint, ["a.yaml", "b.yaml"]);
        assert_eq!(args.previews.namespace_prefix, "");
        assert!(
            Cli::try_parse_from(["sandcastle", "render", "--repo", "acme/shop"]).is_err(),
            "--blueprint, --pr and --sha are required"
        );
        assert_eq!(duration_arg("2d").unwrap(), Duration::from_secs(172_800));
    }

    #[test]
    fn lifecycle_flags_have_defaults_and_can_be_turned_off() {
        let base = [
            "sandcastle",
            "serve",
            "--app-id",
            "1",
            "--private-key-file",
            "k.pem",
            "--webhook-secret",
            "a-long-enough-secret",
        ];
        let Command::Serve(args) = Cli::try_parse_from(base).unwrap().command else {
            panic!("serve")
        };
        let l = &args.lifecycle;
        assert_eq!(l.resync_interval, Duration::from_secs(600));
        assert_eq!(l.orphan_grace, Duration::from_secs(3600));
        assert!(l.leader_election);
        assert_eq!(l.lease_duration, Duration::from_secs(15));
        assert_ne!(l.identity(), l.identity(), "a fresh identity per process");
        let off =
            base.iter()
                .copied()
                .chain(["--leader-election", "false", "--resync-interval", "0"]);
        let Command::Serve(args) = Cli::try_parse_from(off).unwrap().command else {
            panic!("serve")
        };
        assert!(!args.lifecycle.leader_election);
        assert!(args.lifecycle.resync_interval.is_zero());
    }
}
