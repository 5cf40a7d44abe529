//! `sandcastle previews …`: the REST API from a shell. Each subcommand is one API call (a list
//! follows every page); answers print as a table for people or as the API's JSON or YAML
//! (`-o`). Exit codes a script can use: 0 done, 1 refused or failed (the API's code and message
//! on stderr), and for `wait` 0 Ready (or the state asked for), 1 Failed or gone, 2 timed out.

pub mod args;
mod show;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::agent::remote::{Call, CallError, Request, Server, preview_path};
use crate::agent::{
    CreatePreview, DataRefreshView, EventsView, ExtendBody, LogLines, LogQuery, Operation,
    PreviewList, PreviewView, RedeployBody, ResetBody, ShareBody, TestRunView, TokenRequestBody,
    WaitOutcome, WaitResult,
};
use crate::domain::Secret;
use args::{Output, PreviewsAction, PreviewsArgs};
use show::Asked;

/// A wait longer than this is the server's to refuse; the client only bounds its own call.
const LONGEST_WAIT: Duration = Duration::from_secs(3600);

/// Run one `sandcastle previews` subcommand.
pub async fn run(args: PreviewsArgs) -> anyhow::Result<ExitCode> {
    if let Some(why) = empty_token(&args.token) {
        eprintln!("error: {why}");
        return Ok(ExitCode::FAILURE);
    }
    let server =
        Server::new(&args.server, args.token.clone()).context("setting up the HTTP client")?;
    match act(&server, &args).await {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Why `token` cannot be sent, when it is empty (no token at all is the server's to refuse).
fn empty_token(token: &Option<Secret>) -> Option<String> {
    let empty = token.as_ref()?.expose().trim().is_empty();
    empty.then(|| {
        "the token is empty (--token or SANDCASTLE_TOKEN): set it to a Kubernetes bearer \
         token allowed on previewenvironments, e.g. \
         export SANDCASTLE_TOKEN=$(kubectl -n sandcastle create token ci-agent --duration 1h)"
            .to_owned()
    })
}

/// What the subcommand printed it ended with.
async fn act(server: &Server, args: &PreviewsArgs) -> Result<ExitCode, CallError> {
    let out = args.output;
    match &args.action {
        PreviewsAction::List(l) => {
            let mut query: Vec<(String, String)> = Vec::new();
            for (k, v) in [
                ("repo", &l.repo),
                ("branch", &l.branch),
                ("blueprint", &l.blueprint),
                ("phase", &l.phase),
            ] {
                if let Some(v) = v {
                    query.push((k.to_owned(), v.clone()));
                }
            }
            if let Some(pr) = l.pr {
                query.push(("pr".to_owned(), pr.to_string()));
            }
            let items = list_all(server, query).await?;
            print(out, &json!({ "items": items }), |v| {
                let list: PreviewList = typed(v)?;
                Some(show::previews(&list.items, jiff::Timestamp::now()))
            });
            Ok(ExitCode::SUCCESS)
        }
        PreviewsAction::Get(n) => one(server, out, Request::Get(n.name.clone())).await,
        PreviewsAction::Create(c) => {
            let body = CreatePreview {
                blueprint: c.blueprint.clone(),
                repository: c.repo.clone(),
                branch: c.branch.clone(),
                commit: c.commit.clone(),
                name: c.name.clone(),
                ttl: c.ttl.clone(),
            };
            let request = Request::Create(Box::new(body), c.idempotency_key.clone());
            one(server, out, request).await
        }
        PreviewsAction::Wait(w) => {
            let mut call = Call::get(preview_path(&w.name, "/wait"));
            let wanted = if w.test.is_some() { "test" } else { &w.for_ };
            call.query = vec![
                ("for".to_owned(), wanted.to_owned()),
                ("timeout".to_owned(), w.timeout.clone()),
            ];
            if let Some(test) = &w.test {
                call.query.push(("test".to_owned(), test.clone()));
            }
            call.waits = crate::domain::duration::parse(&w.timeout, false)
                .map_or(LONGEST_WAIT, |d| d.min(LONGEST_WAIT));
            let v = server.call(call).await?;
            print(out, &v, |v| {
                typed::<WaitResult>(v).map(|w| match &w.test {
                    Some(t) => test_waited(&w, t),
                    None => show::waited(&w),
                })
            });
            Ok(wait_code(&v, wanted))
        }
        PreviewsAction::Logs(l) => {
            let query = LogQuery {
                workload: l.workload.clone(),
                container: l.container.clone(),
                tail_lines: l.tail,
                since: l.since.clone(),
                previous: l.previous.then_some(true),
            };
            let v = server
                .call(Request::Logs(l.name.clone(), query).call())
                .await?;
            print(out, &v, |v| {
                let lines: LogLines = typed(v)?;
                if let Some(note) = show::logs_note(&lines) {
                    eprintln!("note: {note}");
                }
                Some(show::logs(&lines))
            });
            Ok(ExitCode::SUCCESS)
        }
        PreviewsAction::Events(n) => {
            let v = server.call(Request::Events(n.name.clone()).call()).await?;
            print(out, &v, |v| {
                typed::<EventsView>(v).map(|e| show::events(&e, jiff::Timestamp::now()))
            });
            Ok(ExitCode::SUCCESS)
        }
        PreviewsAction::Token(t) => {
            let body = TokenRequestBody {
                expiration_seconds: t.expiration_seconds,
            };
            let v = server
                .call(Request::Token(t.name.clone(), body).call())
                .await?;
            // Like `kubectl create token`: the token alone, for `$(…)`.
            print(out, &v, |v| v["token"].as_str().map(|t| format!("{t}\n")));
            Ok(ExitCode::SUCCESS)
        }
        PreviewsAction::Redeploy(r) => {
            let body = RedeployBody {
                commit: r.commit.clone(),
            };
            let request = Request::Redeploy(r.name.clone(), body);
            later(server, out, request, Asked::Redeploy).await
        }
        PreviewsAction::Extend(e) => {
            let body = ExtendBody {
                duration: e.duration().to_owned(),
            };
            one(server, out, Request::Extend(e.name.clone(), body)).await
        }
        PreviewsAction::Stop(n) => {
            later(server, out, Request::Stop(n.name.clone()), Asked::Stop).await
        }
        PreviewsAction::Wake(n) => {
            later(server, out, Request::Wake(n.name.clone()), Asked::Wake).await
        }
        PreviewsAction::Reset(r) => {
            let body = ResetBody { latest: r.latest };
            later(
                server,
                out,
                Request::Reset(r.name.clone(), body),
                Asked::Reset,
            )
            .await
        }
        PreviewsAction::RefreshData(b) => {
            let v = server
                .call(Request::RefreshData(b.blueprint.clone()).call())
                .await?;
            print(out, &v, |v| {
                typed::<DataRefreshView>(v).map(|r| show::refresh_asked(&r))
            });
            Ok(ExitCode::SUCCESS)
        }
        PreviewsAction::Delete(n) => {
            later(server, out, Request::Delete(n.name.clone()), Asked::Delete).await
        }
        PreviewsAction::Share(s) => {
            let body = ShareBody {
                expires_in: s.expires_in.clone(),
                label: s.label.clone(),
            };
            let v = server
                .call(Request::Share(s.name.clone(), body).call())
                .await?;
            // The link alone, for `$(…)`; when it expires on stderr.
            print(out, &v, |v| {
                if let Some(at) = v["expiresAt"].as_str() {
                    eprintln!("note: the link opens the preview until {at}");
                }
                v["url"].as_str().map(|u| format!("{u}\n"))
            });
            Ok(ExitCode::SUCCESS)
        }
        PreviewsAction::Unshare(u) => {
            let request = Request::Unshare(u.name.clone(), u.id.clone());
            one(server, out, request).await
        }
        PreviewsAction::Test(t) => {
            let request = Request::RunTest(t.name.clone(), t.test.clone());
            let v = server.call(request.call()).await?;
            print(out, &v, |v| {
                typed::<PreviewView>(v).map(|p| test_asked(&p, &t.test))
            });
            Ok(ExitCode::SUCCESS)
        }
        PreviewsAction::HeaderSecret(n) => {
            let v = server
                .call(Request::HeaderSecret(n.name.clone()).call())
                .await?;
            print(out, &v, |v| v["value"].as_str().map(|t| format!("{t}\n")));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A write the controller carries out after the answer (202): the table says what was asked
/// and how to wait for it, since the preview answered is the one from before.
async fn later(
    server: &Server,
    out: Output,
    request: Request,
    what: Asked,
) -> Result<ExitCode, CallError> {
    let v = server.call(request.call()).await?;
    print(out, &v, |v| {
        typed::<PreviewView>(v).map(|p| show::asked(what, &p))
    });
    Ok(ExitCode::SUCCESS)
}

/// Every page of the list.
async fn list_all(server: &Server, query: Vec<(String, String)>) -> Result<Vec<Value>, CallError> {
    let mut items = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut call = Call::get("/previews".to_owned());
        call.query.clone_from(&query);
        call.query.push(("limit".to_owned(), "500".to_owned()));
        if let Some(a) = &after {
            call.query.push(("continue".to_owned(), a.clone()));
        }
        let page = server.call(call).await?;
        items.extend(page["items"].as_array().cloned().unwrap_or_default());
        match page["continue"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return Ok(items),
        }
    }
}

/// A call that answers one preview.
async fn one(server: &Server, out: Output, request: Request) -> Result<ExitCode, CallError> {
    let v = server.call(request.call()).await?;
    print(out, &v, |v| {
        typed::<PreviewView>(v).map(|p| show::preview(&p, jiff::Timestamp::now()))
    });
    Ok(ExitCode::SUCCESS)
}

fn typed<T: DeserializeOwned>(v: &Value) -> Option<T> {
    serde_json::from_value(v.clone()).ok()
}

/// Print `v` as asked; a table from `table`, or the JSON when the answer is not what this CLI
/// knows (a newer server).
fn print(out: Output, v: &Value, table: impl FnOnce(&Value) -> Option<String>) {
    let json = || serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
    let text = match out {
        Output::Json => json(),
        Output::Yaml => serde_saphyr::to_string(v).unwrap_or_else(|_| json()),
        Output::Table => table(v).unwrap_or_else(json),
    };
    print!("{text}");
}

/// `wait`'s exit code: 0 for what was asked, 1 Failed (or gone when not asked for), 2 timeout.
fn wait_code(v: &Value, wanted: &str) -> ExitCode {
    let outcome: Option<WaitOutcome> = serde_json::from_value(v["outcome"].clone()).ok();
    match outcome {
        Some(WaitOutcome::Timeout) => ExitCode::from(2),
        Some(WaitOutcome::Failed) => ExitCode::FAILURE,
        Some(WaitOutcome::Removed) if !wanted.eq_ignore_ascii_case("removed") => ExitCode::FAILURE,
        Some(_) => ExitCode::SUCCESS,
        None => ExitCode::FAILURE,
    }
}

/// The subcommand each operation is offered as. Exhaustive: a new operation does not compile
/// until the CLI offers it (the test below checks the subcommand exists).
pub fn subcommand_of(op: Operation) -> &'static str {
    match op {
        Operation::List => "list",
        Operation::Get => "get",
        Operation::Wait => "wait",
        Operation::Events => "events",
        Operation::Logs => "logs",
        Operation::Create => "create",
        Operation::Redeploy => "redeploy",
        Operation::Stop => "stop",
        Operation::Wake => "wake",
        Operation::Extend => "extend",
        Operation::Reset => "reset",
        Operation::Delete => "delete",
        Operation::Token => "token",
        Operation::Share => "share",
        Operation::Unshare => "unshare",
        Operation::HeaderSecret => "header-secret",
        Operation::RunTest => "test",
        Operation::RefreshData => "refresh-data",
    }
}

/// What `test` prints: what was asked, and how to wait for its result.
fn test_asked(p: &PreviewView, test: &str) -> String {
    let when = if p.phase == crate::crd::Phase::Ready {
        "it runs now"
    } else {
        "it runs once the preview is Ready"
    };
    format!(
        "Asked to run test {test} in {name}: {when} (it is {phase}); its result is the check run \
         \"Sandcastle / {test}\".\nWait for it: sandcastle previews wait {name} --test {test}\n",
        name = p.name,
        phase = p.phase.as_str()
    )
}

/// How a wait for a test ended, in one line.
fn test_waited(w: &WaitResult, t: &TestRunView) -> String {
    let outcome = serde_json::to_value(w.outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let name = w.preview.as_ref().map_or("", |p| p.name.as_str());
    let how = match (t.conclusion, t.duration_seconds, t.exit_code) {
        (Some(c), Some(secs), exit) => {
            let c = serde_json::to_value(c)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let exit = exit.map_or(String::new(), |e| format!(", exit {e}"));
            format!("{c} after {secs}s{exit}")
        }
        _ => "no result yet".to_owned(),
    };
    let why = t
        .message
        .as_deref()
        .map_or(String::new(), |m| format!(": {m}"));
    format!(
        "{name} test {} {outcome} (run {} at {}, {how}{why})\n",
        t.name,
        t.run,
        t.commit.get(..7).unwrap_or(&t.commit)
    )
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::cli::Cli;

    #[test]
    fn every_operation_is_a_subcommand() {
        let cli = Cli::command();
        let previews = cli.find_subcommand("previews").unwrap();
        for op in Operation::ALL {
            assert!(
                previews.find_subcommand(subcommand_of(op)).is_some(),
                "sandcastle previews {} for {op:?}",
                subcommand_of(op)
            );
        }
        assert_eq!(previews.get_subcommands().count(), Operation::ALL.len());
    }

    #[test]
    fn extend_takes_the_duration_as_a_word_or_with_by() {
        use clap::Parser as _;
        let by = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).map_err(|e| e.kind())?;
            let crate::cli::Command::Previews(p) = cli.command else {
                panic!("not previews");
            };
            let PreviewsAction::Extend(e) = p.action else {
                panic!("not extend");
            };
            Ok::<_, clap::error::ErrorKind>(e.duration().to_owned())
        };
        assert_eq!(
            by(&["sandcastle", "previews", "extend", "x", "1h"]),
            Ok("1h".to_owned())
        );
        assert_eq!(
            by(&["sandcastle", "previews", "extend", "x", "--by", "2h"]),
            Ok("2h".to_owned())
        );
        assert!(by(&["sandcastle", "previews", "extend", "x"]).is_err());
        assert!(by(&["sandcastle", "previews", "extend", "x", "1h", "--by", "2h"]).is_err());
    }

    #[test]
    fn an_empty_token_is_named_with_how_to_get_one() {
        assert_eq!(empty_token(&Some(Secret::new("eyJ"))), None);
        assert_eq!(
            empty_token(&None),
            None,
            "no token is the server's to refuse"
        );
        for blank in ["", "  \n"] {
            let message = empty_token(&Some(Secret::new(blank))).unwrap();
            assert!(
                message.starts_with("the token is empty (--token or SANDCASTLE_TOKEN)"),
                "{message}"
            );
            assert!(
                message.contains("kubectl -n sandcastle create token"),
                "{message}"
            );
        }
    }
}
