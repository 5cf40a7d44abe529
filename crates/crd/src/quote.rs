//! A value quoted back in a message, cut to a short prefix: refusals name what was wrong without
//! echoing whatever size of input came (a 100 MB field is answered in a few hundred bytes).
//! Every message that quotes a caller's value goes through [`short`]; messages of other
//! libraries that may quote one (serde's `unknown field `…``) go through [`clip`]. No I/O.

use std::borrow::Cow;

/// The most characters of a value a message quotes.
pub const QUOTED_CHARS: usize = 64;
/// The most characters of a message from another library (which may quote a value) kept.
pub const MESSAGE_CHARS: usize = 300;

/// `text` as it is when it has at most `max` characters; else its first `max` and how long it
/// was (`abc… (40000 characters)`).
pub fn cut(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!(
            "{}… ({} characters)",
            &text[..end],
            text.chars().count()
        )),
    }
}

/// A caller's value as a message quotes it: [`cut`] to [`QUOTED_CHARS`].
pub fn short(value: &str) -> Cow<'_, str> {
    cut(value, QUOTED_CHARS)
}

/// A message written by another library, which may quote the caller's value somewhere in it:
/// every run of more than [`QUOTED_CHARS`] characters without a space is cut there (`…`), and
/// the whole to [`MESSAGE_CHARS`].
pub fn clip(message: &str) -> Cow<'_, str> {
    let long_run = message
        .split(char::is_whitespace)
        .any(|word| word.chars().nth(QUOTED_CHARS).is_some());
    if !long_run {
        return cut(message, MESSAGE_CHARS);
    }
    let mut out = String::new();
    let mut run = 0;
    for c in message.chars() {
        run = if c.is_whitespace() { 0 } else { run + 1 };
        if run <= QUOTED_CHARS {
            out.push(c);
        } else if run == QUOTED_CHARS + 1 {
            out.push('…');
        }
    }
    Cow::Owned(cut(&out, MESSAGE_CHARS).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_kept_and_long_ones_cut_saying_how_long() {
        assert_eq!(short("shop-pr-1"), "shop-pr-1");
        assert!(matches!(short("shop-pr-1"), Cow::Borrowed(_)));
        let long = "x".repeat(100_000);
        let shown = short(&long);
        assert_eq!(shown, format!("{}… (100000 characters)", "x".repeat(64)));
        assert_eq!(short(&"x".repeat(64)), "x".repeat(64));
        // Characters, not bytes: a cut never splits one.
        let wide = "é".repeat(70);
        assert_eq!(short(&wide), format!("{}… (70 characters)", "é".repeat(64)));
        assert_eq!(cut("abcdef", 3), "abc… (6 characters)");
        assert_eq!(cut("", 0), "");
    }

    #[test]
    fn other_libraries_messages_keep_their_words_and_lose_long_values() {
        let plain = "unknown field `force`, expected `name`";
        assert_eq!(clip(plain), plain);
        let key = "k".repeat(40_000);
        let message = format!("unknown field `{key}`, expected one of `name`, `ttl`");
        let clipped = clip(&message);
        assert_eq!(
            clipped,
            format!(
                "unknown field `{}… expected one of `name`, `ttl`",
                "k".repeat(63)
            )
        );
        let endless = "word ".repeat(1000);
        assert!(clip(&endless).chars().count() < MESSAGE_CHARS + 40);
    }
}
