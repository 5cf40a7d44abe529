//! The writes on one preview: redeploy (a commit, the branch's head, or the same commit again),
//! stop, wake, extend, reset (throw the data away and seed again) and delete. Each goes through
//! the preview write loop with the request it leaves for the history and Events, and is audited.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Agent, AgentError, Caller, Operation, PreviewView};
use sandcastle_crd::labels::{
    AGENT_ACTIVITY, LAST_ACTIVITY, REDEPLOY, RESET, RESET_DATA, RESET_LATEST,
};
use sandcastle_crd::{Blueprint, DEFAULT_MAX_TTL, PreviewEnvironment, Teardown, TeardownReason};
use sandcastle_domain::{Sha, duration, lifecycle};
use sandcastle_kube::previews::{self, Outcome};

/// `POST /previews/{name}/redeploy`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeployBody {
    /// The commit to deploy (40 hex characters); without it, the same commit again (a sandbox of
    /// a branch: the branch's head now).
    #[schema(pattern = r"^[0-9a-fA-F]{40}$")]
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{40}$"))]
    pub commit: Option<String>,
}

/// `POST /previews/{name}/reset`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetBody {
    /// Where the Blueprint restores snapshots of its data (`spec.data`): restore the newest
    /// snapshot, not the one the preview started from.
    #[serde(default)]
    pub latest: bool,
}

/// What `extend` answers: the preview, whether the extension was cut at `maxTtl`, and what
/// was done in a sentence.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
pub struct ExtendView {
    #[serde(flatten)]
    pub preview: PreviewView,
    /// The extension asked for went past the Blueprint's `maxTtl` from creation and was cut
    /// there.
    pub capped: bool,
    /// The new expiry, and the cap when there was one.
    pub message: String,
}

/// `POST /previews/{name}/extend`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtendBody {
    /// How much longer (`4h`, `2d`); never past the Blueprint's `maxTtl` from creation.
    #[schema(
        pattern = r"^([0-9]+[wdhmsWDHMS])*[0-9]*[1-9][0-9]*[wdhmsWDHMS]([0-9]+[wdhmsWDHMS])*$",
        max_length = 12
    )]
    #[schemars(
        regex(
            pattern = r"^([0-9]+[wdhmsWDHMS])*[0-9]*[1-9][0-9]*[wdhmsWDHMS]([0-9]+[wdhmsWDHMS])*$"
        ),
        length(max = 12)
    )]
    pub duration: String,
}

/// Stamp activity on `name` (best effort: a read is not refused because this failed); an
/// agent's (`agent`) is stamped as such too.
pub(super) async fn touch(api: &Api<PreviewEnvironment>, name: &str, now: Timestamp, agent: bool) {
    // One merge patch of its annotations: no read first, nothing to conflict with.
    let mut annotations = serde_json::Map::new();
    annotations.insert(LAST_ACTIVITY.to_owned(), now.to_string().into());
    if agent {
        annotations.insert(AGENT_ACTIVITY.to_owned(), now.to_string().into());
    }
    let stamp = serde_json::json!({"metadata": {"annotations": annotations}});
    let result = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&stamp))
        .await;
    if let Err(e) = result {
        tracing::debug!(preview = name, error = %e, "stamping activity failed");
    }
}

/// How a history note says where a write came from.
pub(super) fn through(caller: &Caller) -> &'static str {
    match caller.via {
        super::Via::Api => "through the API",
        super::Via::Mcp => "through MCP",
        super::Via::Dashboard => "from the dashboard",
    }
}

/// Refused for a preview torn down: nothing but its deletion applies to it any more.
fn not_torn_down(pe: &PreviewEnvironment) -> Result<(), AgentError> {
    match pe.spec.teardown {
        Some(_) => Err(AgentError::Conflict {
            code: "preview_removed",
            message: format!("preview {} is torn down; create a new one", pe.name_any()),
        }),
        None => Ok(()),
    }
}

/// A token for one request's annotation (a redeploy or a reset asked again).
pub(super) fn token(now: Timestamp) -> String {
    format!("{}-{:08x}", now.as_nanosecond(), rand::random::<u32>())
}

