//! Shared test support: the control plane client and waits (`cluster`).

pub mod cluster;

pub use self::cluster::{TestNamespace, client, eventually, wait_for};
