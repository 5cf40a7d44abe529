//! Each test run's check run, `Sandcastle / <test>` on the commit it tested, kept in line with
//! the run: created `queued` (its summary saying what runs where), `in_progress` once its pod
//! started, `completed` with `success`, `failure`, `timed_out` or `cancelled`, its summary and
//! the redacted tail of its logs. Every step GitHub has not shown yet is posted in the same
//! pass, in order, and recorded in the run (`reported`), so each is posted once. A check run
//! made by a leader whose record of it was lost is found again by its `external_id`
//! (`<preview>/<test>/<run>`). GitHub refusing (no `checks: write` permission) is said in the
//! `ChecksReported` condition and tried again at the next pass; an outage stops the pass's
//! posting and asks for a sooner one.

use std::collections::HashMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;

use super::context::Context;
use super::phases::test_runs::place_of;
use super::report::log_url;
use sandcastle_crd::{PreviewEnvironment, PreviewStatus, TestConclusion, TestRun, TestState};
use sandcastle_domain::test_runs::{check_name, external_id, took};
use sandcastle_domain::{RepoName, Sha};
use sandcastle_github::client::{
    CheckConclusion, CheckOutput, CheckRunWrite, CheckStatus, GitHubError, Installation,
};
use sandcastle_github::text::checks::{CheckView, TestLogs, summary, text, title};
use sandcastle_kube::test_jobs::{self, RunLogs};

const CONDITION: &str = "ChecksReported";

/// Where a preview's check runs go, and what they link to.
struct Target<'a> {
    pe: &'a PreviewEnvironment,
    gh: Installation,
    repo: RepoName,
    page: String,
    ctx: &'a Context,
}

/// Bring GitHub in line with the runs of `st`; `logs` are those read in this pass. Returns false
/// when GitHub could not be reached (look again sooner).
pub(super) async fn sync(
    pe: &PreviewEnvironment,
    st: &mut PreviewStatus,
    ctx: &Context,
    logs: &HashMap<String, RunLogs>,
) -> bool {
    if st.tests.iter().all(|r| r.reported == Some(r.state)) {
        return true;
    }
    let (Some(installation), Ok(repo)) =
        (pe.spec.installation_id, RepoName::new(&pe.spec.repository))
    else {
        return true;
    };
    let target = Target {
        pe,
        gh: ctx.github.installation(installation),
        repo,
        page: log_url(&ctx.reporting(), &pe.name_any()),
        ctx,
    };
    let mut refused: Option<String> = None;
    for i in 0..st.tests.len() {
        if st.tests[i].reported == Some(st.tests[i].state) {
            continue;
        }
        let run_logs = if st.tests[i].state == TestState::Completed {
            logs_of(&st.tests[i], st, logs, ctx).await
        } else {
            None
        };
        match bring(&target, &mut st.tests[i], run_logs).await {
            Ok(()) => {}
            Err(e) if !e.is_retryable() => {
                tracing::warn!(preview = %pe.name_any(), error = %e, "GitHub refused a test's check run; trying again at the next pass");
                refused = Some(format!("GitHub: {e}"));
            }
            Err(e) => {
                tracing::warn!(preview = %pe.name_any(), error = %e, "reporting a test's check run failed; will retry");
                set_condition(st, Some(format!("GitHub: {e}")), ctx.clock.now());
                return false;
            }
        }
    }
    set_condition(st, refused, ctx.clock.now());
    true
}

/// The logs of a completed run: read in this pass, or read again (its Job is kept until the
/// test runs again; a timed-out or cancelled run's is gone).
async fn logs_of(
    run: &TestRun,
    st: &PreviewStatus,
    logs: &HashMap<String, RunLogs>,
    ctx: &Context,
) -> Option<RunLogs> {
    if run.conclusion == Some(TestConclusion::Cancelled) {
        return None;
    }
    if let Some(l) = logs.get(&run.job_name()) {
        return Some(l.clone());
    }
    let (cluster, ns) = place_of(st, ctx)?;
    test_jobs::log_tail(cluster.client(), &ns, &run.job_name()).await
}

