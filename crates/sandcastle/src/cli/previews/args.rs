//! The flags of `sandcastle previews` and of each of its subcommands.

use clap::{Args, Subcommand, ValueEnum};

use crate::domain::Secret;

/// `sandcastle previews`: the server, the token and the output shape, then what to do.
#[derive(Debug, Args)]
pub struct PreviewsArgs {
    /// Sandcastle's address (its `--listen`, or the Service or Ingress in front of it).
    #[arg(
        long,
        env = "SANDCASTLE_SERVER",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub server: String,

    /// Kubernetes bearer token to call the API with (`kubectl create token NAME`, or a preview
    /// token from `sandcastle previews token`).
    #[arg(long, env = "SANDCASTLE_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<Secret>,

    /// Output: a table for people, or the API's JSON or YAML for scripts.
    #[arg(short, long, value_enum, default_value_t = Output::Table, global = true)]
    pub output: Output,

    #[command(subcommand)]
    pub action: PreviewsAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Subcommand)]
pub enum PreviewsAction {
    /// List previews (all pages).
    List(ListArgs),
    /// Show one preview.
    Get(NameArg),
    /// Create a sandbox: a preview of a branch or commit without a pull request.
    Create(CreateArgs),
    /// Wait until a preview is Ready (exit 0), Failed (1), or the timeout passes (2).
    Wait(WaitArgs),
    /// Print the logs of a preview's pods, secrets redacted.
    Logs(LogsArgs),
    /// Show Sandcastle's Events on a preview and its namespace's own.
    Events(NameArg),
    /// Mint a short-lived token for the preview's `preview-agent` ServiceAccount.
    Token(TokenArgs),
    /// Deploy again: the same commit, or another one.
    Redeploy(RedeployArgs),
    /// Push the expiry out.
    Extend(ExtendArgs),
    /// Scale the preview to zero, keeping its data.
    Stop(NameArg),
    /// Start a stopped preview again.
    Wake(NameArg),
    /// Throw away the preview's data and run its seed Jobs again (where the Blueprint restores
    /// snapshots, from the one the preview started from).
    Reset(ResetArgs),
    /// Tear the preview down.
    Delete(NameArg),
    /// Take a new snapshot of a Blueprint's data (`spec.data`): previews made from then on
    /// start from it, running ones keep theirs.
    RefreshData(BlueprintArg),
    /// Mint a share link: it opens a signed-in-only preview without a GitHub account until it
    /// expires or is revoked. Prints the link.
    Share(ShareArgs),
    /// Revoke a share link of a preview (its id, as `get -o json` lists it).
    Unshare(UnshareArgs),
    /// Print the preview's header secret (send it as X-Sandcastle-Preview-Secret).
    HeaderSecret(NameArg),
    /// Run one of the Blueprint's tests in the preview now; its result is the commit's check
    /// run `Sandcastle / <test>` (wait for it with `wait NAME --test TEST`).
    Test(TestArgs),
}

#[derive(Debug, Args)]
pub struct NameArg {
    /// The preview's name.
    pub name: String,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this repository (`owner/name`).
    #[arg(long)]
    pub repo: Option<String>,
    /// Only this pull request's previews.
    #[arg(long)]
    pub pr: Option<u32>,
    #[arg(long)]
    pub branch: Option<String>,
    #[arg(long)]
    pub blueprint: Option<String>,
    /// Only previews in this phase (`Ready`, `Failed`, ...).
    #[arg(long)]
    pub phase: Option<String>,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The Blueprint to clone.
    #[arg(long)]
    pub blueprint: String,
    /// The repository (`owner/name`) whose images are deployed.
    #[arg(long)]
    pub repo: String,
    /// The branch; its head commit is deployed unless `--commit` says which.
    #[arg(long)]
    pub branch: Option<String>,
    #[arg(long)]
    pub commit: Option<String>,
    /// The preview's name; when unset, the Blueprint and branch and a suffix of 8 hex digits
    /// (from `--idempotency-key`, else random): the answer says which.
    #[arg(long)]
    pub name: Option<String>,
    /// How long it lives (at most the Blueprint's `maxTtl`), e.g. `4h`.
    #[arg(long)]
    pub ttl: Option<String>,
    /// Makes a retried create return the preview the first one made.
    #[arg(long)]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    pub name: String,
    /// `ready` (or failed), `stopped`, `removed`, `test` (with `--test`).
    #[arg(long = "for", default_value = "ready")]
    pub for_: String,
    /// Wait for this test's result (implies `--for test`): exit 0 passed, 1 failed, 2 timed out.
    #[arg(long)]
    pub test: Option<String>,
    #[arg(long, default_value = "5m")]
    pub timeout: String,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// The preview's name.
    pub name: String,
    /// The test (one of its Blueprint's `tests`).
    pub test: String,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    pub name: String,
    /// A Deployment, StatefulSet, ReplicaSet or Job of the preview.
    #[arg(long)]
    pub workload: Option<String>,
    #[arg(short, long)]
    pub container: Option<String>,
    /// The last this many lines of each container.
    #[arg(long)]
    pub tail: Option<u32>,
    /// Only lines newer than this, e.g. `10m`.
    #[arg(long)]
    pub since: Option<String>,
    /// The previous run of the containers (after a crash).
    #[arg(long)]
    pub previous: bool,
}

#[derive(Debug, Args)]
pub struct TokenArgs {
    pub name: String,
    /// Lifetime in seconds (bounded by the preview's expiry and the server's maximum).
    #[arg(long)]
    pub expiration_seconds: Option<u32>,
}

#[derive(Debug, Args)]
pub struct ShareArgs {
    pub name: String,
    /// How long the link opens the preview (`2h`, `3d`; default 24h).
    #[arg(long)]
    pub expires_in: Option<String>,
    /// What it is for (shown on the preview's page).
    #[arg(long)]
    pub label: Option<String>,
}

#[derive(Debug, Args)]
pub struct UnshareArgs {
    pub name: String,
    /// The share link's id.
    pub id: String,
}

#[derive(Debug, Args)]
pub struct RedeployArgs {
    pub name: String,
    /// Deploy this commit instead of the current one.
    #[arg(long)]
    pub commit: Option<String>,
}

#[derive(Debug, Args)]
pub struct BlueprintArg {
    /// The Blueprint's name.
    pub blueprint: String,
}

#[derive(Debug, Args)]
pub struct ResetArgs {
    pub name: String,
    /// Restore the newest snapshot of the Blueprint's data, not the one the preview started from.
    #[arg(long)]
    pub latest: bool,
}

#[derive(Debug, Args)]
pub struct ExtendArgs {
    pub name: String,
    /// How much longer, e.g. `2h` (or `--by 2h`).
    #[arg(value_name = "DURATION", required_unless_present = "by")]
    pub duration: Option<String>,
    /// The same as DURATION.
    #[arg(long = "by", value_name = "DURATION", conflicts_with = "duration")]
    pub by: Option<String>,
}

impl ExtendArgs {
    /// How much longer, as given (one of the two is required).
    pub fn duration(&self) -> &str {
        self.duration
            .as_deref()
            .or(self.by.as_deref())
            .unwrap_or_default()
    }
}
