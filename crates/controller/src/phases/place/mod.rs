//! Placement: the cluster a preview lives in. A preview holding its Blueprint's slot and not
//! placed yet goes to the target cluster with the most room (`domain::placement`); the choice is
//! written at once, under a lock, so two previews never take a cluster's last room together, and
//! never changes while the preview lives (a new incarnation is placed anew). With no cluster
//! able to take it, the preview waits (`Pending`, GitHub `queued`) while one may clear — full,
//! unreachable, being checked — and fails, saying what to fix, when every one is misconfigured.
//! A placed preview whose cluster does not answer keeps its phase and says so; it carries on
//! when the cluster is back. Previews placed before clusters were recorded live in Sandcastle's
//! own.

pub(crate) mod placements;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::context::Context;
use crate::error::Error;
use crate::report::Report;
use crate::verdict::{Next, Verdict, record, save, set_phase};
use sandcastle_crd::{Blueprint, IN_CLUSTER, Phase, PreviewEnvironment, PreviewStatus};
use sandcastle_domain::placement::{self, Candidate, ClusterName, NoRoom, Standing};
use sandcastle_github::text::statuses::fit_description;
use sandcastle_kube::clusters::Cluster;

/// How soon a preview waiting for a cluster looks again when nothing wakes it sooner (a
/// cluster's change, or a preview leaving one, does).
const WAIT_RECHECK: Duration = Duration::from_secs(60);
/// How soon a preview whose cluster does not answer looks again (its coming back wakes it
/// sooner).
const UNREACHABLE_RECHECK: Duration = Duration::from_secs(30);
/// The condition a placed preview carries: whether its cluster answers.
pub(crate) const CONDITION: &str = "ClusterReachable";

pub(crate) use sandcastle_domain::placement::placed_in;

/// Whether `p` takes room in its cluster: placed and not removed.
fn holds_room(p: &PreviewEnvironment) -> Option<&str> {
    let st = p.status.as_ref()?;
    if st.phase == Some(Phase::Removed) {
        return None;
    }
    placed_in(st)
}

/// What placement decided.
pub(crate) enum Placed {
    At(Arc<Cluster>),
    /// Not placed (waiting, failed) or placed in a cluster that cannot be used now.
    Waiting(Box<Verdict>),
}

/// Make sure `pe` is placed; the decision is written before the lock is released (`persisted`
/// follows).
pub(crate) async fn place(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
    bp: &Blueprint,
    st: &mut PreviewStatus,
    persisted: &mut Option<PreviewStatus>,
    ctx: &Context,
) -> Result<Placed, Error> {
    if let Some(name) = placed_in(st).map(str::to_owned) {
        return Ok(match ctx.clusters.get(&name) {
            Ok(c) => {
                st.cluster = Some(name);
                st.waiting_for_cluster = None;
                Placed::At(c)
            }
            Err(standing) => Placed::Waiting(Box::new(lost(st, &name, &standing, ctx))),
        });
    }
    let decide = ctx.placements.decide.lock().await;
    let chosen = match adopted_cluster(api, pe).await? {
        // A sandbox taken over lives on in its namespace, wherever that is.
        Some(name) => Ok(name),
        None => {
            let counts = counts(api, &pe.name_any(), ctx).await?;
            let candidates: Vec<Candidate> = bp
                .spec
                .target_clusters()
                .into_iter()
                .map(|name| candidate(name, &counts, ctx))
                .collect();
            placement::place(&candidates)
        }
    };
    let name = match chosen {
        Ok(name) => name,
        Err(no_room) => {
            drop(decide);
            return Ok(Placed::Waiting(Box::new(waiting(pe, st, &no_room, ctx))));
        }
    };
    let cluster = ctx
        .clusters
        .get(name.as_str())
        .map_err(|s| Error::Transient(format!("cluster {name}: {s:?}")))?;
    st.cluster = Some(name.to_string());
    st.waiting_for_cluster = None;
    let now = ctx.clock.now();
    let note = format!("in cluster {name}");
    record(
        st,
        now,
        "sandcastle",
        "Placed",
        Some(&pe.spec.sha),
        Some(&note),
    );
    let mut saved = pe.clone();
    saved.status = persisted.clone();
    save(api, &saved, st, &ctx.echoes).await?;
    *persisted = Some(st.clone());
    ctx.placements.remember(&pe.name_any(), name.as_str());
    drop(decide);
    ctx.clusters.metrics().placed(name.as_str());
    tracing::info!(target: "audit", actor = "sandcastle", action = "place", preview = %pe.name_any(), sha = %pe.spec.sha, result = %name, "preview placed");
    Ok(Placed::At(cluster))
}

