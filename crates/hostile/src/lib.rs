//! Hostile-input testing (test builds only): the runner every `hostile` test module uses for its
//! properties and corpora, and generators of nasty input shared by several parsers.
//!
//! Each property runs `PROPTEST_CASES` cases (proptest's default of 256 unless set) and prints
//! `hostile: NAME: N cases`; each fixed corpus prints `hostile: NAME: N corpus inputs`.
//! `scripts/fuzz` runs every `hostile` module with many cases and adds those lines up. A failure
//! panics with the smallest failing input proptest could shrink it to; such an input belongs in
//! the module's corpus once it is fixed. Timing is never asserted: the bounds on work are
//! structural (a refusal above a documented limit, or an outcome that stays the same as the
//! input grows).

use std::cell::Cell;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Check `property` on values drawn from `strategy`.
pub fn check<S: Strategy>(
    name: &str,
    strategy: S,
    property: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    // Failures are reported with their shrunk input, never written to files beside the source:
    // a case worth keeping goes into the corpus by hand.
    let config = Config {
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let ran = Cell::new(0u64);
    let result = runner.run(&strategy, |value| {
        ran.set(ran.get() + 1);
        property(value)
    });
    match result {
        Ok(()) => println!("hostile: {name}: {} cases", ran.get()),
        Err(e) => panic!("{name}: {e}"),
    }
}

/// Run `check` on every input of a fixed corpus.
pub fn corpus<T>(name: &str, inputs: impl IntoIterator<Item = T>, mut check: impl FnMut(T)) {
    let mut n = 0u64;
    for input in inputs {
        check(input);
        n += 1;
    }
    println!("hostile: {name}: {n} corpus inputs");
}

/// Pieces of text that parsers trip over: look-alikes of `/preview` (fullwidth solidus, division
/// slash, zero-width joiner, right-to-left override), byte order marks, NUL and other controls,
/// Markdown fences and quotes, template braces, DNS trouble (dots, hyphens, punycode, upper case)
/// and characters whose byte length is not their char length.
pub const NASTY_ATOMS: &[&str] = &[
    "/preview",
    "/PREVIEW",
    "\u{ff0f}preview",
    "\u{2215}preview",
    "\u{2044}preview",
    "/prev\u{200d}iew",
    "\u{200b}/preview",
    "\u{202e}/preview",
    "\u{2066}/preview\u{2069}",
    "/\u{ff30}\u{ff32}\u{ff25}\u{ff36}\u{ff29}\u{ff25}\u{ff37}",
    "\u{feff}",
    "\0",
    "\u{7f}",
    "\r",
    "\n",
    "\r\n",
    "\t",
    " ",
    "\u{a0}",
    "\u{2028}",
    "    ",
    "```",
    "~~~",
    "> ",
    "stop",
    "extend",
    "2d",
    "99999999999h",
    "1e3s",
    "-1s",
    "0",
    "{{",
    "}}",
    "{",
    "}",
    "{{pr}}",
    "{{ host }}",
    "{{preview}}",
    ".",
    "-",
    "_",
    "xn--",
    "xn--bcher-kva",
    "ABC",
    "\u{e9}",
    "e\u{301}",
    "\u{130}",
    "\u{df}",
    "\u{212a}",
    "\u{1f3d6}",
    "\u{fffd}",
    "\u{10ffff}",
    "\"",
    "\\",
    "'",
    "`",
    ":",
    "#",
    "&a",
    "*a",
    "!!python/object:os.system",
    "<<",
    "---",
    "...",
];

/// Text made of [`NASTY_ATOMS`] and arbitrary characters, up to `max` pieces.
pub fn nasty_text(max: usize) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => proptest::sample::select(NASTY_ATOMS).prop_map(str::to_owned),
        1 => any::<String>(),
        1 => "[a-z0-9]{1,8}",
    ];
    proptest::collection::vec(piece, 0..max).prop_map(|pieces| pieces.concat())
}

/// Byte sequences that mean something to a JSON or YAML reader, and some that mean nothing to
/// any (invalid UTF-8, a lone surrogate's encoding).
pub const NASTY_BYTES: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"null",
    b"-0",
    b"1e999999",
    b"18446744073709551616",
    b"1.0e-400",
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xef\xbb\xbf",
    b"\0",
    b"\n",
    b"&a ",
    b"*a",
    b"<<: ",
    b"!!binary ",
    b"- ",
    b"---\n",
];

/// One change to a byte string: positions are taken modulo the length.
#[derive(Debug, Clone)]
pub enum Edit {
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Truncate(usize),
    Repeat(usize, usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let bytes = prop_oneof![
        proptest::sample::select(NASTY_BYTES).prop_map(<[u8]>::to_vec),
        proptest::collection::vec(any::<u8>(), 1..8),
    ];
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(at, x)| Edit::Flip(at, x)),
        (any::<usize>(), bytes).prop_map(|(at, b)| Edit::Insert(at, b)),
        (any::<usize>(), 1..64usize).prop_map(|(at, n)| Edit::Delete(at, n)),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), 1..32usize, 2..8usize).prop_map(|(at, n, k)| Edit::Repeat(at, n, k)),
    ]
}

/// `base` with the edits applied in turn.
pub fn apply(base: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = base.to_vec();
    for e in edits {
        let len = out.len();
        let at = |i: usize| if len == 0 { 0 } else { i % (len + 1) };
        match e {
            Edit::Flip(i, x) if len > 0 => out[i % len] ^= x,
            Edit::Flip(..) => {}
            Edit::Insert(i, bytes) => {
                let i = at(*i);
                out.splice(i..i, bytes.iter().copied());
            }
            Edit::Delete(i, n) => {
                let i = at(*i);
                out.drain(i..(i + n).min(len));
            }
            Edit::Truncate(i) => out.truncate(at(*i)),
            Edit::Repeat(i, n, k) => {
                let i = at(*i);
                let piece = out[i..(i + n).min(len)].to_vec();
                for _ in 1..*k {
                    out.splice(i..i, piece.iter().copied());
                }
            }
        }
    }
    out
}

/// `base` with one to four edits: near-valid input that gets past a parser's first checks.
pub fn mutated(base: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(edit(), 1..5).prop_map(move |edits| apply(&base, &edits))
}

/// The sizes inputs grow through in the tests that bound work by input size.
pub const SIZES: [usize; 4] = [1 << 10, 10 << 10, 100 << 10, 1 << 20];
