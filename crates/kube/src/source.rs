//! Reads a Blueprint's source objects: every object of a copyable kind (and of the kinds that must
//! be refused or are left out by name, such as DaemonSets, bare Pods, Gateways and
//! ReferenceGrants) in a live namespace, or the YAML documents of a manifests ConfigMap. The
//! result goes to the pure plan unchanged, but for the ReplicaSets and Pods that controllers
//! made, which are not even read (see `LIVE_KINDS`). The Gateway API's kinds are read where the
//! cluster serves them (`GATEWAY_KINDS`).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use super::apply::{ApplyError, Resolver};
use sandcastle_crd::{BlueprintSpec, KindRef};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use sandcastle_domain::plan::Manifests;

/// Kinds read from a live source namespace. DaemonSets are read only so that the plan can refuse
/// them by name instead of silently leaving them out. ReplicaSets and Pods are read for those
/// without a controller (a ReplicaSet of its own is copied, a bare Pod refused); the many that
/// Deployments, Jobs and StatefulSets made are dropped as they are read, so that what the plan
/// lists as left out stays readable.
pub(crate) const LIVE_KINDS: &[(&str, &str)] = &[
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("v1", "PersistentVolumeClaim"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "DaemonSet"),
    ("v1", "Pod"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("networking.k8s.io/v1", "Ingress"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("policy/v1", "PodDisruptionBudget"),
];

/// The Gateway API's kinds, read from a live source namespace when the cluster serves them (its
/// definitions are not part of Kubernetes; a cluster without them has none to read): routes are
/// copied, Gateways read to be refused by name, ReferenceGrants to be left out by name.
pub(crate) const GATEWAY_KINDS: &[(&str, &str)] = &[
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("gateway.networking.k8s.io/v1", "GRPCRoute"),
    ("gateway.networking.k8s.io/v1", "Gateway"),
    ("gateway.networking.k8s.io/v1beta1", "ReferenceGrant"),
];

/// The Gateway API's kinds a preview holds (its routes).
pub(crate) const GATEWAY_ROUTES: &[(&str, &str)] = &[
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("gateway.networking.k8s.io/v1", "GRPCRoute"),
];

/// The API group of an `apiVersion` (`apps/v1` → `apps`, `v1` → `""`).
pub(crate) fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("source namespace {0} does not exist")]
    NamespaceMissing(String),
    #[error("manifests ConfigMap {0} does not exist")]
    ConfigMapMissing(String),
    #[error("manifests ConfigMap {name}, key {key}: {message}")]
    Manifest {
        name: String,
        key: String,
        message: String,
    },
    #[error("the Blueprint names no source")]
    NoSource,
    #[error(transparent)]
    Resolve(#[from] ApplyError),
    #[error("Kubernetes API: {0}")]
    Api(#[from] kube::Error),
}

impl SourceError {
    /// Whether retrying may help (the API failed) rather than the Blueprint being wrong.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Api(_) => true,
            Self::Resolve(e) => e.is_transient(),
            _ => false,
        }
    }
}

/// Read the source objects of `blueprint`. `home` is Sandcastle's namespace (where a manifests
/// ConfigMap lives).
pub async fn read(
    resolver: &Resolver,
    home: &str,
    blueprint: &BlueprintSpec,
) -> Result<Vec<Value>, SourceError> {
    if let Some(ns) = &blueprint.source.namespace {
        return read_namespace(resolver, ns, &blueprint.allow_kinds).await;
    }
    if let Some(m) = &blueprint.source.manifests {
        return read_manifests(resolver, home, &m.config_map).await;
    }
    Err(SourceError::NoSource)
}

/// Source reads shared by reconciles that run together: a burst of previews of one Blueprint
/// reads its source once (about twenty list calls) instead of once each. A read is shared with
/// every reconcile that asks within `within` of it (and with those waiting while it runs); a
/// failed read is not kept. So an edit of a blueprint namespace is seen within `within`.
#[derive(Debug)]
pub struct SourceCache {
    within: Duration,
    reads: Mutex<HashMap<String, (Instant, SharedRead)>>,
}

/// One read of a source, done once by the first reconcile that asks.
type SharedRead = Arc<OnceCell<Arc<Vec<Value>>>>;

impl SourceCache {
    pub fn new(within: Duration) -> Self {
        Self {
            within,
            reads: Mutex::default(),
        }
    }

    /// [`read`], shared as the type says.
    pub async fn read(
        &self,
        resolver: &Resolver,
        home: &str,
        blueprint: &BlueprintSpec,
    ) -> Result<Arc<Vec<Value>>, SourceError> {
        let key = serde_json::to_string(&(home, &blueprint.source, &blueprint.allow_kinds))
            .unwrap_or_default();
        let cell = {
            let mut reads = self.reads.lock().unwrap_or_else(|p| p.into_inner());
            reads.retain(|_, (at, _)| at.elapsed() < self.within);
            reads
                .entry(key)
                .or_insert_with(|| (Instant::now(), Arc::default()))
                .1
                .clone()
        };
        cell.get_or_try_init(|| async { read(resolver, home, blueprint).await.map(Arc::new) })
            .await
            .cloned()
    }
}

