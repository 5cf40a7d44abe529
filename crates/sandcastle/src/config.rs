//! The only reader of command-line flags and environment variables. Every setting is a flag with
//! an environment fallback; the README's configuration table mirrors these doc comments.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::domain::Secret;

/// The fewest characters a webhook secret may have. It proves deliveries come from GitHub, and
/// the dashboard's cookies and MCP confirmations are keyed from it: a guessable one forges all.
pub const MIN_WEBHOOK_SECRET: usize = 16;

fn webhook_secret_arg(s: &str) -> Result<Secret, String> {
    if s.chars().count() < MIN_WEBHOOK_SECRET {
        return Err(format!(
            "a webhook secret needs at least {MIN_WEBHOOK_SECRET} characters (it signs deliveries and keys the \
             dashboard's cookies); make one with `openssl rand -hex 32`"
        ));
    }
    Ok(Secret::new(s))
}

/// An authorization server's issuer: an `https://` (or, for a local one, `http://`) URL with no
/// query or fragment (RFC 8414).
fn issuer_arg(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or("an issuer is an https:// URL")?;
    if rest.is_empty() || rest.contains(['?', '#']) || s.chars().any(char::is_whitespace) {
        return Err("an issuer is an https:// URL without a query or fragment".to_owned());
    }
    Ok(s.trim_end_matches('/').to_owned())
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

    /// Log filter in `tracing` syntax (e.g. `info`, `sandcastle=debug`); by default `info`, or
    /// `warn` for `demo` and `render`, which print their own output.
    #[arg(long, env = "SANDCASTLE_LOG", global = true)]
    pub log: Option<String>,

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
    /// Run Sandcastle: the webhook receiver, health probes and the controller.
    Serve(Box<ServeArgs>),
    /// Show Sandcastle end to end on a local control plane, with a local GitHub stand-in.
    Demo(DemoArgs),
    /// Print Sandcastle's CustomResourceDefinitions as YAML.
    Crds(GeneratedArgs),
    /// Print the RBAC rules Sandcastle needs, as the Helm chart's `files/rbac.yaml` holds them
    /// (`--target`: what to apply in another cluster, `files/target-cluster.yaml`).
    Rbac(RbacArgs),
    /// Print the OpenAPI document of the REST API, as `docs/openapi.json` holds it.
    Openapi(GeneratedArgs),
    /// Print the objects a pull request's preview would get, as YAML in apply order (pipe it into
    /// `kubectl diff -f -`). Applies nothing; exits non-zero when the blueprint is refused.
    Render(Box<RenderArgs>),
    /// Operate previews through a Sandcastle server's API, as an agent or a person would.
    Previews(Box<PreviewsArgs>),
    /// An MCP server on stdin/stdout for a local agent (Claude Code, Cursor, Codex), calling a
    /// Sandcastle server's API with a token.
    Mcp(McpArgs),
    /// Create Sandcastle's GitHub App with GitHub's manifest flow: print the manifest and where to
    /// post it, or, with `--code`, turn GitHub's code into the App and store it for `serve`.
    Setup(Box<SetupArgs>),
}

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

/// `sandcastle mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Sandcastle's address (its `--listen`, or the Service or Ingress in front of it).
    #[arg(
        long,
        env = "SANDCASTLE_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,

    /// Kubernetes bearer token to call the API with.
    #[arg(long, env = "SANDCASTLE_TOKEN", hide_env_values = true)]
    pub token: Option<Secret>,

    /// Offer write tools too (the token's RBAC still decides each call).
    #[arg(long, env = "SANDCASTLE_MCP_WRITE")]
    pub write: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub listen: ListenArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub github: GitHubArgs,
    #[command(flatten)]
    pub previews: PreviewArgs,
    #[command(flatten)]
    pub lifecycle: LifecycleArgs,
}

