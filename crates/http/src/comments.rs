//! `/preview` commands in pull request comments, as the webhook handles them: it records each
//! command as a `PreviewCommand` and answers `202 Accepted` — one Kubernetes write, whatever
//! GitHub's speed. The controller carries it out (👀, who may run it, the writes, the replies, 🚀
//! or 😕; `controller::commands`). Comments that are not commands are answered `202 ignored`,
//! a redelivered command `200 duplicate`; Kubernetes failing answers 503 with nothing recorded.

use axum::http::StatusCode;
use axum::response::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::AppState;
use super::answer::{WRITE_TIMEOUT, reply};
use super::error::ApiError;
use sandcastle_crd::labels::{MANAGED_BY, MANAGER, PR, REPO};
use sandcastle_crd::{PreviewCommand, PreviewCommandSpec};
use sandcastle_domain::naming::repo_label_value;
use sandcastle_github::command_parser;
use sandcastle_github::event::{CommentAction, CommentEvent};

/// The most of a command line a record keeps.
const LINE_LIMIT: usize = 500;

fn ignored(reason: &str) -> Response {
    reply(
        StatusCode::ACCEPTED,
        json!({"status": "ignored", "reason": reason}),
    )
}

/// The record's name: the same for every redelivery of a delivery, valid whatever the id holds.
pub fn record_name(delivery: &str) -> String {
    let digest = Sha256::digest(delivery.as_bytes());
    format!("cmd-{}", &hex::encode(digest)[..20])
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
    let Some(line) = command_line(&ev.body) else {
        return Ok(ignored("no /preview command in the comment"));
    };
    let Some(installation) = ev.installation_id else {
        return Ok(ignored("the delivery names no App installation"));
    };
    let name = record_name(delivery);
    let mut record = PreviewCommand::new(
        &name,
        PreviewCommandSpec {
            repository: ev.repo.to_string(),
            pull_request: ev.number.get(),
            installation_id: installation,
            comment_id: ev.comment_id,
            author: ev.author.clone(),
            command: line.clone(),
            delivery: delivery.to_owned(),
            received_at: Time(state.clock.now()),
        },
    );
    record.metadata.labels = Some(
        [
            (MANAGED_BY.to_owned(), MANAGER.to_owned()),
            (REPO.to_owned(), repo_label_value(&ev.repo)),
            (PR.to_owned(), ev.number.to_string()),
        ]
        .into(),
    );
    let command = command_parser::parse(&line)
        .and_then(Result::ok)
        .map_or("unknown", |c| c.name());
    let api: Api<PreviewCommand> = Api::namespaced(state.client.clone(), &state.home);
    let created = tokio::time::timeout(WRITE_TIMEOUT, api.create(&PostParams::default(), &record))
        .await
        .map_err(|_| {
            ApiError::unavailable(
                "timed out recording the command in Kubernetes; redeliver later".to_owned(),
            )
        })?;
    match created {
        Ok(_) => {
            tracing::info!(target: "audit", actor = %ev.author, action = "command", command, repo = %ev.repo, pr = %ev.number, record = %name, delivery, result = "recorded", "pull request command");
            Ok(reply(
                StatusCode::ACCEPTED,
                json!({"status": "accepted", "command": command, "record": name}),
            ))
        }
        Err(kube::Error::Api(r)) if r.code == 409 => Ok(reply(
            StatusCode::OK,
            json!({"status": "duplicate", "command": command, "record": name}),
        )),
        Err(e) => {
            tracing::warn!(error = %e, "recording a command failed");
            Err(ApiError::unavailable(
                "could not record the command in Kubernetes; redeliver later".to_owned(),
            ))
        }
    }
}

fn command_line(body: &str) -> Option<String> {
    command_parser::command_line(body, LINE_LIMIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_named_by_delivery() {
        let a = record_name("72d3162e-cc78-11e3-81ab-4c9367dc0958");
        assert_eq!(a, record_name("72d3162e-cc78-11e3-81ab-4c9367dc0958"));
        assert_ne!(a, record_name("replay-1"));
        assert_eq!(a.len(), 24);
        assert!(
            record_name("Weird ID/with spaces")
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }
}
