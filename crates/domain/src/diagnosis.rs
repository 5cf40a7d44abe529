//! Classifying why a workload is not ready from what the cluster says of its pods — container
//! states, the scheduler's condition — and the namespace's Events (`FailedCreate`, `Unhealthy`):
//! a stable reason, one sentence, and whose logs explain it (the previous run of a crashing
//! container). No I/O.

use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Event, Pod};

use sandcastle_crd::DiagnosisReason;

/// Log lines kept of the failing container.
pub const TAIL_LINES: usize = 20;
/// Bytes kept of the log tail, all lines together.
pub const TAIL_BYTES: usize = 2000;
/// Characters kept of one log line.
const LINE_CHARS: usize = 200;

/// What is wrong with one workload's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub reason: DiagnosisReason,
    /// What is wrong, without the workload's name: `container api keeps crashing (OOMKilled,
    /// exit 137, 5 restarts)`.
    pub what: String,
    pub pod: Option<String>,
    pub container: Option<String>,
    /// Its logs are those of the previous run.
    pub previous: bool,
}

impl Finding {
    fn of(reason: DiagnosisReason, what: String) -> Self {
        Self {
            reason,
            what,
            pod: None,
            container: None,
            previous: false,
        }
    }

    fn in_container(mut self, pod: &Pod, container: &str, previous: bool) -> Self {
        self.pod = pod.metadata.name.clone();
        self.container = Some(container.to_owned());
        self.previous = previous;
        self
    }
}

const IMAGE_PULL: [&str; 5] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "RegistryUnavailable",
];

/// The first thing wrong with `pods` (init containers first, then containers, then
/// scheduling), or, when there are none, why they could not be created (`refusal`: a
/// ReplicaSet's `ReplicaFailure` message or a `FailedCreate` Event's). `None` while the pods
/// are simply starting.
pub fn classify(pods: &[Pod], events: &[Event], refusal: Option<&str>) -> Option<Finding> {
    if pods.is_empty() {
        return refusal.map(|m| Finding::of(DiagnosisReason::CreateRefused, refused(m)));
    }
    for pod in pods {
        if let Some(f) = containers(pod, events) {
            return Some(f);
        }
    }
    pods.iter().find_map(unschedulable)
}

fn statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    let st = pod.status.as_ref();
    st.and_then(|s| s.init_container_statuses.as_ref())
        .into_iter()
        .flatten()
        .chain(
            st.and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten(),
        )
}

fn containers(pod: &Pod, events: &[Event]) -> Option<Finding> {
    for cs in statuses(pod) {
        let Some(state) = &cs.state else { continue };
        if let Some(w) = &state.waiting {
            let reason = w.reason.clone().unwrap_or_default();
            if reason.is_empty() || reason == "ContainerCreating" || reason == "PodInitializing" {
                continue;
            }
            return Some(waiting(cs, &reason, w.message.as_deref()).in_container(
                pod,
                &cs.name,
                reason == "CrashLoopBackOff",
            ));
        }
        if let Some(t) = &state.terminated
            && t.exit_code != 0
        {
            // Between a crash and the kubelet's back-off the state reads `terminated`; a
            // container that restarts and has crashed before is crash looping all the same.
            let finding = if restarts(pod) && cs.restart_count > 0 {
                crash_loop(cs, Some(t))
            } else {
                let why = t.reason.clone().unwrap_or_else(|| "Error".into());
                let what = format!("container {} exited ({why}, exit {})", cs.name, t.exit_code);
                Finding::of(DiagnosisReason::Exited, what)
            };
            return Some(finding.in_container(pod, &cs.name, false));
        }
        if state.running.is_some() && !cs.ready {
            // Running again between two crashes (an OOM kill is quick, the probe slower): the
            // crashes are the cause, the unready run their symptom.
            let crashed = (cs.last_state.as_ref().and_then(|l| l.terminated.as_ref()))
                .filter(|t| t.exit_code != 0);
            if restarts(pod) && cs.restart_count > 0 && crashed.is_some() {
                return Some(crash_loop(cs, crashed).in_container(pod, &cs.name, true));
            }
            let what = match unhealthy(pod, events) {
                Some(m) => format!("container {} is not ready: {m}", cs.name),
                None => format!(
                    "container {} runs but is not ready (readiness probe)",
                    cs.name
                ),
            };
            return Some(
                Finding::of(DiagnosisReason::ReadinessProbe, what)
                    .in_container(pod, &cs.name, false),
            );
        }
    }
    None
}

