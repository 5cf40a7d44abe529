//! Diagnosing a workload that is not ready: its pods, their `Unhealthy` Events and, when no pod
//! exists, why none could be created, classified by `domain::diagnosis`; then, when asked, the
//! failing container's last log lines (its previous run for a crash loop), redacted with the
//! namespace's Secret values and token shapes.

use k8s_openapi::api::core::v1::{Event, Pod, Secret};
use kube::Client;
use kube::api::{Api, ListParams, LogParams};

use super::readiness::{self, Health, WorkloadState};
use sandcastle_crd::{Diagnosis, DiagnosisReason};
use sandcastle_domain::diagnosis::{self, Finding, TAIL_LINES};
use sandcastle_domain::redact::Redactor;

/// Bytes asked of the container's log (the tail keeps less).
const LOG_BYTES: i64 = 16 * 1024;

/// Whether to fetch the failing container's log tail (once, when a preview fails) or not (each
/// pass while it deploys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logs {
    Fetch,
    Skip,
}

/// Why `w` is not ready, or `None` while its pods are simply starting.
pub async fn diagnose(
    client: &Client,
    ns: &str,
    w: &WorkloadState,
    logs: Logs,
) -> Option<Diagnosis> {
    let workload = format!("{}/{}", w.kind.to_lowercase(), w.name);
    let pods = pods_of(client, ns, w).await;
    let finding = match (&w.health, pods.is_empty()) {
        (Health::Failed(why), _) => {
            let inner = diagnosis::classify(&pods, &[], None);
            let exit = readiness::exit_code(&pods).map(|c| format!(" (exit {c})"));
            Finding {
                reason: DiagnosisReason::JobFailed,
                what: format!("failed: {why}{}", exit.unwrap_or_default()),
                pod: inner.as_ref().and_then(|f| f.pod.clone()),
                container: inner.and_then(|f| f.container),
                previous: false,
            }
        }
        (_, true) => {
            let refusal = readiness::creation_failure(client, ns, w).await;
            diagnosis::classify(&[], &[], refusal.as_deref())?
        }
        (_, false) => {
            let events = unhealthy_events(client, ns).await;
            diagnosis::classify(&pods, &events, None)?
        }
    };
    let log_tail = match logs {
        Logs::Fetch => log_tail(client, ns, &finding).await,
        Logs::Skip => Vec::new(),
    };
    Some(Diagnosis {
        reason: finding.reason,
        summary: format!("{workload}: {}", finding.what),
        workload: Some(workload),
        pod: finding.pod,
        container: finding.container,
        previous: finding.previous && !log_tail.is_empty(),
        log_tail,
    })
}

/// What is wrong, without the workload's name (`summary` starts with it).
pub fn cause(d: &Diagnosis) -> &str {
    d.workload
        .as_deref()
        .and_then(|w| d.summary.strip_prefix(w))
        .and_then(|rest| rest.strip_prefix(": "))
        .unwrap_or(&d.summary)
}

/// The Blueprint's HTTP probe did not pass: `why` is its last answer.
pub fn http_probe(why: &str) -> Diagnosis {
    Diagnosis {
        reason: DiagnosisReason::HttpProbe,
        summary: why.to_owned(),
        workload: None,
        pod: None,
        container: None,
        log_tail: Vec::new(),
        previous: false,
    }
}

async fn pods_of(client: &Client, ns: &str, w: &WorkloadState) -> Vec<Pod> {
    let Some(selector) = &w.selector else {
        return Vec::new();
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut pods = api
        .list(&ListParams::default().labels(selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    pods
}

async fn unhealthy_events(client: &Client, ns: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let fields = "involvedObject.kind=Pod,reason=Unhealthy";
    api.list(&ListParams::default().fields(fields))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// The last lines of the container `finding` names, redacted; empty when it has none to give.
async fn log_tail(client: &Client, ns: &str, finding: &Finding) -> Vec<String> {
    let (Some(pod), Some(container)) = (&finding.pod, &finding.container) else {
        return Vec::new();
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let params = |previous: bool| LogParams {
        container: Some(container.clone()),
        tail_lines: Some(i64::try_from(TAIL_LINES).unwrap_or(20)),
        limit_bytes: Some(LOG_BYTES),
        previous,
        ..LogParams::default()
    };
    let text = match api.logs(pod, &params(finding.previous)).await {
        Ok(t) => t,
        // A container that never restarted has no previous run: its current one will do.
        Err(_) if finding.previous => match api.logs(pod, &params(false)).await {
            Ok(t) => t,
            Err(_) => return Vec::new(),
        },
        Err(_) => return Vec::new(),
    };
    // Without the Secrets' values nothing can be redacted: show no lines rather than leak.
    let Ok(values) = secret_values(client, ns).await else {
        return Vec::new();
    };
    let redactor = Redactor::new(values);
    diagnosis::tail(&text, &redactor)
}

/// The values of the namespace's Secrets, which logs never show.
pub async fn secret_values(client: &Client, ns: &str) -> Result<Vec<String>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let list = api.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .flat_map(|s| s.data.iter().flatten())
        .filter_map(|(_, v)| String::from_utf8(v.0.clone()).ok())
        .collect())
}
