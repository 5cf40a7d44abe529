//! A pull request event as a `PreviewEvent` record holds it (`spec.event`): the fields Sandcastle
//! reads, in its own plain form, written by the webhook and read back by the controller. Values
//! were checked when the payload was parsed; reading them back checks them again, so a record
//! edited by hand is refused with the field at fault rather than acted on.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{BaseInfo, HeadInfo, PrAction, PrState, PullRequestEvent, pr_action};
use sandcastle_domain::authors::Association;
use sandcastle_domain::{PrNumber, RepoName, Sha};

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Recorded {
    action: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    base_changed: bool,
    repository: String,
    number: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    installation_id: Option<u64>,
    head_sha: String,
    head_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    head_repository: Option<String>,
    base_ref: String,
    base_repository: String,
    draft: bool,
    open: bool,
    merged: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    merged_by: Option<String>,
    labels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    author: String,
    author_is_bot: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    changed_files: Option<u64>,
    author_association: String,
    sender: String,
    updated_at: Timestamp,
    html_url: String,
}

/// `ev` as a record holds it.
pub fn to_record(ev: &PullRequestEvent) -> Value {
    let recorded = Recorded {
        action: ev.action.as_str().to_owned(),
        base_changed: matches!(ev.action, PrAction::Edited { base_changed: true }),
        repository: ev.repo.to_string(),
        number: ev.number.get(),
        installation_id: ev.installation_id,
        head_sha: ev.head.sha.to_string(),
        head_ref: ev.head.ref_.clone(),
        head_repository: ev.head.repo.as_ref().map(ToString::to_string),
        base_ref: ev.base.ref_.clone(),
        base_repository: ev.base.repo.to_string(),
        draft: ev.draft,
        open: ev.state == PrState::Open,
        merged: ev.merged,
        merged_by: ev.merged_by.clone(),
        labels: ev.labels.clone(),
        label: ev.label.clone(),
        author: ev.author.clone(),
        author_is_bot: ev.author_is_bot,
        before: ev.before.as_ref().map(ToString::to_string),
        changed_files: ev.changed_files,
        author_association: ev.author_association.as_str().to_owned(),
        sender: ev.sender.clone(),
        updated_at: ev.updated_at,
        html_url: ev.html_url.clone(),
    };
    serde_json::to_value(recorded).expect("a recorded event serializes")
}

/// The event a record holds, or why it cannot be read.
pub fn from_record(value: &Value) -> Result<PullRequestEvent, String> {
    let r: Recorded = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    let mut action = pr_action(&r.action).ok_or_else(|| format!("action {:?}", r.action))?;
    if let PrAction::Edited { base_changed } = &mut action {
        *base_changed = r.base_changed;
    }
    let repo = |s: &str, field: &str| RepoName::new(s).map_err(|e| format!("{field}: {e}"));
    let sha = |s: &str, field: &str| Sha::new(s).map_err(|e| format!("{field}: {e}"));
    Ok(PullRequestEvent {
        action,
        repo: repo(&r.repository, "repository")?,
        number: PrNumber::new(r.number).map_err(|e| format!("number: {e}"))?,
        installation_id: r.installation_id,
        head: HeadInfo {
            sha: sha(&r.head_sha, "headSha")?,
            ref_: r.head_ref,
            repo: r
                .head_repository
                .as_deref()
                .map(|s| repo(s, "headRepository"))
                .transpose()?,
        },
        base: BaseInfo {
            ref_: r.base_ref,
            repo: repo(&r.base_repository, "baseRepository")?,
        },
        draft: r.draft,
        state: if r.open {
            PrState::Open
        } else {
            PrState::Closed
        },
        merged: r.merged,
        merged_by: r.merged_by,
        labels: r.labels,
        label: r.label,
        author: r.author,
        author_is_bot: r.author_is_bot,
        before: r.before.as_deref().map(|s| sha(s, "before")).transpose()?,
        changed_files: r.changed_files,
        author_association: Association::parse(&r.author_association),
        sender: r.sender,
        updated_at: r.updated_at,
        html_url: r.html_url,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, parse};

    #[test]
    fn a_recorded_event_reads_back_as_the_same_event() {
        for name in [
            "pull_request.opened.json",
            "pull_request.closed.merged.json",
            "pull_request.synchronize.json",
        ] {
            let path = format!(
                "{}/../../fixtures/github/{name}",
                env!("CARGO_MANIFEST_DIR")
            );
            let body = std::fs::read(&path).unwrap();
            let Ok(Event::PullRequest(ev)) = parse("pull_request", &body) else {
                panic!("{name} parses as a pull request event");
            };
            let back = from_record(&to_record(&ev)).unwrap();
            assert_eq!(back, *ev, "{name}");
        }
    }

    #[test]
    fn a_record_edited_into_nonsense_is_refused_naming_the_field() {
        let body = std::fs::read(format!(
            "{}/../../fixtures/github/pull_request.opened.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let Ok(Event::PullRequest(ev)) = parse("pull_request", &body) else {
            panic!("the fixture parses");
        };
        let mut v = to_record(&ev);
        v["headSha"] = Value::from("not-a-sha");
        assert!(from_record(&v).unwrap_err().starts_with("headSha"));
        let mut v = to_record(&ev);
        v["action"] = Value::from("assigned");
        assert!(from_record(&v).is_err());
    }
}
