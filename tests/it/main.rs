//! Integration tests against the real local control plane (see `scripts/kube-harness`) and the
//! GitHub stand-in. One test binary with a module per area keeps linking cheap.

mod support;

/// These tests run on the fast tier (kwok's fake nodes).
const TIER: support::cluster::Tier = support::cluster::Tier::Fast;

mod adoption;
mod api;
mod api_answers;
mod api_guard;
mod api_observe;
mod attribution;

mod bare_workloads;
mod browser;
mod chaos;
mod chart;
mod cli;
mod clusters;
mod comebacks;
mod commands;
mod conversation;
mod cost;
mod crds;
mod dashboard;
mod data;
mod demo;
mod diagnosis;
mod discovery;
mod docs;
mod egress;
mod failures;
mod fidelity;
mod gate;
mod gateway;
mod github_calls;
mod github_credentials;
mod guardrails_lifecycle;
mod harness;
mod hygiene;
mod keep_alive;
mod lifecycle;
mod logs;
mod mcp;
mod mcp_client_setups;
mod mcp_guard;
mod metrics;
mod names;
mod nodes;
mod paths;
mod pool;
mod preview_tests;
mod preview_tls;
mod preview_token_fence;
mod probe;
mod rollout_line;
mod schedule;
mod schemathesis;
mod serve;
mod server_side_apply;
mod slow_github;
mod sources;
mod stolen_token;
mod supersede;
mod wait_after_write;
mod wake;
mod webhook;
