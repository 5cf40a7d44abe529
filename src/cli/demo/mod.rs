//! `sandcastle demo`: Sandcastle end to end on a local control plane. It starts the control plane
//! (building it on first use), loads the guestbook example into a staging namespace, runs
//! Sandcastle against a local GitHub stand-in, sends signed pull request deliveries through the
//! real webhook endpoint and narrates what happens, then tears everything down.

pub mod stage;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use tokio::io::AsyncBufReadExt;

use crate::config::{DemoArgs, KubeArgs};
use crate::crd::{Phase, PreviewEnvironment};
use crate::domain::{PrNumber, Sha};
use crate::fake_github::{FakeGitHub, PrSpec};
use crate::serve;

const HOME: &str = "sandcastle";
const STAGING: &str = "guestbook-staging";
fn say(s: impl AsRef<str>) {
    println!("{}", s.as_ref());
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The local control plane started for the demo, stopped on drop.
struct ControlPlane {
    dir: String,
    kubeconfig: PathBuf,
}

impl ControlPlane {
    fn start(root: &Path) -> anyhow::Result<Self> {
        let out = std::process::Command::new(root.join("scripts/kube-harness"))
            .arg("start")
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

/// Follow a preview until it reaches `want` (at commit `sha`, when given), narrating each change.
async fn follow(
    api: &Api<PreviewEnvironment>,
    name: &str,
    want: Phase,
    sha: Option<&Sha>,
    started: Instant,
) -> anyhow::Result<PreviewEnvironment> {
    let mut last = (None, None);
    let deadline = started + Duration::from_secs(180);
    loop {
        if let Some(pe) = api.get_opt(name).await? {
            let st = pe.status.clone().unwrap_or_default();
            let now = (st.phase, st.message.clone());
            if now != last {
                if let Some(p) = st.phase {
                    say(format!(
                        "  {:>6.1}s  {:<11} {}",
                        started.elapsed().as_secs_f64(),
                        p.as_str(),
                        st.message.clone().unwrap_or_default()
                    ));
                }
                last = now;
            }
            let at_sha = sha.is_none_or(|s| st.deployed_sha.as_deref() == Some(s.as_str()));
            if st.phase == Some(want) && at_sha {
                return Ok(pe);
            }
            if st.phase == Some(Phase::Failed) && want != Phase::Failed {
                bail!("preview {name} failed: {}", st.message.unwrap_or_default());
            }
        }
        if Instant::now() > deadline {
            bail!(
                "preview {name} did not become {} within 3 minutes",
                want.as_str()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn github_calls(gh: &FakeGitHub, since: usize) -> usize {
    let calls = gh.calls();
    for c in calls.iter().skip(since) {
        let body = c
            .body
            .as_ref()
            .and_then(|b| b.get("state").or_else(|| b.get("environment")))
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        say(format!(
            "    GitHub ← {} {} → {}{body}",
            c.method, c.path, c.status
        ));
    }
    calls.len()
}

async fn wait_for_user() {
    say("");
    say(
        "The preview stays up. Press Enter (or Ctrl-C) to close the pull request and tear it down.",
    );
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
    let cp = ControlPlane::start(&root)?;
    let client = serve::kube_client(&KubeArgs {
        kubeconfig: Some(cp.kubeconfig.clone()),
        namespace: HOME.into(),
    })
    .await?;
    crate::k8s::crd_install::install(&client, Duration::from_secs(30)).await?;
    say(format!(
        "Control plane ready (KUBECONFIG={}). Installed the Blueprint and PreviewEnvironment CRDs.",
        cp.kubeconfig.display()
    ));

    let stage = stage::Stage::prepare(client.clone(), HOME, STAGING, args.port, true).await?;
    say(format!(
        "Loaded the guestbook example ({} objects) into namespace {STAGING} and made it Blueprint `guestbook` for acme/guestbook.",
        stage.objects
    ));
    say(format!(
        "GitHub: a local stand-in of GitHub's REST API at {} (nothing leaves this machine).",
        stage.gh.url()
    ));
    let (gh, repo, addr) = (stage.gh.clone(), stage.repo.clone(), stage.running.addr);
    say(format!(
        "Sandcastle is listening on http://{addr} (webhook: POST /github/webhook)."
    ));
    let previews: Api<PreviewEnvironment> = Api::namespaced(client.clone(), HOME);
    let number = PrNumber::new(42)?;
    let name = "guestbook-pr-42";

    say("");
    let first = Sha::new(&hex::encode(rand::random::<[u8; 20]>()))?;
    say(format!(
        "1. Pull request #42 opened at commit {}. Sending the signed delivery…",
        first.short()
    ));
    let (status, body) = stage
        .deliver(&gh.open_pull_request(&repo, PrSpec::new(number, first.clone(), "feature/login")))
        .await?;
    say(format!("   webhook answered {status} {body}"));
    let t = Instant::now();
    let pe = follow(&previews, name, Phase::Ready, Some(&first), t).await?;
    let st = pe.status.clone().unwrap_or_default();
    let ns = st.namespace.clone().unwrap_or_default();
    let objects = st.rollout.as_ref().map_or(0, |r| r.objects);
    say(format!(
        "   Preview {name} is Ready: {objects} objects in namespace {ns}, URL {}",
        st.url.clone().unwrap_or_default()
    ));
    for s in &st.services {
        say(format!(
            "     {} {}: {}/{} ready",
            s.kind, s.name, s.ready, s.desired
        ));
    }
    let seen = github_calls(&gh, 0);
    if let Some(sticky) = gh
        .comments(&repo, number)
        .into_iter()
        .find(|c| crate::github::text::parse_marker(&c.body).is_some())
    {
        say("   The pull request's Sandcastle comment now reads:");
        for line in sticky.body.lines().filter(|l| !l.starts_with("<!--")) {
            say(format!("   │ {line}"));
        }
    }

    say("");
    let second = Sha::new(&hex::encode(rand::random::<[u8; 20]>()))?;
    say(format!(
        "2. New commit {} pushed (synchronize). Sending the delivery…",
        second.short()
    ));
    let (status, body) = stage.deliver(&gh.push(&repo, number, &second)).await?;
    say(format!("   webhook answered {status} {body}"));
    follow(&previews, name, Phase::Ready, Some(&second), Instant::now()).await?;
    let d: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &ns);
    let frontend = d.get("frontend").await?;
    let image = frontend
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers[0].image.clone().unwrap_or_default())
        .unwrap_or_default();
    say(format!(
        "   Ready at {}: the frontend now runs {image}",
        second.short()
    ));
    let seen = github_calls(&gh, seen);

    if !args.no_wait {
        wait_for_user().await;
    }
    say("");
    say("3. Pull request #42 merged. Sending the delivery…");
    let (status, body) = stage.deliver(&gh.close(&repo, number, true)).await?;
    say(format!("   webhook answered {status} {body}"));
    follow(&previews, name, Phase::Removed, None, Instant::now()).await?;
    let gone = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .all(|n| n.name_any() != ns);
    say(format!(
        "   Namespace {ns} {}; the GitHub deployments are marked inactive.",
        if gone {
            "is gone"
        } else {
            "is still being deleted"
        }
    ));
    github_calls(&gh, seen);
    stage.running.shutdown().await;
    drop(cp);
    say("Done.");
    Ok(ExitCode::SUCCESS)
}
