//! The Blueprint's HTTP readiness gate, once a rollout's workloads are ready: one try per pass
//! (`successThreshold` requests back to back), no more often than the probe's interval, its last answer kept in the rollout's status
//! (`GET / → 502, 6 tries`) for the status message and the sticky comment; passed once the
//! preview answers with an accepted status showing the rollout's commit, failed past the
//! deadline with what it last saw.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::context::Context;
use sandcastle_crd::{HttpReadiness, ProbeState, Rollout};
use sandcastle_domain::{Sha, duration, probe};
use sandcastle_probe::{Target, ask};

/// The longest one request may take, whatever the interval.
const REQUEST_TIMEOUT_CAP: Duration = Duration::from_secs(10);

/// Where the gate stands after this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Gate {
    Passed,
    /// Not yet: the progress message, what it last saw (the sticky comment is edited when that
    /// changes, not on every try) and when to try again.
    Waiting {
        message: String,
        seen: String,
        again: Duration,
    },
    /// It will not pass: why, for people.
    Failed(String),
}

/// Where the probe of a preview goes.
pub(super) struct Probed<'a> {
    pub url: Option<&'a str>,
    /// The Service and port behind the URL.
    pub backend: Option<(String, u16)>,
    pub namespace: &'a str,
    /// Whether the preview lives in Sandcastle's own cluster: `--probe-via` (an address or the
    /// Service, both inside that cluster) applies only there; a preview in another cluster is
    /// probed at its URL.
    pub local: bool,
    /// Sent as the preview's header secret: a `signedIn` preview's gate lets the probe in.
    pub secret: Option<sandcastle_domain::Secret>,
    /// The wildcard certificate's CA, trusted besides the system's (a private CA).
    pub roots: Option<Vec<u8>>,
}

/// Try the probe once if it is due, recording what it saw in `rollout`.
pub(super) async fn gate(
    spec: &HttpReadiness,
    rollout: &mut Rollout,
    sha: &Sha,
    at: &Probed<'_>,
    ctx: &Context,
) -> Gate {
    let now = ctx.clock.now();
    let interval = spec.interval.get().max(Duration::from_millis(100));
    if let Some(p) = &rollout.probe {
        if p.passed {
            return Gate::Passed;
        }
        let since = elapsed(&p.last_at, now);
        if since < interval {
            return Gate::Waiting {
                message: waiting(&p.last, p.tries),
                seen: p.last.clone(),
                again: interval - since,
            };
        }
    }
    let Some(url) = at.url else {
        return Gate::Failed(
            "readiness.http needs a preview URL, and no Ingress of the blueprint gives one".into(),
        );
    };
    let backend = at
        .backend
        .as_ref()
        .map(|(svc, port)| (svc.as_str(), at.namespace, *port));
    let via = if at.local {
        &ctx.settings.probe_via
    } else {
        &sandcastle_probe::ProbeVia::Url
    };
    let seen = match Target::new(url, &spec.path, via, backend) {
        Ok(mut target) => {
            target.secret = at.secret.clone();
            target.roots = at.roots.clone();
            let timeout = interval.clamp(Duration::from_secs(1), REQUEST_TIMEOUT_CAP);
            in_a_row(spec, sha, &target, timeout).await
        }
        Err(why) => return Gate::Failed(format!("readiness.http: {why}")),
    };
    let state = rollout.probe.get_or_insert_with(|| ProbeState {
        tries: 0,
        last: String::new(),
        started_at: Time(now),
        last_at: Time(now),
        passed: false,
    });
    state.tries += 1;
    state.last_at = Time(now);
    match seen {
        Ok(()) => {
            state.last = format!("{} → passed", probe::request_line(spec));
            state.passed = true;
            Gate::Passed
        }
        Err(last) => {
            state.last = last;
            let deadline = spec.deadline.get();
            if elapsed(&state.started_at, now) >= deadline {
                Gate::Failed(format!(
                    "HTTP probe did not pass within {}: {}",
                    duration::go_style(deadline),
                    probe::progress(&state.last, state.tries)
                ))
            } else {
                Gate::Waiting {
                    message: waiting(&state.last, state.tries),
                    seen: state.last.clone(),
                    again: interval,
                }
            }
        }
    }
}

/// Ask `target` `successThreshold` times back to back; the first answer that does not pass
/// ends the try (saying which of the row it was).
async fn in_a_row(
    spec: &HttpReadiness,
    sha: &Sha,
    target: &Target,
    timeout: Duration,
) -> Result<(), String> {
    let row = spec.success_threshold.max(1);
    for n in 1..=row {
        let seen = match ask(target, timeout).await {
            Ok(answer) => probe::judge(spec, sha, &answer),
            Err(why) => Err(format!("{} → {why}", probe::request_line(spec))),
        };
        if let Err(last) = seen {
            return Err(probe::in_row(&last, n, row));
        }
    }
    Ok(())
}

fn waiting(last: &str, tries: u32) -> String {
    format!("probing: {}", probe::progress(last, tries))
}

fn elapsed(since: &Time, now: jiff::Timestamp) -> Duration {
    now.duration_since(since.0).try_into().unwrap_or_default()
}
