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
