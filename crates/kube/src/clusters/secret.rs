//! A cluster registered as a Secret in Sandcastle's namespace (label `sandcastle.dev/cluster:
//! NAME`), read into what Sandcastle connects with: either a whole kubeconfig (key
//! `kubeconfig`, its current context or the one key `context` names) or the parts of one
//! (`server`, `token`, `ca.crt`), as Argo CD registers clusters. Annotations carry the cap
//! (`sandcastle.dev/max-previews`) and, for wake on visit, the wake listener as that cluster's
//! ingress controller reaches it (`sandcastle.dev/wake-service`). What is wrong with a Secret is
//! said in words that name the key, never its value.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::config::{KubeConfigOptions, Kubeconfig};

use sandcastle_crd::labels::{CLUSTER, CLUSTER_MAX_PREVIEWS, CLUSTER_WAKE_SERVICE};
use sandcastle_domain::placement::ClusterName;
use sandcastle_domain::wake::WakeTarget;

/// How long connecting to a target cluster's API may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request to a target cluster may wait for its answer (watches have their own
/// client, without this bound).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A usable cluster Secret.
pub struct Registration {
    pub name: ClusterName,
    /// For requests: bounded by [`REQUEST_TIMEOUT`], so a cluster that stops answering fails a
    /// reconcile instead of holding it.
    pub config: kube::Config,
    /// For watches (long polls): no read timeout.
    pub watch_config: kube::Config,
    /// The API's address, as agents given a token reach it.
    pub server: String,
    pub max_previews: Option<u32>,
    pub wake: Option<WakeTarget>,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("name", &self.name)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// The name a cluster Secret registers (its label), if it is one.
pub fn cluster_name(secret: &Secret) -> Option<&str> {
    secret.labels().get(CLUSTER).map(String::as_str)
}

fn text<'a>(data: &'a BTreeMap<String, Vec<u8>>, key: &str) -> Result<Option<&'a str>, String> {
    data.get(key)
        .map(|v| std::str::from_utf8(v).map_err(|_| format!("key {key} is not UTF-8 text")))
        .transpose()
}

/// Read a cluster Secret. `Err` says what is wrong, naming the key or annotation at fault.
pub async fn read(secret: &Secret) -> Result<Registration, String> {
    let label = cluster_name(secret).unwrap_or_default();
    let name = ClusterName::new(label).map_err(|e| format!("label {CLUSTER}: {e}"))?;
    if name.is_local() {
        return Err(format!(
            "{name} is Sandcastle's own cluster, always available; it cannot be registered"
        ));
    }
    let data: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .chain(
            secret
                .string_data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone().into_bytes())),
        )
        .collect();
    let kubeconfig = match text(&data, "kubeconfig")? {
        Some(yaml) => Kubeconfig::from_yaml(yaml)
            .map_err(|e| format!("key kubeconfig: {}", first_line(&e)))?,
        None => parts(&data)?,
    };
    let options = KubeConfigOptions {
        context: text(&data, "context")?.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| format!("its kubeconfig cannot be used: {}", first_line(&e)))?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    let mut watch_config = config.clone();
    watch_config.read_timeout = None;
    config.read_timeout = Some(REQUEST_TIMEOUT);
    config.reset_reader_on_write = true;
    let annotations = secret.annotations();
    let max_previews = annotations
        .get(CLUSTER_MAX_PREVIEWS)
        .map(|v| {
            v.trim().parse::<u32>().map_err(|_| {
                format!("annotation {CLUSTER_MAX_PREVIEWS}: {v:?} is not a whole number")
            })
        })
        .transpose()?;
    let wake = annotations
        .get(CLUSTER_WAKE_SERVICE)
        .map(|v| {
            v.parse::<WakeTarget>()
                .map_err(|e| format!("annotation {CLUSTER_WAKE_SERVICE}: {e}"))
        })
        .transpose()?;
    Ok(Registration {
        name,
        server: config.cluster_url.to_string(),
        config,
        watch_config,
        max_previews,
        wake,
    })
}

