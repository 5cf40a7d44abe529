//! The demo's story, told line by line to `say`: pull request #42 opened by a collaborator,
//! pushed to and merged on the stage, with what happens at each step (the preview's phases, its
//! objects, every GitHub call, and the pull request's comment as it reads once it says Ready,
//! with how long after GitHub's `success` that was).

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::bail;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::stage::Stage;
use sandcastle::crd::{Phase, PreviewEnvironment};
use sandcastle::domain::{PrNumber, RepoName, Sha};
use sandcastle::github::text::{MarkerData, parse_marker};
use sandcastle_fake_github::{Call, FakeGitHub, PrSpec, Role};

/// The pull request's author: a collaborator with write access, as most authors are.
const AUTHOR: &str = "maria";

/// Where the story's lines go.
pub type Say<'a> = &'a mut (dyn FnMut(String) + Send);

/// What a preview showed (phase, message), to narrate only what changes.
type Shown = (Option<Phase>, Option<String>);

/// What `name` shows now (nothing when it does not exist yet).
async fn shown(api: &Api<PreviewEnvironment>, name: &str) -> anyhow::Result<Shown> {
    let st = api
        .get_opt(name)
        .await?
        .and_then(|pe| pe.status)
        .unwrap_or_default();
    Ok((st.phase, st.message))
}

