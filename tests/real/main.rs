//! The preview path on the real tier (docs/real-tier.md): a node that runs containers, kube-proxy,
//! CoreDNS and Traefik, so that what a reviewer or an agent sees — the preview URL serving the pull
//! request's commit, wake on visit, logs, OOM kills and image pulls, data reset — is proven on
//! real pods behind a real ingress controller. `scripts/test` starts the real tier beside the fast
//! one; without it every test here fails, saying how to start it.

#[allow(dead_code, unused_imports)]
#[path = "../it/support/mod.rs"]
mod support;

mod tier;

mod chart;
mod data;
mod demo;
mod diagnosis;
mod gate;
mod gateway;
mod logs;
mod pool;
mod preview_tests;
mod probe;
mod serving;
mod snapshot_data;
mod sources;
mod teardown;
mod tls;
mod wake;

/// These tests run on the real tier.
const TIER: support::cluster::Tier = support::cluster::Tier::Real;