impl Agent {
    /// Write `change` to `name` for `caller` (after authorizing `op`), audited.
    async fn change(
        &self,
        caller: &Caller,
        op: Operation,
        name: &str,
        note: String,
        change: impl FnMut(&mut PreviewEnvironment) -> Result<(), Outcome>,
    ) -> Result<PreviewView, AgentError> {
        let pe = self.authorized(caller, op, name).await?;
        self.write(caller, op, &pe, note, change).await
    }

    /// Write `change` to `pe`, which `caller` was authorized to run `op` on, audited.
    pub(super) async fn write(
        &self,
        caller: &Caller,
        op: Operation,
        pe: &PreviewEnvironment,
        note: String,
        mut change: impl FnMut(&mut PreviewEnvironment) -> Result<(), Outcome>,
    ) -> Result<PreviewView, AgentError> {
        let name = pe.name_any();
        let name = name.as_str();
        if op != Operation::Delete {
            not_torn_down(pe)?;
        }
        let now = self.clock.now();
        let request = self.request(caller, op, note);
        let delivery = format!("{}-{}", caller.via.name(), token(now));
        let outcome = previews::modify(&self.api(), name, &delivery, &request, |next| {
            change(next)?;
            previews::touch(next, now);
            if caller.via.is_agent() {
                next.annotations_mut()
                    .insert(AGENT_ACTIVITY.to_owned(), now.to_string());
            }
            Ok(())
        })
        .await?;
        match outcome {
            Outcome::Skipped => return Err(AgentError::NotFound(name.to_owned())),
            Outcome::Deleting | Outcome::Contended => {
                return Err(AgentError::Unavailable {
                    code: "preview_busy",
                    message: format!("preview {name} is being changed or deleted; try again"),
                });
            }
            _ => {}
        }
        self.audit(caller, op, name, &pe.spec.sha, outcome.as_str());
        Ok(self.view(&self.fetch(name).await?))
    }

    /// Deploy `commit` (or, for a sandbox of a branch, the branch's head now; otherwise the same
    /// commit again, as a new rollout).
    pub async fn redeploy(
        &self,
        caller: &Caller,
        name: &str,
        commit: Option<&str>,
    ) -> Result<PreviewView, AgentError> {
        let current = self.authorized(caller, Operation::Redeploy, name).await?;
        let commit = match commit {
            Some(c) => Some(
                Sha::new(c)
                    .map_err(|e| AgentError::invalid("invalid_commit", "commit", e.to_string()))?,
            ),
            None => None,
        };
        let commit = match commit {
            Some(c) => Some(c),
            None if current.spec.pull_request.is_none() => self
                .branch_head(&current.spec.repository, &current.spec.git_ref)
                .await
                .ok()
                .map(|(sha, _)| sha),
            None => None,
        };
        let now = self.clock.now();
        let note = match &commit {
            Some(sha) => format!("redeploy at commit {} {}", sha.short(), through(caller)),
            None => format!("redeploy {}", through(caller)),
        };
        self.write(caller, Operation::Redeploy, &current, note, |pe| {
            if let Some(sha) = &commit {
                pe.spec.sha = sha.to_string();
            }
            pe.spec.stopped = false;
            pe.annotations_mut().insert(REDEPLOY.to_owned(), token(now));
            Ok(())
        })
        .await
    }

    pub async fn stop(&self, caller: &Caller, name: &str) -> Result<PreviewView, AgentError> {
        let note = format!("stop {}", through(caller));
        self.change(caller, Operation::Stop, name, note, |pe| {
            pe.spec.stopped = true;
            Ok(())
        })
        .await
    }

    pub async fn wake(&self, caller: &Caller, name: &str) -> Result<PreviewView, AgentError> {
        let note = format!("wake {}", through(caller));
        self.change(caller, Operation::Wake, name, note, |pe| {
            pe.spec.stopped = false;
            Ok(())
        })
        .await
    }

