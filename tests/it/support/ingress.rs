//! An ingress controller for tests: an HTTP server (and a browser's HTTP proxy) that routes each
//! request the way the cluster's Ingress objects say, as ingress-nginx would. The request's host
//! picks the Ingress rule and its longest matching path; the rule's backend Service decides: an
//! `ExternalName` Service (Sandcastle's `sandcastle-wake`) is proxied to, with the visitor's
//! `Host`; any other Service answers `app <service> in <namespace>`, standing for the app (the
//! control plane runs no containers). A host no Ingress serves gets nginx's default 404. It
//! routes only by the Ingresses of one test's preview namespaces (their prefix), as each test
//! stands for a cluster of its own.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use tokio::task::JoinHandle;

pub struct IngressController {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for IngressController {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl IngressController {
    /// Route by the Ingresses of namespaces whose names start with `prefix`.
    pub async fn start(client: Client, prefix: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .fallback(route)
            .with_state((client, prefix.to_owned()));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, task }
    }

    /// GET `path` of `host` through the controller: status, the preview header, body.
    pub async fn get(&self, host: &str, path: &str) -> (u16, Option<String>, String) {
        let r = reqwest::Client::new()
            .get(format!("http://{}{path}", self.addr))
            .header(header::HOST, host)
            .send()
            .await
            .expect("the ingress controller answers");
        let status = r.status().as_u16();
        let preview = r
            .headers()
            .get("x-sandcastle-preview")
            .map(|v| v.to_str().unwrap().to_owned());
        (status, preview, r.text().await.unwrap_or_default())
    }
}

/// Where an Ingress sends `host` and `path`: the backend Service's namespace, name and port.
async fn backend(
    client: &Client,
    prefix: &str,
    host: &str,
    path: &str,
) -> Option<(String, String, u16)> {
    let all: Api<Ingress> = Api::all(client.clone());
    let mut best: Option<(usize, (String, String, u16))> = None;
    for ing in all.list(&ListParams::default()).await.ok()? {
        let ns = ing.namespace().unwrap_or_default();
        if !ns.starts_with(prefix) {
            continue;
        }
        for rule in ing.spec.iter().flat_map(|s| s.rules.iter().flatten()) {
            if rule.host.as_deref() != Some(host) {
                continue;
            }
            for p in rule.http.iter().flat_map(|h| h.paths.iter()) {
                let prefix = p.path.as_deref().unwrap_or("/");
                let Some(svc) = p.backend.service.as_ref() else {
                    continue;
                };
                let port = svc.port.as_ref().and_then(|p| p.number).unwrap_or(80) as u16;
                if path.starts_with(prefix)
                    && best.as_ref().is_none_or(|(len, _)| prefix.len() > *len)
                {
                    best = Some((prefix.len(), (ns.clone(), svc.name.clone(), port)));
                }
            }
        }
    }
    best.map(|(_, b)| b)
}

async fn route(
    State((client, prefix)): State<(Client, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| h.split(':').next().unwrap_or(h).to_owned())
        .or_else(|| uri.host().map(str::to_owned))
        .unwrap_or_default();
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let Some((ns, name, port)) = backend(&client, &prefix, &host, uri.path()).await else {
        return (StatusCode::NOT_FOUND, Html("<html><head><title>404 Not Found</title></head><body>default backend - 404</body></html>")).into_response();
    };
    let services: Api<Service> = Api::namespaced(client, &ns);
    let Ok(service) = services.get(&name).await else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "503 Service Temporarily Unavailable",
        )
            .into_response();
    };
    let spec = service.spec.unwrap_or_default();
    if spec.type_.as_deref() != Some("ExternalName") {
        let page =
            format!("<html><head><title>app</title></head><body>app {name} in {ns}</body></html>");
        return (StatusCode::OK, Html(page)).into_response();
    }
    let upstream = match spec.external_name.as_deref() {
        Some("localhost") => "127.0.0.1".to_owned(),
        Some(other) => other.to_owned(),
        None => return StatusCode::BAD_GATEWAY.into_response(),
    };
    let mut forwarded = reqwest::Client::new()
        .request(method, format!("http://{upstream}:{port}{path}"))
        .header(header::HOST, &host)
        .body(body);
    if let Some(accept) = headers.get(header::ACCEPT) {
        forwarded = forwarded.header(header::ACCEPT, accept);
    }
    let Ok(answer) = forwarded.send().await else {
        return (StatusCode::BAD_GATEWAY, "502 Bad Gateway").into_response();
    };
    let mut response = Response::builder().status(answer.status().as_u16());
    for (k, v) in answer.headers() {
        if k != header::TRANSFER_ENCODING && k != header::CONNECTION {
            response = response.header(k.as_str(), v.as_bytes());
        }
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    response.body(axum::body::Body::from(bytes)).unwrap()
}
