//! The edge listener's pages (the waking page, the gate's refusals): a title and a line on a
//! plain page, no script, no workload names: the hosts they are served on are public.

use maud::{DOCTYPE, Markup, html};

/// A page of the edge listener (the waking page, the gate's refusals): a title and a line, no
/// script; it reloads itself after `reload` seconds.
pub(crate) fn shell(title: &str, line: &str, reload: Option<u32>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(secs) = reload {
                    meta http-equiv="refresh" content=(secs);
                }
                title { (title) " · Sandcastle" }
                style { "body{font:18px/1.5 system-ui,sans-serif;max-width:36rem;margin:15vh auto;padding:0 1rem;color:#1b1f24}@media (prefers-color-scheme:dark){body{background:#0d1117;color:#e6edf3}}" }
            }
            body {
                main role="status" aria-live="polite" {
                    h1 { (title) }
                    p { (line) }
                }
            }
        }
    }
}
