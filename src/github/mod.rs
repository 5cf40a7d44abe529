//! Everything Sandcastle says to GitHub: the App client (`client`).

pub mod client;

pub use client::{ClientSettings, GitHubApp, GitHubError, Installation};
