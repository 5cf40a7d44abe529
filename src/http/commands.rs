//! `/preview` commands in pull request comments, handled within the delivery: acknowledge with
//! 👀, check that the commenter may write to the repository (people, bots and agents alike),
//! record the desired state, then 🚀 — or 😕 with a one-line reply saying why. Reactions and
//! replies are best effort: when GitHub fails there, the desired state is still written and the
//! delivery still succeeds. Kubernetes failing, or GitHub failing to say who asked or which
//! commit is the head, answers 503 with nothing changed.

use axum::http::StatusCode;
use axum::response::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::{Value, json};

use super::AppState;
use super::error::ApiError;
use super::repo_config::{self, GITHUB_TIMEOUT, limits_of};
use super::webhook::{WRITE_TIMEOUT, blueprints_for, reply};
use crate::crd::labels::STICKY_REFRESH;
use crate::crd::{BlueprintSpec, DEFAULT_MAX_TTL, PreviewEnvironment, Teardown, TeardownReason};
use crate::domain::intent::{self, Change, Intent};
use crate::domain::lifecycle;
use crate::domain::{PrNumber, RepoName};
use crate::github::client::{Installation, Permission, PullState, Reaction};
use crate::github::command_parser::{self, Command};
use crate::github::event::{CommentAction, CommentEvent};
use crate::github::text::replies::{Reply, reply_text};
use crate::github::text::view::sticky_view;
use crate::github::text::{StickyState, StickyView};
use crate::k8s::events::Request;
use crate::k8s::previews::{self, Outcome};

/// The pull request conversation a command came from.
struct Conversation<'a> {
    gh: Installation,
    repo: &'a RepoName,
    pr: PrNumber,
    comment_id: u64,
}

impl Conversation<'_> {
    async fn react(&self, reaction: Reaction) {
        let call = self
            .gh
            .add_comment_reaction(self.repo, self.comment_id, reaction);
        match tokio::time::timeout(GITHUB_TIMEOUT, call).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(repo = %self.repo, pr = %self.pr, ?reaction, error = %e, "reacting failed");
            }
            Err(_) => {
                tracing::warn!(repo = %self.repo, pr = %self.pr, ?reaction, "reacting timed out");
            }
        }
    }

    async fn say(&self, text: &str) {
        let call = self.gh.create_issue_comment(self.repo, self.pr, text);
        match tokio::time::timeout(GITHUB_TIMEOUT, call).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(repo = %self.repo, pr = %self.pr, error = %e, "replying failed");
            }
            Err(_) => tracing::warn!(repo = %self.repo, pr = %self.pr, "replying timed out"),
        }
    }
}

/// What a command came to: done (🚀) or refused (😕), what to say, what was written.
#[derive(Default)]
struct Done {
    refused: bool,
    replies: Vec<Reply>,
    previews: Vec<Value>,
    duplicate: bool,
}

impl Done {
    fn refuse(reply: Reply) -> Self {
        Self {
            refused: true,
            replies: vec![reply],
            ..Self::default()
        }
    }

    fn written(&mut self, preview: &str, outcome: Outcome) {
        self.previews
            .push(json!({"preview": preview, "result": outcome.as_str()}));
    }
}

fn ignored(reason: &str) -> Response {
    reply(
        StatusCode::ACCEPTED,
        json!({"status": "ignored", "reason": reason}),
    )
}

fn permission_name(p: Permission) -> &'static str {
    match p {
        Permission::None => "none",
        Permission::Read => "read",
        Permission::Triage => "triage",
        Permission::Write => "write",
        Permission::Maintain => "maintain",
        Permission::Admin => "admin",
    }
}

/// Time out a Kubernetes write the way the rest of the webhook does: 503, redeliver later.
async fn k8s<T>(
    what: &str,
    fut: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, ApiError> {
    match tokio::time::timeout(WRITE_TIMEOUT, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "{what} failed");
            Err(ApiError::unavailable(format!(
                "could not {what} in Kubernetes; redeliver later"
            )))
        }
        Err(_) => Err(ApiError::unavailable(format!(
            "timed out trying to {what} in Kubernetes; redeliver later"
        ))),
    }
}

