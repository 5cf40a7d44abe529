//! The server's process entry: parse the command line and run it.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    sandcastle::cli::main(sandcastle::config::Cli::parse()).await
}
