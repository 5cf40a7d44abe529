//! Writing a resource's status subresource with server-side apply under one field manager; a
//! resource deleted in the meantime is not an error (there is nothing left to describe).

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

/// Apply `status` as the status of `name`, owned by `manager`; the resource version written
/// (`None`: the resource is gone).
pub async fn apply<K, S>(
    api: &Api<K>,
    name: &str,
    manager: &str,
    status: &S,
) -> Result<Option<String>, kube::Error>
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
        Ok(written) => Ok(written.meta().resource_version.clone()),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}