/// Follow a preview until it reaches `want` (at commit `sha`, when given), narrating each change
/// from `before` (what it showed before the event: not told again).
async fn follow(
    say: Say<'_>,
    api: &Api<PreviewEnvironment>,
    name: &str,
    want: Phase,
    sha: Option<&Sha>,
    before: Shown,
) -> anyhow::Result<PreviewEnvironment> {
    let started = Instant::now();
    let mut last = before;
    let deadline = started + Duration::from_secs(180);
    loop {
        if let Some(pe) = api.get_opt(name).await? {
            let st = pe.status.clone().unwrap_or_default();
            let now = (st.phase, st.message.clone());
            if now != last {
                if let Some(p) = st.phase {
                    say(format!(
                        "  {:>6.1}s  {:<11} {}",
                        started.elapsed().as_secs_f64(),
                        p.as_str(),
                        st.message.clone().unwrap_or_default()
                    ));
                }
                last = now;
            }
            let at_sha = sha.is_none_or(|s| st.deployed_sha.as_deref() == Some(s.as_str()));
            if st.phase == Some(want) && at_sha {
                return Ok(pe);
            }
            if st.phase == Some(Phase::Failed) && want != Phase::Failed {
                bail!("preview {name} failed: {}", st.message.unwrap_or_default());
            }
        }
        if Instant::now() > deadline {
            bail!(
                "preview {name} did not become {} within 3 minutes",
                want.as_str()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn github_calls(say: Say<'_>, gh: &FakeGitHub, since: usize) -> usize {
    let calls = gh.calls();
    for c in calls.iter().skip(since) {
        let body = c
            .body
            .as_ref()
            .and_then(|b| b.get("state").or_else(|| b.get("environment")))
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        say(format!(
            "    GitHub ← {} {} → {}{body}",
            c.method, c.path, c.status
        ));
    }
    calls.len()
}

/// Whether `call` wrote pull request `n`'s comment so that it says Ready at `sha`.
fn wrote_ready(call: &Call, n: PrNumber, sha: &Sha) -> bool {
    let creates = call.method == "POST" && call.path.ends_with(&format!("/issues/{n}/comments"));
    let edits = call.method == "PATCH" && call.path.contains("/issues/comments/");
    let marker: Option<MarkerData> = call
        .body
        .as_ref()
        .and_then(|b| b["body"].as_str())
        .and_then(parse_marker);
    (creates || edits)
        && marker
            .is_some_and(|m| m.state.as_deref() == Some("ready") && m.sha.as_ref() == Some(sha))
}

/// Among `calls`, how long after the first `success` deployment status the comment of pull
/// request `n` was written to say Ready at `sha`, in milliseconds (negative: before).
pub fn comment_lag_ms(calls: &[Call], n: PrNumber, sha: &Sha) -> Option<i64> {
    let success = calls.iter().find(|c| {
        c.method == "POST"
            && c.path.ends_with("/statuses")
            && c.body.as_ref().is_some_and(|b| b["state"] == "success")
    })?;
    let ready = calls.iter().find(|c| wrote_ready(c, n, sha))?;
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    Some(if ready.at >= success.at {
        ms(ready.at - success.at)
    } else {
        -ms(success.at - ready.at)
    })
}

/// Wait until the comment of pull request `n` says Ready at `sha` and GitHub has heard
/// `success` (the controller does one and the other in passes of their own, in either order),
/// then show the comment as it reads and say how far apart the two were: the lag.
async fn show_comment(
    say: Say<'_>,
    gh: &FakeGitHub,
    repo: &RepoName,
    n: PrNumber,
    sha: &Sha,
    since: usize,
) -> anyhow::Result<i64> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let (body, lag) = loop {
        let ready = gh.comments(repo, n).into_iter().find(|c| {
            parse_marker(&c.body)
                .is_some_and(|m| m.state.as_deref() == Some("ready") && m.sha.as_ref() == Some(sha))
        });
        let calls = gh.calls();
        let lag = comment_lag_ms(calls.get(since..).unwrap_or_default(), n, sha);
        if let (Some(c), Some(lag)) = (ready, lag) {
            break (c.body, lag);
        }
        if Instant::now() > deadline {
            bail!("the comment of pull request #{n} did not say Ready within a minute");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    say("   The pull request's Sandcastle comment now reads:".to_owned());
    for line in body.lines().filter(|l| !l.starts_with("<!--")) {
        say(format!("   │ {line}"));
    }
    let when = if lag >= 0 {
        format!("{lag} ms after")
    } else {
        format!("{} ms before", -lag)
    };
    say(format!(
        "   The comment said Ready {when} GitHub heard `success` (each is written on a pass \
         of the controller over the preview)."
    ));
    Ok(lag)
}

/// What the story measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// For each rollout, how long after GitHub heard `success` the comment said Ready, in
    /// milliseconds (negative: before).
    pub comment_lag_ms: Vec<i64>,
}

/// On the real tier: fetch the preview's page through Traefik and say where a browser opens it
/// and which commit it shows (an error when it does not show `sha`).
async fn show_page(
    say: Say<'_>,
    stage: &Stage,
    st: &sandcastle::crd::PreviewStatus,
    sha: &Sha,
) -> anyhow::Result<()> {
    let Some(tier) = &stage.real else {
        return Ok(());
    };
    let url = st.url.clone().unwrap_or_default();
    let host = url
        .split("://")
        .nth(1)
        .unwrap_or_default()
        .trim_end_matches('/');
    let page = tier.get(host, "/").await?;
    if page.commit.as_deref() != Some(sha.as_str()) {
        bail!(
            "the page of {host} answered {} with commit {:?}, not {}",
            page.status,
            page.commit,
            sha.short()
        );
    }
    say(format!(
        "   Open {} in a browser: the page shows commit {} (fetched through Traefik: HTTP {}).",
        tier.browser_url(host),
        sha.short(),
        page.status
    ));
    Ok(())
}

/// Tell the story on `stage` (its Sandcastle running with the controller in namespace `home`);
/// `before_push` is awaited before the push, `before_merge` before the pull request is merged.
pub async fn play(
    say: Say<'_>,
    client: &Client,
    stage: &Stage,
    home: &str,
    before_push: impl Future<Output = ()>,
    before_merge: impl Future<Output = ()>,
) -> anyhow::Result<Figures> {
    let (gh, repo) = (stage.gh.clone(), stage.repo.clone());
    let previews: Api<PreviewEnvironment> = Api::namespaced(client.clone(), home);
    let number = PrNumber::new(42)?;
    let name = &format!("{}-pr-42", stage.blueprint);
    let name = name.as_str();
    let mut figures = Figures::default();
    gh.set_role(&repo, AUTHOR, Role::Write);

    say(String::new());
    let first = Sha::new(&hex::encode(rand::random::<[u8; 20]>()))?;
    say(format!(
        "1. Pull request #42 opened by @{AUTHOR} (write access) at commit {}, from branch \
         feature/login of {repo}. Sending the signed delivery…",
        first.short()
    ));
    if let Some(tier) = &stage.real {
        tier.image_for(&crate::repo_root(), &first)?;
    }
    let mut pull = PrSpec::new(number, first.clone(), "feature/login");
    AUTHOR.clone_into(&mut pull.author);
    let before = shown(&previews, name).await?;
    let (status, body) = stage.deliver(&gh.open_pull_request(&repo, pull)).await?;
    say(format!("   webhook answered {status} {body}"));
    let pe = follow(say, &previews, name, Phase::Ready, Some(&first), before).await?;
    let st = pe.status.clone().unwrap_or_default();
    let ns = st.namespace.clone().unwrap_or_default();
    let objects = st.rollout.as_ref().map_or(0, |r| r.objects);
    say(format!(
        "   Preview {name} is Ready: {objects} objects in namespace {ns}, URL {}",
        st.url.clone().unwrap_or_default()
    ));
    for s in &st.services {
        say(format!(
            "     {} {}: {}/{} ready",
            s.kind, s.name, s.ready, s.desired
        ));
    }
    show_page(say, stage, &st, &first).await?;
    // Whoever opens the dashboard is signed in as the pull request's author (the stand-in's
    // browser session), through the App's OAuth as on GitHub.
    gh.sign_in_to_github(AUTHOR);
    say(format!(
        "   Dashboard: {}/ (Sign in with GitHub: the stand-in signs you in as @{AUTHOR}); the \
         preview's page, its history and env-hours: {}/previews/{name}",
        stage.public_url(),
        stage.public_url()
    ));
    let lag = show_comment(say, &gh, &repo, number, &first, 0).await?;
    figures.comment_lag_ms.push(lag);
    let seen = github_calls(say, &gh, 0);

    before_push.await;
    say(String::new());
    let second = Sha::new(&hex::encode(rand::random::<[u8; 20]>()))?;
    if let Some(tier) = &stage.real {
        tier.image_for(&crate::repo_root(), &second)?;
    }
    say(format!(
        "2. New commit {} pushed (synchronize). Sending the delivery…",
        second.short()
    ));
    let before = shown(&previews, name).await?;
    let (status, body) = stage.deliver(&gh.push(&repo, number, &second)).await?;
    say(format!("   webhook answered {status} {body}"));
    let pe = follow(say, &previews, name, Phase::Ready, Some(&second), before).await?;
    let d: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &ns);
    let frontend = d.get(&stage.app).await?;
    let image = frontend
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers[0].image.clone().unwrap_or_default())
        .unwrap_or_default();
    say(format!(
        "   Ready at {}: {} now runs {image}",
        second.short(),
        stage.app
    ));
    show_page(say, stage, &pe.status.clone().unwrap_or_default(), &second).await?;
    let lag = show_comment(say, &gh, &repo, number, &second, seen).await?;
    figures.comment_lag_ms.push(lag);
    let seen = github_calls(say, &gh, seen);

    before_merge.await;
    say(String::new());
    say("3. Pull request #42 merged. Sending the delivery…".to_owned());
    let before = shown(&previews, name).await?;
    let (status, body) = stage.deliver(&gh.close(&repo, number, true)).await?;
    say(format!("   webhook answered {status} {body}"));
    follow(say, &previews, name, Phase::Removed, None, before).await?;
    let gone = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .all(|n| n.name_any() != ns);
    say(format!(
        "   Namespace {ns} {}; the GitHub deployments are marked inactive.",
        if gone {
            "is gone"
        } else {
            "is still being deleted"
        }
    ));
    github_calls(say, &gh, seen);
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use sandcastle_fake_github::CallAuth;

    fn call(at: Instant, method: &str, path: &str, body: serde_json::Value) -> Call {
        Call {
            seq: 0,
            at,
            method: method.into(),
            path: path.into(),
            query: Default::default(),
            body: Some(body),
            auth: CallAuth::None,
            status: 200,
        }
    }

    fn comment(state: &str, sha: &Sha) -> serde_json::Value {
        let marker = format!(
            "<!-- sandcastle {{\"preview\":\"p\",\"sha\":\"{sha}\",\"phase\":\"Ready\",\"state\":\"{state}\"}} -->"
        );
        json!({"body": format!("### Preview\n\n{marker}\n")})
    }

    #[test]
    fn the_lag_runs_from_success_to_the_comment_that_says_ready() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let n = PrNumber::new(42).unwrap();
        let sha = Sha::new(&"a".repeat(40)).unwrap();
        let other = Sha::new(&"b".repeat(40)).unwrap();
        let deployments = "/repos/acme/guestbook/deployments/7/statuses";
        let calls = [
            call(
                t,
                "POST",
                "/repos/acme/guestbook/issues/42/comments",
                comment("deploying", &sha),
            ),
            call(
                t + ms(100),
                "POST",
                deployments,
                json!({"state": "in_progress"}),
            ),
            call(
                t + ms(900),
                "POST",
                deployments,
                json!({"state": "success"}),
            ),
            call(
                t + ms(950),
                "PATCH",
                "/repos/acme/guestbook/issues/comments/5",
                comment("ready", &other),
            ),
            call(
                t + ms(1400),
                "PATCH",
                "/repos/acme/guestbook/issues/comments/5",
                comment("ready", &sha),
            ),
        ];
        assert_eq!(comment_lag_ms(&calls, n, &sha), Some(500));
        assert_eq!(comment_lag_ms(&calls[..4], n, &sha), None, "not Ready yet");
        let early = [
            call(
                t + ms(800),
                "PATCH",
                "/repos/acme/guestbook/issues/comments/5",
                comment("ready", &sha),
            ),
            calls[2].clone(),
        ];
        assert_eq!(comment_lag_ms(&early, n, &sha), Some(-100));
    }
}
