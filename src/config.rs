//! The only reader of command-line flags and environment variables. Every setting is a flag with
//! an environment fallback; the README's configuration table mirrors these doc comments.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// A secret value that never prints itself (Debug and Display show `[redacted]`).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::domain::duration::parse(s, true).map_err(|e| e.to_string())
}

#[derive(Debug, Parser)]
#[command(
    name = "sandcastle",
    version,
    about = "Preview environments for every pull request, on Kubernetes"
)]
pub struct Cli {
    /// Log format.
    #[arg(long, env = "SANDCASTLE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print Sandcastle's CustomResourceDefinitions as YAML.
    Crds(CrdsArgs),
}

#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Compare with this file instead of printing; exit non-zero when it differs.
    #[arg(long)]
    pub check: Option<PathBuf>,
}

/// Settings for talking to Kubernetes.
#[derive(Debug, Clone, Args)]
pub struct KubeArgs {
    /// Kubeconfig file; when unset, in-cluster configuration or the default kubeconfig is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Namespace holding Sandcastle's Blueprints and PreviewEnvironments.
    #[arg(long, env = "SANDCASTLE_NAMESPACE", default_value = "sandcastle")]
    pub namespace: String,
}

/// Where the HTTP server listens.
#[derive(Debug, Clone, Args)]
pub struct ListenArgs {
    /// Address the HTTP server (webhook, API, dashboard, health, metrics) listens on.
    #[arg(long, env = "SANDCASTLE_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
}

/// Used in later settings blocks.
pub fn duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "[redacted]");
        assert!(!format!("{s:?}").contains("hunter2"));
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn cli_parses() {
        let cli = Cli::try_parse_from(["sandcastle", "crds"]).unwrap();
        assert!(matches!(cli.command, Command::Crds(_)));
        assert_eq!(duration_arg("2d").unwrap(), Duration::from_secs(172_800));
    }
}
