//! A preview's front door as the controller keeps it: the [`Edge`] its plan is made with (the
//! wildcard certificate's names, who may open it, the gate), the certificate's copy in its
//! namespace (made at each new rollout), and the copies of every live preview made again when
//! the source Secret changes (a renewal), while this replica leads.

use std::sync::Arc;

use kube::ResourceExt;

use super::context::Context;
use sandcastle_crd::{Blueprint, Phase, PreviewEnvironment};
use sandcastle_domain::Secret;
use sandcastle_domain::edge::Edge;
use sandcastle_kube::tls::{self, Loaded, NoCertificate};

/// The front door of a preview of `blueprint`; `Err` says why it cannot have one now (the
/// certificate configured but not read yet, or not usable).
pub(crate) fn edge_of(blueprint: &Blueprint, ctx: &Context) -> Result<Edge, NoCertificate> {
    let tls = match &ctx.wildcard {
        Some(w) => Some(w.current()?.certificate.clone()),
        None => None,
    };
    Ok(Edge {
        tls,
        access: blueprint.spec.access.unwrap_or(ctx.settings.default_access),
        gate: ctx.settings.gate.clone(),
    })
}

/// Copy the certificate into namespace `ns` of `client`'s cluster (a new rollout).
pub(crate) async fn copy_certificate(
    ctx: &Context,
    client: &kube::Client,
    ns: &str,
) -> Result<(), crate::error::Error> {
    let Some(w) = &ctx.wildcard else {
        return Ok(());
    };
    let loaded = w
        .current()
        .map_err(|e| crate::error::Error::Transient(e.to_string()))?;
    tls::copy(client, ns, &loaded).await?;
    Ok(())
}

/// The header the readiness probe sends to pass a `signedIn` preview's gate.
pub(crate) fn probe_secret(
    pe: &PreviewEnvironment,
    edge_access: bool,
    ctx: &Context,
) -> Option<Secret> {
    if !edge_access {
        return None;
    }
    ctx.gate_keys.as_ref().map(|k| k.header_secret(pe))
}

/// What the readiness probe trusts besides the system's roots: the wildcard's CA, if its
/// Secret holds one.
pub(crate) fn probe_roots(ctx: &Context) -> Option<Vec<u8>> {
    let loaded = ctx.wildcard.as_ref()?.current().ok()?;
    loaded.ca().map(<[u8]>::to_vec)
}

/// Follow the certificate until `shutdown`; each change is copied into every live preview.
pub(crate) async fn follow(ctx: Context, shutdown: impl std::future::Future<Output = ()>) {
    let Some(wildcard) = ctx.wildcard.clone() else {
        return;
    };
    let fan_out = {
        let ctx = ctx.clone();
        move |loaded: Arc<Loaded>| {
            let ctx = ctx.clone();
            tokio::spawn(async move { renew(&ctx, &loaded).await });
        }
    };
    tokio::select! {
        () = wildcard.follow(ctx.client.clone(), fan_out) => {}
        () = shutdown => {}
    }
}

/// Copy `loaded` into the namespace of every live preview (those not deployed yet get it with
/// their rollout), and look again at those that failed.
async fn renew(ctx: &Context, loaded: &Loaded) {
    let Some(previews) = &ctx.previews else {
        return;
    };
    let live: Vec<Arc<PreviewEnvironment>> = previews
        .state()
        .into_iter()
        .filter(|pe| pe.spec.teardown.is_none())
        .filter(|pe| {
            let st = pe.status.as_ref();
            st.and_then(|s| s.phase) != Some(Phase::Removed)
                && st.and_then(|s| s.namespace.as_ref()).is_some()
        })
        .collect();
    let mut copied = 0;
    for pe in &live {
        let st = pe.status.as_ref();
        let (Some(ns), cluster) = (
            st.and_then(|s| s.namespace.clone()),
            st.and_then(sandcastle_domain::placement::placed_in)
                .unwrap_or(sandcastle_crd::IN_CLUSTER),
        ) else {
            continue;
        };
        let Ok(cluster) = ctx.clusters.get(cluster) else {
            continue;
        };
        match tls::copy(cluster.client(), &ns, loaded).await {
            Ok(()) => copied += 1,
            // A namespace not made yet, or going: its rollout (or nothing) takes care of it.
            Err(kube::Error::Api(r)) if r.code == 404 || r.code == 403 => {}
            Err(e) => {
                tracing::warn!(preview = %pe.name_any(), error = %e, "copying the renewed preview certificate failed");
            }
        }
    }
    tracing::info!(version = %loaded.version, copied, live = live.len(), "preview certificate copied into live previews");
    // Those that failed (for want of a certificate, or one that did not serve their hosts)
    // are looked at again now.
    for pe in previews.state() {
        if pe.status.as_ref().and_then(|s| s.phase) == Some(Phase::Failed) {
            ctx.poke(&pe);
        }
    }
}