/// The GitHub App Sandcastle acts as.
#[derive(Debug, Clone, Args)]
pub struct GitHubArgs {
    /// The GitHub App's id. Without it (and its key and webhook secret), Sandcastle uses the
    /// App stored by `/setup` (Secret `sandcastle-github-app`), or serves `/setup` to create one.
    #[arg(
        long,
        env = "SANDCASTLE_GITHUB_APP_ID",
        requires_all = ["private_key_file", "webhook_secret"]
    )]
    pub app_id: Option<u64>,

    /// File holding the App's private key (PEM).
    #[arg(long, env = "SANDCASTLE_GITHUB_PRIVATE_KEY_FILE", requires = "app_id")]
    pub private_key_file: Option<PathBuf>,

    /// Webhook secret(s), comma-separated: the first is current, the others are accepted while
    /// a rotation is under way.
    #[arg(
        long,
        env = "SANDCASTLE_WEBHOOK_SECRET",
        value_delimiter = ',',
        requires = "app_id",
        hide_env_values = true,
        value_parser = webhook_secret_arg
    )]
    pub webhook_secret: Vec<Secret>,

    /// Base URL of GitHub's REST API (GitHub Enterprise: https://HOST/api/v3).
    #[arg(
        long,
        env = "SANDCASTLE_GITHUB_API_URL",
        default_value = "https://api.github.com"
    )]
    pub github_api_url: String,

    /// Base URL of GitHub's web pages, where people sign in (GitHub Enterprise: https://HOST).
    #[arg(
        long,
        env = "SANDCASTLE_GITHUB_URL",
        default_value = "https://github.com"
    )]
    pub github_url: String,

    /// The App's OAuth client id: people sign in to the dashboard with GitHub.
    #[arg(
        long,
        env = "SANDCASTLE_GITHUB_CLIENT_ID",
        requires = "github_client_secret"
    )]
    pub github_client_id: Option<String>,

    /// The App's OAuth client secret.
    #[arg(long, env = "SANDCASTLE_GITHUB_CLIENT_SECRET", hide_env_values = true)]
    pub github_client_secret: Option<Secret>,
}

/// How previews are named, reached and kept.
#[derive(Debug, Clone, Args)]
pub struct PreviewArgs {
    /// Public base URL of this Sandcastle (preview pages linked from GitHub as `log_url`).
    #[arg(
        long,
        env = "SANDCASTLE_PUBLIC_URL",
        default_value = "http://localhost:8080"
    )]
    pub public_url: String,

    /// Prefix of preview namespace names.
    #[arg(long, env = "SANDCASTLE_NAMESPACE_PREFIX", default_value = "")]
    pub namespace_prefix: String,

    /// Host template for previews whose Blueprint sets no `host`.
    #[arg(
        long,
        env = "SANDCASTLE_DEFAULT_HOST",
        default_value = "{{host}}-{{preview}}.preview.localhost"
    )]
    pub default_host: String,

    /// Namespace of the ingress controller (allowed through preview NetworkPolicies).
    #[arg(
        long,
        env = "SANDCASTLE_INGRESS_NAMESPACE",
        default_value = "ingress-nginx"
    )]
    pub ingress_namespace: String,

    /// How long a removed preview is kept as a tombstone so late deliveries cannot revive it.
    #[arg(long, env = "SANDCASTLE_TOMBSTONE_RETENTION", default_value = "72h", value_parser = duration_arg)]
    pub tombstone_retention: Duration,

    /// The longest a token minted for a preview through the API lives (never past the preview).
    #[arg(long, env = "SANDCASTLE_TOKEN_MAX_LIFETIME", default_value = "1h", value_parser = duration_arg)]
    pub token_max_lifetime: Duration,

    /// The longest one API `wait` call may ask to wait.
    #[arg(long, env = "SANDCASTLE_API_MAX_WAIT", default_value = "10m", value_parser = duration_arg)]
    pub api_max_wait: Duration,

    /// Offer write tools (create, redeploy, extend, stop, wake, reset, destroy, tokens) on `/mcp`;
    /// callers still need the RBAC for each.
    #[arg(long, env = "SANDCASTLE_MCP_WRITE")]
    pub mcp_write: bool,

    /// An OAuth authorization server (its issuer URL) whose access tokens the cluster's API
    /// server accepts as bearer tokens (e.g. the OIDC issuer its authentication trusts): named
    /// in `/.well-known/oauth-protected-resource`, so MCP clients can sign in there. Unset: none
    /// is named, and clients send a Kubernetes token they already have.
    #[arg(long, env = "SANDCASTLE_AUTHORIZATION_SERVER", value_parser = issuer_arg)]
    pub authorization_server: Option<String>,

    /// How Blueprints' HTTP readiness probes reach a preview: `url` (its URL, by DNS),
    /// `connect-to:HOST:PORT` (its URL through this address, e.g. the ingress controller's
    /// Service) or `service` (its primary Service in the cluster, with the preview's host).
    #[arg(long, env = "SANDCASTLE_PROBE_VIA", default_value = "url")]
    pub probe_via: crate::probe::ProbeVia,

    /// Delete each preview's GitHub environment (`preview/<name>`) when its tombstone expires,
    /// so repositories do not collect dead environments; needs the App's Administration
    /// (write) permission.
    #[arg(long, env = "SANDCASTLE_DELETE_GITHUB_ENVIRONMENTS")]
    pub delete_github_environments: bool,

    /// Show the dashboard's pages, read-only, to anyone without signing in.
    #[arg(long, env = "SANDCASTLE_PUBLIC_PAGES")]
    pub public_pages: bool,

    /// Wake on visit: the wake listener as the ingress controller reaches it, `HOST:PORT`
    /// (e.g. `sandcastle.sandcastle.svc.cluster.local:8081`). A stopped preview's Ingresses
    /// then route to it through an ExternalName Service `sandcastle-wake` in its namespace.
    /// Unset: stopped previews' Ingresses are left as they are.
    #[arg(long, env = "SANDCASTLE_WAKE_SERVICE")]
    pub wake_service: Option<crate::domain::wake::WakeTarget>,

    /// How often each cluster registered as a Secret (label `sandcastle.dev/cluster`) is
    /// checked: whether its API answers, and (every 10 minutes, or after it comes back) whether
    /// its credentials hold what previews need.
    #[arg(long, env = "SANDCASTLE_CLUSTER_CHECK_INTERVAL", default_value = "10s", value_parser = duration_arg)]
    pub cluster_check_interval: Duration,
}

