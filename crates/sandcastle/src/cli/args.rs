//! Flag groups several commands share — how to reach Kubernetes, where to listen, the GitHub
//! App — and the value parsers of flags. Every setting is a flag with an environment fallback;
//! the README's configuration table mirrors these doc comments.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::domain::Secret;

/// The fewest characters a webhook secret may have. It proves deliveries come from GitHub, and
/// the dashboard's cookies and MCP confirmations are keyed from it: a guessable one forges all.
pub const MIN_WEBHOOK_SECRET: usize = 16;

pub(crate) fn webhook_secret_arg(s: &str) -> Result<Secret, String> {
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
pub(crate) fn issuer_arg(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or("an issuer is an https:// URL")?;
    if rest.is_empty() || rest.contains(['?', '#']) || s.chars().any(char::is_whitespace) {
        return Err("an issuer is an https:// URL without a query or fragment".to_owned());
    }
    Ok(s.trim_end_matches('/').to_owned())
}

pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::domain::duration::parse(s, true).map_err(|e| e.to_string())
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
    /// in `/.well-known/oauth-protected-resource` (RFC 9728), so MCP clients can sign in there.
    /// Unset: that document is not served (it must name one), and 401s say to send a
    /// Kubernetes bearer token.
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
    /// Unset: stopped previews' Ingresses route to a Service with no endpoints.
    #[arg(long, env = "SANDCASTLE_WAKE_SERVICE")]
    pub wake_service: Option<crate::domain::wake::WakeTarget>,

    /// Wake on visit for HTTPRoutes: a Service of Sandcastle's namespace whose port leads to the
    /// wake listener, `NAME:PORT` (the chart's own Service and its wake port). A stopped
    /// preview's HTTPRoutes then route to it, through a ReferenceGrant Sandcastle makes there for
    /// the preview (Gateway API implementations refuse the ExternalName Service Ingresses use).
    /// Unset, or for previews in other clusters: they route to a Service with no endpoints.
    #[arg(long, env = "SANDCASTLE_WAKE_ROUTE_SERVICE")]
    pub wake_route_service: Option<crate::domain::wake::routes::WakeRouteService>,

    /// How often each cluster registered as a Secret (label `sandcastle.dev/cluster`) is
    /// checked: whether its API answers, and (every 10 minutes, or after it comes back) whether
    /// its credentials hold what previews need.
    #[arg(long, env = "SANDCASTLE_CLUSTER_CHECK_INTERVAL", default_value = "10s", value_parser = duration_arg)]
    pub cluster_check_interval: Duration,

    /// The front door: the wildcard certificate and who may open previews.
    #[command(flatten)]
    pub edge: EdgeArgs,
}

/// A preview's front door: the one wildcard certificate every preview host is served with, who
/// may open previews, and the gate in front of those only signed-in people and agents may.
#[derive(Debug, Clone, Args)]
pub struct EdgeArgs {
    /// A wildcard certificate's Secret, `NAMESPACE/NAME` (e.g. `*.preview.example.com`, issued
    /// once by cert-manager with DNS-01): copied into every preview namespace and named by every
    /// Ingress's `tls`, followed when it is renewed; preview URLs are then `https://` and each
    /// preview host must be one label under the wildcard.
    #[arg(long, env = "SANDCASTLE_PREVIEW_TLS_SECRET")]
    pub preview_tls_secret: Option<crate::k8s::tls::TlsSource>,

    /// Who may open previews whose Blueprint sets no `access`: `public`, or `signedIn` (people
    /// signed in with GitHub who can read the repository, the preview's own token or header
    /// secret, share links; needs `--gate-url`).
    #[arg(long, env = "SANDCASTLE_PREVIEW_ACCESS", default_value = "public")]
    pub preview_access: crate::crd::Access,

    /// The gate, as the ingress controller reaches Sandcastle's wake listener (its edge
    /// listener), e.g. `http://sandcastle.sandcastle.svc.cluster.local:8081`: `signedIn`
    /// previews' routes ask it about every request.
    #[arg(long, env = "SANDCASTLE_GATE_URL", value_parser = gate_url_arg)]
    pub gate_url: Option<String>,

    /// The ingress controller the gate is wired into: `traefik` (a forwardAuth Middleware,
    /// named by each Ingress and by an ExtensionRef filter on each HTTPRoute rule).
    #[arg(long, env = "SANDCASTLE_GATE_PROVIDER", default_value = "traefik")]
    pub gate_provider: crate::domain::edge::GateProvider,

    /// The longest a share link opens a preview.
    #[arg(long, env = "SANDCASTLE_SHARE_MAX_LIFETIME", default_value = "7d", value_parser = duration_arg)]
    pub share_max_lifetime: Duration,
}

impl EdgeArgs {
    /// The gate, when one is configured.
    pub fn gate(&self) -> Option<crate::domain::edge::Gate> {
        self.gate_url
            .as_ref()
            .map(|address| crate::domain::edge::Gate {
                provider: self.gate_provider,
                address: address.clone(),
            })
    }
}

/// The gate's base URL: `http://` or `https://`, a host, no path, query or fragment.
pub(crate) fn gate_url_arg(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
        .ok_or("the gate URL is http://HOST:PORT (or https://)")?;
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() || rest.contains(['/', '?', '#']) || s.chars().any(char::is_whitespace) {
        return Err("the gate URL is http://HOST:PORT, without a path".to_owned());
    }
    Ok(s.trim_end_matches('/').to_owned())
}

/// Rendering Blueprints' Helm charts and Kustomize overlays (`source.helm`, `source.kustomize`):
/// the tools, and the bounds each render runs within.
#[derive(Debug, Clone, Args)]
pub struct RenderToolArgs {
    /// The `helm` binary (Sandcastle's image ships a pinned one on `PATH`).
    #[arg(long, env = "SANDCASTLE_HELM_BINARY", default_value = "helm")]
    pub helm_binary: PathBuf,

    /// The `kustomize` binary (Sandcastle's image ships a pinned one on `PATH`).
    #[arg(long, env = "SANDCASTLE_KUSTOMIZE_BINARY", default_value = "kustomize")]
    pub kustomize_binary: PathBuf,

    /// How long one render may take before it is stopped.
    #[arg(long, env = "SANDCASTLE_RENDER_TIMEOUT", default_value = "30s", value_parser = duration_arg)]
    pub render_timeout: Duration,

    /// The most memory one render may use, in MiB.
    #[arg(long, env = "SANDCASTLE_RENDER_MEMORY_MIB", default_value_t = 512, value_parser = clap::value_parser!(u64).range(64..=65536))]
    pub render_memory_mib: u64,

    /// The largest repository archive (compressed) fetched to render, in MiB; its unpacked
    /// content may hold 20,000 files and 256 MiB.
    #[arg(long, env = "SANDCASTLE_REPO_ARCHIVE_MAX_MIB", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10240))]
    pub repo_archive_max_mib: u64,
}

impl RenderToolArgs {
    pub fn renderer(&self) -> crate::render::Renderer {
        let limits = crate::render::Limits {
            deadline: self.render_timeout,
            memory_bytes: self.render_memory_mib << 20,
            download_bytes: self.repo_archive_max_mib << 20,
            ..Default::default()
        };
        crate::render::Renderer {
            helm: self.helm_binary.clone(),
            kustomize: self.kustomize_binary.clone(),
            limits,
        }
    }
}
