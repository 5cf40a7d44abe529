//! `sandcastle serve` as a real process beside a test's world: its own port, the world's
//! namespaces and GitHub stand-in, the App key in a file, its output read as it comes (a full
//! pipe would stop it), stopped with SIGTERM or killed with SIGKILL.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use sandcastle_fake_github::{TEST_APP_ID, TEST_APP_PRIVATE_KEY_PEM};
use tokio::io::AsyncReadExt;
use tokio::task::JoinHandle;

use super::cluster;
use super::eventually;
use super::world::World;

/// A running `sandcastle serve`.
pub struct ServeProcess {
    child: tokio::process::Child,
    pub addr: SocketAddr,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

/// Everything it said: `(stdout, stderr)`.
pub type Output = (String, String);

/// The App's private key written to a file of its own (what `SANDCASTLE_GITHUB_PRIVATE_KEY_FILE`
/// names).
pub fn app_key_file() -> PathBuf {
    let dir = std::env::temp_dir().join(cluster::unique("sandcastle-serve"));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("app.pem");
    std::fs::write(&key, TEST_APP_PRIVATE_KEY_PEM).unwrap();
    key
}

impl ServeProcess {
    /// Starts it for `world` with `webhook_secret`, the settings every process needs and `extra`
    /// (later entries win); returns once `/readyz` answers 200.
    pub async fn start(world: &World, webhook_secret: &str, extra: &[(&str, String)]) -> Self {
        Self::start_under(world, webhook_secret, extra, &[]).await
    }

    /// [`ServeProcess::start`], the process run by `wrapper` (a command that ends by running
    /// its last arguments, e.g. `unshare`): `wrapper… sandcastle serve`.
    pub async fn start_under(
        world: &World,
        webhook_secret: &str,
        extra: &[(&str, String)],
        wrapper: &[String],
    ) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let kubeconfig = cluster::kubeconfig_path();
        let bin = env!("CARGO_BIN_EXE_sandcastle-dev");
        let mut cmd = match wrapper.split_first() {
            None => tokio::process::Command::new(bin),
            Some((program, args)) => {
                let mut c = tokio::process::Command::new(program);
                c.args(args).arg(bin);
                c
            }
        };
        cmd.arg("serve")
            .env_clear()
            .env("KUBECONFIG", kubeconfig)
            .env("SANDCASTLE_LISTEN", addr.to_string())
            // The wake listener on a free port of its own (replicas run side by side).
            .env("SANDCASTLE_WAKE_LISTEN", "127.0.0.1:0")
            .env("SANDCASTLE_PUBLIC_URL", format!("http://{addr}"))
            .env("SANDCASTLE_NAMESPACE", &world.home.name)
            .env("SANDCASTLE_NAMESPACE_PREFIX", &world.prefix)
            .env("SANDCASTLE_GITHUB_APP_ID", TEST_APP_ID.to_string())
            .env("SANDCASTLE_GITHUB_PRIVATE_KEY_FILE", app_key_file())
            .env("SANDCASTLE_WEBHOOK_SECRET", webhook_secret)
            .env("SANDCASTLE_GITHUB_API_URL", world.gh.url())
            .env("SANDCASTLE_GITHUB_URL", world.gh.url())
            .env("SANDCASTLE_LOG", "warn");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("sandcastle serve starts");
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
        let process = Self {
            child,
            addr,
            stdout,
            stderr,
        };
        eventually("serve is ready", Duration::from_secs(60), || async {
            let (status, body) = world.get_from(addr, "/readyz").await;
            if status == 200 {
                Ok(())
            } else {
                Err(format!("{status} {body}"))
            }
        })
        .await;
        process
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("still running")
    }

    /// SIGTERM, then wait (30 s at most) for it to end; returns everything it said.
    pub async fn stop(self) -> Output {
        self.signal("-TERM");
        self.finish().await
    }

    /// SIGTERM, then wait for it to end; returns how it ended and everything it said.
    pub async fn stop_with_status(self) -> (std::process::ExitStatus, Output) {
        self.signal("-TERM");
        self.finish_with_status().await
    }

    /// SIGKILL (no chance to hand anything back); returns everything it said.
    pub async fn kill(self) -> Output {
        self.signal("-KILL");
        self.finish().await
    }

    fn signal(&self, which: &str) {
        let status = std::process::Command::new("kill")
            .arg(which)
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {which} {}", self.pid());
    }

    async fn finish(self) -> Output {
        self.finish_with_status().await.1
    }

    async fn finish_with_status(mut self) -> (std::process::ExitStatus, Output) {
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("stops within 30 s")
            .unwrap();
        let said = (self.stdout.await.unwrap(), self.stderr.await.unwrap());
        (status, said)
    }
}

fn drain(pipe: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>) -> JoinHandle<String> {
    tokio::spawn(async move {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut bytes).await;
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}
