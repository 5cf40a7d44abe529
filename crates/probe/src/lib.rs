//! One request of a preview's HTTP readiness probe: where it goes (the preview URL, the URL
//! through a fixed address such as the ingress controller's Service, or the primary Service
//! directly with the preview's host in `Host`), bounded in time and body, following redirects
//! only on the same host. Judging the answer is pure (`domain::probe`).

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::redirect::{Attempt, Policy};

use sandcastle_domain::Secret;
use sandcastle_domain::edge::SECRET_HEADER;
use sandcastle_domain::probe::{Answer, BODY_LIMIT};

/// Redirects followed on the same host before the last one is taken as the answer.
const MAX_REDIRECTS: usize = 5;

/// How a probe reaches a preview.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProbeVia {
    /// The preview URL, resolved by DNS.
    #[default]
    Url,
    /// The preview URL, connecting to this `host:port` instead (e.g. the ingress controller's
    /// Service, when preview hosts do not resolve where Sandcastle runs).
    ConnectTo(String),
    /// The primary Service in the preview namespace (`http://<service>.<namespace>.svc:<port>`),
    /// with the preview's host in `Host`; needs Sandcastle in the cluster.
    Service,
}

impl std::str::FromStr for ProbeVia {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "url" => Ok(Self::Url),
            "service" => Ok(Self::Service),
            other => match other.strip_prefix("connect-to:") {
                Some(addr)
                    if addr.rsplit_once(':').is_some_and(|(h, p)| {
                        !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0)
                    }) =>
                {
                    Ok(Self::ConnectTo(addr.to_owned()))
                }
                _ => Err(format!(
                    "{other:?}: expected url, service or connect-to:HOST:PORT"
                )),
            },
        }
    }
}

/// Where one probe request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL requested (scheme, host, port, path).
    pub url: reqwest::Url,
    /// Sent as `Host` when it differs from the URL's (the primary Service reached directly).
    pub host: Option<String>,
    /// Connect here instead of resolving the URL's host.
    pub connect_to: Option<String>,
    /// The preview's header secret, sent so a `signedIn` preview's gate lets the probe in.
    pub secret: Option<Secret>,
    /// Certificates (PEM) trusted besides the system's: the CA of the wildcard certificate
    /// previews are served with, when its Secret holds one (`ca.crt`: a private CA).
    pub roots: Option<Vec<u8>>,
}

impl Target {
    /// The target for `path` of the preview at `preview_url` (`https://pr-1.example.com`),
    /// reached `via`; `service` is the primary Service's name, namespace and port.
    pub fn new(
        preview_url: &str,
        path: &str,
        via: &ProbeVia,
        service: Option<(&str, &str, u16)>,
    ) -> Result<Self, String> {
        let base = reqwest::Url::parse(preview_url).map_err(|e| format!("{preview_url}: {e}"))?;
        let host = base
            .host_str()
            .ok_or("the preview URL has no host")?
            .to_owned();
        let direct = |url: &str| reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"));
        match via {
            ProbeVia::Url => Ok(Self {
                url: direct(&format!("{preview_url}{path}"))?,
                host: None,
                connect_to: None,
                secret: None,
                roots: None,
            }),
            ProbeVia::ConnectTo(addr) => Ok(Self {
                url: direct(&format!("{preview_url}{path}"))?,
                host: None,
                connect_to: Some(addr.clone()),
                secret: None,
                roots: None,
            }),
            ProbeVia::Service => {
                let (svc, ns, port) = service.ok_or("no primary Service with a port to probe")?;
                Ok(Self {
                    url: direct(&format!("http://{svc}.{ns}.svc:{port}{path}"))?,
                    host: Some(host),
                    connect_to: None,
                    secret: None,
                    roots: None,
                })
            }
        }
    }
}