/// Housekeeping and leader election.
#[derive(Debug, Clone, Args)]
pub struct LifecycleArgs {
    /// How often the catch-up resync compares open pull requests with previews (it also runs at
    /// start-up); `0` turns it off. Orphan namespaces are swept at the same pace.
    #[arg(long, env = "SANDCASTLE_RESYNC_INTERVAL", default_value = "10m", value_parser = duration_arg)]
    pub resync_interval: Duration,

    /// How long a namespace Sandcastle made may stay without a PreviewEnvironment before it is
    /// deleted; `0` never deletes.
    #[arg(long, env = "SANDCASTLE_ORPHAN_GRACE", default_value = "1h", value_parser = duration_arg)]
    pub orphan_grace: Duration,

    /// Elect one leader among replicas with a Lease: all serve HTTP, only the leader runs the
    /// controller and housekeeping. Turn off only when exactly one replica runs.
    #[arg(long, env = "SANDCASTLE_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,

    /// Name of the leader Lease in Sandcastle's namespace.
    #[arg(
        long,
        env = "SANDCASTLE_LEASE_NAME",
        default_value = "sandcastle-leader"
    )]
    pub lease_name: String,

    /// How long the leader's Lease lasts without renewal; another replica takes over within
    /// about this long after the leader dies.
    #[arg(long, env = "SANDCASTLE_LEASE_DURATION", default_value = "15s", value_parser = duration_arg)]
    pub lease_duration: Duration,

    /// This replica's identity in the Lease (default: the host name, which is the pod name in
    /// Kubernetes, plus a random suffix).
    #[arg(long, env = "SANDCASTLE_IDENTITY")]
    pub identity: Option<String>,
}

impl LifecycleArgs {
    /// The Lease holder identity: `--identity`, or the host name with a random suffix so that a
    /// restarted process never mistakes the previous one's lease for its own.
    pub fn identity(&self) -> String {
        self.identity.clone().unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "sandcastle".to_owned());
            format!("{host}-{:08x}", rand::random::<u32>())
        })
    }
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Do not wait for Enter before closing the pull request.
    #[arg(long)]
    pub no_wait: bool,

    /// Port for the Sandcastle server (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
}

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

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// What the preview is cloned from: YAML files or directories of `*.yaml` files (manifests,
    /// as a `source.manifests` ConfigMap holds them; repeat the flag for several), or the name of
    /// a live namespace, read through the cluster as the controller reads `source.namespace`.
    #[arg(long, value_name = "FILE|DIR|NAMESPACE", required = true)]
    pub blueprint: Vec<String>,

    /// The Blueprint's settings (images, host, skip, secrets, isolation, ...): a file holding a
    /// Blueprint object or only its `spec` fields. Its `source` is ignored (`--blueprint` is the
    /// source). Without it, a Blueprint document among the `--blueprint` files is used, else the
    /// defaults.
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,

    /// Name of the Blueprint, which names the preview (default: the name of the Blueprint
    /// document, else the repository's name).
    #[arg(long, value_name = "NAME")]
    pub blueprint_name: Option<String>,

    /// The files hold objects read back from this namespace (`kubectl get -o yaml`): they may
    /// name it, and references to it are rewritten as for a live namespace.
    #[arg(long, value_name = "NAMESPACE")]
    pub source_namespace: Option<String>,

    /// The repository, `owner/name`.
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: String,

    /// The pull request number.
    #[arg(long, value_name = "N")]
    pub pr: u64,

    /// The commit to preview (40 hex digits).
    #[arg(long, value_name = "SHA")]
    pub sha: String,

    /// The PR's head branch, for `{{branch}}` templates and `SANDCASTLE_BRANCH` (default:
    /// `pr-<N>`).
    #[arg(long, value_name = "BRANCH")]
    pub branch: Option<String>,

    /// Also print the preview namespace and its guardrails (quota, LimitRange, NetworkPolicy,
    /// ServiceAccounts, the `preview-agent` Role), which the controller applies first.
    #[arg(long)]
    pub guardrails: bool,

    /// Kubeconfig file, to read a live namespace; when unset, in-cluster configuration or the
    /// default kubeconfig is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    #[command(flatten)]
    pub previews: PreviewArgs,
}

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
    /// Throw away the preview's data and run its seed Jobs again.
    Reset(NameArg),
    /// Tear the preview down.
    Delete(NameArg),
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
    /// `ready` (or failed), `stopped`, `removed`.
    #[arg(long = "for", default_value = "ready")]
    pub for_: String,
    #[arg(long, default_value = "5m")]
    pub timeout: String,
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
pub struct RedeployArgs {
    pub name: String,
    /// Deploy this commit instead of the current one.
    #[arg(long)]
    pub commit: Option<String>,
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