/// Place `pe` in Sandcastle's own cluster, recorded in `st` for the caller's write, when no
/// decision could come out otherwise: its Blueprint targets no other cluster, it takes over no
/// sandbox, and Sandcastle's own cluster has no cap and is ready. No lock, no write of its own
/// (the slot decision that admits it writes both at once) and no history entry (there was no
/// choice to tell of). `true` when placed.
pub(crate) fn place_with_slot(
    pe: &PreviewEnvironment,
    bp: &Blueprint,
    st: &mut PreviewStatus,
    ctx: &Context,
) -> bool {
    let Ok(local) = ctx.clusters.get(IN_CLUSTER) else {
        return false;
    };
    let trivial = bp.spec.target_clusters() == [IN_CLUSTER]
        && pe.spec.adopts.is_none()
        && local.max_previews.is_none()
        && local.standing() == Standing::Ready;
    if !trivial || placed_in(st).is_some() {
        return false;
    }
    st.cluster = Some(IN_CLUSTER.to_owned());
    st.waiting_for_cluster = None;
    ctx.clusters.metrics().placed(IN_CLUSTER);
    tracing::info!(target: "audit", actor = "sandcastle", action = "place", preview = %pe.name_any(), sha = %pe.spec.sha, result = IN_CLUSTER, "preview placed");
    true
}

/// The cluster of the sandbox `pe` takes over, if it was placed.
async fn adopted_cluster(
    api: &Api<PreviewEnvironment>,
    pe: &PreviewEnvironment,
) -> Result<Option<ClusterName>, Error> {
    let Some(a) = &pe.spec.adopts else {
        return Ok(None);
    };
    let sandbox = api.get_opt(&a.preview).await?;
    Ok(sandbox
        .as_ref()
        .and_then(|s| s.status.as_ref())
        .and_then(|st| placed_in(st))
        .and_then(|c| ClusterName::new(c).ok()))
}

fn candidate(name: &str, counts: &BTreeMap<String, u32>, ctx: &Context) -> Candidate {
    let cluster = ctx.clusters.get(name).ok();
    Candidate {
        name: ClusterName::new(name).unwrap_or_else(|_| ClusterName::in_cluster()),
        standing: ctx.clusters.standing(name),
        cap: cluster.and_then(|c| c.max_previews),
        previews: counts.get(name).copied().unwrap_or(0),
    }
}

/// Previews each cluster holds, but `except`: from the controller's cache and the decisions it
/// may not show yet (from the API without a cache).
async fn counts(
    api: &Api<PreviewEnvironment>,
    except: &str,
    ctx: &Context,
) -> Result<BTreeMap<String, u32>, Error> {
    let previews: Vec<Arc<PreviewEnvironment>> = match &ctx.previews {
        Some(store) => store.state(),
        None => api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(Arc::new)
            .collect(),
    };
    let mut recent = ctx.placements.recent();
    let mut out: BTreeMap<String, u32> = BTreeMap::new();
    for p in &previews {
        let name = p.name_any();
        let remembered = recent.remove(&name);
        if name == except {
            continue;
        }
        let removed = p.status.as_ref().and_then(|s| s.phase) == Some(Phase::Removed);
        let cluster = holds_room(p)
            .map(str::to_owned)
            .or(remembered.filter(|_| !removed));
        if let Some(c) = cluster {
            *out.entry(c).or_default() += 1;
        }
    }
    // Placed a moment ago and not in the cache at all yet.
    for (preview, cluster) in recent {
        if preview != except {
            *out.entry(cluster).or_default() += 1;
        }
    }
    Ok(out)
}

