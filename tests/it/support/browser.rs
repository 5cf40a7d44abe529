//! A headless Chromium (Debian's, driven through its chromedriver with fantoccini) for tests:
//! `SANDCASTLE_CHROMEDRIVER` and `SANDCASTLE_CHROMIUM`, else on PATH (`scripts/test` installs them).

use std::path::PathBuf;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use super::eventually;

const T: Duration = Duration::from_secs(90);

fn program(env: &str, names: &[&str]) -> PathBuf {
    if let Ok(p) = std::env::var(env) {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "{} not found: install Debian's chromium and chromium-driver (scripts/test does), or set {env}",
        names[0]
    )
}

/// A headless Chromium session, with its chromedriver (stopped when dropped).
pub struct Browser {
    pub client: Client,
    _driver: tokio::process::Child,
}

impl Browser {
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// A session whose Chromium also gets `args` (e.g. `--proxy-server=...`).
    pub async fn start_with(args: &[String]) -> Self {
        let driver = program("SANDCASTLE_CHROMEDRIVER", &["chromedriver"]);
        let chromium = program("SANDCASTLE_CHROMIUM", &["chromium", "chromium-browser"]);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let child = tokio::process::Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", driver.display()));
        let status = format!("http://127.0.0.1:{port}/status");
        eventually("chromedriver answers", Duration::from_secs(30), || {
            let status = status.clone();
            async move {
                reqwest::get(&status)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        })
        .await;
        let mut caps = serde_json::Map::new();
        let mut all: Vec<String> = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1280,900",
        ]
        .map(str::to_owned)
        .to_vec();
        all.extend_from_slice(args);
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"binary": chromium, "args": all}),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a Chromium session");
        Self {
            client,
            _driver: child,
        }
    }

    /// The page's text; empty while a page is being replaced (the old body went stale).
    pub async fn text(&self) -> String {
        match self.client.find(Locator::Css("body")).await {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Wait until the page (as it is now, without reloading it) says `what`.
    pub async fn wait_text(&self, what: &str) -> String {
        eventually(&format!("the page says {what:?}"), T, || async {
            let text = self.text().await;
            if text.contains(what) {
                Ok(text)
            } else {
                Err(text)
            }
        })
        .await
    }

    /// Wait until the page (without reloading it) has an element matching `css`.
    pub async fn wait_css(&self, css: &str) {
        eventually(&format!("the page has {css}"), T, || async {
            match self.client.find(Locator::Css(css)).await {
                Ok(_) => Ok(()),
                Err(_) => Err(self.text().await),
            }
        })
        .await;
    }

    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
            .click()
            .await
            .unwrap();
    }

    /// Save the page as `target/screenshots/<name>.png`; returns the PNG.
    pub async fn screenshot(&self, name: &str) -> Vec<u8> {
        let png = self.client.screenshot().await.unwrap();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("../screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
        png
    }
}
