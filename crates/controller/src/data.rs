//! Keeping each Blueprint's data snapshots (`spec.data.from: snapshot`), while this replica
//! leads: every few seconds, a Blueprint's sets are read back from its source namespace; a new
//! set is taken when the first is missing, when one is asked for (the `data-refresh`
//! annotation) or when the newest is older than `every`; sets past `keep` are deleted unless a
//! live preview started from one (its reset restores it); and `status.data` says how they stand.
//! Every [`SWEEP_EVERY`] rounds, the sets no Blueprint keeps any more (one deleted, switched off
//! or reading another namespace; an ownerReference cannot cross namespaces) are deleted once no
//! live preview started from them. Restoring a set into a preview is the rollout's
//! (`phases::data`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use futures::FutureExt;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::json;

use super::context::Context;
use sandcastle_crd::labels::DATA_REFRESH;
use sandcastle_crd::{Blueprint, DataFrom, DataSpec, DataStatus};
use sandcastle_domain::data::{self, Due};
use sandcastle_kube::{snapshots, status};

/// How often the snapshots are looked at.
pub const DATA_EVERY: Duration = Duration::from_secs(2);
/// The field manager of the Blueprints' data status.
const MANAGER: &str = "sandcastle-data";
/// Sets no Blueprint keeps are looked for every this many rounds.
pub const SWEEP_EVERY: u32 = 15;

/// Keep the snapshots until `shutdown`.
pub(crate) async fn run(ctx: Context, shutdown: impl std::future::Future<Output = ()>) {
    let mut written: HashMap<String, serde_json::Value> = HashMap::new();
    let mut interval = tokio::time::interval(DATA_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    let mut rounds: u32 = 0;
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = interval.tick() => {
                round(&ctx, &mut written).await;
                if rounds.is_multiple_of(SWEEP_EVERY) {
                    sweep(&ctx).await;
                }
                rounds = rounds.wrapping_add(1);
            }
        }
    }
}

/// Delete the sets no Blueprint keeps and no live preview started from.
async fn sweep(ctx: &Context) {
    let Some(blueprints) = &ctx.blueprints else {
        return;
    };
    // Until both caches are filled, a Blueprint or a preview not seen yet is not known gone.
    if !matches!(blueprints.wait_until_ready().now_or_never(), Some(Ok(()))) {
        return;
    }
    let Some(pinned) = pinned_all(ctx) else {
        return;
    };
    let kept: BTreeMap<String, String> = blueprints
        .state()
        .iter()
        .filter(|bp| {
            bp.spec
                .data
                .as_ref()
                .is_some_and(|d| d.from == DataFrom::Snapshot)
        })
        .filter(|bp| bp.spec.source_cluster() == sandcastle_crd::IN_CLUSTER)
        .filter_map(|bp| Some((bp.name_any(), bp.spec.source.namespace.clone()?)))
        .collect();
    let client = ctx.clusters.local().client().clone();
    let found = match snapshots::all_sets(&client, &ctx.settings.home).await {
        Ok(found) => found,
        // Snapshots not served: there is nothing to sweep.
        Err(e) if snapshots::not_served(&e).is_some() => return,
        Err(e) => {
            tracing::warn!(error = %e, "listing the data snapshots failed");
            return;
        }
    };
    for (ns, blueprint, set) in data::orphaned(&found, &kept, &pinned) {
        match snapshots::delete_set(&client, &ns, &blueprint, &set).await {
            Ok(_) => {
                tracing::info!(%blueprint, namespace = %ns, %set, "data snapshot no Blueprint keeps deleted");
            }
            Err(e) => {
                tracing::warn!(%blueprint, namespace = %ns, %set, error = %e, "deleting a data snapshot failed");
            }
        }
    }
}

async fn round(ctx: &Context, written: &mut HashMap<String, serde_json::Value>) {
    let Some(blueprints) = &ctx.blueprints else {
        return;
    };
    // Read once a round: the sets live previews started from (none known before the cache).
    let pinned = pinned_all(ctx);
    for bp in blueprints.state() {
        let Some(spec) = bp
            .spec
            .data
            .as_ref()
            .filter(|d| d.from == DataFrom::Snapshot)
        else {
            continue;
        };
        let status = keep(ctx, &bp, spec, pinned.as_ref()).await;
        let name = bp.name_any();
        let value = json!(status);
        if written.get(&name) == Some(&value) {
            continue;
        }
        let api: Api<Blueprint> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
        match status::apply(&api, &name, MANAGER, &json!({"data": value})).await {
            Ok(_) => {
                written.insert(name, value);
            }
            Err(e) => {
                tracing::warn!(blueprint = %name, error = %e, "writing the data status failed");
            }
        }
    }
}

