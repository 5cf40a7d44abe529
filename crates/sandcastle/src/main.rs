//! The server's process entry.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    sandcastle::cli::main().await
}
