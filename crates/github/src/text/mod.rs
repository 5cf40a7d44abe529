//! What people read on GitHub: the sticky comment (`sticky`, from the preview as `view` sees
//! it), deployment status descriptions (`statuses`), replies to commands (`replies`) and why a
//! preview was removed, by whom and through what (`teardown`). Pure: text from values,
//! snapshot-tested.

pub mod replies;
pub mod statuses;
pub mod sticky;
pub mod teardown;
pub mod view;

pub use sticky::*;
