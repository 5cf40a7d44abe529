//! What people read on GitHub: the sticky comment (`sticky`, from the preview as `view` sees
//! it, as values in `state`, with its hidden `marker`; Markdown made safe in `markdown`),
//! deployment status descriptions (`statuses`), replies to commands (`replies`) and why a
//! preview was removed, by whom and through what (`teardown`). Pure: text from values,
//! snapshot-tested.

pub mod checks;
mod markdown;
mod marker;
pub mod replies;
mod state;
pub mod statuses;
pub mod sticky;
pub mod teardown;
pub mod view;

pub use markdown::{ago, clock, expiry};
pub use marker::*;
pub use state::*;
pub use sticky::*;
