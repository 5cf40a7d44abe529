//! The hidden line every sticky comment carries, `<!-- sandcastle {json} -->`: how Sandcastle
//! finds its comment again and how agents read a preview's state from the pull request.

use serde::{Deserialize, Serialize};

use super::state::{StickyState, StickyView};
use sandcastle_crd::Phase;
use sandcastle_domain::Sha;

/// Every sticky comment carries one line `<!-- sandcastle {json} -->`; this is how it starts.
pub const MARKER_PREFIX: &str = "<!-- sandcastle ";

const MARKER_SUFFIX: &str = " -->";

/// The hidden line's content: enough for an agent to act without scraping the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerData {
    pub preview: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub sha: Option<Sha>,
    pub phase: Phase,
    /// [`StickyState::code`].
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub api: Option<String>,
}

/// The marker content for a view. A removed preview has no URL.
pub fn marker_data(view: &StickyView) -> MarkerData {
    let removed = matches!(view.state, StickyState::Removed { .. });
    MarkerData {
        preview: view.preview.clone(),
        namespace: view.namespace.clone(),
        url: view.url.clone().filter(|_| !removed),
        sha: view.sha.clone(),
        phase: view.state.phase(),
        state: Some(view.state.code().to_owned()),
        api: view.api_url.clone(),
    }
}

/// `<!-- sandcastle {json} -->`, with `<` and `>` escaped inside the JSON so that no value can
/// close the HTML comment early.
pub fn marker_line(data: &MarkerData) -> String {
    let json = serde_json::to_string(data).expect("marker data always serializes");
    // `<` and `>` can only occur inside JSON strings, where the escapes mean the same.
    let json = json.replace('<', "\\u003c").replace('>', "\\u003e");
    format!("{MARKER_PREFIX}{json}{MARKER_SUFFIX}")
}

/// Find Sandcastle's marker in a comment body. Edits to the visible part do not matter; `None`
/// when the marker is gone or damaged. The **last** intact marker wins, because Sandcastle writes
/// its own as the last line. Callers should also check the comment's author is the App, since
/// anyone can paste a marker into a comment.
pub fn parse_marker(body: &str) -> Option<MarkerData> {
    let mut found = None;
    let mut rest = body;
    while let Some(start) = rest.find(MARKER_PREFIX) {
        rest = &rest[start + MARKER_PREFIX.len()..];
        if let Some(end) = rest.find("-->")
            && let Ok(data) = serde_json::from_str(rest[..end].trim())
        {
            found = Some(data);
        }
    }
    found
}
