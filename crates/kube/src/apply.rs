//! Server-side apply of untyped objects (one field manager), with the API resource of each kind
//! resolved once: built-in kinds statically, extra kinds (a Blueprint's `allowKinds`) by
//! discovery. Jobs and ReplicaSets, which never change what they already run, are replaced when
//! what they run changes.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet},
    autoscaling::v2::HorizontalPodAutoscaler,
    batch::v1::{CronJob, Job},
    core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service, ServiceAccount},
    networking::v1::{Ingress, NetworkPolicy},
    policy::v1::PodDisruptionBudget,
    rbac::v1::{Role, RoleBinding},
};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{Scope, pinned_kind};
use kube::{Client, Resource};
use serde_json::Value;
use tokio::sync::RwLock;

use sha2::{Digest, Sha256};

use sandcastle_crd::labels::{FIELD_MANAGER, HOOK, SPEC_HASH};

/// Why an object could not be applied, naming it.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{kind} {name}: {message}")]
    Rejected {
        kind: String,
        name: String,
        message: String,
    },
    #[error("{kind} {name}: the cluster does not serve {api_version} {kind}")]
    UnknownKind {
        api_version: String,
        kind: String,
        name: String,
    },
    #[error("{kind} {name} is cluster-scoped and cannot be copied into a preview")]
    ClusterScoped { kind: String, name: String },
    #[error("{kind} {name} changed and is being replaced")]
    Replacing { kind: String, name: String },
    #[error("object without apiVersion/kind/metadata.name: {0}")]
    Malformed(String),
    #[error("Kubernetes API: {0}")]
    Api(#[source] kube::Error),
}

impl ApplyError {
    /// Whether retrying later may succeed (the API was unreachable), as opposed to a rejection.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Api(e) => !matches!(e, kube::Error::Api(r) if r.code < 500 && r.code != 429),
            Self::Replacing { .. } => true,
            _ => false,
        }
    }
}

/// apiVersion, kind and name of an object.
pub fn identity(obj: &Value) -> Result<(&str, &str, &str), ApplyError> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str);
    let kind = obj.get("kind").and_then(Value::as_str);
    let name = obj.pointer("/metadata/name").and_then(Value::as_str);
    match (api_version, kind, name) {
        (Some(a), Some(k), Some(n)) => Ok((a, k, n)),
        _ => Err(ApplyError::Malformed(truncate(&obj.to_string(), 200))),
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn builtin<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

/// The kinds Sandcastle reads and writes without discovery: those a preview may hold, the
/// DaemonSets it refuses, and its guardrails' quota and limits.
pub fn builtin_resources() -> Vec<ApiResource> {
    vec![
        builtin::<ConfigMap>(),
        builtin::<Secret>(),
        builtin::<Service>(),
        builtin::<ServiceAccount>(),
        builtin::<PersistentVolumeClaim>(),
        builtin::<Deployment>(),
        builtin::<StatefulSet>(),
        builtin::<ReplicaSet>(),
        builtin::<DaemonSet>(),
        builtin::<Job>(),
        builtin::<CronJob>(),
        builtin::<Ingress>(),
        builtin::<NetworkPolicy>(),
        builtin::<Role>(),
        builtin::<RoleBinding>(),
        builtin::<HorizontalPodAutoscaler>(),
        builtin::<PodDisruptionBudget>(),
        builtin::<k8s_openapi::api::core::v1::ResourceQuota>(),
        builtin::<k8s_openapi::api::core::v1::LimitRange>(),
    ]
}

/// Resolves apiVersion + kind to the API resource to call, caching discovery results.
#[derive(Clone)]
pub struct Resolver {
    client: Client,
    cache: Arc<RwLock<HashMap<(String, String), ApiResource>>>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver").finish_non_exhaustive()
    }
}

/// A Role or binding that grants more than Sandcastle holds (the chart gives it no `escalate` or
/// `bind` unless `rbac.copyRoles` is on) is refused saying so first, and which setting copies it.
fn with_hint(kind: &str, message: String) -> String {
    let escalation = message.contains("attempting to grant RBAC permissions not currently held");
    if !(matches!(kind, "Role" | "RoleBinding") && escalation) {
        return message;
    }
    let one_line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    format!(
        "grants more than Sandcastle holds; install the chart with rbac.copyRoles=true to copy \
         it: {one_line}"
    )
}

impl Resolver {
    pub fn new(client: Client) -> Self {
        let map = builtin_resources()
            .into_iter()
            .map(|ar| ((ar.api_version.clone(), ar.kind.clone()), ar))
            .collect();
        Self {
            client,
            cache: Arc::new(RwLock::new(map)),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The API resource for `apiVersion`/`kind`; `name` only labels errors.
    pub async fn resolve(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
    ) -> Result<ApiResource, ApplyError> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(ar) = self.cache.read().await.get(&key) {
            return Ok(ar.clone());
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = pinned_kind(&self.client, &gvk).await.map_err(|e| match e {
            kube::Error::Api(r) if r.code == 404 => ApplyError::UnknownKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                name: name.to_owned(),
            },
            kube::Error::Discovery(_) => ApplyError::UnknownKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                name: name.to_owned(),
            },
            other => ApplyError::Api(other),
        })?;
        if caps.scope != Scope::Namespaced {
            return Err(ApplyError::ClusterScoped {
                kind: kind.to_owned(),
                name: name.to_owned(),
            });
        }
        self.cache.write().await.insert(key, ar.clone());
        Ok(ar)
    }

    /// A namespaced API for the object's kind.
    pub async fn api_for(
        &self,
        namespace: &str,
        obj: &Value,
    ) -> Result<Api<DynamicObject>, ApplyError> {
        let (api_version, kind, name) = identity(obj)?;
        let ar = self.resolve(api_version, kind, name).await?;
        Ok(Api::namespaced_with(self.client.clone(), namespace, &ar))
    }

