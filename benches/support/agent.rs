//! An agent's side of the API for the benchmarks: a ServiceAccount allowed everything on
//! previews with a token of its own, and a caller that times each request.

use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn apply() -> PatchParams {
    PatchParams::apply("bench").force()
}

/// A ServiceAccount allowed everything on previews, and a token for it.
pub async fn admin(client: &kube::Client, ns: &str) -> (Api<ServiceAccount>, String) {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bench"}});
    sas.patch("bench", &apply(), &Patch::Apply(&sa))
        .await
        .unwrap();
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "bench"},
        "rules": [{"apiGroups": ["sandcastle.dev"], "resources": ["*"], "verbs": ["*"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "bench"},
        "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": ns}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bench"}});
    Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(client.clone(), ns)
        .patch("bench", &apply(), &Patch::Apply(&role))
        .await
        .unwrap();
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(client.clone(), ns)
        .patch("bench", &apply(), &Patch::Apply(&binding))
        .await
        .unwrap();
    let token = mint(&sas).await;
    (sas, token)
}

pub async fn mint(sas: &Api<ServiceAccount>) -> String {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    sas.create_token_request("bench", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .and_then(|s| s.token)
        .unwrap()
}

/// Calls the API with one token; returns the status, the JSON answer and the time taken.
pub struct Caller {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

impl Caller {
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value, Duration) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let t = Instant::now();
        let resp = req.send().await.expect("the API answers");
        let status = resp.status().as_u16();
        let value = resp.json::<Value>().await.unwrap_or(Value::Null);
        (status, value, t.elapsed())
    }

    pub async fn get(&self, path: &str) -> Duration {
        let (status, body, took) = self.call(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        took
    }

    pub async fn create(&self, blueprint: &str, name: &str) -> Duration {
        let body = json!({"blueprint": blueprint, "repository": "acme/guestbook",
            "commit": super::random_sha().as_str(), "name": name});
        self.create_with(body).await
    }

    /// `POST /previews` with `body`, which must be answered 201.
    pub async fn create_with(&self, body: Value) -> Duration {
        let name = body["name"].clone();
        let (status, answer, took) = self
            .call(reqwest::Method::POST, "/api/v1/previews", Some(body))
            .await;
        assert_eq!(status, 201, "create {name}: {answer}");
        took
    }
}