fn waiting(cs: &ContainerStatus, reason: &str, message: Option<&str>) -> Finding {
    if IMAGE_PULL.contains(&reason) {
        let what = format!("image {} cannot be pulled ({reason})", cs.image);
        return Finding::of(DiagnosisReason::ImagePull, what);
    }
    if reason == "CrashLoopBackOff" {
        let last = cs.last_state.as_ref().and_then(|l| l.terminated.as_ref());
        return crash_loop(cs, last);
    }
    let what = match message.filter(|m| !m.is_empty()) {
        Some(m) => format!("container {} cannot start: {reason}: {m}", cs.name),
        None => format!("container {} cannot start: {reason}", cs.name),
    };
    Finding::of(DiagnosisReason::ContainerWaiting, what)
}

/// Whether the kubelet restarts the pod's containers after they exit (`Always`, the default).
fn restarts(pod: &Pod) -> bool {
    let policy = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref());
    matches!(policy, None | Some("Always"))
}

/// `container api keeps crashing (OOMKilled, exit 137, 5 restarts)`, from its `last` exit.
fn crash_loop(cs: &ContainerStatus, last: Option<&ContainerStateTerminated>) -> Finding {
    let mut detail: Vec<String> = Vec::new();
    if let Some(t) = last {
        detail.extend(t.reason.clone().filter(|r| !r.is_empty()));
        detail.push(format!("exit {}", t.exit_code));
    }
    match cs.restart_count {
        0 => {}
        1 => detail.push("1 restart".into()),
        n => detail.push(format!("{n} restarts")),
    }
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(" ({})", detail.join(", "))
    };
    let what = format!("container {} keeps crashing{detail}", cs.name);
    Finding::of(DiagnosisReason::CrashLoop, what)
}

/// The newest `Unhealthy` Event's message for `pod` (`Readiness probe failed: …`).
fn unhealthy(pod: &Pod, events: &[Event]) -> Option<String> {
    let name = pod.metadata.name.as_deref()?;
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Unhealthy"))
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .max_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0))
        .and_then(|e| e.message.clone())
}

fn unschedulable(pod: &Pod) -> Option<Finding> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let c = conditions
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
    let message = c
        .message
        .clone()
        .or_else(|| c.reason.clone())
        .unwrap_or_else(|| "Unschedulable".into());
    let what = format!("pods cannot be scheduled: {message}");
    Some(Finding::of(DiagnosisReason::Unschedulable, what))
}

/// `pods refused: exceeded quota: …`, from the API server's `pods "x" is forbidden: …`.
fn refused(message: &str) -> String {
    let why = message
        .split_once("is forbidden: ")
        .map_or(message, |(_, rest)| rest);
    format!("pods refused: {why}")
}

/// The kept part of a log: its last [`TAIL_LINES`] lines, redacted by `redactor`, each cut at
/// 200 characters, within [`TAIL_BYTES`]; lines that could pose as Sandcastle's comment marker
/// are defused.
pub fn tail(text: &str, redactor: &crate::redact::Redactor) -> Vec<String> {
    tail_within(text, TAIL_LINES, TAIL_BYTES, redactor).0
}

