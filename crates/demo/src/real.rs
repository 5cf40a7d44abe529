//! The demo on the real tier (`sandcastle demo --real`, docs/real-tier.md): the test app and
//! Redis as the staging namespace, each pull request commit built as its own image of the test
//! app, and its page fetched through Traefik — the URL a person opens in a browser.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use sandcastle::domain::Sha;

/// The test app (`sandcastle.test/app`) behind Service `app` and an Ingress, counting visits in
/// Redis (a StatefulSet, the data tier) that a seed Job starts at 41. Its pods run as a
/// non-root user with no capabilities, so any Pod Security level admits them.
pub const TESTAPP_YAML: &str = include_str!("testapp.yaml");

/// A running real tier, from the lines `scripts/kube-harness start --real` prints.
#[derive(Debug, Clone)]
pub struct RealTier {
    /// Traefik's entry point for every preview host (`127.0.0.1:PORT`).
    pub ingress: String,
    /// The control plane's directory (`SANDCASTLE_HARNESS_DIR`).
    pub harness_dir: String,
}

/// A page fetched through Traefik: status, `X-Commit`, body.
#[derive(Debug)]
pub struct Page {
    pub status: u16,
    pub commit: Option<String>,
    pub body: String,
}

impl RealTier {
    /// Build the test app as commit `sha` (its own image, serving that commit) and import it as
    /// `sandcastle.test/app:<sha>`, as a CI would push the pull request's image.
    pub fn image_for(&self, root: &Path, sha: &Sha) -> anyhow::Result<()> {
        let out = Command::new(root.join("scripts/kube-harness"))
            .args(["image-commit", sha.as_str()])
            .env("SANDCASTLE_HARNESS_DIR", &self.harness_dir)
            .output()
            .context("running scripts/kube-harness image-commit")?;
        if !out.status.success() {
            bail!(
                "building the image of commit {}: {}",
                sha.short(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// The URL of `host` as a browser on this machine opens it (`*.localhost` is loopback).
    pub fn browser_url(&self, host: &str) -> String {
        let port = self.ingress.rsplit(':').next().unwrap_or_default();
        format!("http://{host}:{port}/")
    }

    /// GET `path` of `host` through Traefik.
    pub async fn get(&self, host: &str, path: &str) -> anyhow::Result<Page> {
        let client = HttpClient::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let req = http::Request::get(format!("http://{}{path}", self.ingress))
            .header(http::header::HOST, host)
            .body(Empty::new())?;
        let resp = client
            .request(req)
            .await
            .context("Traefik does not answer")?;
        let status = resp.status().as_u16();
        let commit = resp
            .headers()
            .get("x-commit")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = resp.into_body().collect().await?.to_bytes();
        Ok(Page {
            status,
            commit,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}
