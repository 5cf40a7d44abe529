//! A short-lived token for a preview's `preview-agent` ServiceAccount (Kubernetes
//! TokenRequest), so an agent can read the preview's pods, logs and events through the
//! Kubernetes API — in that namespace only — and operate that preview (and only it) through
//! Sandcastle. It expires no later than the preview and than the configured maximum, and is
//! bound to a Secret inside the preview namespace: deleting the preview (its namespace) voids it.
//! It is minted in the cluster the preview lives in, and is good for that cluster's API (the
//! answer names it and, for another cluster than Sandcastle's, its address).

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, PostParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Agent, AgentError, Caller, Operation, view};
use sandcastle_domain::guardrails::{PREVIEW_AGENT, PREVIEW_AGENT_ANCHOR};

/// Kubernetes issues no token for less than ten minutes.
const SHORTEST: Duration = Duration::from_secs(600);

/// How long the token should live (it lives at most the configured maximum, and never past the
/// preview).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRequestBody {
    /// Seconds (at least 600).
    #[schema(value_type = Option<u64>, minimum = 600, maximum = 4_294_967_295_u64)]
    #[serde(default, deserialize_with = "whole_seconds")]
    pub expiration_seconds: Option<u32>,
}

/// A token for the preview's `preview-agent` ServiceAccount.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenView {
    /// The bearer token (shown once; never logged).
    pub token: String,
    /// RFC 3339.
    pub expires_at: String,
    /// The preview namespace the token may read.
    pub namespace: String,
    pub service_account: String,
    /// The cluster the preview lives in (`in-cluster`: Sandcastle's own), whose API the token
    /// is for.
    pub cluster: String,
    /// That cluster's API address, for a cluster other than Sandcastle's own (whose address is
    /// the one you already reach it by).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

impl std::fmt::Debug for TokenView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenView")
            .field("token", &"[redacted]")
            .field("expires_at", &self.expires_at)
            .field("namespace", &self.namespace)
            .field("cluster", &self.cluster)
            .finish()
    }
}

impl Agent {
    /// Mint a token for preview `name`'s `preview-agent` account.
    pub async fn token(
        &self,
        caller: &Caller,
        name: &str,
        body: &TokenRequestBody,
    ) -> Result<TokenView, AgentError> {
        let pe = self.authorized(caller, Operation::Token, name).await?;
        if pe.spec.teardown.is_some() {
            return Err(AgentError::Conflict {
                code: "preview_removed",
                message: format!("preview {name} is torn down"),
            });
        }
        let now = self.clock.now();
        let asked = body
            .expiration_seconds
            .map(|s| Duration::from_secs(u64::from(s)));
        if asked.is_some_and(|d| d < SHORTEST) {
            return Err(AgentError::invalid(
                "invalid_expiration",
                "expirationSeconds",
                "Kubernetes issues tokens for 600 seconds at least",
            ));
        }
        let left: Option<Duration> = pe
            .spec
            .expires_at
            .as_ref()
            .map(|e| Duration::try_from(e.0.duration_since(now)).unwrap_or_default());
        if left.is_some_and(|l| l < SHORTEST) {
            return Err(AgentError::Conflict {
                code: "preview_expiring",
                message: format!(
                    "preview {name} expires in less than ten minutes; extend it first"
                ),
            });
        }
        let mut lifetime = asked.unwrap_or(self.limits.token_lifetime);
        lifetime = lifetime.min(self.limits.token_lifetime);
        if let Some(l) = left {
            lifetime = lifetime.min(l);
        }
        let lifetime = lifetime.max(SHORTEST);
        let ns = view::namespace_of(&pe, &self.addresses.namespace_prefix);
        let cluster = self.cluster_of(&pe)?;
        let anchor = Api::<Secret>::namespaced(cluster.client().clone(), &ns)
            .get_opt(PREVIEW_AGENT_ANCHOR)
            .await?
            .ok_or_else(|| AgentError::Conflict {
                code: "preview_not_ready",
                message: format!("preview {name} has no namespace yet; wait until it deploys"),
            })?;
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: None,
                expiration_seconds: Some(i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX)),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".to_owned()),
                    kind: Some("Secret".to_owned()),
                    name: Some(PREVIEW_AGENT_ANCHOR.to_owned()),
                    uid: anchor.metadata.uid.clone(),
                }),
            }),
            ..TokenRequest::default()
        };
        let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client().clone(), &ns);
        let minted = accounts
            .create_token_request(PREVIEW_AGENT, &PostParams::default(), &request)
            .await?;
        let none = || AgentError::Unavailable {
            code: "kubernetes_unavailable",
            message: "Kubernetes returned no token".to_owned(),
        };
        let status = minted.status.ok_or_else(none)?;
        let token = status.token.ok_or_else(none)?;
        let expires = status.expiration_timestamp.ok_or_else(none)?;
        self.audit(caller, Operation::Token, name, &pe.spec.sha, "minted");
        Ok(TokenView {
            token,
            expires_at: expires.0.to_string(),
            namespace: ns,
            service_account: PREVIEW_AGENT.to_owned(),
            cluster: cluster.name.to_string(),
            server: cluster.server.clone(),
        })
    }
}

/// Seconds as JSON writes a whole number: `1363` or `1363.0` (JSON Schema's `integer` is any
/// number without a fraction); a fraction, or a number past `u32`, is refused naming it.
fn whole_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    let whole = n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= f64::from(u32::MAX))
            .map(|f| f as u64)
    });
    whole
        .and_then(|w| u32::try_from(w).ok())
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("{n} is not a whole number of seconds")))
}