fn check_written(preview: &str, outcome: Outcome) -> Result<Outcome, ApiError> {
    match outcome {
        Outcome::Deleting | Outcome::Contended => Err(ApiError::unavailable(format!(
            "preview {preview} is {}; redeliver later",
            if outcome == Outcome::Deleting {
                "being deleted"
            } else {
                "being changed by another writer"
            }
        ))),
        other => Ok(other),
    }
}

/// Handle an `issue_comment` delivery.
pub(super) async fn issue_comment(
    state: &AppState,
    ev: &CommentEvent,
    delivery: &str,
) -> Result<Response, ApiError> {
    if ev.action != CommentAction::Created {
        return Ok(ignored("edited and deleted comments are not commands"));
    }
    if !ev.on_pull_request {
        return Ok(ignored("comments on issues are not commands"));
    }
    if ev.via_app == Some(state.github.app_id()) {
        return Ok(ignored("Sandcastle's own comment"));
    }
    let Some(parsed) = command_parser::parse(&ev.body) else {
        return Ok(ignored("no /preview command in the comment"));
    };
    let Some(installation) = ev.installation_id else {
        return Ok(ignored("the delivery names no App installation"));
    };
    let talk = Conversation {
        gh: state.github.installation(installation),
        repo: &ev.repo,
        pr: ev.number,
        comment_id: ev.comment_id,
    };
    talk.react(Reaction::Eyes).await;

    let permission = tokio::time::timeout(
        GITHUB_TIMEOUT,
        state.permissions.get(&talk.gh, &ev.repo, &ev.author),
    )
    .await
    .map_err(|_| "timed out".to_owned())
    .and_then(|r| r.map_err(|e| e.to_string()))
    .map_err(|e| {
        tracing::warn!(repo = %ev.repo, user = %ev.author, error = %e, "permission check failed");
        ApiError::github_unavailable(format!(
            "could not ask GitHub whether {} may write to {}; redeliver later",
            ev.author, ev.repo
        ))
    })?;
    // The limits the help quotes: from a Blueprint that lists the repository.
    let covering: Vec<BlueprintSpec> = state
        .blueprints
        .state()
        .iter()
        .filter(|b| intent::covers_repo(&b.spec, &ev.repo))
        .map(|b| b.spec.clone())
        .collect();
    let limits = limits_of(covering.first());

    let (name, done) = if !permission.can_write() {
        let done = Done::refuse(Reply::PermissionDenied {
            repo: ev.repo.clone(),
            permission: permission_name(permission).to_owned(),
        });
        (parsed.as_ref().map_or("unknown", |c| c.name()), done)
    } else {
        match parsed {
            Err(e) => ("unknown", Done::refuse(Reply::NotUnderstood(e))),
            Ok(Command::Help) => (
                Command::Help.name(),
                Done {
                    replies: vec![Reply::Help],
                    ..Done::default()
                },
            ),
            Ok(Command::Deploy) => (
                Command::Deploy.name(),
                deploy(state, &talk, ev, installation, delivery).await?,
            ),
            Ok(command) => (
                command.name(),
                on_existing(state, ev, command, delivery).await?,
            ),
        }
    };

    let result = if done.refused { "refused" } else { "done" };
    let written = Value::Array(done.previews.clone());
    tracing::info!(target: "audit", actor = %ev.author, action = name, repo = %ev.repo, pr = %ev.number, result, previews = %written, delivery, "pull request command");
    if !done.duplicate {
        talk.react(if done.refused {
            Reaction::Confused
        } else {
            Reaction::Rocket
        })
        .await;
        for r in &done.replies {
            talk.say(&reply_text(r, &limits)).await;
        }
    }
    let status = if done.duplicate {
        "duplicate"
    } else if done.refused {
        "refused"
    } else {
        "accepted"
    };
    Ok(reply(
        StatusCode::OK,
        json!({"status": status, "command": name, "previews": done.previews}),
    ))
}

