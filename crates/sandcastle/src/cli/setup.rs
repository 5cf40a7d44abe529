//! `sandcastle setup`: the GitHub App from its manifest, from a shell. Without `--code` it prints
//! the manifest filled with the public URL and where to post it (a Sandcastle without an App
//! serves the same as `/setup`); with `--code` it converts GitHub's code into the App and stores
//! it in the Secret `sandcastle serve` reads, refusing to replace one unless `--force`.

use std::process::ExitCode;

use anyhow::Context as _;

use clap::Args;

use super::args::KubeArgs;
use crate::github::manifest;
use crate::k8s::app_secret;

/// `sandcastle setup`.
#[derive(Debug, Args)]
pub struct SetupArgs {
    #[command(flatten)]
    pub kube: KubeArgs,

    /// Sandcastle's public base URL (the App's webhook and callbacks point there).
    #[arg(
        long,
        env = "SANDCASTLE_PUBLIC_URL",
        default_value = "http://localhost:8080"
    )]
    pub public_url: String,

    /// Base URL of GitHub's web pages (GitHub Enterprise: https://HOST).
    #[arg(
        long,
        env = "SANDCASTLE_GITHUB_URL",
        default_value = "https://github.com"
    )]
    pub github_url: String,

    /// Base URL of GitHub's REST API (GitHub Enterprise: https://HOST/api/v3).
    #[arg(
        long,
        env = "SANDCASTLE_GITHUB_API_URL",
        default_value = "https://api.github.com"
    )]
    pub github_api_url: String,

    /// Create the App on this organization (default: your personal account).
    #[arg(long)]
    pub organization: Option<String>,

    /// The App's name.
    #[arg(long, default_value = "Sandcastle")]
    pub name: String,

    /// The code GitHub sent back (`/setup/callback?code=…`): convert it and store the App.
    #[arg(long)]
    pub code: Option<String>,

    /// Replace an App already stored.
    #[arg(long)]
    pub force: bool,
}

pub async fn run(args: &SetupArgs) -> anyhow::Result<ExitCode> {
    let Some(code) = &args.code else {
        let m = manifest::manifest(&args.public_url, Some(&args.name))?;
        let to = manifest::new_app_url(&args.github_url, args.organization.as_deref(), "STATE");
        println!("{}", serde_json::to_string_pretty(&m)?);
        eprintln!(
            "\nOpen {}/setup in a browser (a Sandcastle without an App serves it), or POST the \
             manifest above as the form field `manifest` to\n  {to}\nfrom a browser; GitHub then \
             sends you to {}/setup/callback?code=CODE. Run `sandcastle setup --code CODE` within \
             the hour to store the App.",
            args.public_url.trim_end_matches('/'),
            args.public_url.trim_end_matches('/'),
        );
        return Ok(ExitCode::SUCCESS);
    };
    let client = crate::serve::kube_client(&args.kube).await?;
    let (app, install) = crate::http::dashboard::setup::make_app(
        &client,
        &args.kube.namespace,
        &args.github_api_url,
        code,
        args.force,
    )
    .await
    .with_context(|| {
        format!(
            "making the GitHub App (Secret {}/{})",
            args.kube.namespace,
            app_secret::NAME
        )
    })?;
    println!(
        "Stored GitHub App {} (id {}) in Secret {}/{}; sandcastle serve takes it up within \
         seconds. Install it: {install}",
        app.slug,
        app.app_id,
        args.kube.namespace,
        app_secret::NAME,
    );
    Ok(ExitCode::SUCCESS)
}
