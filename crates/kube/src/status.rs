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
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
