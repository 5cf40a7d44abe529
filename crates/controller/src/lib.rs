//! The controller: the only writer of preview namespaces, GitHub deployment statuses and sticky
//! comments, and the one that carries out `/preview` commands (`commands`). It watches PreviewEnvironments (and the workloads and namespaces it creates, and
//! Blueprints) and reconciles each preview towards its spec, level-triggered and idempotent;
//! previews whose GitHub reporting failed are looked at again after a pause. Beside it run the
//! housekeeping jobs (catch-up resync, orphan sweep); with leader election, only in the replica
//! that leads, which is also the one whose metrics count the previews. Previews placed in other
//! clusters are watched there too (`remote`).

pub mod commands;
pub mod context;
mod data;
mod echoes;
mod edge;
mod error;
pub mod events;
mod finalizer;
pub mod housekeeping;
pub mod leader;
pub mod orphans;
mod phases;
mod pool;
mod reconcile;
mod remote;
mod report;
pub mod resync;
mod sticky;
pub(crate) mod term;
mod test_checks;
mod verdict;

use std::sync::Arc;
use std::time::Duration;

use std::collections::HashMap;

use futures::{FutureExt, StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};

pub use context::{Context, Settings};
pub use error::Error;

use sandcastle_crd::labels::{LAST_ACTIVITY, MANAGED_BY, MANAGER, PREVIEW};
use sandcastle_crd::{Blueprint, PreviewCommand, PreviewEnvironment, PreviewEvent};

/// A loop's failed reconcile, logged (its error policy has already said when to try again).
fn logged<T, E: std::fmt::Display>(res: Result<T, E>, what: &str) -> futures::future::Ready<()> {
    if let Err(e) = res {
        tracing::debug!(error = %e, "{what}");
    }
    futures::future::ready(())
}

/// Map an object Sandcastle created (labelled with its preview) back to the preview.
fn owner_of<K: Resource>(obj: &K, home: &str) -> Option<ObjectRef<PreviewEnvironment>> {
    let name = obj.meta().labels.as_ref()?.get(PREVIEW)?;
    Some(ObjectRef::new(name).within(home))
}

/// Blueprint changes that concern its previews: a new generation (the spec changed) or a
/// deletion. Status writes (the preview counts) are left out, so they never fan out.
/// Every event first fills `cache`, so the reconciles a change starts read the changed spec.
fn blueprint_changes(
    api: Api<Blueprint>,
    cache: reflector::store::Writer<Blueprint>,
) -> impl futures::Stream<Item = Result<Blueprint, watcher::Error>> + Send + 'static {
    let mut seen: HashMap<String, Option<i64>> = HashMap::new();
    watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(cache)
        .filter_map(move |event| {
            let out = match event {
                Ok(watcher::Event::Apply(bp) | watcher::Event::InitApply(bp)) => {
                    let generation = bp.metadata.generation;
                    (seen.insert(bp.name_any(), generation) != Some(generation)).then_some(Ok(bp))
                }
                Ok(watcher::Event::Delete(bp)) => {
                    seen.remove(&bp.name_any());
                    Some(Ok(bp))
                }
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            };
            futures::future::ready(out)
        })
}

