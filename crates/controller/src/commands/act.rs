//! What one `/preview` command does: who may run it, then the writes it asks for (deploy the
//! head commit for every Blueprint the repository uses; stop, wake, extend, destroy or refresh
//! the pull request's previews, or ask them to run a test) and the replies it deserves, written
//! out as text.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::Api;

use super::{Conversation, GITHUB_TIMEOUT, Later, blueprints, refused};
use crate::context::Context;
use sandcastle_crd::labels::STICKY_REFRESH;
use sandcastle_crd::{
    BlueprintSpec, CommandOutcome, CommandWrite, DEFAULT_MAX_TTL, Interface, PreviewCommand,
    PreviewEnvironment, Teardown, TeardownReason,
};
use sandcastle_domain::authors::{self, Author};
use sandcastle_domain::intent::{self, Change, Intent};
use sandcastle_domain::lifecycle;
use sandcastle_github::client::{Permission, PullState};
use sandcastle_github::command_parser::{self, Command, HelpLimits};
use sandcastle_github::text::replies::{Reply, reply_text};
use sandcastle_github::text::view::sticky_view;
use sandcastle_github::text::{StickyState, StickyView};
use sandcastle_github::{config_file, triggers};
use sandcastle_kube::events::Request;
use sandcastle_kube::previews::{self, Outcome};

/// What a command came to, before its replies are written out as text.
#[derive(Default)]
struct Done {
    refused: bool,
    replies: Vec<Reply>,
    previews: Vec<CommandWrite>,
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
        self.previews.push(CommandWrite {
            preview: preview.to_owned(),
            result: outcome.as_str().to_owned(),
        });
    }
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

/// A write another writer is in the middle of: try again shortly.
fn check_written(preview: &str, outcome: Outcome) -> Result<Outcome, Later> {
    match outcome {
        Outcome::Deleting => Err(Later::Retry(format!("preview {preview} is being deleted"))),
        Outcome::Contended => Err(Later::Retry(format!(
            "preview {preview} is being changed by another writer"
        ))),
        other => Ok(other),
    }
}

/// Carry out `cmd`: who asked, may they, and then what it asks for.
pub(super) async fn carry_out(
    ctx: &Context,
    cmd: &PreviewCommand,
    talk: &Conversation,
) -> Result<CommandOutcome, Later> {
    let author = &cmd.spec.author;
    let permission = tokio::time::timeout(
        GITHUB_TIMEOUT,
        ctx.permissions.get(&talk.gh, &talk.repo, author),
    )
    .await
    .map_err(|_| "timed out".to_owned())
    .and_then(|r| r.map_err(|e| e.to_string()))
    .map_err(|e| {
        Later::Retry(format!(
            "could not ask GitHub whether {author} may write to {}: {e}",
            talk.repo
        ))
    })?;
    let all = blueprints(ctx).await?;
    // The limits the help quotes: from a Blueprint that lists the repository.
    let limits = HelpLimits::of(
        all.iter()
            .map(|b| &b.spec)
            .find(|s| intent::covers_repo(s, &talk.repo)),
    );
    let parsed = command_parser::parse(&cmd.spec.command);
    let name = parsed
        .as_ref()
        .and_then(|p| p.as_ref().ok())
        .map_or("unknown", |c| c.name());
    if !permission.can_write() {
        let reply = Reply::PermissionDenied {
            repo: talk.repo.clone(),
            permission: permission_name(permission).to_owned(),
        };
        return Ok(refused(name, reply_text(&reply, &limits)));
    }
    let done = match parsed {
        None => Done::refuse(Reply::Help),
        Some(Err(e)) => Done::refuse(Reply::NotUnderstood(e)),
        Some(Ok(Command::Help)) => Done {
            replies: vec![Reply::Help],
            ..Done::default()
        },
        Some(Ok(Command::Deploy)) => deploy(ctx, cmd, talk, &all).await?,
        Some(Ok(Command::RefreshData)) => refresh_data(ctx, cmd, talk, &all, permission).await?,
        Some(Ok(command)) => on_existing(ctx, cmd, talk, command, &all).await?,
    };
    Ok(CommandOutcome {
        command: name.to_owned(),
        refused: done.refused,
        replies: done
            .replies
            .iter()
            .map(|r| reply_text(r, &limits))
            .collect(),
        previews: done.previews,
    })
}

