//! Process entry: parse configuration, set up logging, run the chosen command.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use sandcastle::config::{Cli, Command, CrdsArgs, LogFormat};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_format);
    match run(cli.command).await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SANDCASTLE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
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
        Command::Crds(args) => crds(&args),
    }
}

fn crds(args: &CrdsArgs) -> anyhow::Result<ExitCode> {
    let yaml = sandcastle::k8s::crd::definitions_yaml()?;
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
            "{} differs from the CRDs the code generates; run `sandcastle crds > {}`",
            path.display(),
            path.display()
        );
        Ok(ExitCode::FAILURE)
    }
}
