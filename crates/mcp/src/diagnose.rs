//! `diagnose_preview`'s answer, from what the API says of a preview and its Events: the phase and
//! its reason, the controller's diagnosis (a classified reason, one sentence, the failing
//! container's log tail), the workloads short of ready, the warnings, and (fetched by the server)
//! the last log lines of those workloads. No I/O.

use serde_json::{Value, json};

/// Log lines asked of each failing workload.
pub const TAIL_LINES: u32 = 30;
/// Warning Events kept, newest last.
const WARNINGS: usize = 10;

/// The workloads of `preview` (the API's view) with fewer replicas ready than desired.
pub fn failing_workloads(preview: &Value) -> Vec<String> {
    preview["services"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["ready"].as_i64() < s["desired"].as_i64())
        .filter_map(|s| s["name"].as_str().map(str::to_owned))
        .collect()
}

fn warnings(events: &Value) -> Vec<Value> {
    let mut all: Vec<Value> = ["preview", "namespace"]
        .iter()
        .flat_map(|k| events[*k].as_array().cloned().unwrap_or_default())
        .filter(|e| e["type"] == "Warning")
        .collect();
    all.sort_by(|a, b| a["time"].as_str().cmp(&b["time"].as_str()));
    let skip = all.len().saturating_sub(WARNINGS);
    all.split_off(skip)
}

/// The diagnosis: one sentence first, then what it rests on.
pub fn report(preview: &Value, events: &Value, logs: Vec<Value>) -> Value {
    let phase = preview["phase"].as_str().unwrap_or("Unknown");
    let ready = phase == "Ready";
    let failing: Vec<Value> = preview["services"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["ready"].as_i64() < s["desired"].as_i64())
        .cloned()
        .collect();
    let reason = preview["reason"].as_str();
    let diagnosis = &preview["diagnosis"];
    let summary = match (ready, reason, failing.first()) {
        (false, _, _) if diagnosis["summary"].is_string() => {
            format!(
                "{phase}: {}",
                diagnosis["summary"].as_str().unwrap_or_default()
            )
        }
        (true, _, _) => format!(
            "Ready: {}/{} services ready at {}",
            preview["servicesReady"],
            preview["servicesTotal"],
            preview["url"].as_str().unwrap_or("no URL")
        ),
        (false, Some(r), _) => format!("{phase}: {r}"),
        (false, None, Some(s)) => format!(
            "{phase}: {} {} has {}/{} ready",
            s["kind"].as_str().unwrap_or("workload"),
            s["name"].as_str().unwrap_or("?"),
            s["ready"],
            s["desired"]
        ),
        (false, None, None) => phase.to_owned(),
    };
    json!({
        "name": preview["name"],
        "phase": phase,
        "ready": ready,
        "summary": summary,
        "reason": reason,
        "stuckOn": preview["stuckOn"],
        "diagnosis": diagnosis,
        "failing": failing,
        "warnings": warnings(events),
        "logs": logs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preview(phase: &str, reason: Option<&str>) -> Value {
        json!({"name": "shop-pr-1", "phase": phase, "reason": reason, "url": "http://x",
            "servicesReady": 1, "servicesTotal": 2,
            "services": [{"name": "web", "kind": "Deployment", "ready": 1, "desired": 1},
                         {"name": "api", "kind": "Deployment", "ready": 0, "desired": 1}]})
    }

    #[test]
    fn it_names_the_workload_short_of_ready_and_the_warnings() {
        let p = preview("Deploying", None);
        assert_eq!(failing_workloads(&p), ["api"]);
        let events = json!({"preview": [{"type": "Normal", "time": "1"}],
            "namespace": [{"type": "Warning", "reason": "BackOff", "time": "2"},
                          {"type": "Warning", "reason": "Failed", "time": "1"}]});
        let r = report(&p, &events, vec![json!({"workload": "api"})]);
        assert_eq!(r["summary"], "Deploying: Deployment api has 0/1 ready");
        assert_eq!(r["ready"], false);
        assert_eq!(r["warnings"][0]["reason"], "Failed");
        assert_eq!(r["warnings"][1]["reason"], "BackOff");
        assert_eq!(r["failing"][0]["name"], "api");
    }

    #[test]
    fn a_reason_comes_first_and_ready_says_so() {
        let r = report(
            &preview("Failed", Some("image pull failed for api")),
            &Value::Null,
            vec![],
        );
        assert_eq!(r["summary"], "Failed: image pull failed for api");
        let mut p = preview("Ready", None);
        p["services"] = json!([]);
        let mut failed = preview("Failed", Some("not Ready after 10m: deployment/api 0/1"));
        failed["diagnosis"] = json!({"reason": "crashLoop",
            "summary": "deployment/api: container api keeps crashing (OOMKilled, exit 137)",
            "logTail": ["out of memory"]});
        let r = report(&failed, &Value::Null, vec![]);
        assert_eq!(
            r["summary"],
            "Failed: deployment/api: container api keeps crashing (OOMKilled, exit 137)"
        );
        assert_eq!(r["diagnosis"]["logTail"][0], "out of memory");
        let r = report(&p, &Value::Null, vec![]);
        assert_eq!(r["ready"], true);
        assert!(
            r["summary"].as_str().unwrap().starts_with("Ready: 1/2"),
            "{r}"
        );
    }
}