    /// Address the wake listener (the page visitors to a stopped preview's host see, and
    /// nothing else) listens on.
    #[arg(long, env = "SANDCASTLE_WAKE_LISTEN", default_value = "0.0.0.0:8081")]
    pub wake_listen: SocketAddr,
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
    fn a_short_webhook_secret_is_refused() {
        let serve = |secret: &str| {
            Cli::try_parse_from([
                "sandcastle",
                "serve",
                "--app-id",
                "1",
                "--private-key-file",
                "k.pem",
                "--webhook-secret",
                secret,
            ])
        };
        let refused = serve("current-is-long-enough,short")
            .unwrap_err()
            .to_string();
        assert!(refused.contains("at least 16 characters"), "{refused}");
        assert!(serve("").is_err());
        assert!(serve("0123456789abcdef").is_ok());
    }

    #[test]
    fn an_authorization_server_is_an_issuer_url() {
        assert_eq!(
            issuer_arg("https://login.example.com/realms/dev/").as_deref(),
            Ok("https://login.example.com/realms/dev")
        );
        assert!(issuer_arg("http://127.0.0.1:5556").is_ok());
        for bad in [
            "login.example.com",
            "https://",
            "https://x?y=1",
            "https://x#f",
            "ftp://x",
        ] {
            assert!(issuer_arg(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cli_parses() {
        let cli = Cli::try_parse_from(["sandcastle", "crds"]).unwrap();
        assert!(matches!(cli.command, Command::Crds(_)));
        let cli = Cli::try_parse_from([
            "sandcastle",
            "render",
            "--blueprint",
            "a.yaml",
            "--blueprint",
            "b.yaml",
            "--repo",
            "acme/shop",
            "--pr",
            "42",
            "--sha",
            "0123456789abcdef0123456789abcdef01234567",
        ])
        .unwrap();
        let Command::Render(args) = cli.command else {
            panic!("render parses as render")
        };
        assert_eq!(args.blueprint, ["a.yaml", "b.yaml"]);
        assert_eq!(args.previews.namespace_prefix, "");
        assert!(
            Cli::try_parse_from(["sandcastle", "render", "--repo", "acme/shop"]).is_err(),
            "--blueprint, --pr and --sha are required"
        );
        assert_eq!(duration_arg("2d").unwrap(), Duration::from_secs(172_800));
    }

    #[test]
    fn lifecycle_flags_have_defaults_and_can_be_turned_off() {
        let base = [
            "sandcastle",
            "serve",
            "--app-id",
            "1",
            "--private-key-file",
            "k.pem",
            "--webhook-secret",
            "a-long-enough-secret",
        ];
        let Command::Serve(args) = Cli::try_parse_from(base).unwrap().command else {
            panic!("serve")
        };
        let l = &args.lifecycle;
        assert_eq!(l.resync_interval, Duration::from_secs(600));
        assert_eq!(l.orphan_grace, Duration::from_secs(3600));
        assert!(l.leader_election);
        assert_eq!(l.lease_duration, Duration::from_secs(15));
        assert_ne!(l.identity(), l.identity(), "a fresh identity per process");
        let off =
            base.iter()
                .copied()
                .chain(["--leader-election", "false", "--resync-interval", "0"]);
        let Command::Serve(args) = Cli::try_parse_from(off).unwrap().command else {
            panic!("serve")
        };
        assert!(!args.lifecycle.leader_election);
        assert!(args.lifecycle.resync_interval.is_zero());
    }
}