/// Post what `run`'s check run has not shown yet, in order.
async fn bring(
    at: &Target<'_>,
    run: &mut TestRun,
    logs: Option<RunLogs>,
) -> Result<(), GitHubError> {
    let Ok(sha) = Sha::new(&run.sha) else {
        return Ok(());
    };
    let name = at.pe.name_any();
    let external = external_id(&name, run);
    let now = at.ctx.clock.now();
    let view = |run: &TestRun, logs: Option<&RunLogs>| CheckView {
        test: run.name.clone(),
        preview: name.clone(),
        page: Some(at.page.clone()),
        sha: run.sha.clone(),
        job: run.job_name(),
        state: run.state,
        conclusion: run.conclusion,
        took: took(run, now),
        exit_code: run.exit_code,
        message: run.message.clone(),
        logs: logs.map(|l| TestLogs {
            pod: l.pod.clone(),
            container: l.container.clone(),
            lines: l.lines.clone(),
            redacted: l.redacted,
        }),
    };
    let output = |v: &CheckView| CheckOutput {
        title: title(v),
        summary: summary(v),
        text: text(v),
    };
    let term = &at.ctx.term;
    if run.check_run_id.is_none() {
        let known = match term.check_run(at.pe, &external) {
            Some(id) => Some(id),
            None if term.fresh(at.pe) => None,
            None => at
                .gh
                .find_check_run(&at.repo, &sha, &check_name(&run.name), &external)
                .await?
                .map(|r| r.id),
        };
        let id = match known {
            Some(id) => id,
            None => {
                let queued = TestRun {
                    state: TestState::Queued,
                    conclusion: None,
                    ..run.clone()
                };
                let mut write = CheckRunWrite::new(CheckStatus::Queued);
                write.name = Some(check_name(&run.name));
                write.head_sha = Some(sha.clone());
                write.details_url = Some(at.page.clone());
                write.external_id = Some(external.clone());
                write.output = Some(output(&view(&queued, None)));
                let made = at.gh.create_check_run(&at.repo, &write).await?;
                term.created_check_run(at.pe, &external, made.id);
                made.id
            }
        };
        run.check_run_id = Some(id);
        run.reported = Some(TestState::Queued);
    }
    let Some(id) = run.check_run_id else {
        return Ok(());
    };
    if run.reported == Some(TestState::Queued)
        && let Some(started) = run.started_at.as_ref()
    {
        let running = TestRun {
            state: TestState::Running,
            conclusion: None,
            ..run.clone()
        };
        let mut write = CheckRunWrite::new(CheckStatus::InProgress);
        write.started_at = Some(second(started));
        write.output = Some(output(&view(&running, None)));
        at.gh.update_check_run(&at.repo, id, &write).await?;
        run.reported = Some(TestState::Running);
    }
    if run.state == TestState::Completed && run.reported != Some(TestState::Completed) {
        let mut write = CheckRunWrite::new(CheckStatus::Completed);
        write.conclusion = Some(match run.conclusion {
            Some(TestConclusion::Success) => CheckConclusion::Success,
            Some(TestConclusion::Failure) | None => CheckConclusion::Failure,
            Some(TestConclusion::TimedOut) => CheckConclusion::TimedOut,
            Some(TestConclusion::Cancelled) => CheckConclusion::Cancelled,
        });
        write.started_at = run.started_at.as_ref().map(second);
        write.completed_at = Some(run.finished_at.as_ref().map_or(
            Timestamp::from_second(now.as_second()).unwrap_or(now),
            second,
        ));
        write.output = Some(output(&view(run, logs.as_ref())));
        at.gh.update_check_run(&at.repo, id, &write).await?;
        run.reported = Some(TestState::Completed);
    }
    Ok(())
}

/// A time in whole seconds, as GitHub writes them.
fn second(t: &Time) -> Timestamp {
    Timestamp::from_second(t.0.as_second()).unwrap_or(t.0)
}

/// Say in the status whether GitHub took the check runs (`why` it did not).
fn set_condition(st: &mut PreviewStatus, why: Option<String>, now: Timestamp) {
    let existing = st.conditions.iter().position(|c| c.type_ == CONDITION);
    let Some(message) = why else {
        if let Some(i) = existing {
            st.conditions.remove(i);
        }
        return;
    };
    let cond = Condition {
        type_: CONDITION.to_owned(),
        status: "False".to_owned(),
        reason: "NotReported".to_owned(),
        message,
        last_transition_time: Time(now),
        observed_generation: None,
    };
    match existing {
        Some(i) if st.conditions[i].message == cond.message => {}
        Some(i) => st.conditions[i] = cond,
        None => st.conditions.push(cond),
    }
}