/// A kubeconfig built from the keys `server`, `token` and `ca.crt` (PEM).
fn parts(data: &BTreeMap<String, Vec<u8>>) -> Result<Kubeconfig, String> {
    use base64::Engine as _;
    let server = text(data, "server")?
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or("it has neither a kubeconfig key nor a server key")?;
    if !server.starts_with("https://") && !server.starts_with("http://") {
        return Err("key server must be the API's URL (https://HOST:PORT)".to_owned());
    }
    let token = text(data, "token")?.map(str::trim);
    let ca = data
        .get("ca.crt")
        .map(|pem| base64::engine::general_purpose::STANDARD.encode(pem));
    let cluster = serde_json::json!({
        "server": server,
        "certificate-authority-data": ca,
    });
    let user = match token {
        Some(t) => serde_json::json!({"token": t}),
        None => serde_json::json!({}),
    };
    let kc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "target", "cluster": cluster}],
        "users": [{"name": "target", "user": user}],
        "contexts": [{"name": "target", "context": {"cluster": "target", "user": "target"}}],
        "current-context": "target",
    });
    serde_json::from_value(kc).map_err(|e| format!("keys server, token, ca.crt: {e}"))
}

/// The first line of an error, without what a library may quote of the input.
fn first_line(e: &dyn std::fmt::Display) -> String {
    let s = e.to_string();
    s.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use serde_json::json;

    fn secret(label: &str, data: &[(&str, &str)], annotations: serde_json::Value) -> Secret {
        let mut s: Secret = serde_json::from_value(json!({
            "metadata": {"name": "c", "labels": {CLUSTER: label}, "annotations": annotations},
        }))
        .unwrap();
        s.data = Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        );
        s
    }

    #[tokio::test]
    async fn server_and_token_make_a_registration_with_its_cap() {
        let s = secret(
            "eu-1",
            &[("server", "https://10.1.2.3:6443"), ("token", "t0ken")],
            json!({CLUSTER_MAX_PREVIEWS: "12", CLUSTER_WAKE_SERVICE: "wake.example.com:8081"}),
        );
        let r = read(&s).await.unwrap();
        assert_eq!(r.name.as_str(), "eu-1");
        assert_eq!(r.server, "https://10.1.2.3:6443/");
        assert_eq!(r.max_previews, Some(12));
        assert_eq!(r.wake.as_ref().unwrap().host(), "wake.example.com");
        assert_eq!(r.config.read_timeout, Some(REQUEST_TIMEOUT));
        assert_eq!(r.watch_config.read_timeout, None);
        assert!(
            !format!("{r:?}").contains("t0ken"),
            "the token never prints"
        );
    }

    #[tokio::test]
    async fn what_is_wrong_names_the_key_and_never_the_secret() {
        let cases = [
            (secret("B", &[], json!({})), "label sandcastle.dev/cluster"),
            (
                secret("in-cluster", &[("server", "https://x")], json!({})),
                "cannot be registered",
            ),
            (
                secret("b", &[("token", "s3cret")], json!({})),
                "neither a kubeconfig key",
            ),
            (
                secret(
                    "b",
                    &[("server", "10.0.0.1"), ("token", "s3cret")],
                    json!({}),
                ),
                "key server must be",
            ),
            (
                secret("b", &[("kubeconfig", "token: s3cret\n: [")], json!({})),
                "key kubeconfig",
            ),
            (
                secret(
                    "b",
                    &[("server", "https://x")],
                    json!({CLUSTER_MAX_PREVIEWS: "lots"}),
                ),
                "annotation sandcastle.dev/max-previews",
            ),
        ];
        for (s, want) in cases {
            let why = read(&s).await.unwrap_err();
            assert!(why.contains(want), "{why:?} should say {want:?}");
            assert!(!why.contains("s3cret"), "{why:?} quotes the secret");
        }
    }
}
