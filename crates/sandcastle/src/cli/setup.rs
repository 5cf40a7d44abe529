//! `sandcastle setup`: the GitHub App from its manifest, from a shell. Without `--code` it prints
//! the manifest filled with the public URL and where to post it (a Sandcastle without an App
//! serves the same as `/setup`); with `--code` it converts GitHub's code into the App and stores
//! it in the Secret `sandcastle serve` reads, refusing to replace one unless `--force`.

use std::process::ExitCode;

use anyhow::Context as _;

use crate::config::SetupArgs;
use crate::github::manifest;
use crate::k8s::app_secret;

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
