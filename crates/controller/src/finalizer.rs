//! Sandcastle's finalizer on PreviewEnvironments: added before anything is rolled out, removed
//! once a deleted preview's namespace is gone and GitHub was told.
//!
//! Written by hand rather than with `kube::runtime::finalizer`: that helper removes the
//! finalizer as soon as its cleanup returns `Ok`, so a teardown that takes several passes
//! (pre-delete hooks that run for minutes, a namespace that takes its time to go, GitHub down
//! when `inactive` is due) would have to block a worker for the whole time or report its
//! progress as errors; and it adds the finalizer before anything else, also to forks that
//! await approval (nothing deployed) and to tombstones. Two small merge patches, guarded by the
//! resourceVersion read, do what is needed.

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use sandcastle_crd::PreviewEnvironment;
use sandcastle_crd::labels::FINALIZER;

/// Whether `pe` carries Sandcastle's finalizer.
pub(super) fn present(pe: &PreviewEnvironment) -> bool {
    pe.finalizers().iter().any(|f| f == FINALIZER)
}

/// Set `pe`'s finalizers, guarded by the resourceVersion read; the object as written, or `None`
/// if it is gone.
async fn set(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    finalizers: Vec<String>,
) -> Result<Option<PreviewEnvironment>, kube::Error> {
    let patch = json!({
        "metadata": {"finalizers": finalizers, "resourceVersion": pe.meta().resource_version}
    });
    match api
        .patch(
            &pe.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(written) => Ok(Some(written)),
        Err(kube::Error::Api(r)) if r.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

/// Add the finalizer; the preview as written (so that the same pass can go on with it), or
/// `None` if it is gone.
pub(super) async fn add(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
) -> Result<Option<PreviewEnvironment>, kube::Error> {
    let mut finalizers = pe.finalizers().to_vec();
    finalizers.push(FINALIZER.to_owned());
    set(api, pe, finalizers).await
}

pub(super) async fn remove(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
) -> Result<(), kube::Error> {
    let finalizers = pe
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    set(api, pe, finalizers).await.map(drop)
}