/// `/preview`: deploy the head commit as it is now, for every Blueprint the repository uses; a
/// fork's commit is pinned there.
async fn deploy(
    state: &AppState,
    talk: &Conversation<'_>,
    ev: &CommentEvent,
    installation: u64,
    delivery: &str,
) -> Result<Done, ApiError> {
    let pull = tokio::time::timeout(GITHUB_TIMEOUT, talk.gh.get_pull(&ev.repo, ev.number))
        .await
        .map_err(|_| "timed out".to_owned())
        .and_then(|r| r.map_err(|e| e.to_string()))
        .map_err(|e| {
            tracing::warn!(repo = %ev.repo, pr = %ev.number, error = %e, "reading the pull request failed");
            ApiError::github_unavailable(format!(
                "could not read pull request #{} of {} from GitHub; redeliver later",
                ev.number, ev.repo
            ))
        })?;
    if pull.state == PullState::Closed {
        return Ok(Done::refuse(Reply::PullRequestClosed));
    }
    let blueprints = blueprints_for(state, &ev.repo, &pull.base.ref_).await?;
    let admitting: Vec<(&str, &BlueprintSpec)> = blueprints
        .iter()
        .filter_map(|b| b.metadata.name.as_deref().map(|n| (n, &b.spec)))
        .filter(|(_, s)| intent::admits(s, &ev.repo, &pull.base.ref_))
        .collect();
    if admitting.is_empty() {
        return Ok(Done::refuse(Reply::RepoNotEnabled {
            repo: ev.repo.clone(),
        }));
    }
    let config = repo_config::load(
        state,
        Some(installation),
        &ev.repo,
        &pull.base.ref_,
        ev.number,
        &admitting,
    )
    .await?;
    let api: Api<PreviewEnvironment> = Api::namespaced(state.client.clone(), &state.home);
    let now = state.clock.now();
    let pinned = pull.is_from_fork();
    let mut done = Done::default();
    let mut duplicates = 0;
    for (name, spec) in admitting.iter().filter(|(n, _)| config.selects(n)) {
        let intent = Intent {
            preview: intent::preview_name(name, spec, &ev.repo, ev.number),
            blueprint: (*name).to_owned(),
            repo: ev.repo.clone(),
            pr: ev.number,
            sha: pull.head.sha.clone(),
            git_ref: pull.head.ref_.clone(),
            installation_id: Some(installation),
            event_time: pull.updated_at,
            change: Change::Deploy {
                create: true,
                requested_by: ev.author.clone(),
                ttl: config.ttl(spec),
                max_ttl: spec.max_ttl.get(),
            },
        };
        let preview = intent.preview.as_str();
        let request = Request {
            at: now,
            actor: format!("@{}", ev.author),
            action: "command-deploy".into(),
            note: format!(
                "/preview on #{} at commit {}",
                ev.number,
                pull.head.sha.short()
            ),
        };
        let outcome = k8s(
            &format!("write preview {preview}"),
            previews::deploy_now(&api, &intent, &request, pinned, delivery, now),
        )
        .await?;
        let outcome = check_written(preview, outcome)?;
        duplicates += usize::from(outcome == Outcome::Duplicate);
        tracing::info!(target: "audit", actor = %ev.author, action = "deploy", preview, sha = %pull.head.sha, pinned, result = outcome.as_str(), delivery, "pull request command");
        done.written(preview, outcome);
    }
    done.duplicate = duplicates > 0 && duplicates == done.previews.len();
    Ok(done)
}

