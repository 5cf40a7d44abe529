//! The periodic jobs beside the controller (run only where the controller runs, so only in the
//! leader): the catch-up resync with GitHub and the orphan sweep, at start and then every
//! `housekeeping_interval`. A moved test clock runs the sweep at once (its grace period is
//! measured with the clock).

use std::future::Future;

use futures::StreamExt;

use super::context::Context;
use super::{orphans, resync};

/// Run housekeeping until `shutdown` resolves.
pub async fn run(ctx: Context, shutdown: impl Future<Output = ()>) {
    let settings = &ctx.settings;
    if !settings.resync && settings.orphan_grace.is_none() {
        return;
    }
    let mut interval = tokio::time::interval(settings.housekeeping_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks = ctx.clock.ticks();
    let mut round = 0;
    tokio::pin!(shutdown);
    loop {
        let by_clock = tokio::select! {
            () = &mut shutdown => return,
            _ = interval.tick() => false,
            Some(()) = ticks.next() => true,
        };
        let work = async {
            if settings.resync && !by_clock {
                match resync::run(&ctx, round).await {
                    Ok(report) => tracing::info!(round, ?report, "catch-up resync"),
                    Err(e) => tracing::warn!(round, error = %e, "catch-up resync failed"),
                }
                round += 1;
            }
            if let Some(grace) = settings.orphan_grace {
                match orphans::sweep(&ctx, grace).await {
                    Ok(report) => tracing::debug!(?report, "orphan sweep"),
                    Err(e) => tracing::warn!(error = %e, "orphan sweep failed"),
                }
            }
        };
        tokio::select! {
            () = &mut shutdown => return,
            () = work => {}
        }
    }
}
