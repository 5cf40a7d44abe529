//! Preview namespaces: create one with Sandcastle's labels (refusing to adopt a namespace that is
//! not ours), delete it, and tell whether it is gone.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use sandcastle_crd::labels::{FIELD_MANAGER, MANAGED_BY, MANAGER, PREVIEW};

#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    #[error(
        "namespace {namespace} already exists and is not managed by Sandcastle for preview {preview}"
    )]
    NotOurs { namespace: String, preview: String },
    #[error("namespace {0} is still being deleted")]
    Terminating(String),
    #[error("Kubernetes API: {0}")]
    Api(#[from] kube::Error),
}

/// Whether `ns` belongs to `preview`.
pub fn is_ours(ns: &Namespace, preview: &str) -> bool {
    let labels = ns.labels();
    labels.get(MANAGED_BY).map(String::as_str) == Some(MANAGER)
        && labels.get(PREVIEW).map(String::as_str) == Some(preview)
}

/// Create or update the namespace `name` for `preview` with `labels` (server-side apply). A
/// namespace of `previous` (a sandbox `preview` takes over) becomes `preview`'s. `cached`: the
/// namespace as a watch last saw it; when it is `preview`'s, live and labelled so already,
/// nothing is sent at all (every pass of a rollout comes here).
pub async fn ensure(
    client: &Client,
    name: &str,
    preview: &str,
    previous: Option<&str>,
    labels: &BTreeMap<String, String>,
    cached: Option<&Namespace>,
) -> Result<Namespace, NamespaceError> {
    if let Some(ns) = cached.filter(|ns| {
        previous.is_none()
            && is_ours(ns, preview)
            && ns.metadata.deletion_timestamp.is_none()
            && labelled_as(ns, labels)
    }) {
        return Ok(ns.clone());
    }
    let api: Api<Namespace> = Api::all(client.clone());
    if let Some(existing) = api.get_opt(name).await? {
        let taken_over = previous.is_some_and(|p| is_ours(&existing, p));
        if !is_ours(&existing, preview) && !taken_over {
            return Err(NamespaceError::NotOurs {
                namespace: name.to_owned(),
                preview: preview.to_owned(),
            });
        }
        if existing.metadata.deletion_timestamp.is_some() {
            return Err(NamespaceError::Terminating(name.to_owned()));
        }
        // Every pass of a rollout comes here: an apply that would change nothing is not sent.
        if !taken_over && labelled_as(&existing, labels) {
            return Ok(existing);
        }
    }
    let ns = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels},
    });
    Ok(api
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&ns),
        )
        .await?)
}

/// Whether `ns` carries exactly `labels` as Sandcastle's field manager applied them: the same
/// values, and no other label of Sandcastle's own (an apply would remove it).
fn labelled_as(ns: &Namespace, labels: &BTreeMap<String, String>) -> bool {
    let have = ns.labels();
    if labels.iter().any(|(k, v)| have.get(k) != Some(v)) {
        return false;
    }
    let owned = ns
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.manager.as_deref() == Some(FIELD_MANAGER) && m.operation.as_deref() == Some("Apply")
        })
        .filter_map(|m| {
            m.fields_v1
                .as_ref()?
                .0
                .get("f:metadata")?
                .get("f:labels")?
                .as_object()
                .cloned()
        })
        .flat_map(|o| o.into_iter().map(|(k, _)| k))
        .collect::<std::collections::BTreeSet<_>>();
    let wanted = labels
        .keys()
        .map(|k| format!("f:{k}"))
        .collect::<std::collections::BTreeSet<_>>();
    owned == wanted
}

/// Ask for the namespace to be deleted (if it is ours). Returns true when it no longer exists.
pub async fn delete(client: &Client, name: &str, preview: &str) -> Result<bool, NamespaceError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let Some(existing) = api.get_opt(name).await? else {
        return Ok(true);
    };
    if !is_ours(&existing, preview) {
        // Never touch a namespace Sandcastle did not create for this preview.
        return Ok(true);
    }
    if existing.metadata.deletion_timestamp.is_none() {
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(r)) if r.code == 404 => return Ok(true),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}