/// [`tail`] with other bounds: the last `lines` lines within `max_bytes`, and how many secrets
/// were masked. Each whole line is redacted before it is cut: a token or a Secret's value cut
/// in two would no longer be recognised, and its first part would show.
pub fn tail_within(
    text: &str,
    lines: usize,
    max_bytes: usize,
    redactor: &crate::redact::Redactor,
) -> (Vec<String>, u32) {
    let mut kept: Vec<String> = Vec::new();
    let mut bytes = 0;
    let mut masked = 0;
    for line in text.lines().rev().take(lines) {
        let (line, n) = redactor.redact(line);
        let line: String = if line.chars().count() > LINE_CHARS {
            let cut: String = line.chars().take(LINE_CHARS - 1).collect();
            format!("{cut}…")
        } else {
            line
        };
        let line = line.replace("<!--", "<! --");
        if bytes + line.len() + 1 > max_bytes {
            break;
        }
        bytes += line.len() + 1;
        masked += n;
        kept.push(line);
    }
    kept.reverse();
    (kept, masked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::Redactor;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "api-1"}, "status": status})).unwrap()
    }

    fn container(state: serde_json::Value) -> serde_json::Value {
        json!({"name": "api", "image": "ghcr.io/acme/api:abc1234", "imageID": "", "ready": false,
            "restartCount": 5, "state": state,
            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}})
    }

    fn one(state: serde_json::Value) -> Finding {
        let p = pod(json!({"containerStatuses": [container(state)]}));
        classify(&[p], &[], None).unwrap()
    }

    #[test]
    fn image_pulls_name_the_image() {
        let f = one(json!({"waiting": {"reason": "ImagePullBackOff", "message": "Back-off"}}));
        assert_eq!(f.reason, DiagnosisReason::ImagePull);
        assert_eq!(
            f.what,
            "image ghcr.io/acme/api:abc1234 cannot be pulled (ImagePullBackOff)"
        );
        assert_eq!((f.container.as_deref(), f.previous), (Some("api"), false));
    }

    #[test]
    fn crash_loops_give_the_last_exit_and_the_previous_logs() {
        let f = one(json!({"waiting": {"reason": "CrashLoopBackOff"}}));
        assert_eq!(f.reason, DiagnosisReason::CrashLoop);
        assert_eq!(
            f.what,
            "container api keeps crashing (OOMKilled, exit 137, 5 restarts)"
        );
        assert_eq!((f.pod.as_deref(), f.previous), (Some("api-1"), true));
    }

    /// [`container`] before it ever crashed.
    fn never_crashed(state: serde_json::Value) -> serde_json::Value {
        let mut c = container(state);
        c["restartCount"] = json!(0);
        c.as_object_mut().unwrap().remove("lastState");
        c
    }

    #[test]
    fn a_container_running_again_between_crashes_is_crash_looping() {
        let f = one(json!({"running": {}}));
        assert_eq!(f.reason, DiagnosisReason::CrashLoop);
        assert_eq!(
            f.what,
            "container api keeps crashing (OOMKilled, exit 137, 5 restarts)"
        );
        assert_eq!((f.pod.as_deref(), f.previous), (Some("api-1"), true));
    }

    #[test]
    fn running_but_unready_containers_are_the_readiness_probe() {
        let p = pod(json!({"containerStatuses": [never_crashed(json!({"running": {}}))]}));
        let f = classify(&[p], &[], None).unwrap();
        assert_eq!(f.reason, DiagnosisReason::ReadinessProbe);
        assert_eq!(
            f.what,
            "container api runs but is not ready (readiness probe)"
        );
        let event: Event = serde_json::from_value(json!({"metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod", "name": "api-1"}, "reason": "Unhealthy",
            "message": "Readiness probe failed: HTTP probe failed with statuscode: 500"}))
        .unwrap();
        let p = pod(json!({"containerStatuses": [never_crashed(json!({"running": {}}))]}));
        let f = classify(&[p], &[event], None).unwrap();
        assert_eq!(
            f.what,
            "container api is not ready: Readiness probe failed: HTTP probe failed with statuscode: 500"
        );
    }

    #[test]
    fn other_waits_exits_and_scheduling() {
        let f = one(json!({"waiting": {"reason": "CreateContainerConfigError",
            "message": "secret \"db\" not found"}}));
        assert_eq!(f.reason, DiagnosisReason::ContainerWaiting);
        assert_eq!(
            f.what,
            "container api cannot start: CreateContainerConfigError: secret \"db\" not found"
        );
        let exited = |restarts: i32, policy: &str| {
            let mut c = container(json!({"terminated": {"exitCode": 2, "reason": "Error"}}));
            c["restartCount"] = json!(restarts);
            let mut p = pod(json!({"containerStatuses": [c]}));
            p.spec =
                serde_json::from_value(json!({"containers": [], "restartPolicy": policy})).unwrap();
            classify(&[p], &[], None).unwrap()
        };
        let f = exited(0, "Always");
        assert_eq!(
            (f.reason, f.what.as_str()),
            (
                DiagnosisReason::Exited,
                "container api exited (Error, exit 2)"
            )
        );
        assert_eq!(exited(5, "Never").reason, DiagnosisReason::Exited);
        // Caught between a crash and the back-off: the crash loop, with this exit.
        let f = exited(5, "Always");
        assert_eq!(
            (f.reason, f.what.as_str(), f.previous),
            (
                DiagnosisReason::CrashLoop,
                "container api keeps crashing (Error, exit 2, 5 restarts)",
                false
            )
        );
        let p = pod(
            json!({"conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0/3 nodes are available: 3 Insufficient memory."}]}),
        );
        let f = classify(&[p], &[], None).unwrap();
        assert_eq!(f.reason, DiagnosisReason::Unschedulable);
        assert_eq!(
            f.what,
            "pods cannot be scheduled: 0/3 nodes are available: 3 Insufficient memory."
        );
        assert_eq!(f.container, None);
    }

    #[test]
    fn pods_never_created_say_who_refused_them() {
        let f = classify(
            &[],
            &[],
            Some("pods \"api-7d-x\" is forbidden: exceeded quota: sandcastle-quota, requested: pods=1"),
        )
        .unwrap();
        assert_eq!(f.reason, DiagnosisReason::CreateRefused);
        assert_eq!(
            f.what,
            "pods refused: exceeded quota: sandcastle-quota, requested: pods=1"
        );
        assert_eq!(classify(&[], &[], None), None);
    }

    #[test]
    fn starting_pods_are_fine() {
        let p = pod(json!({"containerStatuses": [
            {"name": "api", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ContainerCreating"}}}]}));
        assert_eq!(classify(&[p], &[], None), None);
        let ready = pod(json!({"containerStatuses": [
            {"name": "api", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
             "state": {"running": {}}}]}));
        assert_eq!(classify(&[ready], &[], None), None);
    }

    #[test]
    fn a_long_line_is_redacted_whole_before_it_is_cut() {
        let jwt = format!(
            "eyJhbGciOiJSUzI1NiJ9.eyJ{}.c2lnbmF0dXJlLXBhcnQ",
            "x".repeat(400)
        );
        let secret = format!("{}s3cret-tail", "y".repeat(190));
        let log = format!("token {jwt}\npassword {secret}\n");
        let (t, masked) = tail_within(&log, 10, 4096, &Redactor::new([secret]));
        assert_eq!(t, ["token [redacted]", "password [redacted]"]);
        assert_eq!(masked, 2);
    }

    #[test]
    fn tails_are_bounded_and_cannot_pose_as_the_marker() {
        let log: String = (1..=50).map(|i| format!("line {i}\n")).collect();
        let t = tail(&log, &Redactor::new([]));
        assert_eq!(t.len(), TAIL_LINES);
        assert_eq!(t.first().map(String::as_str), Some("line 31"));
        assert_eq!(t.last().map(String::as_str), Some("line 50"));
        let long = "x".repeat(5000);
        let t = tail(&format!("{long}\n{long}\n"), &Redactor::new([]));
        assert!(t.iter().all(|l| l.chars().count() <= 200));
        let many: String = (0..30).map(|_| format!("{}\n", "z".repeat(190))).collect();
        let kept: usize = tail(&many, &Redactor::new([]))
            .iter()
            .map(|l| l.len() + 1)
            .sum();
        assert!(kept <= TAIL_BYTES, "{kept}");
        assert_eq!(
            tail(
                "<!-- sandcastle {\"phase\": \"Ready\"} -->",
                &Redactor::new([])
            ),
            vec!["<! -- sandcastle {\"phase\": \"Ready\"} -->".to_owned()]
        );
    }
}