    /// Push the expiry back by `by` (`4h`, `2d`), never past the Blueprint's `maxTtl` from
    /// creation (the answer says when it was cut there).
    pub async fn extend(
        &self,
        caller: &Caller,
        name: &str,
        by: &str,
    ) -> Result<ExtendView, AgentError> {
        let current = self.authorized(caller, Operation::Extend, name).await?;
        not_torn_down(&current)?;
        let by = super::error::api_duration("duration", by, true)?;
        if by.is_zero() {
            return Err(AgentError::invalid(
                "invalid_duration",
                "duration",
                "must be longer than zero",
            ));
        }
        let max_ttl = self.max_ttl(&current.spec.blueprint).await?;
        let now = self.clock.now();
        let created = current.creation_timestamp().map_or(now, |t| t.0);
        let latest = lifecycle::hard_limit(created, max_ttl);
        if current
            .spec
            .expires_at
            .as_ref()
            .is_some_and(|e| e.0 >= latest)
        {
            // The request is fine; the preview's state is what refuses it.
            return Err(AgentError::Conflict {
                code: "at_max_ttl",
                message: format!(
                    "the preview already lives as long as it may ({} after creation, the Blueprint's maxTtl)",
                    duration::human(max_ttl)
                ),
            });
        }
        let note = format!("extend by {} {}", duration::human(by), through(caller));
        let capped = AtomicBool::new(false);
        let preview = self
            .write(caller, Operation::Extend, &current, note, |pe| {
                let current = pe.spec.expires_at.as_ref().map(|t| t.0);
                let ext = lifecycle::extend(created, current, now, by, max_ttl);
                pe.spec.expires_at = Some(Time(ext.expires_at));
                capped.store(ext.capped, Ordering::Relaxed);
                Ok(())
            })
            .await?;
        let capped = capped.load(Ordering::Relaxed);
        let until = preview.expires_at.clone().unwrap_or_default();
        let message = if capped {
            format!(
                "extended to {until}, not by all of {}: capped at the Blueprint's maxTtl, {} after creation",
                duration::human(by),
                duration::go_style(max_ttl)
            )
        } else {
            format!("extended by {} to {until}", duration::human(by))
        };
        Ok(ExtendView {
            preview,
            capped,
            message,
        })
    }

    /// Throw the preview's data away (its claims, StatefulSets and seed Jobs) and roll it out
    /// again, so the seed phase runs on fresh data — or, where the Blueprint restores snapshots,
    /// on the snapshot the preview started from (the newest with `latest`).
    pub async fn reset(
        &self,
        caller: &Caller,
        name: &str,
        body: &ResetBody,
    ) -> Result<PreviewView, AgentError> {
        let now = self.clock.now();
        let what = if body.latest {
            "data restored from the newest snapshot"
        } else {
            "data thrown away, seeded again"
        };
        let note = format!("reset ({what}) {}", through(caller));
        let latest = body.latest;
        self.change(caller, Operation::Reset, name, note, |pe| {
            pe.spec.stopped = false;
            let annotations = pe.annotations_mut();
            annotations.insert(RESET.to_owned(), token(now));
            if latest {
                annotations.insert(RESET_DATA.to_owned(), RESET_LATEST.to_owned());
            } else {
                annotations.remove(RESET_DATA);
            }
            Ok(())
        })
        .await
    }

    /// Tear the preview down now (it stays as a tombstone for a while, like a closed PR's).
    /// Its tokens stop working at once (they would otherwise until the namespace is gone).
    pub async fn delete(&self, caller: &Caller, name: &str) -> Result<PreviewView, AgentError> {
        let pe = self.authorized(caller, Operation::Delete, name).await?;
        let now = self.clock.now();
        let actor = caller.user.clone();
        let note = format!("delete {}", through(caller));
        let view = self
            .write(caller, Operation::Delete, &pe, note, |pe| {
                if pe.spec.teardown.is_some() {
                    return Err(Outcome::Unchanged);
                }
                pe.spec.teardown = Some(Teardown {
                    reason: TeardownReason::Destroyed,
                    actor: Some(actor.clone()),
                    via: Some(caller.via.interface()),
                    at: Time(now),
                });
                Ok(())
            })
            .await?;
        let (namespace, cluster) = self.place_of(&pe);
        self.authority
            .revoke(pe.uid().as_deref(), &namespace, &cluster);
        Ok(view)
    }

    /// The Blueprint's `maxTtl` (the default when the Blueprint is gone).
    pub(super) async fn max_ttl(&self, blueprint: &str) -> Result<Duration, AgentError> {
        let api: Api<Blueprint> = Api::namespaced(self.client.clone(), &self.home);
        Ok(api
            .get_opt(blueprint)
            .await?
            .map_or(DEFAULT_MAX_TTL, |b| b.spec.max_ttl)
            .get())
    }
}