async fn read_namespace(
    resolver: &Resolver,
    ns: &str,
    extra: &[KindRef],
) -> Result<Vec<Value>, SourceError> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
        Api::all(resolver.client().clone());
    if namespaces.get_opt(ns).await?.is_none() {
        return Err(SourceError::NamespaceMissing(ns.to_owned()));
    }
    // Each kind once, by group and kind: an `allowKinds` entry for a kind read anyway (an
    // HTTPRoute listed before Sandcastle copied them) would read every object twice.
    let mut kinds: Vec<(String, String, bool)> = Vec::new();
    let required = LIVE_KINDS.iter().map(|(a, k)| (*a, *k, false));
    let optional = GATEWAY_KINDS.iter().map(|(a, k)| (*a, *k, true));
    let listed = extra
        .iter()
        .map(|k| (k.api_version.as_str(), k.kind.as_str(), false));
    for (api_version, kind, optional) in required.chain(optional).chain(listed) {
        let seen = kinds
            .iter()
            .any(|(a, k, _)| k == kind && group_of(a) == group_of(api_version));
        if !seen {
            kinds.push((api_version.to_owned(), kind.to_owned(), optional));
        }
    }
    let lists = futures::future::try_join_all(kinds.iter().map(
        |(api_version, kind, optional)| async move {
            let ar = match resolver.resolve(api_version, kind, "*").await {
                Ok(ar) => ar,
                // Not served here (the Gateway API is not installed): nothing of it to read.
                Err(ApplyError::UnknownKind { .. }) if *optional => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            let api: Api<DynamicObject> = Api::namespaced_with(resolver.client().clone(), ns, &ar);
            let list = match api.list(&ListParams::default()).await {
                Ok(list) => list,
                Err(kube::Error::Api(r)) if *optional && r.code == 404 => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            list.items
                .into_iter()
                .filter(|o| !(made_by_controllers(api_version, kind) && has_controller(o)))
                .map(|o| with_type(o, api_version, kind))
                .collect::<Result<Vec<_>, SourceError>>()
        },
    ))
    .await?;
    Ok(lists.into_iter().flatten().collect())
}

/// Kinds whose objects are read only when no controller made them.
fn made_by_controllers(api_version: &str, kind: &str) -> bool {
    matches!(
        (api_version, kind),
        ("apps/v1", "ReplicaSet") | ("v1", "Pod")
    )
}

fn has_controller(obj: &DynamicObject) -> bool {
    obj.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true))
}

/// Objects in a list response carry no apiVersion/kind; put them back.
fn with_type(obj: DynamicObject, api_version: &str, kind: &str) -> Result<Value, SourceError> {
    let mut v = serde_json::to_value(obj).map_err(|e| SourceError::Manifest {
        name: "-".into(),
        key: "-".into(),
        message: e.to_string(),
    })?;
    v["apiVersion"] = Value::from(api_version);
    v["kind"] = Value::from(kind);
    Ok(v)
}

async fn read_manifests(
    resolver: &Resolver,
    home: &str,
    name: &str,
) -> Result<Vec<Value>, SourceError> {
    let api: Api<ConfigMap> = Api::namespaced(resolver.client().clone(), home);
    let cm = api
        .get_opt(name)
        .await?
        .ok_or_else(|| SourceError::ConfigMapMissing(name.to_owned()))?;
    let (objects, warnings) = parse_config_map(name, &cm.data.unwrap_or_default())?;
    for (key, warning) in warnings {
        tracing::warn!(config_map = name, key = %key, "manifests ConfigMap {name}, key {key}: {warning}");
    }
    Ok(objects)
}

/// Warnings about a manifests ConfigMap, each with the key of its YAML.
type KeyWarnings = Vec<(String, String)>;

/// The objects of every key of a manifests ConfigMap (keys in a stable order, so the same
/// ConfigMap always gives the same plan), and each key's warnings.
fn parse_config_map(
    name: &str,
    data: &BTreeMap<String, String>,
) -> Result<(Vec<Value>, KeyWarnings), SourceError> {
    let mut objects = Vec::new();
    let mut warnings = Vec::new();
    for (key, yaml) in data {
        let parsed = Manifests::parse(yaml).map_err(|e| SourceError::Manifest {
            name: name.to_owned(),
            key: key.clone(),
            message: e.to_string(),
        })?;
        objects.extend(parsed.objects);
        warnings.extend(parsed.warnings.iter().map(|w| (key.clone(), w.to_string())));
    }
    Ok((objects, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_keys_are_read_in_order_with_their_warnings() {
        let data: BTreeMap<String, String> = [
            (
                "b.yaml".to_owned(),
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {k: 1, k: 2}\n"
                    .to_owned(),
            ),
            (
                "a.yaml".to_owned(),
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n".to_owned(),
            ),
        ]
        .into();
        let (objects, warnings) = parse_config_map("shop-manifests", &data).unwrap();
        let names: Vec<&str> = objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(objects[1]["data"]["k"], 2);
        assert_eq!(
            warnings,
            [(
                "b.yaml".to_owned(),
                "document 1 (line 4): duplicate key data.k: the last value is used, as kubectl does"
                    .to_owned()
            )]
        );

        let broken: BTreeMap<String, String> =
            [("x.yaml".to_owned(), "kind: [\n".to_owned())].into();
        let err = parse_config_map("shop-manifests", &broken).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("manifests ConfigMap shop-manifests, key x.yaml: document 1"),
            "{err}"
        );
    }
}
