//! Asking for a new snapshot of a Blueprint's data (`spec.data.from: snapshot`), for the
//! previews made from now on: the caller authorized for `update blueprints/data-refresh` (a
//! preview's token never is: a Blueprint is every preview's source), the Blueprint's
//! `data-refresh` annotation set to a new token (the leader's data keeper takes the set and
//! records the token), audited; the answer shows the sets as they stand.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::write::token;
use super::{Agent, AgentError, Caller, Operation};
use sandcastle_crd::labels::DATA_REFRESH;
use sandcastle_crd::{Blueprint, DataFrom};
use sandcastle_domain::naming;

/// What a refresh answers: the token asked with, and the Blueprint's snapshot sets so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataRefreshView {
    pub blueprint: String,
    /// The Blueprint's `status.data.refreshed` becomes this once the new set is taken.
    pub asked: String,
    /// The sets before this one, newest first.
    pub snapshots: Vec<SnapshotSetView>,
    /// Why no snapshot can be taken, when the keeper last said so.
    pub message: Option<String>,
}

/// One snapshot set of a Blueprint's data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSetView {
    /// `20261207-031500`.
    pub id: String,
    /// RFC 3339.
    pub taken_at: String,
    pub ready: bool,
    pub error: Option<String>,
}

impl Agent {
    /// Ask for a new snapshot of Blueprint `name`'s data.
    pub async fn refresh_data(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<DataRefreshView, AgentError> {
        let op = Operation::RefreshData;
        if caller.github.is_some() {
            return Err(AgentError::Forbidden(format!(
                "{} is not offered to people signed in with GitHub; use the API, or comment \
                 `/preview refresh-data` on a pull request as a maintainer",
                op.name()
            )));
        }
        if !naming::is_object_name(name) {
            return Err(AgentError::NoBlueprint(name.to_owned()));
        }
        self.authority
            .authorize(caller, op, Some((name, "", "")))
            .await?;
        let api: Api<Blueprint> = Api::namespaced(self.client.clone(), &self.home);
        let bp = api
            .get_opt(name)
            .await
            .map_err(|e| AgentError::kubernetes(&e))?
            .ok_or_else(|| AgentError::NoBlueprint(name.to_owned()))?;
        let snapshots = bp
            .spec
            .data
            .as_ref()
            .is_some_and(|d| d.from == DataFrom::Snapshot);
        if !snapshots {
            return Err(AgentError::Conflict {
                code: "no_data_snapshots",
                message: format!(
                    "Blueprint {name} does not restore its previews' data from snapshots \
                     (spec.data.from is not snapshot)"
                ),
            });
        }
        let asked = token(self.clock.now());
        let patch = json!({"metadata": {"annotations": {DATA_REFRESH: asked}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| AgentError::kubernetes(&e))?;
        tracing::info!(target: "audit", actor = %caller.user, action = op.name(), blueprint = %bp.name_any(), result = "asked", via = caller.via.name(), "blueprint operation");
        let data = bp.status.and_then(|s| s.data).unwrap_or_default();
        Ok(DataRefreshView {
            blueprint: name.to_owned(),
            asked,
            snapshots: data
                .sets
                .iter()
                .map(|s| SnapshotSetView {
                    id: s.id.clone(),
                    taken_at: s.taken_at.0.to_string(),
                    ready: s.ready,
                    error: s.error.clone(),
                })
                .collect(),
            message: data.message,
        })
    }
}
