//! The wildcard certificate previews serve (`--preview-tls-secret NAMESPACE/NAME`, e.g. issued
//! once by cert-manager with DNS-01): the source Secret followed by a watch, its certificate's
//! DNS names (which hosts fit it, for the plan), and its copy — `sandcastle-tls`, the same
//! `tls.crt` and `tls.key` — in each preview namespace, made at each new rollout and made again
//! in every live preview when the source changes (a renewal). The certificate is read with
//! x509-parser; the key is only ever copied, never logged or parsed.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use serde_json::json;

use sandcastle_crd::labels::{MANAGED_BY, MANAGER};
use sandcastle_domain::edge::{Certificate, TLS_SECRET};

/// The field manager of the copies.
const MANAGER_NAME: &str = "sandcastle-tls";

/// Where the wildcard certificate's Secret is: `NAMESPACE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSource {
    pub namespace: String,
    pub name: String,
}

impl std::str::FromStr for TlsSource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = |p: &str| !p.is_empty() && sandcastle_domain::naming::is_object_name(p);
        match s.split_once('/') {
            Some((ns, name)) if ok(ns) && ok(name) => Ok(Self {
                namespace: ns.to_owned(),
                name: name.to_owned(),
            }),
            _ => Err("expected NAMESPACE/NAME of a kubernetes.io/tls Secret".to_owned()),
        }
    }
}

impl std::fmt::Display for TlsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The certificate as last read: its names, and what a copy holds.
pub struct Loaded {
    pub certificate: Certificate,
    data: BTreeMap<String, ByteString>,
    /// The source's resourceVersion: a copy of another version is out of date.
    pub version: String,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("certificate", &self.certificate)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// What is known of the source Secret now.
#[derive(Debug, Clone)]
pub enum Standing {
    /// Not read yet.
    Unknown,
    Loaded(Arc<Loaded>),
    /// Missing, or not a usable certificate: why.
    Unusable(String),
}

/// Why there is no certificate to serve previews with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoCertificate {
    /// Not read yet (Sandcastle starting): ask again in a moment.
    #[error("the preview certificate Secret {0} has not been read yet")]
    NotReadYet(String),
    /// Missing, or not a certificate: why, for people.
    #[error("{0}")]
    Unusable(String),
}

/// The wildcard certificate, kept current by [`Wildcard::follow`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Wildcard {
    pub source: TlsSource,
    now: Arc<RwLock<Standing>>,
}

/// The DNS names of the first certificate in `pem` (a `tls.crt`), lower-case.
pub fn names_of(pem: &[u8]) -> Result<Vec<String>, String> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem)
        .map_err(|e| format!("tls.crt holds no PEM certificate ({e})"))?;
    let cert = block
        .parse_x509()
        .map_err(|e| format!("tls.crt is not an X.509 certificate ({e})"))?;
    let mut names: Vec<String> = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_ascii_lowercase()),
                _ => None,
            })
            .collect(),
        Ok(None) => Vec::new(),
        Err(e) => return Err(format!("tls.crt's subjectAltName cannot be read ({e})")),
    };
    names.dedup();
    if names.is_empty() {
        return Err("tls.crt names no DNS host (subjectAltName)".to_owned());
    }
    Ok(names)
}

/// What the Secret `s` gives: the certificate loaded, or why it cannot be used.
fn load(s: &Secret) -> Result<Loaded, String> {
    let data = s.data.clone().unwrap_or_default();
    let (Some(crt), Some(_)) = (data.get("tls.crt"), data.get("tls.key")) else {
        return Err("it holds no tls.crt and tls.key".to_owned());
    };
    let names = names_of(&crt.0)?;
    let data = ["tls.crt", "tls.key", "ca.crt"]
        .into_iter()
        .filter_map(|k| Some((k.to_owned(), data.get(k)?.clone())))
        .collect();
    Ok(Loaded {
        certificate: Certificate { names },
        data,
        version: s.resource_version().unwrap_or_default(),
    })
}

impl Loaded {
    /// The certificate's CA (`ca.crt`, PEM), when its Secret holds one: a private CA, which
    /// Sandcastle's own readiness probe trusts.
    pub fn ca(&self) -> Option<&[u8]> {
        self.data.get("ca.crt").map(|b| b.0.as_slice())
    }
}

impl Wildcard {
    pub fn new(source: TlsSource) -> Self {
        Self {
            source,
            now: Arc::new(RwLock::new(Standing::Unknown)),
        }
    }

    /// The certificate now, or why there is none to serve.
    pub fn current(&self) -> Result<Arc<Loaded>, NoCertificate> {
        let standing = self.now.read().unwrap_or_else(|p| p.into_inner()).clone();
        match standing {
            Standing::Loaded(l) => Ok(l),
            Standing::Unknown => Err(NoCertificate::NotReadYet(self.source.to_string())),
            Standing::Unusable(why) => Err(NoCertificate::Unusable(format!(
                "the preview certificate Secret {}: {why}",
                self.source
            ))),
        }
    }

