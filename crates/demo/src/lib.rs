//! `sandcastle demo`: Sandcastle end to end on a local control plane. It starts the control plane
//! (building it on first use), loads the guestbook example into a staging namespace, runs
//! Sandcastle against a local GitHub stand-in, sends signed pull request deliveries through the
//! real webhook endpoint and narrates what happens, then tears everything down.

pub mod real;
pub mod stage;
pub mod story;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::io::AsyncBufReadExt;

use clap::Args;
use sandcastle::cli::args::KubeArgs;
use sandcastle::serve;

/// `sandcastle demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Do not wait for Enter before closing the pull request.
    #[arg(long)]
    pub no_wait: bool,

    /// Port for the Sandcastle server (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,

    /// Run the previews for real: a node that runs containers behind Traefik (root on Linux;
    /// its first build takes 10 to 17 minutes on two cores, cached after; docs/real-tier.md),
    /// and print a URL to open in a browser. Without it the pods run on fake nodes and the URL
    /// answers nothing.
    #[arg(long)]
    pub real: bool,
}

const HOME: &str = "sandcastle";
const STAGING: &str = "guestbook-staging";
const REAL_STAGING: &str = "shop-staging";
fn say(s: impl AsRef<str>) {
    println!("{}", s.as_ref());
}

pub(crate) fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The local control plane started for the demo, stopped on drop.
struct ControlPlane {
    dir: String,
    kubeconfig: PathBuf,
    /// Traefik's entry point, on the real tier.
    ingress: Option<String>,
}

impl ControlPlane {
    fn start(root: &Path, real: bool) -> anyhow::Result<Self> {
        let out = std::process::Command::new(root.join("scripts/kube-harness"))
            .arg("start")
            .args(real.then_some("--real"))
            .stderr(std::process::Stdio::inherit())
            .output()
            .context(
                "running scripts/kube-harness start (run the demo from a Sandcastle checkout)",
            )?;
        if !out.status.success() {
            bail!("the local control plane did not start");
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {key}=")).map(str::to_owned))
        };
        let kubeconfig = value("KUBECONFIG").context("kube-harness printed no KUBECONFIG")?;
        let dir = value("SANDCASTLE_HARNESS_DIR")
            .context("kube-harness printed no SANDCASTLE_HARNESS_DIR")?;
        Ok(Self {
            dir,
            kubeconfig: kubeconfig.into(),
            ingress: value("SANDCASTLE_INGRESS_HTTP"),
        })
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        say("Stopping the local control plane.");
        let _ = std::process::Command::new(repo_root().join("scripts/kube-harness"))
            .arg("stop")
            .env("SANDCASTLE_HARNESS_DIR", &self.dir)
            .status();
    }
}

async fn wait_for_user(what: &str) {
    say("");
    say(what);
    let mut line = String::new();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    tokio::select! {
        _ = stdin.read_line(&mut line) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let root = repo_root();
    say(
        "Sandcastle demo: a preview environment per pull request, on a real local Kubernetes control plane.",
    );
    say(
        "Starting the local control plane (built from source on first use; this can take several minutes)…",
    );
    let cp = ControlPlane::start(&root, args.real)?;
    let client = serve::kube_client(&KubeArgs {
        kubeconfig: Some(cp.kubeconfig.clone()),
        namespace: HOME.into(),
    })
    .await?;
    sandcastle::k8s::crd_install::install(&client, Duration::from_secs(30)).await?;
    say(format!(
        "Control plane ready (KUBECONFIG={}). Installed the Blueprint and PreviewEnvironment CRDs.",
        cp.kubeconfig.display()
    ));

    let stage = match &cp.ingress {
        Some(ingress) => {
            say(format!(
                "A real node runs the pods; Traefik serves every preview host on {ingress}."
            ));
            let tier = real::RealTier {
                ingress: ingress.clone(),
                harness_dir: cp.dir.clone(),
            };
            let stage =
                stage::Stage::prepare_real(client.clone(), HOME, REAL_STAGING, args.port, tier)
                    .await?;
            say(format!(
                "Loaded the test app and Redis ({} objects) into namespace {REAL_STAGING} and made it Blueprint `shop` for acme/shop.",
                stage.objects
            ));
            stage
        }
        None => {
            let stage =
                stage::Stage::prepare(client.clone(), HOME, STAGING, args.port, true).await?;
            say(format!(
                "Loaded the guestbook example ({} objects) into namespace {STAGING} and made it Blueprint `guestbook` for acme/guestbook.",
                stage.objects
            ));
            stage
        }
    };
    say(format!(
        "GitHub: a local stand-in of GitHub's REST API at {} (nothing leaves this machine).",
        stage.gh.url()
    ));
    let addr = stage.running.addr;
    say(format!(
        "Sandcastle is listening on http://{addr} (webhook: POST /github/webhook)."
    ));
    let mut out = |line: String| say(line);
    let wait = !args.no_wait;
    let before_push = async {
        if wait && args.real {
            wait_for_user("Open the URL above. Press Enter (or Ctrl-C) to push a new commit.")
                .await;
        }
    };
    let before_merge = async {
        if wait {
            wait_for_user(
                "The preview stays up. Press Enter (or Ctrl-C) to close the pull request and tear it down.",
            )
            .await;
        }
    };
    story::play(&mut out, &client, &stage, HOME, before_push, before_merge).await?;
    stage.running.shutdown().await;
    drop(cp);
    say("Done.");
    Ok(ExitCode::SUCCESS)
}
