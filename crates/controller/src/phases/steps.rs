//! The steps of a rollout, without I/O: the guardrails, the plan's stages, and the pre-delete
//! hooks applied suspended right after the config stage; the hash that tells one rollout from
//! the next; and the sentences a rollout's status and GitHub description say.

use std::fmt;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::hooks;
use sandcastle_crd::ApplyOrder;
use sandcastle_domain::plan::{self, Plan};
use sandcastle_github::text::statuses::fit_description;
use sandcastle_kube::apply::ApplyError;
use sandcastle_kube::readiness::WorkloadState;

/// One step of a rollout: each is applied, then waited on until ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The preview namespace's walls (quota, limits, policies, accounts).
    Guardrails,
    /// Pre-delete hooks, applied suspended: they run at teardown.
    Hooks,
    /// A stage of the plan.
    Plan(plan::Stage),
    /// Every stage after config at once (Blueprint `order: together`).
    Together,
}

impl Step {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Guardrails => "guardrails",
            Self::Hooks => hooks::STEP,
            Self::Plan(stage) => stage.as_str(),
            Self::Together => "all",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The order a preview's rollouts apply in. A namespace taken over (a warm pool's preview, a
/// sandbox) already runs the data tier and has been seeded, so everything after config goes at
/// once: what differs (the app's new image, the routes' new hosts) rolls out side by side
/// instead of waiting stage by stage. Decided by `spec.adopts`, fixed for the preview's life,
/// so that its plan's hash stays the same from pass to pass.
pub(crate) fn apply_order(blueprint: ApplyOrder, adopted: bool) -> ApplyOrder {
    if adopted {
        ApplyOrder::Together
    } else {
        blueprint
    }
}

/// The steps of a rollout: the guardrails, then the plan's stages (each alone, or with `order:
/// together` all after config as one step, in stage order), with the pre-delete hooks
/// (suspended, see [`hooks`]) right after the config stage that they may need.
pub(crate) fn rollout_steps(
    plan: &Plan,
    order: ApplyOrder,
    guard: Vec<Value>,
    hook_wait: Duration,
) -> Vec<(Step, Vec<Value>)> {
    let mut steps: Vec<(Step, Vec<Value>)> = vec![(Step::Guardrails, guard)];
    let mut hooks_step = (!plan.pre_delete.is_empty())
        .then(|| (Step::Hooks, hooks::suspended(&plan.pre_delete, hook_wait)));
    for step in &plan.steps {
        if step.stage > plan::Stage::Config
            && let Some(h) = hooks_step.take()
        {
            steps.push(h);
        }
        let name = match order {
            ApplyOrder::Together if step.stage > plan::Stage::Config => Step::Together,
            _ => Step::Plan(step.stage),
        };
        match steps.last_mut() {
            Some((last, objects)) if *last == Step::Together && name == Step::Together => {
                objects.extend(step.objects.iter().cloned());
            }
            _ => steps.push((name, step.objects.clone())),
        }
    }
    steps.extend(hooks_step);
    steps
}

/// The hash of what a rollout applies (and of the `/preview` that asked for it again): a
/// different hash is a new rollout.
pub(crate) fn plan_hash(steps: &[(Step, Vec<Value>)], redeploy: Option<&String>) -> String {
    let mut h = Sha256::new();
    if let Some(token) = redeploy {
        h.update(token.as_bytes());
    }
    for (step, objects) in steps {
        h.update(step.as_str().as_bytes());
        for o in objects {
            h.update(o.to_string().as_bytes());
        }
    }
    hex::encode(h.finalize())[..16].to_owned()
}

/// What GitHub shows for a failure (one line of at most 140 characters): the message, or for a
/// refusal listing several problems, the first and how many more.
pub(crate) fn failure_description(message: &str) -> String {
    let mut lines = message.lines();
    let first = lines.next().unwrap_or_default();
    let more = lines.count();
    let text = match more {
        0 => first.to_owned(),
        1 => format!("{first} (and 1 more problem)"),
        n => format!("{first} (and {n} more problems)"),
    };
    fit_description(&text)
}

pub(crate) fn apply_failure(step: Step, e: &ApplyError) -> String {
    format!("{step} phase: {e}")
}

/// What a rollout waiting on `w` says, with what it is stuck on when the cluster says.
pub(crate) fn progress_message(step: Step, w: &WorkloadState, blocker: Option<&str>) -> String {
    let verb = match step {
        Step::Plan(plan::Stage::Data) => "starting data stores",
        Step::Plan(plan::Stage::Seed) => "seeding",
        Step::Plan(plan::Stage::Apps) => "starting apps",
        Step::Together => "starting",
        _ => "applying",
    };
    let progress = if w.kind == "Job" {
        format!("{verb}: job {} running", w.name)
    } else {
        format!("{verb}: {} {}/{} ready", w.name, w.ready, w.desired)
    };
    match blocker {
        Some(why) => format!("{progress}: {why}"),
        None => progress,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandcastle_kube::readiness::Health;
    use serde_json::json;

    fn job(name: &str) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {}})
    }

    #[test]
    fn a_namespace_taken_over_applies_all_after_config_at_once() {
        assert_eq!(apply_order(ApplyOrder::Staged, true), ApplyOrder::Together);
        assert_eq!(apply_order(ApplyOrder::Staged, false), ApplyOrder::Staged);
        assert_eq!(
            apply_order(ApplyOrder::Together, false),
            ApplyOrder::Together
        );
    }

    #[test]
    fn hooks_are_applied_right_after_the_config_stage() {
        let step = |stage, name: &str| plan::Step {
            stage,
            objects: vec![job(name)],
        };
        let mut p = Plan {
            steps: vec![
                step(plan::Stage::Config, "c"),
                step(plan::Stage::Seed, "s"),
                step(plan::Stage::Apps, "a"),
            ],
            pre_delete: vec![job("dump")],
            url: None,
            left_out: Vec::new(),
        };
        let names = |steps: &[(Step, Vec<Value>)]| {
            steps.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
        };
        let steps = rollout_steps(&p, ApplyOrder::Staged, Vec::new(), Duration::from_secs(60));
        assert_eq!(
            names(&steps),
            ["guardrails", "config", "hooks", "seed", "apps"]
        );
        assert_eq!(steps[2].1[0]["spec"]["suspend"], true);
        p.pre_delete.clear();
        let steps = rollout_steps(&p, ApplyOrder::Staged, Vec::new(), Duration::from_secs(60));
        assert_eq!(names(&steps), ["guardrails", "config", "seed", "apps"]);
    }

    #[test]
    fn together_applies_every_stage_after_config_as_one_step_in_stage_order() {
        let step = |stage, name: &str| plan::Step {
            stage,
            objects: vec![job(name)],
        };
        let p = Plan {
            steps: vec![
                step(plan::Stage::Config, "c"),
                step(plan::Stage::Data, "d"),
                step(plan::Stage::Seed, "s"),
                step(plan::Stage::Apps, "a"),
                step(plan::Stage::Ingress, "i"),
            ],
            pre_delete: vec![job("dump")],
            url: None,
            left_out: Vec::new(),
        };
        let steps = rollout_steps(&p, ApplyOrder::Together, Vec::new(), Duration::ZERO);
        let names: Vec<&str> = steps.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["guardrails", "config", "hooks", "all"]);
        let all: Vec<&Value> = steps[3].1.iter().map(|o| &o["metadata"]["name"]).collect();
        assert_eq!(all, ["d", "s", "a", "i"]);
        let staged = rollout_steps(&p, ApplyOrder::Staged, Vec::new(), Duration::ZERO);
        assert_ne!(plan_hash(&steps, None), plan_hash(&staged, None));
    }

    #[test]
    fn the_hash_follows_what_is_applied_and_a_redeploy() {
        let steps = vec![(Step::Plan(plan::Stage::Apps), vec![job("a")])];
        let again = vec![(Step::Plan(plan::Stage::Apps), vec![job("a")])];
        let other = vec![(Step::Plan(plan::Stage::Apps), vec![job("b")])];
        assert_eq!(plan_hash(&steps, None), plan_hash(&again, None));
        assert_ne!(plan_hash(&steps, None), plan_hash(&other, None));
        let token = "delivery-1".to_owned();
        assert_ne!(plan_hash(&steps, None), plan_hash(&steps, Some(&token)));
    }

    #[test]
    fn github_hears_the_first_problem_and_how_many_more() {
        assert_eq!(
            failure_description(
                "blueprint refused: DaemonSet a is not allowed: x\nClusterRole b is not allowed: y\nPod c: z"
            ),
            "blueprint refused: DaemonSet a is not allowed: x (and 2 more problems)"
        );
        assert_eq!(
            failure_description("seed job db-seed failed: BackoffLimitExceeded (exit 1)"),
            "seed job db-seed failed: BackoffLimitExceeded (exit 1)"
        );
        assert!(failure_description(&"x".repeat(300)).chars().count() <= 140);
    }

    #[test]
    fn progress_says_what_holds_it_up() {
        let w = WorkloadState {
            kind: "Deployment".into(),
            name: "web".into(),
            ready: 0,
            desired: 2,
            health: Health::Waiting,
            selector: None,
        };
        let apps = Step::Plan(plan::Stage::Apps);
        assert_eq!(
            progress_message(apps, &w, None),
            "starting apps: web 0/2 ready"
        );
        assert_eq!(
            progress_message(apps, &w, Some("0/1 nodes are available")),
            "starting apps: web 0/2 ready: 0/1 nodes are available"
        );
    }
}
