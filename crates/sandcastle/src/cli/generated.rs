//! `sandcastle crds`, `rbac` and `openapi`: the files generated from the code, printed or, with
//! `--check`, compared with the copies on disk (CI fails on drift).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

#[derive(Debug, Args)]
pub struct GeneratedArgs {
    /// Compare with this file instead of printing; exit non-zero when it differs.
    #[arg(long)]
    pub check: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RbacArgs {
    /// Print what to apply in a cluster previews are placed in (or a Blueprint's source is read
    /// from) instead of the rules of Sandcastle's own cluster.
    #[arg(long)]
    pub target: bool,
    #[command(flatten)]
    pub generated: GeneratedArgs,
}

/// `sandcastle crds`.
pub fn crds(args: &GeneratedArgs) -> anyhow::Result<ExitCode> {
    generated(
        &crate::crd::definitions_yaml()?,
        args,
        "the CRDs the code generates",
        "crds",
    )
}

/// `sandcastle rbac` (`--target`: for another cluster).
pub fn rbac(args: &RbacArgs) -> anyhow::Result<ExitCode> {
    if args.target {
        return generated(
            &crate::k8s::rbac::target_yaml()?,
            &args.generated,
            "the RBAC a target cluster needs",
            "rbac --target",
        );
    }
    generated(
        &crate::k8s::rbac::rules_yaml()?,
        &args.generated,
        "the RBAC rules the code needs",
        "rbac",
    )
}

/// `sandcastle openapi`.
pub fn openapi(args: &GeneratedArgs) -> anyhow::Result<ExitCode> {
    generated(
        &crate::http::api::openapi_json(),
        args,
        "the OpenAPI document the code generates",
        "openapi",
    )
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
