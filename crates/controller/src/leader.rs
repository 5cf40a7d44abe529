//! Leader election among Sandcastle replicas with a `coordination.k8s.io/v1` Lease in
//! Sandcastle's namespace. Every replica serves HTTP; the one holding the Lease runs the
//! controller and the housekeeping jobs. The holder renews every `duration / 6` and steps down
//! (stops its work) when it could not renew for `2/3` of the duration, so it has stopped before
//! anyone else may take over; a follower takes over once the record it watches has not changed
//! for a whole lease duration (measured on its own clock, as client-go does, so clock skew
//! between nodes does not matter). A clean shutdown hands the Lease back at once.
//!
//! Why not a crate: `kube-lease-manager` (the one that builds with kube 5) keeps reporting
//! leadership while renewals fail and judges expiry by comparing another node's `renewTime` with
//! the local clock; both are wrong for a controller that must never run twice.

use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a replica takes part in leader election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// Name of the Lease (in Sandcastle's namespace).
    pub lease_name: String,
    /// This replica's identity (the pod name, made unique).
    pub identity: String,
    /// How long a lease is valid without renewal; a takeover happens within about this long.
    pub lease_duration: Duration,
}

impl LeaderElection {
    fn renew_deadline(&self) -> Duration {
        self.lease_duration * 2 / 3
    }

    fn retry_period(&self) -> Duration {
        (self.lease_duration / 6).max(Duration::from_millis(100))
    }
}

/// What one attempt to take or renew the Lease found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    Held,
    /// Someone else holds a valid lease.
    Taken,
    /// Another writer changed the Lease between read and write; look again.
    Conflict,
}

struct Elector {
    api: Api<Lease>,
    le: LeaderElection,
    /// The other holder's record (holder, renew time) and when this replica first saw it.
    observed: Option<(String, Instant)>,
    last_renew: Option<Instant>,
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

impl Elector {
    async fn attempt(&mut self) -> Result<Attempt, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let name = self.le.lease_name.as_str();
        let me = self.le.identity.as_str();
        let Some(mut lease) = self.api.get_opt(name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me.to_owned()),
                    lease_duration_seconds: Some(seconds(self.le.lease_duration)),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Held),
                Err(kube::Error::Api(r)) if r.code == 409 => Ok(Attempt::Conflict),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = holder.as_deref() == Some(me);
        if let (Some(holder), false) = (&holder, mine) {
            let record = format!("{holder}@{:?}", spec.renew_time.as_ref().map(|t| t.0));
            let valid_for = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.le.lease_duration, Duration::from_secs);
            match &self.observed {
                Some((seen, since)) if *seen == record => {
                    if since.elapsed() < valid_for {
                        return Ok(Attempt::Taken);
                    }
                    tracing::info!(%holder, "the leader's lease ran out; taking over");
                }
                _ => {
                    self.observed = Some((record, Instant::now()));
                    return Ok(Attempt::Taken);
                }
            }
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!mine);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(me.to_owned()),
            lease_duration_seconds: Some(seconds(self.le.lease_duration)),
            acquire_time: if mine {
                spec.acquire_time.clone()
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..spec
        });
        match self.api.replace(name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(Attempt::Held),
            Err(kube::Error::Api(r)) if r.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e),
        }
    }

    /// Wait until this replica holds the Lease.
    async fn acquire(&mut self) {
        loop {
            match self.attempt().await {
                Ok(Attempt::Held) => {
                    self.last_renew = Some(Instant::now());
                    self.observed = None;
                    return;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "reading the leader Lease failed"),
            }
            tokio::time::sleep(self.le.retry_period()).await;
        }
    }

    /// Renew until the Lease is lost (another holder) or could not be renewed in time.
    async fn keep(&mut self) {
        loop {
            tokio::time::sleep(self.le.retry_period()).await;
            match self.attempt().await {
                Ok(Attempt::Held) => self.last_renew = Some(Instant::now()),
                Ok(Attempt::Taken) => {
                    tracing::warn!("another replica holds the leader Lease; stepping down");
                    self.last_renew = None;
                    return;
                }
                Ok(Attempt::Conflict) => {}
                Err(e) => tracing::warn!(error = %e, "renewing the leader Lease failed"),
            }
            if self
                .last_renew
                .is_none_or(|t| t.elapsed() >= self.le.renew_deadline())
            {
                tracing::warn!("could not renew the leader Lease in time; stepping down");
                return;
            }
        }
    }

    /// How long the work may go on after stepping down before another replica can lead.
    fn margin(&self) -> Duration {
        self.last_renew.map_or(Duration::ZERO, |t| {
            self.le
                .lease_duration
                .saturating_sub(t.elapsed())
                .saturating_sub(self.le.retry_period())
        })
    }

    /// Hand the Lease back so another replica can lead at once.
    async fn release(&mut self) {
        let name = self.le.lease_name.as_str();
        let Ok(Some(mut lease)) = self.api.get_opt(name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.le.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        if let Err(e) = self.api.replace(name, &PostParams::default(), &lease).await {
            tracing::warn!(error = %e, "releasing the leader Lease failed");
        }
    }
}

/// Take part in leader election until `shutdown`: run `work` (given a token that is cancelled
/// when it must stop) for as long as this replica leads, and report leadership on `leading`.
pub async fn run<W, F>(
    client: Client,
    namespace: &str,
    le: LeaderElection,
    leading: watch::Sender<bool>,
    shutdown: CancellationToken,
    work: W,
) where
    W: Fn(CancellationToken) -> F,
    F: Future<Output = ()>,
{
    let mut elector = Elector {
        api: Api::namespaced(client, namespace),
        le,
        observed: None,
        last_renew: None,
    };
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = elector.acquire() => {}
        }
        tracing::info!(identity = %elector.le.identity, "leading: running the controller");
        leading.send_replace(true);
        let stop = CancellationToken::new();
        let job = work(stop.clone());
        tokio::pin!(job);
        let shutting_down = tokio::select! {
            () = &mut job => false,
            () = elector.keep() => false,
            () = shutdown.cancelled() => true,
        };
        stop.cancel();
        // Let reconciles in flight finish while no one else can lead yet; then drop them.
        let margin = if shutting_down {
            elector.le.lease_duration
        } else {
            elector.margin()
        };
        if tokio::time::timeout(margin, &mut job).await.is_err() {
            tracing::warn!("work did not stop in time; abandoning it");
        }
        leading.send_replace(false);
        if shutting_down {
            elector.release().await;
            return;
        }
        tracing::info!(identity = %elector.le.identity, "no longer leading");
    }
}
