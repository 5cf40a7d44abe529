//! A preview's tests (the Blueprint's `tests`) in the controller. [`start`]: once a rollout is
//! Ready, the runs due — each `runOn: ready` test after each rollout, any test asked for — get
//! their Job in the preview's namespace (or, for a template that cannot run there, a failed run
//! saying why). [`settle`], every pass: runs that no longer concern the preview (an older commit,
//! another rollout, a stopped or removed preview) are cancelled and their Jobs deleted; the
//! others are looked at (pod started, succeeded, failed, past their timeout on the controller's
//! clock), and a run that ended has its logs read before a timed-out Job goes. What GitHub
//! hears of each run is `test_checks`' to say, in the same pass.

use std::collections::HashMap;
use std::time::Duration;

use kube::ResourceExt;

use crate::context::Context;
use crate::error::Error;
use crate::verdict::record;
use sandcastle_crd::{
    Blueprint, DEFAULT_TEST_TIMEOUT, PreviewEnvironment, PreviewStatus, TestConclusion, TestRun,
    TestState,
};
use sandcastle_domain::plan::{self, PreviewContext};
use sandcastle_domain::test_runs::{self, Seen, Standing};
use sandcastle_kube::clusters::Cluster;
use sandcastle_kube::test_jobs::{self, RunLogs};