    fn set(&self, standing: Standing) {
        *self.now.write().unwrap_or_else(|p| p.into_inner()) = standing;
    }

    /// Follow the source Secret (in `client`'s cluster) until the stream ends; `changed` is
    /// called with each new certificate (a renewal), after it is current.
    pub async fn follow(self, client: Client, changed: impl Fn(Arc<Loaded>)) {
        let api: Api<Secret> = Api::namespaced(client, &self.source.namespace);
        let config =
            watcher::Config::default().fields(&format!("metadata.name={}", self.source.name));
        let mut events = watcher::watcher(api, config).boxed();
        let mut seen = false;
        while let Some(event) = events.next().await {
            let secret = match event {
                Ok(Event::Apply(s) | Event::InitApply(s)) => {
                    seen = true;
                    s
                }
                Ok(Event::Delete(_)) => {
                    self.set(Standing::Unusable("it was deleted".to_owned()));
                    continue;
                }
                Ok(Event::Init) => {
                    seen = false;
                    continue;
                }
                Ok(Event::InitDone) => {
                    if !seen {
                        self.set(Standing::Unusable("it does not exist".to_owned()));
                    }
                    continue;
                }
                Err(e) => {
                    tracing::warn!(source = %self.source, error = %e, "watching the preview certificate failed");
                    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                    continue;
                }
            };
            match load(&secret) {
                Ok(loaded) => {
                    let loaded = Arc::new(loaded);
                    let new = self.current().is_ok_and(|l| l.version != loaded.version)
                        || self.current().is_err();
                    self.set(Standing::Loaded(loaded.clone()));
                    if new {
                        tracing::info!(source = %self.source, names = %loaded.certificate.describe(), "preview certificate loaded");
                        changed(loaded);
                    }
                }
                Err(why) => {
                    tracing::warn!(source = %self.source, %why, "the preview certificate cannot be used");
                    self.set(Standing::Unusable(why));
                }
            }
        }
    }
}

/// Make (or bring up to date) the copy of `loaded` in namespace `ns` of `client`'s cluster.
pub async fn copy(client: &Client, ns: &str, loaded: &Loaded) -> Result<(), kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let body = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": TLS_SECRET,
            "labels": {MANAGED_BY: MANAGER},
        },
        "type": "kubernetes.io/tls",
        "data": loaded.data,
    });
    api.patch(
        TLS_SECRET,
        &PatchParams::apply(MANAGER_NAME).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_namespace_and_name() {
        assert_eq!(
            "cert-manager/wildcard-preview".parse::<TlsSource>(),
            Ok(TlsSource {
                namespace: "cert-manager".to_owned(),
                name: "wildcard-preview".to_owned()
            })
        );
        for bad in ["", "a", "a/", "/b", "A/b", "a/b/c"] {
            assert!(bad.parse::<TlsSource>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_certificates_dns_names_are_read() {
        let names = vec![
            "*.preview.example.com".to_owned(),
            "Preview.example.com".to_owned(),
        ];
        let cert = rcgen::generate_simple_self_signed(names).unwrap();
        let pem = cert.cert.pem();
        assert_eq!(
            names_of(pem.as_bytes()).unwrap(),
            ["*.preview.example.com", "preview.example.com"]
        );
        let s = Secret {
            data: Some(BTreeMap::from([
                ("tls.crt".to_owned(), ByteString(pem.into_bytes())),
                ("tls.key".to_owned(), ByteString(b"key".to_vec())),
                ("other".to_owned(), ByteString(b"x".to_vec())),
            ])),
            ..Secret::default()
        };
        let loaded = load(&s).unwrap();
        assert!(loaded.certificate.serves("42-shop.preview.example.com"));
        assert_eq!(
            loaded.data.keys().collect::<Vec<_>>(),
            ["tls.crt", "tls.key"]
        );
        assert!(!format!("{loaded:?}").contains("key"), "{loaded:?}");
    }

    #[test]
    fn a_secret_without_a_certificate_is_unusable_and_says_why() {
        let s = Secret {
            data: Some(BTreeMap::from([(
                "tls.crt".to_owned(),
                ByteString(b"not a certificate".to_vec()),
            )])),
            ..Secret::default()
        };
        assert_eq!(load(&s).unwrap_err(), "it holds no tls.crt and tls.key");
        let mut s = s;
        s.data
            .as_mut()
            .unwrap()
            .insert("tls.key".to_owned(), ByteString(b"k".to_vec()));
        assert!(load(&s).unwrap_err().contains("no PEM certificate"));
    }
}