/// `/preview refresh-data`: a new snapshot of the data of every Blueprint of the repository that
/// restores snapshots — what every new preview starts from, so maintainers only. The token is
/// the delivery's: a retried command asks once.
async fn refresh_data(
    ctx: &Context,
    cmd: &PreviewCommand,
    talk: &Conversation,
    all: &[sandcastle_crd::Blueprint],
    permission: Permission,
) -> Result<Done, Later> {
    if !matches!(permission, Permission::Maintain | Permission::Admin) {
        return Ok(Done::refuse(Reply::NeedsMaintainer {
            repo: talk.repo.clone(),
            permission: permission_name(permission).to_owned(),
        }));
    }
    let chosen: Vec<&sandcastle_crd::Blueprint> = all
        .iter()
        .filter(|b| intent::covers_repo(&b.spec, &talk.repo))
        .filter(|b| {
            b.spec
                .data
                .as_ref()
                .is_some_and(|d| d.from == sandcastle_crd::DataFrom::Snapshot)
        })
        .collect();
    if chosen.is_empty() {
        return Ok(Done::refuse(Reply::NoDataSnapshots));
    }
    let api: Api<sandcastle_crd::Blueprint> =
        Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let patch = serde_json::json!({"metadata": {"annotations": {
        sandcastle_crd::labels::DATA_REFRESH: cmd.spec.delivery,
    }}});
    let mut blueprints = Vec::new();
    for bp in chosen {
        let name = bp.name_any();
        api.patch(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map_err(|e| Later::Retry(format!("asking Blueprint {name} for a snapshot: {e}")))?;
        tracing::info!(target: "audit", actor = %cmd.spec.author, action = "refresh-data", blueprint = %name, result = "asked", delivery = %cmd.spec.delivery, "pull request command");
        blueprints.push(name);
    }
    Ok(Done {
        replies: vec![Reply::DataRefreshAsked { blueprints }],
        ..Done::default()
    })
}

/// `/preview`: deploy the head commit as it is now, for every Blueprint the repository uses; a
/// fork's commit is pinned there.
async fn deploy(
    ctx: &Context,
    cmd: &PreviewCommand,
    talk: &Conversation,
    all: &[sandcastle_crd::Blueprint],
) -> Result<Done, Later> {
    let pull = tokio::time::timeout(GITHUB_TIMEOUT, talk.gh.get_pull(&talk.repo, talk.pr))
        .await
        .map_err(|_| "timed out".to_owned())
        .and_then(|r| r.map_err(|e| e.to_string()))
        .map_err(|e| {
            Later::Retry(format!(
                "could not read pull request #{} of {}: {e}",
                talk.pr, talk.repo
            ))
        })?;
    if pull.state == PullState::Closed {
        return Ok(Done::refuse(Reply::PullRequestClosed));
    }
    // The label is state: a push carrying it takes previews down (`github::triggers`).
    if pull.labels.iter().any(|l| l == intent::NO_PREVIEW_LABEL) {
        return Ok(Done::refuse(Reply::LabelledNoPreview));
    }
    // As a delivery naming it is refused (`github::event`).
    if !sandcastle_domain::naming::is_branch_name(&pull.head.ref_) {
        return Ok(Done::refuse(Reply::BranchRefused {
            branch: pull.head.ref_.clone(),
        }));
    }
    let admitting: Vec<(&str, &BlueprintSpec)> = all
        .iter()
        .filter_map(|b| b.metadata.name.as_deref().map(|n| (n, &b.spec)))
        .filter(|(_, s)| intent::admits(s, &talk.repo, &pull.base.ref_))
        .collect();
    if admitting.is_empty() {
        return Ok(Done::refuse(Reply::RepoNotEnabled {
            repo: talk.repo.clone(),
        }));
    }
    let at = config_file::Reader {
        gh: &talk.gh,
        app_id: ctx.github.app_id(),
        repo: &talk.repo,
        base: &pull.base.ref_,
        pr: talk.pr,
        timeout: GITHUB_TIMEOUT,
    };
    let config = config_file::load(at, &admitting)
        .await
        .map_err(|e| Later::Retry(e.to_string()))?;
    let api: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let now = ctx.clock.now();
    let pinned = pull.is_from_fork();
    let mut done = Done::default();
    let author = Author {
        login: &pull.author,
        is_bot: pull.author_is_bot,
        association: pull.author_association,
        same_repository: !pull.is_from_fork(),
    };
    let chosen: Vec<_> = admitting
        .iter()
        .filter(|(n, _)| config.selects(n))
        .collect();
    let mut off = 0;
    for (name, spec) in &chosen {
        let class = Some(authors::classify(&spec.authors, &author, &pull.labels));
        if let (Some(why), Some(class)) = (triggers::off_reason(spec, class), class) {
            tracing::info!(target: "audit", actor = %cmd.spec.author, action = "deploy", blueprint = %name, result = %why, delivery = %cmd.spec.delivery, "pull request command refused");
            done.replies.push(Reply::AuthorClassOff {
                blueprint: (*name).to_owned(),
                class,
            });
            off += 1;
            continue;
        }
        let intent = Intent {
            preview: intent::preview_name(name, spec, &talk.repo, talk.pr),
            blueprint: (*name).to_owned(),
            repo: talk.repo.clone(),
            pr: talk.pr,
            sha: pull.head.sha.clone(),
            git_ref: pull.head.ref_.clone(),
            installation_id: Some(cmd.spec.installation_id),
            event_time: pull.updated_at,
            undoes: None,
            opens: false,
            keep: Some(pull.labels.iter().any(|l| l == intent::KEEP_LABEL)),
            change: Change::Deploy {
                create: true,
                requested_by: cmd.spec.author.clone(),
                ttl: authors::ttl(spec, class, config.ttl(spec)),
                max_ttl: spec.max_ttl.get(),
                class,
            },
        };
        let preview = intent.preview.as_str();
        let request = Request {
            sha: None,
            id: String::new(),
            at: now,
            actor: format!("@{}", cmd.spec.author),
            action: "command-deploy".into(),
            note: format!(
                "/preview on #{} at commit {}",
                talk.pr,
                pull.head.sha.short()
            ),
        };
        let outcome =
            previews::deploy_now(&api, &intent, &request, pinned, &cmd.spec.delivery, now).await?;
        let outcome = check_written(preview, outcome)?;
        tracing::info!(target: "audit", actor = %cmd.spec.author, action = "deploy", preview, sha = %pull.head.sha, pinned, result = outcome.as_str(), delivery = %cmd.spec.delivery, "pull request command");
        done.written(preview, outcome);
    }
    // Refused for every Blueprint it asked of.
    done.refused = off > 0 && off == chosen.len();
    Ok(done)
}

/// How `command` changes one preview at `now`, and what to answer about it (an extension).
/// `token` marks a status refresh; an extension is capped at `max_ttl` from creation.
fn apply_command(
    next: &mut PreviewEnvironment,
    command: Command,
    author: &str,
    token: &str,
    max_ttl: std::time::Duration,
    now: Timestamp,
) -> Option<Reply> {
    let mut answer = None;
    match command {
        Command::Stop => next.spec.stopped = true,
        Command::Wake => next.spec.stopped = false,
        Command::Destroy => {
            next.spec.teardown = Some(Teardown {
                reason: TeardownReason::Destroyed,
                actor: Some(author.to_owned()),
                via: Some(Interface::Command),
                at: Time(now),
            });
        }
        Command::Status => {
            next.annotations_mut()
                .insert(STICKY_REFRESH.to_owned(), token.to_owned());
        }
        Command::Test(test) => sandcastle_domain::test_runs::ask(next, &test, token),
        Command::Extend(by) => {
            let created = next.creation_timestamp().map_or(now, |t| t.0);
            let current = next.spec.expires_at.as_ref().map(|t| t.0);
            let ext = lifecycle::extend(created, current, now, by, max_ttl);
            next.spec.expires_at = Some(Time(ext.expires_at));
            answer = Some(Reply::Extended {
                until: ext.expires_at,
                now,
                capped: ext.capped.then_some(max_ttl),
            });
        }
        Command::Deploy | Command::Help | Command::RefreshData => {}
    }
    // Every command is activity: it keeps the preview from being stopped as idle.
    previews::touch(next, now);
    answer
}

/// `stop`, `wake`, `extend`, `destroy`, `status` and `test`: act on the pull request's previews
/// (for `test`, those whose Blueprint has the test).
async fn on_existing(
    ctx: &Context,
    cmd: &PreviewCommand,
    talk: &Conversation,
    command: Command,
    all: &[sandcastle_crd::Blueprint],
) -> Result<Done, Later> {
    let api: Api<PreviewEnvironment> = Api::namespaced(ctx.client.clone(), &ctx.settings.home);
    let now = ctx.clock.now();
    let previews_of_pr = previews::of_pull_request(&api, &talk.repo, talk.pr).await?;
    let spec_of = |pe: &PreviewEnvironment| {
        all.iter()
            .find(|b| b.metadata.name.as_deref() == Some(pe.spec.blueprint.as_str()))
            .map(|b| b.spec.clone())
    };
    let targets: Vec<&PreviewEnvironment> = previews_of_pr
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
    let targets = match command {
        Command::Test(test) => {
            let has = |pe: &&PreviewEnvironment| {
                spec_of(pe).is_some_and(|s| s.tests.iter().any(|t| t.name == test.as_str()))
            };
            let with: Vec<&PreviewEnvironment> = targets.iter().copied().filter(has).collect();
            if with.is_empty() {
                let mut known: Vec<String> = targets
                    .iter()
                    .filter_map(|pe| spec_of(pe))
                    .flat_map(|s| s.tests.into_iter().map(|t| t.name))
                    .collect();
                known.sort();
                known.dedup();
                let test = test.to_string();
                return Ok(Done::refuse(Reply::UnknownTest { test, known }));
            }
            with
        }
        _ => targets,
    };
    let delivery = cmd.spec.delivery.as_str();
    let mut done = Done::default();
    let mut views = Vec::new();
    for pe in targets {
        let name = pe.name_any();
        let max_ttl = spec_of(pe).map_or(DEFAULT_MAX_TTL, |s| s.max_ttl).get();
        let mut answer: Option<Reply> = None;
        let change = |next: &mut PreviewEnvironment| -> Result<(), Outcome> {
            if let Command::Extend(_) = command {
                let created = next.creation_timestamp().map_or(now, |t| t.0);
                let current = next.spec.expires_at.as_ref().map(|t| t.0);
                let latest = lifecycle::hard_limit(created, max_ttl);
                if current.is_some_and(|c| c >= latest) {
                    answer = Some(Reply::ExtendTooFar { max_ttl, latest });
                    return Err(Outcome::Unchanged);
                }
            }
            answer = apply_command(next, command, &cmd.spec.author, delivery, max_ttl, now);
            Ok(())
        };
        let request = Request {
            sha: None,
            id: String::new(),
            at: now,
            actor: format!("@{}", cmd.spec.author),
            action: format!("command-{}", command.name()),
            note: format!("{command} on #{}", talk.pr),
        };
        let outcome = previews::modify(&api, &name, delivery, &request, change).await?;
        let outcome = check_written(&name, outcome)?;
        tracing::info!(target: "audit", actor = %cmd.spec.author, action = command.name(), preview = %name, sha = %pe.spec.sha, result = outcome.as_str(), delivery, "pull request command");
        done.written(&name, outcome);
        if let Some(a) = answer {
            done.refused |= matches!(a, Reply::ExtendTooFar { .. });
            done.replies.push(a);
        }
        if command == Command::Status {
            views.push(status_view(
                pe,
                spec_of(pe).as_ref(),
                &ctx.settings.public_url,
            ));
        }
    }
    if command == Command::Status {
        done.replies.push(Reply::Status {
            previews: views,
            now,
        });
    }
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
            sha: sandcastle_domain::Sha::new(&pe.spec.sha).ok(),
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
            log_tail: None,
            running: st.running,
            rule: None,
            cluster: None,
            cluster_down: None,
            tests: Vec::new(),
            data: st.data,
        }
    })
}
