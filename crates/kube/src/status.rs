//! Writing a resource's status subresource with server-side apply under one field manager; a
//! resource deleted in the meantime is not an error (there is nothing left to describe).

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

/// Apply `status` as the status of `name`, owned by `manager`.
pub async fn apply<K, S>(
    api: &Api<K>,
    name: &str,
    manager: &str,
    status: &S,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    written(api, name, manager, status).await.map(drop)
}

/// [`apply`], returning the object as written (`None`: it was gone).
pub async fn written<K, S>(
    api: &Api<K>,
    name: &str,
    manager: &str,
    status: &S,
) -> Result<Option<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    match api
        .patch_status(
            name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&patch),
        )
        .await
    {
        Ok(obj) => Ok(Some(obj)),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}