/// Start the runs due on a preview whose rollout `st` says is Ready: after the rollout, and
/// those asked for.
pub(crate) async fn start(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    blueprint: &Blueprint,
    (pctx, plan): (&PreviewContext, &plan::Plan),
    cluster: &Cluster,
    ctx: &Context,
) -> Result<(), Error> {
    let tests = &blueprint.spec.tests;
    let Some(rollout) = st.rollout.as_ref().map(|r| r.plan_hash.clone()) else {
        return Ok(());
    };
    if tests.is_empty() && st.tests.is_empty() {
        return Ok(());
    }
    let now = ctx.clock.now();
    // What an older commit or rollout left running goes first, saying so.
    let standing = Standing {
        sha: &pe.spec.sha,
        rollout: Some(&rollout),
        halted: None,
    };
    let stale = test_runs::cancel_stale(&mut st.tests, standing, now);
    let asked = test_runs::requests(pe);
    let (due, replaced) =
        test_runs::start_due(tests, &mut st.tests, &asked, (&pe.spec.sha, &rollout), now);
    let (client, ns) = (cluster.client(), pctx.namespace.as_str());
    for job in stale.iter().chain(&replaced) {
        test_jobs::delete(client, ns, job).await?;
        let ended_run = st
            .tests
            .iter()
            .find(|r| &r.job_name() == job)
            .map(|r| (r.name.clone(), r.run));
        if let Some((name, number)) = ended_run {
            ended(pe, st, &name, number, ctx);
        }
    }
    for run in due {
        let Some((index, test)) = tests.iter().enumerate().find(|(_, t)| t.name == run.name) else {
            continue;
        };
        let job_name = run.job_name();
        let refused = match plan::test_job(&blueprint.spec, (index, test), run.run, plan, pctx) {
            Ok(job) => {
                test_jobs::delete_older(client, ns, &test.name, &job_name).await?;
                match test_jobs::create(client, ns, &job).await {
                    Ok(()) => None,
                    Err(kube::Error::Api(r)) if r.code < 500 && r.code != 429 => {
                        Some(format!("the cluster refused its Job: {}", r.message))
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Err(problems) => Some(format!(
                "refused: {}",
                problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
        };
        tracing::info!(preview = %pe.name_any(), test = %run.name, run = run.run, refused = refused.is_some(), "test run queued");
        let Some(why) = refused else { continue };
        if let Some(r) = find(&mut st.tests, &run.name, run.run) {
            r.state = TestState::Completed;
            r.conclusion = Some(TestConclusion::Failure);
            r.finished_at = Some(r.queued_at.clone());
            r.message = Some(sandcastle_domain::quote::clip(&why).into_owned());
        }
        ended(pe, st, &run.name, run.run, ctx);
    }
    Ok(())
}

/// What a pass's [`settle`] leaves for reporting: the logs of the runs that ended in it, and how
/// soon the first unfinished run is past its timeout.
#[derive(Debug, Default)]
pub(crate) struct Settled {
    pub logs: HashMap<String, RunLogs>,
    pub next: Option<Duration>,
}

/// Cancel what no longer concerns the preview and look at what runs (see the module's doc).
pub(crate) async fn settle(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    ctx: &Context,
) -> Settled {
    let mut settled = Settled::default();
    if st.tests.is_empty() {
        return settled;
    }
    let now = ctx.clock.now();
    let blueprint = ctx.blueprint(&pe.spec.blueprint).await.ok().flatten();
    if let Some(bp) = &blueprint {
        test_runs::keep_bounded(&mut st.tests, &bp.spec.tests);
    }
    let timeout_of = |name: &str| {
        blueprint
            .as_ref()
            .and_then(|b| b.spec.tests.iter().find(|t| t.name == name))
            .map_or(DEFAULT_TEST_TIMEOUT, |t| t.timeout)
            .get()
    };
    let halted = if pe.spec.teardown.is_some() || pe.metadata.deletion_timestamp.is_some() {
        Some("the preview was removed")
    } else if pe.spec.stopped {
        Some("the preview was stopped")
    } else {
        None
    };
    let standing = Standing {
        sha: &pe.spec.sha,
        rollout: st.rollout.as_ref().map(|r| r.plan_hash.as_str()),
        halted,
    };
    let cancelled = test_runs::cancel_stale(&mut st.tests, standing, now);
    let place = place_of(st, ctx);
    if let Some((cluster, ns)) = &place {
        for job in &cancelled {
            if let Err(e) = test_jobs::delete(cluster.client(), ns, job).await {
                tracing::warn!(preview = %pe.name_any(), job, error = %e, "deleting a cancelled test's Job failed");
            }
        }
    }
    let unfinished: Vec<(String, u32)> = st
        .tests
        .iter()
        .filter(|r| r.state != TestState::Completed)
        .map(|r| (r.name.clone(), r.run))
        .collect();
    for (name, number) in unfinished {
        let Some((cluster, ns)) = &place else { break };
        let client = cluster.client();
        let job = format!("test-{name}-{number}");
        let seen = match test_jobs::observe(client, ns, &job).await {
            Ok(seen) => seen,
            Err(e) => {
                tracing::warn!(preview = %pe.name_any(), job, error = %e, "reading a test's Job failed");
                Seen::Waiting
            }
        };
        let Some(run) = find(&mut st.tests, &name, number) else {
            continue;
        };
        if !test_runs::observe(run, &seen, timeout_of(&name), now) {
            continue;
        }
        let conclusion = run.conclusion;
        if let Some(logs) = test_jobs::log_tail(client, ns, &job).await {
            settled.logs.insert(job.clone(), logs);
        }
        if conclusion == Some(TestConclusion::TimedOut)
            && let Err(e) = test_jobs::delete(client, ns, &job).await
        {
            tracing::warn!(preview = %pe.name_any(), job, error = %e, "deleting a timed-out test's Job failed");
        }
        ended(pe, st, &name, number, ctx);
    }
    for job in &cancelled {
        if let Some((name, number)) = st
            .tests
            .iter()
            .find(|r| &r.job_name() == job)
            .map(|r| (r.name.clone(), r.run))
        {
            ended(pe, st, &name, number, ctx);
        }
    }
    settled.next =
        test_runs::next_deadline(&st.tests, timeout_of, now).map(|d| d.max(Duration::from_secs(1)));
    settled
}

fn find<'a>(runs: &'a mut [TestRun], name: &str, number: u32) -> Option<&'a mut TestRun> {
    runs.iter_mut().find(|r| r.name == name && r.run == number)
}

/// The cluster and namespace the preview's tests run in, if it has them.
pub(crate) fn place_of(
    st: &PreviewStatus,
    ctx: &Context,
) -> Option<(std::sync::Arc<Cluster>, String)> {
    let ns = st.namespace.clone()?;
    let name = sandcastle_domain::placement::placed_in(st).unwrap_or(sandcastle_crd::IN_CLUSTER);
    let cluster = ctx.clusters.get(name).ok()?;
    (cluster.is_local() || cluster.reachable()).then_some((cluster, ns))
}

/// Record the end of run `number` of `name` in the history (and so as an Event).
fn ended(pe: &PreviewEnvironment, st: &mut PreviewStatus, name: &str, number: u32, ctx: &Context) {
    let Some(run) = st.tests.iter().find(|r| r.name == name && r.run == number) else {
        return;
    };
    let action = match run.conclusion {
        Some(TestConclusion::Success) => "TestPassed",
        Some(TestConclusion::Failure) => "TestFailed",
        Some(TestConclusion::TimedOut) => "TestTimedOut",
        Some(TestConclusion::Cancelled) | None => "TestCancelled",
    };
    let mut note = format!("{name} (run {number})");
    if let Some(why) = &run.message {
        note.push_str(&format!(": {why}"));
    }
    let sha = run.sha.clone();
    tracing::info!(preview = %pe.name_any(), test = name, run = number, result = action, "test run ended");
    record(
        st,
        ctx.clock.now(),
        "sandcastle",
        action,
        Some(&sha),
        Some(&note),
    );
}
