//! What people read on GitHub: the sticky comment (`sticky`, from the preview as `view` sees
//! it), deployment status descriptions (`statuses`) and replies to commands (`replies`). Pure:
//! text from values, snapshot-tested.

pub mod replies;
pub mod statuses;
pub mod sticky;
pub mod view;

pub use sticky::*;
