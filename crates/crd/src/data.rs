//! Where a preview's data stores start from (`spec.data`): empty, or restored from CSI volume
//! snapshots of the Blueprint's own claims; the snapshots Sandcastle keeps (`status.data`), and
//! which of them a preview's data came from (the preview's `status.data`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::GoDuration;

/// The most snapshot sets `keep` may ask for.
pub const MAX_KEEP: u32 = 10;
/// How often snapshots are taken when `every` is not set.
pub const DEFAULT_EVERY: GoDuration = GoDuration::from_secs(24 * 3600);

fn default_every() -> GoDuration {
    DEFAULT_EVERY
}
fn default_keep() -> u32 {
    2
}

/// `spec.data`: what each preview's PersistentVolumeClaims start with.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DataSpec {
    /// `empty` (the default): claims start empty and seed Jobs fill them; `snapshot`: each new
    /// preview's claims are restored from the newest ready snapshot of the Blueprint's claims.
    #[serde(default)]
    pub from: DataFrom,
    /// The source namespace's claims to snapshot and restore (a StatefulSet's by the name it
    /// gives them, `<template>-<statefulset>-<ordinal>`). Empty: every bound claim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50), inner(length(min = 1, max = 253)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub claims: Vec<String>,
    /// The VolumeSnapshotClass to snapshot with. Unset: the class the cluster marks default for
    /// the claims' driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub snapshot_class: Option<String>,
    /// How often a new snapshot is taken (`24h`); `0`: only when asked (API, MCP, `/preview
    /// refresh-data`).
    #[serde(default = "default_every")]
    #[schemars(regex(pattern = r"^(0|([0-9]+(h|m|s))+)$"))]
    pub every: GoDuration,
    /// How many ready snapshots are kept (older ones are deleted, except those a live preview
    /// started from, which its reset restores).
    #[serde(default = "default_keep")]
    #[schemars(range(min = 1, max = 10))]
    pub keep: u32,
    /// Snapshots do not cross clusters. A preview placed in another cluster than the Blueprint's
    /// source is `refuse`d with the reason (the default), or starts empty and is `seed`ed.
    #[serde(default)]
    pub elsewhere: DataElsewhere,
}

/// Where a preview's claims start from.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum DataFrom {
    #[default]
    Empty,
    Snapshot,
}

/// What a preview in another cluster than the snapshots does.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum DataElsewhere {
    #[default]
    Refuse,
    Seed,
}

/// `status.data` of a Blueprint: its snapshot sets, newest first.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct DataStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<SnapshotSet>,
    /// The last refresh asked for and taken (the token of the `data-refresh` annotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refreshed: Option<String>,
    /// Why no snapshot can be taken, when none can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One snapshot of each of the Blueprint's claims, taken together.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSet {
    /// `20261207-031500`: when it was taken, which also names its VolumeSnapshots.
    pub id: String,
    pub taken_at: Time,
    /// Every snapshot of the set is ready to restore from.
    #[serde(default)]
    pub ready: bool,
    /// Why the set cannot be used (the first of its snapshots' errors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub claims: Vec<ClaimSnapshot>,
}

/// The snapshot of one claim, and what restoring it in another namespace needs.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSnapshot {
    /// The claim in the source namespace.
    pub claim: String,
    /// The VolumeSnapshot in the source namespace.
    pub volume_snapshot: String,
    /// The driver's handle of the snapshot, once it is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The smallest claim it restores into (`1Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_size: Option<String>,
}

/// `status.data` of a preview: which snapshot set its claims were restored from.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PreviewData {
    /// The set (`20261207-031500`); absent when the preview started empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// When that set was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<Time>,
    /// The claims restored from it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<String>,
    /// Why the preview started empty where its Blueprint restores snapshots (another cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
