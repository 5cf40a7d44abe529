//! The page that shows a share link just made, once (it is kept nowhere; the preview's page
//! lists its links without them, `render`). Pure: HTML from the answer.

use maud::html;

use super::render::{self, Who};
use sandcastle_agent::ShareView;

/// The page showing a link just made: the only time it is shown.
pub fn made(view: &ShareView, preview: &str, who: &Who) -> String {
    let text = format!(
        "It opens preview {preview} without signing in until {} (or until it is revoked). Copy it \
         now: it is not shown again.",
        view.expires_at
    );
    let body = html! {
        p { (text) }
        p { input id="share-url" readonly value=(view.url) size="80"; }
        p { a href=(format!("/previews/{preview}")) { "Back to " (preview) } }
    };
    render::layout("Share link", who, false, body).into_string()
}