/// The objects of kind `K` Sandcastle made (`ours`) in its own cluster, kept in `writer`'s cache
/// (without their field managers when `slim`), each change passed on.
fn reflected<K>(
    client: &kube::Client,
    ours: &watcher::Config,
    writer: reflector::store::Writer<K>,
    slim: bool,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K: Send + Sync + 'static,
{
    watcher(Api::<K>::all(client.clone()), ours.clone())
        .default_backoff()
        .modify(move |o: &mut K| {
            if slim {
                o.meta_mut().managed_fields = None;
            }
        })
        .reflect(writer)
        .touched_objects()
}

/// Run the controller and the housekeeping jobs until `shutdown` resolves.
pub async fn run(
    mut ctx: Context,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let shutdown = shutdown.shared();
    // Another leader may have posted anything since this process last led.
    ctx.term = Arc::default();
    let home = ctx.settings.home.clone();
    let client = ctx.client.clone();
    let previews: Api<PreviewEnvironment> = Api::namespaced(client.clone(), &home);
    let blueprints: Api<Blueprint> = Api::namespaced(client.clone(), &home);
    let ours = watcher::Config::default().labels(&format!("{MANAGED_BY}={MANAGER}"));

    let h1 = home.clone();
    let h2 = home.clone();
    let h3 = home.clone();
    let h4 = home.clone();
    // The controller's own cache of previews, and the changes worth a pass: an activity stamp
    // alone (a read, a visit) is not one — deadlines are requeued, and read the stamp then.
    let (store, preview_writer) = reflector::store();
    let changes = watcher(previews, watcher::Config::default())
        .default_backoff()
        .reflect(preview_writer)
        .applied_objects()
        .try_filter({
            let echoes = Arc::clone(&ctx.echoes);
            move |pe| futures::future::ready(!echoes.is_own(pe))
        })
        .predicate_filter(worth_a_pass, Default::default());
    let controller = Controller::for_stream(changes, store.clone()).with_config(
        controller::Config::default()
            .debounce(RECONCILE_DEBOUNCE)
            .concurrency(ctx.settings.max_concurrent_reconciles),
    );
    let (pokes, poked) = futures::channel::mpsc::unbounded();
    ctx.pokes = Some(pokes);
    ctx.previews = Some(store.clone());
    let (watched, writers) = sandcastle_kube::watched::Watched::new();
    ctx.watched = Some(watched);
    let (blueprint_cache, blueprint_writer) = reflector::store();
    ctx.blueprints = Some(blueprint_cache);
    // `previews{phase}` is counted from this cache while the controller runs here.
    let clock = ctx.clock.clone();
    let _counting = (ctx.metrics.previews).count_from(store.clone(), Arc::new(move || clock.now()));
    let ctx_store = store.clone();
    let ticks = ctx.clock.ticks();
    // Previews whose GitHub reporting failed are looked at again after a pause.
    let wakeups = futures::stream::unfold(ctx.retry.take_wakeups(), |rx| async move {
        let mut rx = rx?;
        let next = rx.recv().await?;
        Some((next, Some(rx)))
    });
    let housekeeping = housekeeping::run(ctx.clone(), shutdown.clone());
    // The wildcard certificate, copied again into every live preview when it is renewed.
    let certificate = edge::follow(ctx.clone(), shutdown.clone());
    // Each Blueprint's warm pool, kept full.
    let pools = pool::run(ctx.clone(), shutdown.clone());
    // Each Blueprint's data snapshots, taken, refreshed and retired.
    let data = data::run(ctx.clone(), shutdown.clone());
    // Changes in the other clusters previews live in, and to those clusters themselves.
    let elsewhere = remote::triggers(&ctx, shutdown.clone());
    // `/preview` commands the webhook recorded, carried out beside the previews.
    // Pull request events the webhook recorded, carried out in each pull request's order.
    let (event_pokes, events_poked) = futures::channel::mpsc::unbounded();
    ctx.event_pokes = Some(event_pokes);
    let events = Controller::new(
        Api::<PreviewEvent>::namespaced(client.clone(), &home),
        watcher::Config::default(),
    )
    .with_config(controller::Config::default().concurrency(ctx.settings.max_concurrent_reconciles));
    ctx.records = Some(events.store());
    let events = events
        .reconcile_on(events_poked)
        .reconcile_all_on(ctx.clock.ticks())
        .graceful_shutdown_on(shutdown.clone())
        .run(
            events::reconcile,
            events::error_policy,
            Arc::new(ctx.clone()),
        )
        .for_each(|res| logged(res, "event loop"));
    let commands = Controller::new(
        Api::<PreviewCommand>::namespaced(client.clone(), &home),
        watcher::Config::default(),
    )
    .reconcile_all_on(ctx.clock.ticks())
    .graceful_shutdown_on(shutdown.clone())
    .run(
        commands::reconcile,
        commands::error_policy,
        Arc::new(ctx.clone()),
    )
    .for_each(|res| logged(res, "command loop"));
    let controller = controller
        .watches_stream(
            reflected(&client, &ours, writers.deployments, true),
            move |o| owner_of(&o, &h1),
        )
        .watches_stream(
            reflected(&client, &ours, writers.statefulsets, true),
            move |o| owner_of(&o, &h2),
        )
        .watches_stream(reflected(&client, &ours, writers.jobs, true), move |o| {
            owner_of(&o, &h3)
        })
        // A namespace keeps its field managers: whether an apply would change it is read there.
        .watches_stream(
            reflected(&client, &ours, writers.namespaces, false),
            move |o| owner_of(&o, &h4),
        )
        .watches_stream(
            blueprint_changes(blueprints, blueprint_writer),
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
        // A freed slot pokes the queue; a moved test clock looks at every preview again.
        .reconcile_on(poked)
        .reconcile_on(wakeups)
        .reconcile_on(elsewhere)
        .reconcile_all_on(ticks)
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile::reconcile, reconcile::error_policy, Arc::new(ctx))
        .for_each(|res| logged(res, "reconcile loop"));
    // kube's controller holds its runner until its cache is first filled, and does not notice a
    // shutdown meanwhile; a shutdown right after start-up would wait forever. Reconciles in
    // flight get a grace period; then the controller is dropped.
    let filled = ctx_store.clone();
    let deadline = shutdown.then(move |()| async move {
        // Before the cache is filled no reconcile can have started: nothing to wait for.
        let started = filled.wait_until_ready().now_or_never().is_some();
        if started {
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        }
        started
    });
    tokio::select! {
        _ = async { futures::join!(controller, events, commands, housekeeping, certificate, pools, data) } => {}
        waited = deadline => if waited {
            tracing::warn!("reconciles still running {SHUTDOWN_GRACE:?} after shutdown; dropping them");
        },
    }
}

/// What of a preview a change must touch to be worth a reconcile, as a hash: everything but the
/// activity stamp that reads and visits write (at most once a minute per preview each; 500
/// previews read in turn made 500 passes a minute, each with its reads and writes, slowing the
/// reads themselves). The controller requeues a preview at its idle deadline and reads the stamp
/// then. A stopped preview's stamp counts: a visit's stamp is what wakes it.
fn worth_a_pass(pe: &PreviewEnvironment) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let meta = &pe.metadata;
    meta.generation.hash(&mut h);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_nanosecond())
        .hash(&mut h);
    meta.finalizers.hash(&mut h);
    meta.labels.hash(&mut h);
    let stopped = pe.status.as_ref().and_then(|s| s.phase) == Some(sandcastle_crd::Phase::Stopped);
    for (k, v) in meta.annotations.iter().flatten() {
        if stopped || k != LAST_ACTIVITY {
            (k, v).hash(&mut h);
        }
    }
    serde_json::to_string(&pe.status).ok()?.hash(&mut h);
    Some(h.finish())
}