/// No cluster can take `pe`: wait while one may clear, fail when an admin must act.
fn waiting(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    no_room: &NoRoom,
    ctx: &Context,
) -> Verdict {
    let now = ctx.clock.now();
    if no_room.may_clear() {
        let message = format!("waiting for a cluster: {no_room}");
        set_phase(st, Phase::Pending, message, now, Some(&pe.spec.sha));
        st.waiting_for_cluster = Some(no_room.to_string());
        let why = fit_description(&format!("Waiting for a cluster: {no_room}"));
        return Verdict::new(st.clone(), Next::After(WAIT_RECHECK)).reporting(Report::Queued(why));
    }
    let fix = if no_room.lacks_access() {
        "; grant what charts/sandcastle/files/target-cluster.yaml grants (docs/clusters.md)"
    } else {
        ""
    };
    st.waiting_for_cluster = None;
    let message = format!("cannot be placed: {no_room}{fix}");
    set_phase(st, Phase::Failed, message.clone(), now, Some(&pe.spec.sha));
    let report = Report::Failure {
        why: fit_description(&message),
        rollout: false,
    };
    Verdict::new(st.clone(), Next::After(WAIT_RECHECK)).reporting(report)
}

/// `pe` lives in cluster `name`, which cannot be used now (its Secret gone or unusable): it
/// keeps its phase, says why, and looks again later.
fn lost(st: &mut PreviewStatus, name: &str, standing: &Standing, ctx: &Context) -> Verdict {
    let why = match standing {
        Standing::Invalid(e) => format!("the Secret of cluster {name} cannot be used: {e}"),
        _ => format!(
            "cluster {name} is not registered any more (no Secret labelled sandcastle.dev/cluster={name})"
        ),
    };
    reachability(st, name, Some(&why), ctx);
    st.message = Some(format!(
        "{why}; its namespace is left as it is until it is back"
    ));
    Verdict::new(st.clone(), Next::After(WAIT_RECHECK))
}

/// `pe`'s cluster does not answer: the phase stays (the namespace is still there, as far as
/// anyone knows), the message and the `ClusterReachable` condition say why, GitHub hears
/// nothing; the cluster's return brings it back.
pub(crate) fn unreachable(st: &mut PreviewStatus, cluster: &Cluster, ctx: &Context) -> Verdict {
    let health = cluster.health();
    let error = match &health.reach {
        sandcastle_kube::clusters::Reach::Down(e) => e.clone(),
        _ => "not checked yet".to_owned(),
    };
    let since = health
        .since
        .map(|t| format!(" since {}", t.strftime("%H:%M:%S UTC")))
        .unwrap_or_default();
    let why = format!("cluster {} is unreachable{since} ({error})", cluster.name);
    reachability(st, cluster.name.as_str(), Some(&why), ctx);
    st.message = Some(format!(
        "{why}: the preview may not answer; Sandcastle carries on when the cluster is back"
    ));
    Verdict::new(st.clone(), Next::After(UNREACHABLE_RECHECK))
}

/// Set the `ClusterReachable` condition of a preview placed in `cluster` (`down`: why not), and
/// record each change in the history once.
pub(crate) fn reachability(
    st: &mut PreviewStatus,
    cluster: &str,
    down: Option<&str>,
    ctx: &Context,
) {
    let now = ctx.clock.now();
    let (status, reason, message) = match down {
        Some(why) => ("False", "Unreachable", why.to_owned()),
        None => ("True", "Reachable", format!("cluster {cluster} answers")),
    };
    let was = st
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION)
        .map(|c| c.status.clone());
    if was.as_deref() == Some(status) {
        return;
    }
    st.conditions.retain(|c| c.type_ != CONDITION);
    st.conditions.push(Condition {
        type_: CONDITION.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.clone(),
        last_transition_time: Time(now),
        observed_generation: None,
    });
    // The first placement is not news; losing the cluster and getting it back are.
    if was.is_some() || down.is_some() {
        let action = if down.is_some() {
            "ClusterUnreachable"
        } else {
            "ClusterBack"
        };
        record(st, now, "sandcastle", action, None, Some(&message));
    }
}

/// Look again at every preview that waits for a cluster or lives in a registered one: after a
/// cluster changed (added, gone, down, back) or a preview left one.
pub(crate) fn poke_waiting(ctx: &Context) {
    let Some(store) = &ctx.previews else {
        return;
    };
    for p in store.state() {
        if p.spec.teardown.is_some()
            && p.status.as_ref().and_then(|s| s.phase) == Some(Phase::Removed)
        {
            continue;
        }
        let waits = p.status.as_ref().is_some_and(|s| placed_in(s).is_none());
        let remote = p
            .status
            .as_ref()
            .and_then(|s| s.cluster.as_deref())
            .is_some_and(|c| c != IN_CLUSTER);
        if waits || remote {
            ctx.poke(&p);
        }
    }
}