/// Bring `bp`'s sets up to date (`pinned`: the sets live previews started from, by Blueprint);
/// how they stand.
async fn keep(
    ctx: &Context,
    bp: &Blueprint,
    spec: &DataSpec,
    pinned: Option<&BTreeMap<String, BTreeSet<String>>>,
) -> DataStatus {
    let name = bp.name_any();
    let before = bp.status.as_ref().and_then(|s| s.data.clone());
    let refreshed = before.as_ref().and_then(|d| d.refreshed.clone());
    let failed = |message: String| DataStatus {
        sets: before.as_ref().map(|d| d.sets.clone()).unwrap_or_default(),
        refreshed: refreshed.clone(),
        message: Some(message),
    };
    let Some(ns) = bp.spec.source.namespace.as_deref() else {
        return failed(
            "spec.data: snapshots are taken of a live source namespace's claims; \
                       this Blueprint has no source.namespace"
                .into(),
        );
    };
    if bp.spec.source_cluster() != sandcastle_crd::IN_CLUSTER {
        return failed(format!(
            "spec.data: snapshots are taken in Sandcastle's own cluster, and source.cluster is {}",
            bp.spec.source_cluster()
        ));
    }
    let client = ctx.clusters.local().client().clone();
    let known = before
        .as_ref()
        .map(|d| d.sets.as_slice())
        .unwrap_or_default();
    let sets = match snapshots::observe(&client, ns, &name, known).await {
        Ok(s) => s,
        Err(e) => {
            let why =
                snapshots::not_served(&e).unwrap_or_else(|| format!("reading the snapshots: {e}"));
            return failed(why);
        }
    };
    let mut st = DataStatus {
        sets,
        refreshed,
        message: None,
    };
    // Until the previews are known, none is known not to restore from an old set.
    let gone = match pinned {
        Some(pinned) => {
            let own = pinned.get(&name).cloned().unwrap_or_default();
            data::retired(&st, spec.keep, &own, ctx.clock.now())
        }
        None => Vec::new(),
    };
    for id in &gone {
        match snapshots::delete_set(&client, ns, &name, id).await {
            Ok(()) => {
                tracing::info!(blueprint = %name, set = %id, "data snapshot retired");
                st.sets.retain(|s| &s.id != id);
            }
            Err(e) => {
                tracing::warn!(blueprint = %name, set = %id, error = %e, "retiring a data snapshot failed");
            }
        }
    }
    let asked = bp.annotations().get(DATA_REFRESH).map(String::as_str);
    let now = ctx.clock.now();
    let Some(due) = data::due(spec, &st, asked, now) else {
        return st;
    };
    let claims = match snapshots::bound_claims(&client, ns).await {
        Ok(bound) => data::claims_to_take(spec, &bound),
        Err(e) => Err(format!("reading the claims of namespace {ns}: {e}")),
    };
    let claims = match claims {
        Ok(c) => c,
        Err(why) => {
            st.message = Some(why);
            return st;
        }
    };
    let id = data::set_id(now);
    let class = spec.snapshot_class.as_deref();
    let at = snapshots::Taken {
        home: &ctx.settings.home,
        ns,
        blueprint: &name,
        set: &id,
    };
    match snapshots::take(&client, &at, &claims, class).await {
        Ok(()) => {
            tracing::info!(blueprint = %name, set = %id, claims = claims.len(), why = ?due, "data snapshot taken");
            if let Due::Asked(token) = due {
                st.refreshed = Some(token);
            }
            // Read back next round; until then it is being taken.
            if let Ok(sets) = snapshots::observe(&client, ns, &name, &st.sets).await {
                st.sets = sets;
            }
        }
        Err(e) => {
            st.message = Some(
                snapshots::not_served(&e).unwrap_or_else(|| format!("taking a snapshot: {e}")),
            );
        }
    }
    st
}

/// The sets live previews started from, by Blueprint; `None` before the previews' cache is
/// filled.
fn pinned_all(ctx: &Context) -> Option<BTreeMap<String, BTreeSet<String>>> {
    let previews = ctx.previews.as_ref()?;
    previews.wait_until_ready().now_or_never()?.ok()?;
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in previews.state() {
        let Some(st) = p.status.as_ref() else {
            continue;
        };
        if st.phase == Some(sandcastle_crd::Phase::Removed) {
            continue;
        }
        if let Some(set) = st.data.as_ref().and_then(|d| d.snapshot.clone()) {
            out.entry(p.spec.blueprint.clone()).or_default().insert(set);
        }
    }
    Some(out)
}
