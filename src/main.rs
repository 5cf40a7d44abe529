//! Sandcastle's development build: the server's command line, plus `demo` — the whole loop on a
//! local control plane against the GitHub stand-in, which the server people deploy does not
//! hold. `cargo run -- demo` runs it; every other command is the server's own.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sandcastle::cli::{Command, Global, finish, init_tracing};
use sandcastle_demo::DemoArgs;

#[derive(Debug, Parser)]
#[command(
    name = "sandcastle",
    version,
    about = "Preview environments for every pull request, on Kubernetes (development build, with the demo)"
)]
struct DevCli {
    #[command(flatten)]
    global: Global,

    #[command(subcommand)]
    command: DevCommand,
}

#[derive(Debug, Subcommand)]
enum DevCommand {
    /// Show Sandcastle end to end on a local control plane, with a local GitHub stand-in.
    Demo(DemoArgs),
    #[command(flatten)]
    Server(Command),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = DevCli::parse();
    match cli.command {
        // The demo narrates on stdout: its logs (on stderr) stay at warnings unless asked.
        DevCommand::Demo(args) => {
            init_tracing(&cli.global, true);
            finish(sandcastle_demo::run(args).await)
        }
        DevCommand::Server(command) => {
            init_tracing(&cli.global, command.prints());
            finish(command.run().await)
        }
    }
}