/// `stop`, `wake`, `extend`, `destroy` and `status`: act on the pull request's previews.
async fn on_existing(
    state: &AppState,
    ev: &CommentEvent,
    command: Command,
    delivery: &str,
) -> Result<Done, ApiError> {
    let api: Api<PreviewEnvironment> = Api::namespaced(state.client.clone(), &state.home);
    let now = state.clock.now();
    let all = k8s(
        "list previews",
        previews::of_pull_request(&api, &ev.repo, ev.number),
    )
    .await?;
    let blueprints = state.blueprints.state();
    let spec_of = |pe: &PreviewEnvironment| {
        blueprints
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some(pe.spec.blueprint.as_str()))
            .map(|b| b.spec.clone())
    };
    let targets: Vec<&PreviewEnvironment> = all
        .iter()
        .filter(|p| match command {
            Command::Status => true,
            Command::Destroy => p.spec.teardown.is_none(),
            _ => p.spec.teardown.is_none() && !p.spec.awaiting_approval,
        })
        .collect();
    if targets.is_empty() {
        return Ok(Done::refuse(Reply::NoPreview));
    }
    let mut done = Done::default();
    let mut duplicates = 0;
    let mut views = Vec::new();
    for pe in targets {
        let name = pe.name_any();
        let mut answer: Option<Reply> = None;
        let author = ev.author.clone();
        let max_ttl = spec_of(pe).map_or(DEFAULT_MAX_TTL, |s| s.max_ttl).get();
        let change = |next: &mut PreviewEnvironment| -> Result<(), Outcome> {
            match command {
                Command::Stop => next.spec.stopped = true,
                Command::Wake => next.spec.stopped = false,
                Command::Destroy => {
                    next.spec.teardown = Some(Teardown {
                        reason: TeardownReason::Destroyed,
                        actor: Some(author.clone()),
                        at: Time(now),
                    });
                }
                Command::Status => {
                    next.annotations_mut()
                        .insert(STICKY_REFRESH.to_owned(), delivery.to_owned());
                }
                Command::Extend(by) => {
                    let created = next.creation_timestamp().map_or(now, |t| t.0);
                    let current = next.spec.expires_at.as_ref().map(|t| t.0);
                    let ext = lifecycle::extend(created, current, now, by, max_ttl);
                    let latest = lifecycle::hard_limit(created, max_ttl);
                    if current.is_some_and(|c| c >= latest) {
                        answer = Some(Reply::ExtendTooFar { max_ttl, latest });
                        return Err(Outcome::Unchanged);
                    }
                    next.spec.expires_at = Some(Time(ext.expires_at));
                    answer = Some(Reply::Extended {
                        until: ext.expires_at,
                        now,
                        capped: ext.capped.then_some(max_ttl),
                    });
                }
                Command::Deploy | Command::Help => {}
            }
            // Every command is activity: it keeps the preview from being stopped as idle.
            previews::touch(next, now);
            Ok(())
        };
        let request = Request {
            at: now,
            actor: format!("@{}", ev.author),
            action: format!("command-{}", command.name()),
            note: format!("{command} on #{}", ev.number),
        };
        let outcome = k8s(
            &format!("write preview {name}"),
            previews::modify(&api, &name, delivery, &request, change),
        )
        .await?;
        let outcome = check_written(&name, outcome)?;
        duplicates += usize::from(outcome == Outcome::Duplicate);
        tracing::info!(target: "audit", actor = %ev.author, action = command.name(), preview = %name, sha = %pe.spec.sha, result = outcome.as_str(), delivery, "pull request command");
        done.written(&name, outcome);
        if let Some(a) = answer {
            done.refused |= matches!(a, Reply::ExtendTooFar { .. });
            done.replies.push(a);
        }
        if command == Command::Status {
            views.push(status_view(pe, spec_of(pe).as_ref(), &state.public_url));
        }
    }
    if command == Command::Status {
        done.replies.push(Reply::Status {
            previews: views,
            now,
        });
    }
    done.duplicate = duplicates > 0 && duplicates == done.previews.len();
    Ok(done)
}

/// The view for a `/preview status` line; a preview the controller has not described yet shows
/// its phase and message as progress.
fn status_view(
    pe: &PreviewEnvironment,
    spec: Option<&BlueprintSpec>,
    public_url: &str,
) -> StickyView {
    let page = format!(
        "{}/previews/{}",
        public_url.trim_end_matches('/'),
        pe.name_any()
    );
    sticky_view(pe, spec, Some(page.clone())).unwrap_or_else(|| {
        let st = pe.status.clone().unwrap_or_default();
        let step = match (st.phase, st.message) {
            (Some(p), Some(m)) => format!("{}: {m}", p.as_str()),
            (Some(p), None) => p.as_str().to_owned(),
            (None, _) => "waiting for Sandcastle to pick it up".to_owned(),
        };
        StickyView {
            preview: pe.name_any(),
            state: StickyState::Deploying {
                step,
                stuck_on: st.stuck_on,
            },
            url: None,
            sha: crate::domain::Sha::new(&pe.spec.sha).ok(),
            deployed_at: None,
            blueprint: pe.spec.blueprint.clone(),
            source: String::new(),
            services: Vec::new(),
            jobs: Vec::new(),
            expires_at: None,
            stop_after_idle: None,
            api_url: Some(page),
            namespace: None,
            pinned_fork_note: false,
        }
    })
}
