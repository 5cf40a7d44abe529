//! Calling Sandcastle's REST API as Kubernetes identities really are: ServiceAccounts made in
//! the test's Sandcastle namespace, granted `previewenvironments` access with a Role, their
//! tokens minted with TokenRequest; and an expired token signed with the local control plane's
//! own ServiceAccount key.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::world::World;

/// An API response: status, JSON body (`Null` when not JSON), headers.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

/// Send `method path` to the world's Sandcastle with `token` (and a JSON `body`).
pub async fn call(
    world: &World,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Answer {
    call_with(world, method, path, token, body, &[]).await
}

/// An HTTP client; rustls is built with ring only, so the process picks it.
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// [`call`] with extra headers.
pub async fn call_with(
    world: &World,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> Answer {
    let url = format!("http://{}{path}", world.addr());
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = client()
        .request(method, url)
        .timeout(Duration::from_secs(700));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("Sandcastle answers");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap_or_default();
    Answer {
        status,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        headers,
    }
}

/// A ServiceAccount `name` in the world's Sandcastle namespace allowed `rules` on
/// `previewenvironments` there (none: no access at all); returns a token for it.
pub async fn account(world: &World, name: &str, rules: &[(&[&str], &[&str])]) -> String {
    let ns = &world.home.name;
    let client = &world.client;
    let apply = |v: Value| v;
    let sa =
        apply(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}));
    let params = PatchParams::apply("sandcastle-tests").force();
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .patch(name, &params, &Patch::Apply(&sa))
        .await
        .expect("ServiceAccount made");
    if !rules.is_empty() {
        let rules: Vec<Value> = rules
            .iter()
            .map(|(resources, verbs)| {
                json!({"apiGroups": ["sandcastle.dev"], "resources": resources, "verbs": verbs})
            })
            .collect();
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name}, "rules": rules});
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}});
        Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(client.clone(), ns)
            .patch(name, &params, &Patch::Apply(&role))
            .await
            .expect("Role made");
        Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(client.clone(), ns)
            .patch(name, &params, &Patch::Apply(&binding))
            .await
            .expect("RoleBinding made");
    }
    token_for(client, ns, name).await
}

/// A fresh 10-minute token for ServiceAccount `name` in `ns` (TokenRequest).
pub async fn token_for(client: &Client, ns: &str, name: &str) -> String {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("token minted")
        .status
        .and_then(|s| s.token)
        .expect("a token")
}

/// A token for ServiceAccount `name` in `ns` that expired an hour ago, signed with the local
/// control plane's ServiceAccount key (`pki/sa.key` beside the kubeconfig). Fails the test with
/// the reason when that key is not there (a cluster of your own keeps its key to itself).
pub async fn expired_token(client: &Client, ns: &str, name: &str) -> String {
    let kubeconfig = std::env::var("SANDCASTLE_TEST_KUBECONFIG").unwrap_or_default();
    let key_path = std::path::Path::new(&kubeconfig)
        .parent()
        .map(|d| d.join("pki/sa.key"))
        .unwrap_or_default();
    let key = std::fs::read_to_string(&key_path).unwrap_or_else(|e| {
        panic!(
            "an expired token is signed with the local control plane's ServiceAccount key, read from {}: {e}; \
             run the tests with scripts/test (which starts that control plane)",
            key_path.display()
        )
    });
    let sa = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("the ServiceAccount exists");
    let now = jiff::Timestamp::now().as_second();
    let issuer = "https://kubernetes.default.svc.cluster.local";
    let claims = json!({
        "iss": issuer, "aud": [issuer],
        "sub": format!("system:serviceaccount:{ns}:{name}"),
        "iat": now - 7200, "nbf": now - 7200, "exp": now - 3600,
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": sa.uid().unwrap()}},
    });
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(key.as_bytes()).expect("an RSA key");
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &claims,
        &key,
    )
    .expect("signed")
}

/// Full access to previews (and every subresource the API authorizes).
pub const ALL: (&[&str], &[&str]) = (
    &[
        "previewenvironments",
        "previewenvironments/logs",
        "previewenvironments/events",
        "previewenvironments/token",
        "previewenvironments/reset",
        "previewenvironments/share",
        "previewenvironments/tests",
        "blueprints/data-refresh",
    ],
    &[
        "get", "list", "watch", "create", "update", "patch", "delete",
    ],
);