/// Changes to one preview within this long of each other bring one reconcile, not one each: a
/// rollout's Deployments report their pods one status write at a time. (A pass's own status
/// write brings none: `echoes`.)
const RECONCILE_DEBOUNCE: Duration = Duration::from_millis(250);

/// How long reconciles in flight may run on after a shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Requeue soon while something is in progress.
pub(crate) fn soon(ctx: &Context) -> Action {
    Action::requeue(ctx.settings.progress_interval)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandcastle_crd::{Phase, PreviewStatus};

    fn preview() -> PreviewEnvironment {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "sandcastle.dev/v1alpha1", "kind": "PreviewEnvironment",
            "metadata": {"name": "p", "generation": 1, "annotations": {LAST_ACTIVITY: "t1"}},
            "spec": {"blueprint": "b", "repository": "acme/shop", "ref": "main",
                "sha": "0123456789012345678901234567890123456789",
                "requestedBy": {"kind": "github-user", "name": "maria"}},
            "status": {"phase": "Ready"}
        }))
        .unwrap()
    }

    #[test]
    fn an_activity_stamp_alone_is_not_worth_a_pass_unless_the_preview_is_stopped() {
        let pe = preview();
        let mut stamped = pe.clone();
        stamped
            .annotations_mut()
            .insert(LAST_ACTIVITY.to_owned(), "t2".to_owned());
        stamped.metadata.resource_version = Some("2".to_owned());
        assert_eq!(worth_a_pass(&pe), worth_a_pass(&stamped));

        let mut asked = pe.clone();
        asked
            .annotations_mut()
            .insert("sandcastle.dev/redeploy".to_owned(), "x".to_owned());
        assert_ne!(worth_a_pass(&pe), worth_a_pass(&asked));
        let mut moved = pe.clone();
        moved.metadata.generation = Some(2);
        assert_ne!(worth_a_pass(&pe), worth_a_pass(&moved));
        let mut reported = pe.clone();
        reported.status = Some(PreviewStatus {
            message: Some("new".to_owned()),
            ..pe.status.clone().unwrap()
        });
        assert_ne!(worth_a_pass(&pe), worth_a_pass(&reported));

        let mut stopped = pe;
        stopped.status.as_mut().unwrap().phase = Some(Phase::Stopped);
        let mut visited = stopped.clone();
        visited
            .annotations_mut()
            .insert(LAST_ACTIVITY.to_owned(), "t2".to_owned());
        assert_ne!(worth_a_pass(&stopped), worth_a_pass(&visited));
    }
}
