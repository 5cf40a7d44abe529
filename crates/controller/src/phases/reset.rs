//! Resetting a preview's data (asked through the API): its PersistentVolumeClaims, StatefulSets
//! and seed Jobs are deleted, and once they are gone the preview is rolled out again, so the
//! data stores start again from the Blueprint's known state — empty, or restored from the
//! snapshot the preview started from (the newest with `latest`) — and the seed Jobs run again.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, ListParams};
use kube::{Client, Resource, ResourceExt};

use sandcastle_crd::PreviewEnvironment;
use sandcastle_crd::PreviewStatus;
use sandcastle_crd::labels::{HOOK, HOOK_SEED, RESET, RESET_DATA, RESET_LATEST};
use sandcastle_crd::{Blueprint, DataFrom};

/// The reset asked of `pe` and not carried out yet (its token).
pub(crate) fn asked(pe: &PreviewEnvironment, st: &PreviewStatus) -> Option<String> {
    let token = pe.annotations().get(RESET)?;
    (st.reset_done.as_ref() != Some(token)).then(|| token.clone())
}

/// Whether the reset asked for the newest snapshot of the Blueprint's data.
pub(crate) fn latest(pe: &PreviewEnvironment) -> bool {
    pe.annotations().get(RESET_DATA).map(String::as_str) == Some(RESET_LATEST)
}

/// What the history says a reset did.
pub(crate) fn note(blueprint: &Blueprint, latest: bool) -> &'static str {
    let snapshots = blueprint
        .spec
        .data
        .as_ref()
        .is_some_and(|d| d.from == DataFrom::Snapshot);
    match (snapshots, latest) {
        (false, _) => "data thrown away; seeding again",
        (true, false) => "data restored again from the snapshot it started from",
        (true, true) => "data restored from the newest snapshot",
    }
}

async fn delete_all<K>(api: &Api<K>, items: &[K]) -> Result<usize, kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for item in items
        .iter()
        .filter(|i| i.meta().deletion_timestamp.is_none())
    {
        match api
            .delete(&item.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(r)) if r.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(items.len())
}

/// Delete the data of namespace `ns`; returns how many of those objects still exist (0: done).
pub(crate) async fn wipe(client: &Client, ns: &str) -> Result<usize, kube::Error> {
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let all = ListParams::default();
    let seed: Vec<Job> = jobs
        .list(&all)
        .await?
        .items
        .into_iter()
        .filter(|j| j.annotations().get(HOOK).map(String::as_str) == Some(HOOK_SEED))
        .collect();
    let mut left = delete_all(&jobs, &seed).await?;
    left += delete_all(&sets, &sets.list(&all).await?.items).await?;
    left += delete_all(&claims, &claims.list(&all).await?.items).await?;
    Ok(left)
}
