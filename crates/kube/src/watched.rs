//! What the controller's own watches last saw of the namespaces and workloads Sandcastle made in
//! its own cluster, so that a rollout's pass judges its workloads and its namespace without a
//! GET per object per pass (in a burst of 100 previews those GETs were a sixth of every request
//! the API server answered). A cached workload is believed only once it is the object
//! Sandcastle's last apply returned (same uid) at that generation or later; one not seen yet,
//! replaced, or older is read from the API, so a pass never judges a spec it did not apply.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::DynamicObject;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::{Resource, ResourceExt};

/// Namespace, kind, name.
type Key = (String, String, String);

/// The caches, and what Sandcastle last applied.
pub struct Watched {
    deployments: Store<Deployment>,
    statefulsets: Store<StatefulSet>,
    jobs: Store<Job>,
    namespaces: Store<Namespace>,
    /// uid and generation of each workload as its last apply returned them.
    applied: Mutex<HashMap<Key, (String, i64)>>,
}

/// The writers that fill [`Watched`], for the controller's watches.
#[allow(missing_debug_implementations)]
pub struct Writers {
    pub deployments: Writer<Deployment>,
    pub statefulsets: Writer<StatefulSet>,
    pub jobs: Writer<Job>,
    pub namespaces: Writer<Namespace>,
}

/// The kinds judged from the caches.
const CACHED_KINDS: [&str; 3] = ["Deployment", "StatefulSet", "Job"];

impl Watched {
    /// Empty caches, and the writers that fill them.
    pub fn new() -> (Arc<Self>, Writers) {
        let (deployments, dw) = reflector::store();
        let (statefulsets, sw) = reflector::store();
        let (jobs, jw) = reflector::store();
        let (namespaces, nw) = reflector::store();
        let watched = Self {
            deployments,
            statefulsets,
            jobs,
            namespaces,
            applied: Mutex::default(),
        };
        let writers = Writers {
            deployments: dw,
            statefulsets: sw,
            jobs: jw,
            namespaces: nw,
        };
        (Arc::new(watched), writers)
    }

    fn applied(&self) -> std::sync::MutexGuard<'_, HashMap<Key, (String, i64)>> {
        self.applied.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remember what applying to `namespace` returned (the workloads among it).
    pub fn note_applied(&self, namespace: &str, objects: &[DynamicObject]) {
        let mut applied = self.applied();
        for obj in objects {
            let kind = obj.types.as_ref().map_or("", |t| t.kind.as_str());
            if !CACHED_KINDS.contains(&kind) {
                continue;
            }
            let (Some(uid), Some(generation)) = (obj.uid(), obj.meta().generation) else {
                continue;
            };
            let key = (namespace.to_owned(), kind.to_owned(), obj.name_any());
            applied.insert(key, (uid, generation));
        }
    }

    /// Forget what was applied to `namespace` (deleted with its preview).
    pub fn forget(&self, namespace: &str) {
        self.applied().retain(|(ns, _, _), _| ns != namespace);
    }

    /// Whether `obj`, cached, is what was last applied as `kind` `name` in `namespace`, or newer.
    fn current<K: Resource>(&self, namespace: &str, kind: &str, obj: &K) -> bool {
        let key = (
            namespace.to_owned(),
            kind.to_owned(),
            obj.meta().name.clone().unwrap_or_default(),
        );
        let Some((uid, generation)) = self.applied().get(&key).cloned() else {
            // Not applied by this process: the cache filled from a list after it started.
            return true;
        };
        obj.meta().uid.as_deref() == Some(uid.as_str())
            && obj.meta().generation.unwrap_or(0) >= generation
    }

    fn cached<K>(&self, store: &Store<K>, namespace: &str, kind: &str, name: &str) -> Option<Arc<K>>
    where
        K: Resource<DynamicType = ()> + Clone + 'static,
    {
        let obj = store.get(&ObjectRef::new(name).within(namespace))?;
        self.current(namespace, kind, obj.as_ref()).then_some(obj)
    }

    /// Deployment `name` in `namespace`, when the cache holds it as last applied.
    pub fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<Deployment>> {
        self.cached(&self.deployments, namespace, "Deployment", name)
    }

    /// StatefulSet `name` in `namespace`, when the cache holds it as last applied.
    pub fn statefulset(&self, namespace: &str, name: &str) -> Option<Arc<StatefulSet>> {
        self.cached(&self.statefulsets, namespace, "StatefulSet", name)
    }

    /// Job `name` in `namespace`, when the cache holds it as last applied.
    pub fn job(&self, namespace: &str, name: &str) -> Option<Arc<Job>> {
        self.cached(&self.jobs, namespace, "Job", name)
    }

    /// The namespace `name`, when the cache holds it.
    pub fn namespace(&self, name: &str) -> Option<Arc<Namespace>> {
        self.namespaces.get(&ObjectRef::new(name))
    }
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("applied", &self.applied().len())
            .finish_non_exhaustive()
    }
}
