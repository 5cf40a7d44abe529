//! Checking a cluster: does its API answer (`GET /version`, bounded), and do its credentials
//! hold every permission a target cluster needs (`rbac::target_rules`, one
//! SelfSubjectAccessReview each, asked cluster-wide)? The answers name what is missing as
//! `kubectl auth can-i` takes it, so the admin knows what to grant.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::{Access, Cluster, Reach};
use crate::rbac::{self, Permission};

/// How long a cluster's API may take to answer a check.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(5);
/// How often access is checked again on a cluster that had it all (it is also checked after
/// every time the cluster comes back, and on every check while something is missing).
pub const ACCESS_RECHECK: Duration = Duration::from_secs(600);
/// How often access is checked again on a cluster whose credentials lack something (an admin
/// granting it is seen this much later at most).
pub const ACCESS_RETRY: Duration = Duration::from_secs(30);
/// Access reviews asked at once.
const REVIEWS_AT_ONCE: usize = 16;

/// Whether the cluster's API answers now.
pub async fn reach(cluster: &Cluster) -> Reach {
    match tokio::time::timeout(REACH_TIMEOUT, cluster.client().apiserver_version()).await {
        Ok(Ok(_)) => Reach::Up,
        Ok(Err(e)) => Reach::Down(short(&e)),
        Err(_) => Reach::Down(format!("no answer within {}s", REACH_TIMEOUT.as_secs())),
    }
}

/// A connection error in a few words (hyper's chains are long and repeat themselves).
pub fn short(e: &kube::Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s = text;
        }
        source = inner.source();
    }
    s.chars().take(160).collect()
}

/// Which permissions of a target cluster the credentials lack (`Err`: the API failed).
pub async fn access(cluster: &Cluster) -> Result<Access, kube::Error> {
    let api: Api<SelfSubjectAccessReview> = Api::all(cluster.client().clone());
    let needed = rbac::permissions(&rbac::target_rules());
    let answers: Vec<Result<(Permission, bool), kube::Error>> =
        futures::stream::iter(needed.into_iter().map(|p| {
            let api = api.clone();
            async move {
                let allowed = allowed(&api, &p).await?;
                Ok((p, allowed))
            }
        }))
        .buffer_unordered(REVIEWS_AT_ONCE)
        .collect()
        .await;
    let mut missing = Vec::new();
    for answer in answers {
        let (p, allowed) = answer?;
        if !allowed {
            missing.push(p);
        }
    }
    missing.sort();
    Ok(if missing.is_empty() {
        Access::Complete
    } else {
        Access::Lacks(missing.iter().map(ToString::to_string).collect())
    })
}

async fn allowed(api: &Api<SelfSubjectAccessReview>, p: &Permission) -> Result<bool, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(p.verb.clone()),
                group: Some(p.group.clone()),
                resource: Some(p.resource.clone()),
                subresource: p.subresource.clone(),
                name: p.name.clone(),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = api.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// Check `cluster` once: reachability always; access when it was never checked, when the
/// cluster just came back, or once [`ACCESS_RECHECK`] (lacking: [`ACCESS_RETRY`]) has passed. Returns whether what
/// placement sees changed.
pub async fn once(cluster: &Cluster, now: jiff::Timestamp) -> bool {
    let reach = reach(cluster).await;
    let before = cluster.health();
    let back = reach == Reach::Up && before.reach != Reach::Up;
    let due = match (&before.access, before.access_checked) {
        (Access::Complete, Some(at)) => at.elapsed() >= ACCESS_RECHECK,
        (Access::Lacks(_), Some(at)) => at.elapsed() >= ACCESS_RETRY,
        _ => true,
    };
    let access = if reach == Reach::Up && (back || due) {
        match access(cluster).await {
            Ok(a) => Some(a),
            Err(e) => {
                tracing::warn!(cluster = %cluster.name, error = %short(&e), "checking the cluster's access failed");
                None
            }
        }
    } else {
        None
    };
    let changed = cluster.set_health(|h| {
        if h.reach != reach {
            h.since = Some(now);
        }
        h.reach = reach.clone();
        if let Some(a) = access {
            h.access = a;
            h.access_checked = Some(Instant::now());
        }
    });
    if changed {
        let h = cluster.health();
        match (&h.reach, &h.access) {
            (Reach::Down(e), _) => {
                tracing::warn!(cluster = %cluster.name, error = %e, "cluster unreachable");
            }
            (Reach::Up, Access::Lacks(missing)) => {
                tracing::warn!(cluster = %cluster.name, missing = ?missing, "the cluster's credentials lack permissions previews need");
            }
            (Reach::Up, _) => tracing::info!(cluster = %cluster.name, "cluster reachable"),
            _ => {}
        }
    }
    changed
}