/// Ask `target` once within `timeout`; the answer, or why there is none (`connection refused`).
pub async fn ask(target: &Target, timeout: Duration) -> Result<Answer, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let origin = target.url.clone();
    let policy = Policy::custom(move |attempt: Attempt<'_>| {
        if same_origin(&origin, attempt.url()) && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    let mut builder = reqwest::Client::builder()
        .redirect(policy)
        .timeout(timeout)
        .user_agent(concat!("sandcastle-probe/", env!("CARGO_PKG_VERSION")));
    if let Some(pem) = &target.roots {
        let roots = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| format!("the preview certificate's ca.crt cannot be read: {e}"))?;
        for root in roots {
            builder = builder.add_root_certificate(root);
        }
    }
    if let (Some(addr), Some(host)) = (&target.connect_to, target.url.host_str()) {
        let resolved = resolve(addr).await?;
        builder = builder.resolve(host, resolved);
    }
    let client = builder.build().map_err(|e| e.to_string())?;
    let mut request = client.get(target.url.clone());
    if let Some(host) = &target.host {
        request = request.header(reqwest::header::HOST, host);
    }
    if let Some(secret) = &target.secret {
        request = request.header(SECRET_HEADER, secret.expose());
    }
    let mut response = request.send().await.map_err(|e| failure(&e))?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let mut body = Vec::new();
    while body.len() < BODY_LIMIT {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(e) => return Err(failure(&e)),
        }
    }
    body.truncate(BODY_LIMIT);
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// Whether a redirect from `from` to `to` stays with the preview: the same host and port, or
/// the same host moving from `http` to `https` on its default port.
fn same_origin(from: &reqwest::Url, to: &reqwest::Url) -> bool {
    let upgrade = from.scheme() == "http" && to.scheme() == "https" && to.port().is_none();
    from.host_str() == to.host_str()
        && (from.port_or_known_default() == to.port_or_known_default() || upgrade)
}

async fn resolve(addr: &str) -> Result<SocketAddr, String> {
    tokio::net::lookup_host(addr)
        .await
        .map_err(|e| format!("{addr} does not resolve: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr} does not resolve"))
}

/// Why a request got no answer, in a few words.
fn failure(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "timed out".to_owned();
    }
    let mut source: Option<&dyn std::error::Error> = Some(e);
    let mut deepest = e.to_string();
    while let Some(s) = source {
        deepest = s.to_string();
        source = s.source();
    }
    if deepest.contains("Connection refused") {
        "connection refused".to_owned()
    } else if e.is_connect() {
        format!("cannot connect: {deepest}")
    } else {
        deepest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn via_is_read_from_its_setting() {
        assert_eq!("url".parse::<ProbeVia>(), Ok(ProbeVia::Url));
        assert_eq!("service".parse::<ProbeVia>(), Ok(ProbeVia::Service));
        assert_eq!(
            "connect-to:ingress.ingress-nginx.svc:80".parse::<ProbeVia>(),
            Ok(ProbeVia::ConnectTo("ingress.ingress-nginx.svc:80".into()))
        );
        for bad in [
            "",
            "dns",
            "connect-to:",
            "connect-to:host",
            "connect-to::80",
        ] {
            assert!(bad.parse::<ProbeVia>().is_err(), "{bad}");
        }
    }

    #[test]
    fn redirects_stay_on_the_preview() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        let from = u("http://pr-1.example.com/");
        assert!(same_origin(&from, &u("http://pr-1.example.com/login")));
        assert!(same_origin(&from, &u("https://pr-1.example.com/")));
        assert!(!same_origin(&from, &u("http://pr-1.example.com:8080/")));
        assert!(!same_origin(&from, &u("http://169.254.169.254/latest")));
        assert!(!same_origin(
            &u("https://pr-1.example.com/"),
            &u("http://pr-1.example.com/")
        ));
    }

    #[test]
    fn targets_keep_the_preview_host() {
        let url =
            Target::new("https://pr-1.example.com", "/healthz", &ProbeVia::Url, None).unwrap();
        assert_eq!(url.url.as_str(), "https://pr-1.example.com/healthz");
        assert_eq!(url.host, None);

        let svc = Target::new(
            "https://pr-1.example.com",
            "/",
            &ProbeVia::Service,
            Some(("web", "shop-pr-1", 8080)),
        )
        .unwrap();
        assert_eq!(svc.url.as_str(), "http://web.shop-pr-1.svc:8080/");
        assert_eq!(svc.host.as_deref(), Some("pr-1.example.com"));
        assert!(Target::new("https://pr-1.example.com", "/", &ProbeVia::Service, None).is_err());
    }
}
