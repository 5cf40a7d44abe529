//! Everything GitHub says to Sandcastle and Sandcastle says back: webhook signatures, events
//! parsed into Sandcastle's own types and turned into intents, comment commands and who may run
//! them, a repository's `.github/sandcastle.yml`, the text people read (sticky comment,
//! deployment statuses, replies) and the App client.

pub mod changed_files;
pub mod client;
pub mod command_parser;
pub mod config_file;
pub mod event;
pub mod manifest;
pub mod permissions;
pub mod repo_config;
pub mod text;
pub mod triggers;
pub mod user;
pub mod verify;