/// What came back to a request whose body was still being sent: the status and the JSON body.
#[derive(Debug)]
pub struct EarlyAnswer {
    pub status: u16,
    pub body: Value,
}

/// Send `head` (the request line and headers, which promise a body) and the first bytes of the
/// body, then send nothing more, holding the connection open as a slow or endless upload does;
/// the answer if one comes within `within`, or `None` (the server waits for the rest).
pub async fn answer_before_the_body_ends(
    world: &World,
    head: &str,
    body_start: &[u8],
    within: Duration,
) -> Option<EarlyAnswer> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(world.addr())
        .await
        .expect("Sandcastle accepts connections");
    stream.write_all(head.as_bytes()).await.expect("head sent");
    stream.write_all(body_start).await.expect("body start sent");
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            if let Some(answer) = complete_answer(&got) {
                return Some(answer);
            }
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return complete_answer(&got),
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.ok().flatten()
}

/// An HTTP/1.1 answer read whole from `bytes` (with a `content-length`), if it is all there.
fn complete_answer(bytes: &[u8]) -> Option<EarlyAnswer> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let body = bytes.get(end..end + length)?;
    Some(EarlyAnswer {
        status,
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    })
}

/// How a connection fared after a request was answered before its body was sent: as a pooled
/// HTTP/1.1 client sees it.
#[derive(Debug, PartialEq, Eq)]
pub enum AfterEarlyAnswer {
    /// The answer said `Connection: close`: a client opens a new connection for its next
    /// request, as it should.
    SaidClose { status: u16 },
    /// The connection was kept, and the next request on it was answered `second`.
    Kept { status: u16, second: u16 },
}

/// Send `head` (promising `body`), read the answer before sending `body` (it came 20 ms or more
/// after the head, as a client's upload does), then, unless the answer said `Connection: close`,
/// send a `GET /healthz` on the same connection, as a pooled client reusing it would. Panics —
/// with what came — when the connection was closed without a word: the client's next request
/// would have failed.
pub async fn reuse_after_an_early_answer(
    addr: std::net::SocketAddr,
    head: &str,
    body: &[u8],
) -> AfterEarlyAnswer {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("Sandcastle accepts connections");
    stream.write_all(head.as_bytes()).await.expect("head sent");
    let (status, close, rest) =
        read_answer_head(&mut stream, head.lines().next().unwrap_or_default()).await;
    if close {
        return AfterEarlyAnswer::SaidClose { status };
    }
    drop(rest);
    // The body, then the next request, on the connection a pool would keep.
    let second = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let sent = async {
        stream.write_all(body).await?;
        stream.write_all(second.as_bytes()).await
    };
    if let Err(e) = sent.await {
        panic!("answered {status} without Connection: close, then the connection was closed: {e}");
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let read = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return got,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
            if got.windows(4).any(|w| w == b"\r\n\r\n") {
                return got;
            }
        }
    };
    let got = tokio::time::timeout(Duration::from_secs(15), read)
        .await
        .unwrap_or_default();
    let second: u16 = String::from_utf8_lossy(&got)
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "answered {status} without Connection: close, then the next request on the \
                 connection got no answer ({} bytes)",
                got.len()
            )
        });
    AfterEarlyAnswer::Kept { status, second }
}

/// Read an answer's head (and its body by `content-length`): its status, whether it says
/// `Connection: close`, and the bytes read past it.
async fn read_answer_head(stream: &mut tokio::net::TcpStream, what: &str) -> (u16, bool, Vec<u8>) {
    use tokio::io::AsyncReadExt as _;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let read = async {
        loop {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if got.len() >= end + 4 + length {
                    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok());
                    let close = head
                        .lines()
                        .filter_map(|l| l.strip_prefix("connection:"))
                        .any(|v| v.split(',').any(|t| t.trim() == "close"));
                    return (status.unwrap_or(0), close, got[end + 4 + length..].to_vec());
                }
            }
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => panic!(
                    "the connection ended before a whole answer: {}",
                    String::from_utf8_lossy(&got)
                ),
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(15), read)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer before the body was sent"))
}
