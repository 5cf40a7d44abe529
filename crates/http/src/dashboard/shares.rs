//! A preview's share links on its page: the live ones (who made them, what for, until when),
//! a form to mint one and a button to revoke each, for those who may write; and the page that
//! shows a new link, once (it is kept nowhere). Pure: HTML from the preview's view.

use jiff::Timestamp;
use maud::{Markup, html};

use super::render::{self, Who};
use sandcastle_agent::{PreviewView, ShareView};

/// The share links section of `p`'s page; the forms need `csrf` (the viewer may write).
pub fn section(p: &PreviewView, csrf: Option<&str>, now: Timestamp) -> Markup {
    let live = render::Action::Share.applies(p.phase);
    html! {
        section aria-labelledby="shares" {
            h2 id="shares" { "Share links" }
            p.muted {
                "A share link opens this preview without a GitHub account until it expires or is \
                 revoked, for previews only signed-in people may open."
            }
            @if p.shares.is_empty() { p.muted { "None." } } @else {
                div.wrap { table {
                    thead { tr {
                        th scope="col" { "Link" } th scope="col" { "For" } th scope="col" { "Made by" }
                        th scope="col" { "Expires" } @if csrf.is_some() { th scope="col" { "" } }
                    } }
                    tbody { @for s in &p.shares { tr {
                        td { code { (s.id) } }
                        td { (s.label.as_deref().unwrap_or("")) }
                        td { (s.created_by) }
                        td { (render::until(now, Some(&s.expires_at))) }
                        @if let Some(csrf) = csrf { td {
                            form.inline method="post" action=(format!("/previews/{}/unshare", p.name)) {
                                input type="hidden" name="csrf" value=(csrf);
                                input type="hidden" name="id" value=(s.id);
                                button type="submit" { "Revoke" }
                            }
                        } }
                    } } }
                } }
            }
            @if let (Some(csrf), true) = (csrf, live) {
                form.inline method="post" action=(format!("/previews/{}/share", p.name)) {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="expires" { "Valid for" }
                    input id="expires" name="duration" value="24h" size="4" pattern="([0-9]+[wdhmsWDHMS])+";
                    " " label for="label" { "for" }
                    input id="label" name="label" placeholder="the design review" maxlength="100";
                    " " button type="submit" { "Make a share link" }
                }
            }
        }
    }
}

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
