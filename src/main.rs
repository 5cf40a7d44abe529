//! Sandcastle's development build: the server's command line, plus `demo` — the whole loop on a
//! local control plane against the GitHub stand-in, which the server people deploy does not hold.
//! `cargo run -- demo` runs it; every other command is the server's own.

use std::process::ExitCode;

use clap::Parser;
use sandcastle::config::{Cli, Command};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let Command::Demo(args) = cli.command else {
        return sandcastle::cli::main(cli).await;
    };
    // The demo narrates on stdout; its logs (on stderr) stay at warnings unless asked.
    sandcastle::cli::init_tracing(cli.log_format, cli.log.as_deref().unwrap_or("warn"));
    match sandcastle_demo::run(args).await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
