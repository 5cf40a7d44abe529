//! Shared test support: the control plane client and waits (`cluster`), and one test's whole
//! world — Sandcastle, the GitHub stand-in and a blueprint (`world`); the blueprint fixtures as
//! a user loads them (`fixtures`); what the pods of a namespace log (`logs`); `sandcastle serve` as a process (`process`); an ingress controller
//! that routes by the cluster's Ingress objects (`ingress`); other control planes for previews
//! placed elsewhere (`clusters`); the Gateway API's and Traefik's definitions installed
//! (`gateway`, `traefik`).

pub mod api;
pub mod audit;
pub mod browser;
pub mod cluster;
pub mod clusters;
pub mod fixtures;
pub mod gateway;
pub mod ingress;
pub mod logs;
pub mod mcp_clients;
pub mod process;
pub mod proxy;
pub mod traefik;
pub mod world;

pub use self::cluster::{TestNamespace, client, eventually, wait_for};
