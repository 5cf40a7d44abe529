//! A Blueprint's warm pool: previews cloned ahead of time, at the repository's default branch,
//! that a new sandbox or a pull request's first preview takes over instead of cloning.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most previews one pool keeps.
pub const MAX_POOL_SIZE: u32 = 50;

/// `spec.pool`: how many previews are kept ready to be claimed, and in what state.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PoolSpec {
    /// How many unclaimed previews to keep (each claimed one is replaced in the background).
    #[schemars(range(min = 1, max = 50))]
    pub size: u32,
    /// `running`: kept Ready (a claim rolls out only what differs); `stopped`: rolled out, then
    /// scaled to zero (a claim starts them again; cheaper to keep, slower to claim).
    #[serde(default)]
    pub state: PoolState,
    /// The repository (`owner/name`) its previews are made for, at its default branch; only
    /// that repository's previews claim them. Unset: the Blueprint's one repository (a
    /// Blueprint listing several, or `owner/*`, must say which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9-]{1,39}/[A-Za-z0-9._-]{1,100}$"))]
    pub repository: Option<String>,
}

/// What a pool's previews do while they wait to be claimed.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum PoolState {
    #[default]
    Running,
    Stopped,
}

impl PoolState {
    pub fn as_str(self) -> &'static str {
        match self {
            PoolState::Running => "running",
            PoolState::Stopped => "stopped",
        }
    }
}

/// How a Blueprint's pool stands (`status.pool`), as the pool keeper last saw it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// `spec.pool.size`.
    pub size: u32,
    /// The pool's previews not claimed yet (deploying, ready or stopped).
    pub previews: u32,
    pub ready: u32,
    pub stopped: u32,
    /// Why the pool cannot be filled, when it cannot (no repository named, the App not
    /// installed, GitHub not answering).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
