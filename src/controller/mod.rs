//! The controller: the only writer of preview namespaces and GitHub deployment statuses. It
//! watches PreviewEnvironments (and the workloads and namespaces it creates, and Blueprints) and
//! reconciles each preview towards its spec, level-triggered and idempotent.

pub mod clock;
pub mod context;
mod hooks;
mod reconcile;
mod report;
mod rollout;
mod status;
mod teardown;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

pub use context::{Context, Settings};
pub use reconcile::Error;

use crate::k8s::crd::{Blueprint, PreviewEnvironment};
use crate::k8s::labels::{MANAGED_BY, MANAGER, PREVIEW};

/// Map an object Sandcastle created (labelled with its preview) back to the preview.
fn owner_of<K: Resource>(obj: &K, home: &str) -> Option<ObjectRef<PreviewEnvironment>> {
    let name = obj.meta().labels.as_ref()?.get(PREVIEW)?;
    Some(ObjectRef::new(name).within(home))
}

/// Run the controller until `shutdown` resolves.
pub async fn run(
    ctx: Context,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let home = ctx.settings.home.clone();
    let client = ctx.client.clone();
    let previews: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);
    let blueprints: Api<Blueprint> = Api::namespaced(client.clone(), &home);
    let ours = watcher::Config::default().labels(&format!("{MANAGED_BY}={MANAGER}"));

    let h1 = home.clone();
    let h2 = home.clone();
    let h3 = home.clone();
    let h4 = home.clone();
    let controller = Controller::new(previews, watcher::Config::default());
    let store = controller.store();
    controller
        .watches(
            Api::<Deployment>::all(client.clone()),
            ours.clone(),
            move |o| owner_of(&o, &h1),
        )
        .watches(
            Api::<StatefulSet>::all(client.clone()),
            ours.clone(),
            move |o| owner_of(&o, &h2),
        )
        .watches(Api::<Job>::all(client.clone()), ours.clone(), move |o| {
            owner_of(&o, &h3)
        })
        .watches(Api::<Namespace>::all(client.clone()), ours, move |o| {
            owner_of(&o, &h4)
        })
        .watches(
            blueprints,
            watcher::Config::default(),
            move |bp: Blueprint| {
                // A changed Blueprint concerns every preview made from it.
                let name = bp.name_any();
                store
                    .state()
                    .into_iter()
                    .filter(|p| p.spec.blueprint == name)
                    .map(|p| ObjectRef::from_obj(&*p))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, reconcile::error_policy, Arc::new(ctx))
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "reconcile loop");
            }
        })
        .await;
}

/// Requeue soon while something is in progress.
pub(crate) fn soon(ctx: &Context) -> Action {
    Action::requeue(ctx.settings.progress_interval)
}

/// Requeue after `d`.
pub(crate) fn after(d: Duration) -> Action {
    Action::requeue(d)
}