    /// Server-side apply `obj` into `namespace` as Sandcastle's field manager.
    pub async fn apply(&self, namespace: &str, obj: &Value) -> Result<DynamicObject, ApplyError> {
        let (_, kind, name) = identity(obj)?;
        let api = self.api_for(namespace, obj).await?;
        match kind {
            "Job" => self.apply_job(&api, obj, name).await,
            "ReplicaSet" => apply_replica_set(&api, obj, name).await,
            _ => ssa(&api, kind, name, obj).await,
        }
    }

    /// Jobs are immutable once created: an unchanged Job is left alone, a completed seed Job is
    /// never run again (the data it made is still there), and a changed one is replaced.
    async fn apply_job(
        &self,
        api: &Api<DynamicObject>,
        obj: &Value,
        name: &str,
    ) -> Result<DynamicObject, ApplyError> {
        let hash = hex::encode(&Sha256::digest(obj.to_string().as_bytes())[..8]);
        let mut desired = obj.clone();
        desired["metadata"]["annotations"][SPEC_HASH] = Value::from(hash.clone());
        let Some(existing) = api.get_opt(name).await.map_err(ApplyError::Api)? else {
            return ssa(api, "Job", name, &desired).await;
        };
        let annotations = &existing.metadata.annotations;
        let same = annotations.as_ref().and_then(|a| a.get(SPEC_HASH)) == Some(&hash);
        let seed = annotations
            .as_ref()
            .and_then(|a| a.get(HOOK))
            .map(String::as_str)
            == Some("seed");
        let complete = existing
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Complete" && c["status"] == "True")
            });
        if existing.metadata.deletion_timestamp.is_some() {
            return Err(ApplyError::Replacing {
                kind: "Job".into(),
                name: name.to_owned(),
            });
        }
        if same || (seed && complete) {
            return Ok(existing);
        }
        api.delete(name, &DeleteParams::background())
            .await
            .map_err(ApplyError::Api)?;
        // A later apply recreates it once the old one is gone.
        Err(ApplyError::Replacing {
            kind: "Job".into(),
            name: name.to_owned(),
        })
    }
}

/// A ReplicaSet never replaces its pods: a changed pod template (the image of a new commit)
/// would reach only pods made later, and a selector cannot change at all. One whose selector or
/// template changed is replaced, as a changed Job is (its pods go with it); anything else, such
/// as its replicas, is applied in place.
async fn apply_replica_set(
    api: &Api<DynamicObject>,
    obj: &Value,
    name: &str,
) -> Result<DynamicObject, ApplyError> {
    let pods = serde_json::json!([obj["spec"]["selector"], obj["spec"]["template"]]);
    let hash = hex::encode(&Sha256::digest(pods.to_string().as_bytes())[..8]);
    let mut desired = obj.clone();
    desired["metadata"]["annotations"][SPEC_HASH] = Value::from(hash.clone());
    let replacing = || ApplyError::Replacing {
        kind: "ReplicaSet".into(),
        name: name.to_owned(),
    };
    if let Some(existing) = api.get_opt(name).await.map_err(ApplyError::Api)? {
        if existing.metadata.deletion_timestamp.is_some() {
            return Err(replacing());
        }
        let recorded = existing
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SPEC_HASH));
        if recorded.is_some_and(|h| *h != hash) {
            api.delete(name, &DeleteParams::background())
                .await
                .map_err(ApplyError::Api)?;
            // A later apply recreates it once the old one is gone.
            return Err(replacing());
        }
    }
    ssa(api, "ReplicaSet", name, &desired).await
}

async fn ssa(
    api: &Api<DynamicObject>,
    kind: &str,
    name: &str,
    obj: &Value,
) -> Result<DynamicObject, ApplyError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(obj))
        .await
        .map_err(|e| match e {
            kube::Error::Api(r) if r.code == 422 || r.code == 400 || r.code == 403 => {
                ApplyError::Rejected {
                    kind: kind.to_owned(),
                    name: name.to_owned(),
                    message: with_hint(kind, r.message),
                }
            }
            other => ApplyError::Api(other),
        })
}

impl Resolver {
    /// Apply every object (a few at a time: objects of one phase do not depend on each other),
    /// stopping at the first failure.
    pub async fn apply_all(
        &self,
        namespace: &str,
        objects: &[Value],
    ) -> Result<Vec<DynamicObject>, ApplyError> {
        // Roles before the rest: without `bind`, a RoleBinding is only accepted once the API
        // server can see that its Role grants nothing Sandcastle does not hold.
        let (roles, rest): (Vec<&Value>, Vec<&Value>) =
            objects.iter().partition(|o| o["kind"] == "Role");
        let mut applied = Vec::with_capacity(objects.len());
        for group in [roles, rest] {
            for chunk in group.chunks(8) {
                let batch = chunk.iter().map(|obj| self.apply(namespace, obj));
                applied.extend(futures::future::try_join_all(batch).await?);
            }
        }
        Ok(applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_granting_more_than_sandcastle_holds_name_the_setting() {
        let refused = "rolebindings.rbac.authorization.k8s.io \"dev\" is forbidden: user \"x\" is \
                       attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], \
                       Resources:[\"pods/exec\"], Verbs:[\"create\"]}";
        let said = with_hint("RoleBinding", refused.to_owned());
        assert!(
            said.starts_with(
                "grants more than Sandcastle holds; install the chart with rbac.copyRoles=true"
            ),
            "{said}"
        );
        assert!(said.contains("pods/exec") && !said.contains('\n'), "{said}");
        assert_eq!(with_hint("ConfigMap", "x".into()), "x");
    }
}
