//! Everything GitHub says to Sandcastle and Sandcastle says back, as pure functions: webhook
//! signatures, events parsed into Sandcastle's own types, comment commands, and the text people
//! read (sticky comment, deployment statuses, replies).

pub mod commands;
pub mod event;
pub mod render;
pub mod verify;
