//! Everything Sandcastle says to GitHub: the App client (`client`) and a local stand-in for GitHub's
//! REST API and webhooks (`standin`) that tests and `sandcastle demo` run against.

pub mod client;
pub mod standin;

pub use client::{ClientSettings, GitHubApp, GitHubError, Installation};
