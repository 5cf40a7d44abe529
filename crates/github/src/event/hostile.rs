//! Hostile deliveries for [`super::parse`]: arbitrary bytes, real payloads with one field
//! replaced by a nasty JSON token or removed, bytes of real payloads mutated, a corpus of the
//! nastiest cases (deep nesting, huge numbers, invalid UTF-8, BOM, NUL) and bodies of growing
//! size. Every refusal is `invalid_json` (the body is not JSON serde_json reads) or
//! `invalid_payload` naming the field at fault.

use std::sync::LazyLock;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use sandcastle_hostile::{self as hostile, SIZES};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../fixtures/github/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Real (and two hand-written) deliveries: event name and body.
static DELIVERIES: LazyLock<Vec<(&'static str, Value)>> = LazyLock::new(|| {
    let read = |name: &str| serde_json::from_slice::<Value>(&fixture(name)).unwrap();
    vec![
        ("pull_request", read("pull_request.opened.json")),
        ("pull_request", read("pull_request.synchronize.json")),
        ("pull_request", read("pull_request.closed.merged.json")),
        ("issue_comment", read("issue_comment.created.json")),
        ("ping", read("ping.json")),
        (
            "check_run",
            json!({
                "action": "completed",
                "check_run": {
                    "id": 4, "head_sha": "eeb67d6e0f131d27102080b6bb50be2ddae28cc3",
                    "name": "ci / test", "status": "completed", "conclusion": "success",
                    "pull_requests": [{"number": 315, "id": 9}],
                },
                "repository": {"full_name": "acme/shop"},
                "installation": {"id": 5},
            }),
        ),
        (
            "installation_repositories",
            json!({
                "action": "added",
                "installation": {"id": 11},
                "repositories_added": [{"full_name": "acme/web"}],
                "repositories_removed": [],
            }),
        ),
    ]
});

/// Every place in each delivery, as serde_path_to_error writes paths (`a.b[0].c`).
static PLACES: LazyLock<Vec<Vec<Vec<Seg>>>> = LazyLock::new(|| {
    DELIVERIES
        .iter()
        .map(|(_, v)| {
            let mut out = Vec::new();
            places(v, &mut Vec::new(), &mut out);
            out
        })
        .collect()
});

#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn places(v: &Value, at: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    let children: Vec<(Seg, &Value)> = match v {
        Value::Object(map) => map.iter().map(|(k, v)| (Seg::Key(k.clone()), v)).collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (Seg::Index(i), v))
            .collect(),
        _ => Vec::new(),
    };
    for (seg, child) in children {
        at.push(seg);
        out.push(at.clone());
        places(child, at, out);
        at.pop();
    }
}

fn written(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Whether the error path `err` and the changed place `path` lie on one line from the root:
/// the error is at the change, above it (a field of a struct went missing) or inside it (the
/// new value is a container with something wrong inside).
fn on_one_line(err: &str, path: &str) -> bool {
    let leads = |a: &str, b: &str| {
        a == b || b.starts_with(&format!("{a}.")) || b.starts_with(&format!("{a}["))
    };
    err == "." || leads(err, path) || leads(path, err)
}

const HOLE: &str = "\u{1}HOLE\u{1}";

/// Raw JSON text put in place of a value: numbers serde_json cannot hold, wrong types, strings
/// no identifier accepts, look-alikes, invalid UTF-8 and escapes of lone surrogates.
fn tokens() -> impl Strategy<Value = Vec<u8>> {
    let fixed: Vec<Vec<u8>> = [
        &b"null"[..],
        b"true",
        b"-0",
        b"0",
        b"-1",
        b"1.5",
        b"1e999999",
        b"-1e999999",
        b"18446744073709551616",
        b"1.0e-400",
        b"2147483648",
        b"[]",
        b"{}",
        b"[{}]",
        b"\"\"",
        b"\"\\u0000\"",
        b"\"\\ud800\"",
        b"\"\xff\xfe\"",
        b"\"\xef\xbb\xbfopened\"",
        b"\"Acme/Shop\"",
        b"\"a/b/c\"",
        b"\"\xef\xbc\x8fpreview\"",
        b"\"eeb67d6e0f131d27102080b6bb50be2ddae28cc3\"",
        b"\"EEB67D6E0F131D27102080B6BB50BE2DDAE28CC3\"",
        b"\"gggggggggggggggggggggggggggggggggggggggg\"",
        b"\"2025-10-15T07:09:59Z\"",
        b"\"9999-12-31T23:59:59Z\"",
        b"\"2025-02-30T00:00:00Z\"",
        b"\"-009999-01-01T00:00:00Z\"",
        b"{\"login\":\"x\",\"full_name\":\"a/b\",\"id\":1,\"name\":\"n\",\"number\":1}",
    ]
    .iter()
    .map(|t| t.to_vec())
    .collect();
    prop_oneof![
        4 => proptest::sample::select(fixed),
        1 => (1..60usize).prop_map(|d| format!("{}{}", "[".repeat(d), "]".repeat(d)).into_bytes()),
        1 => "[a-z0-9/._-]{0,120}".prop_map(|s| format!("\"{s}\"").into_bytes()),
        1 => any::<String>().prop_map(|s| serde_json::to_vec(&s).unwrap()),
    ]
}

#[derive(Debug, Clone)]
enum Change {
    Replace(Vec<u8>),
    Remove,
}

/// The body of delivery `d` with the value at `path` changed.
fn changed(d: &Value, path: &[Seg], change: &Change) -> Vec<u8> {
    let mut v = d.clone();
    let (last, parent) = path.split_last().unwrap();
    let mut at = &mut v;
    for seg in parent {
        at = match seg {
            Seg::Key(k) => &mut at[k.as_str()],
            Seg::Index(i) => &mut at[*i],
        };
    }
    match (change, last) {
        (Change::Remove, Seg::Key(k)) => {
            at.as_object_mut().unwrap().remove(k);
        }
        (Change::Remove, Seg::Index(i)) => {
            at.as_array_mut().unwrap().remove(*i);
        }
        (Change::Replace(_), Seg::Key(k)) => at[k.as_str()] = json!(HOLE),
        (Change::Replace(_), Seg::Index(i)) => at[*i] = json!(HOLE),
    }
    let text = serde_json::to_vec(&v).unwrap();
    let Change::Replace(token) = change else {
        return text;
    };
    let hole = serde_json::to_vec(HOLE).unwrap();
    let i = text.windows(hole.len()).position(|w| w == hole).unwrap();
    [&text[..i], token, &text[i + hole.len()..]].concat()
}

fn is_json(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok()
}

const EVENTS: &[&str] = &[
    "pull_request",
    "issue_comment",
    "check_run",
    "installation",
    "installation_repositories",
    "ping",
    "push",
    "star",
    "",
    "pull_request\0",
];

/// What holds of every answer: a syntax refusal only for a body serde_json cannot read, and a
/// refusal message of bounded length whatever the body.
fn named(result: &Result<Event, ParseError>, body: &[u8]) -> Result<(), TestCaseError> {
    if let Err(e) = result {
        prop_assert!(matches!(e.code(), "invalid_json" | "invalid_payload"));
        prop_assert!(
            e.to_string().len() <= 2 * MESSAGE_LIMIT,
            "{} bytes",
            e.to_string().len()
        );
        if let ParseError::Syntax { .. } = e {
            prop_assert!(!is_json(body), "{e}");
        }
    }
    Ok(())
}

#[test]
fn proptest_arbitrary_bodies_are_read_or_refused_by_name() {
    let body = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..512),
        any::<String>().prop_map(String::into_bytes),
        "\\{\"action\":\"[a-z_]{0,20}\"[^}]{0,40}\\}?".prop_map(String::into_bytes),
    ];
    hostile::check(
        "event: arbitrary bodies are read or refused by name",
        (proptest::sample::select(EVENTS), body),
        |(event, body)| {
            let result = parse(event, &body);
            named(&result, &body)?;
            // An event or action Sandcastle does not use is never held to any shape.
            if !matches!(
                event,
                "pull_request"
                    | "issue_comment"
                    | "check_run"
                    | "installation"
                    | "installation_repositories"
                    | "ping"
            ) {
                prop_assert!(
                    matches!(
                        result,
                        Ok(Event::Ignored { .. }) | Err(ParseError::Syntax { .. })
                    ),
                    "{:?}",
                    result
                );
            }
            Ok(())
        },
    );
}

#[test]
fn proptest_one_changed_field_is_read_or_refused_at_its_path() {
    let strategy = (
        0..DELIVERIES.len(),
        any::<proptest::sample::Index>(),
        tokens(),
        0..8u8,
    );
    hostile::check(
        "event: one changed field is read or refused at its path",
        strategy,
        |(d, place, token, remove)| {
            let (event, value) = &DELIVERIES[d];
            let path = place.get(&PLACES[d]);
            let change = if remove == 0 {
                Change::Remove
            } else {
                Change::Replace(token)
            };
            let body = changed(value, path, &change);
            let result = parse(event, &body);
            named(&result, &body)?;
            if let Err(ParseError::Field { path: err, .. }) = &result {
                prop_assert!(is_json(&body), "{err}");
                prop_assert!(
                    on_one_line(err, &written(path)),
                    "{err} for a change at {}",
                    written(path)
                );
            }
            Ok(())
        },
    );
}

#[test]
fn proptest_mutated_bytes_of_real_deliveries() {
    let strategy = (0..DELIVERIES.len()).prop_flat_map(|d| {
        (
            Just(d),
            hostile::mutated(serde_json::to_vec(&DELIVERIES[d].1).unwrap()),
        )
    });
    hostile::check(
        "event: mutated bytes of real deliveries",
        strategy,
        |(d, body)| {
            let result = parse(DELIVERIES[d].0, &body);
            named(&result, &body)
        },
    );
}

/// A pull request delivery with `extra` spliced in as its first member after `action`.
fn opened_with(extra: &str) -> Vec<u8> {
    let body = fixture("pull_request.opened.json");
    let text = std::str::from_utf8(&body).unwrap();
    let at = text.find("\"number\"").unwrap();
    format!("{}{extra},{}", &text[..at], &text[at..]).into_bytes()
}

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

fn syntax_message(result: Result<Event, ParseError>) -> String {
    match result {
        Err(ParseError::Syntax { message, .. }) => message,
        other => panic!("expected a syntax refusal, got {other:?}"),
    }
}

fn field_error(result: Result<Event, ParseError>) -> (String, String) {
    match result {
        Err(ParseError::Field { path, message }) => (path, message),
        other => panic!("expected a field refusal, got {other:?}"),
    }
}

/// serde_json's recursion limit (128) refuses deep nesting wherever a value is built; where a
/// value is skipped it is skipped without recursion. Either way, no stack overflow.
#[test]
fn corpus_deep_nesting() {
    // A whole body nested 10,000 deep has no action: ignored (skipped without recursion),
    // except by `ping`, which reads its body and finds no `zen`.
    hostile::corpus("event: nesting 10,000 deep", EVENTS, |event| {
        let body = nested(10_000).into_bytes();
        match (*event, parse(event, &body)) {
            ("ping", Err(ParseError::Field { .. })) => {}
            (e, Ok(Event::Ignored { action: None, .. })) if e != "ping" => {}
            (_, other) => panic!("{event}: {other:?}"),
        }
    });
    let deep = nested(10_000);
    let skipped = parse("pull_request", &opened_with(&format!("\"deep\":{deep}")));
    assert!(matches!(skipped, Ok(Event::PullRequest(_))), "{skipped:?}");
    let action = format!("{{\"action\":{deep}}}");
    assert_eq!(
        syntax_message(parse("star", action.as_bytes())),
        "recursion limit exceeded"
    );
    let zen = format!("{{\"zen\":{deep},\"hook_id\":1}}");
    let (path, _) = field_error(parse("ping", zen.as_bytes()));
    assert_eq!(path, "zen");
    // Just under and just over the limit (the enclosing object counts: 127 levels in all), in
    // the one place a whole value is built.
    let under = format!("{{\"action\":{}}}", nested(126));
    assert!(matches!(
        parse("star", under.as_bytes()),
        Ok(Event::Ignored { action: None, .. })
    ));
    let over = format!("{{\"action\":{}}}", nested(127));
    assert_eq!(
        syntax_message(parse("star", over.as_bytes())),
        "recursion limit exceeded"
    );
}

#[test]
fn corpus_huge_numbers_in_id_fields() {
    let comment =
        || serde_json::from_slice::<Value>(&fixture("issue_comment.created.json")).unwrap();
    let places: &[(&str, &[&str])] = &[
        ("issue_comment", &["comment", "id"]),
        ("issue_comment", &["issue", "number"]),
        ("ping", &["hook_id"]),
    ];
    let numbers: &[&str] = &[
        "1e999999",
        "18446744073709551616",
        "-0",
        "1.0e-400",
        "-1",
        "0",
        "2147483648",
    ];
    let cases: Vec<(&str, &[&str], &str)> = places
        .iter()
        .flat_map(|(e, p)| numbers.iter().map(move |n| (*e, *p, *n)))
        .collect();
    hostile::corpus(
        "event: huge numbers in id fields",
        cases,
        |(event, place, number)| {
            let base = if event == "ping" {
                json!({"zen": "z", "hook_id": 1})
            } else {
                comment()
            };
            let path: Vec<Seg> = place.iter().map(|k| Seg::Key((*k).to_owned())).collect();
            let body = changed(&base, &path, &Change::Replace(number.as_bytes().to_vec()));
            let result = parse(event, &body);
            let want = place.join(".");
            match (number, &result) {
                // Out of range for an f64: serde_json refuses it as it reads it.
                ("1e999999", Err(ParseError::Syntax { message, .. })) => {
                    assert_eq!(message, "number out of range");
                }
                // A positive integer up to i32::MAX for a pull request number, any u64 for an id.
                ("0", Ok(_)) if want != "issue.number" => {}
                ("2147483648", Ok(_)) if want != "issue.number" => {}
                (_, Err(ParseError::Field { path, .. })) => assert_eq!(path, &want, "{number}"),
                _ => panic!("{event} {want} = {number}: {result:?}"),
            }
        },
    );
}

#[test]
fn corpus_invalid_text() {
    let comment = fixture("issue_comment.created.json");
    let text = std::str::from_utf8(&comment).unwrap();
    let with_body = |raw: &[u8]| {
        let at = text
            .find("\"body\": \"/build\"")
            .expect("the comment's body");
        [
            &comment[..at],
            b"\"body\": \"",
            raw,
            b"\"",
            &comment[at + 16..],
        ]
        .concat()
    };
    // Refused: invalid UTF-8, a raw control character, a lone surrogate.
    let refused: Vec<(&[u8], &str)> = vec![
        (b"\xff/preview", "invalid unicode code point"),
        (b"/preview\xc3", "invalid unicode code point"),
        (b"\xed\xa0\x80", "invalid unicode code point"),
        (
            b"/preview\0stop",
            "control character (\\u0000-\\u001F) found while parsing a string",
        ),
        (b"\\ud800", "unexpected end of hex escape"),
        (b"\\ud800x", "unexpected end of hex escape"),
        (b"\\udc00", "lone leading surrogate in hex escape"),
    ];
    hostile::corpus(
        "event: invalid text in comment bodies",
        refused,
        |(raw, want)| {
            assert_eq!(
                syntax_message(parse("issue_comment", &with_body(raw))),
                want,
                "{raw:?}"
            );
        },
    );
    // Read: escaped NUL, look-alikes of the keyword, a right-to-left override. None of them
    // makes a command.
    let read: Vec<(&[u8], &str)> = vec![
        (b"/preview\\u0000stop", "/preview\0stop"),
        (b"\xef\xbc\x8fpreview", "\u{ff0f}preview"),
        (b"\\u202e/preview", "\u{202e}/preview"),
        (b"\\ufeff/preview", "\u{feff}/preview"),
        (b"/pre\\u200dview", "/pre\u{200d}view"),
    ];
    hostile::corpus("event: look-alike comment bodies", read, |(raw, want)| {
        let Ok(Event::IssueComment(c)) = parse("issue_comment", &with_body(raw)) else {
            panic!("{raw:?} not read");
        };
        assert_eq!(c.body, want);
        assert_eq!(crate::command_parser::parse(&c.body), None, "{want:?}");
    });
    // A byte order mark before the JSON is not JSON.
    let bom = [&b"\xef\xbb\xbf"[..], &comment].concat();
    assert_eq!(
        syntax_message(parse("issue_comment", &bom)),
        "expected value"
    );
    // Invalid UTF-8 in a string Sandcastle skips is skipped, as serde_json skips it.
    let raw = opened_with("\"junk\":\"x\"");
    let at = raw.windows(3).position(|w| w == b"\"x\"").unwrap();
    let invalid = [&raw[..at + 1], b"\xff\xfe", &raw[at + 2..]].concat();
    assert!(matches!(
        parse("pull_request", &invalid),
        Ok(Event::PullRequest(_))
    ));
}

/// At every size the answer is the same: nesting is refused at depth 128 where a value is built
/// and skipped where none is, long strings and arrays are read in one pass, and a refusal's
/// message stays within [`MESSAGE_LIMIT`] however long the value it is about.
#[test]
fn corpus_bodies_of_growing_size() {
    hostile::corpus("event: bodies of growing size", SIZES, |n| {
        let action = format!("{{\"action\":{}}}", nested(n / 2));
        assert_eq!(
            syntax_message(parse("star", action.as_bytes())),
            "recursion limit exceeded"
        );
        let skipped = opened_with(&format!("\"deep\":{}", nested(n / 2)));
        assert!(matches!(
            parse("pull_request", &skipped),
            Ok(Event::PullRequest(_))
        ));
        let zen = "z".repeat(n);
        let ping = format!("{{\"zen\":\"{zen}\",\"hook_id\":1}}");
        assert!(
            matches!(parse("ping", ping.as_bytes()), Ok(Event::Ping { zen: z, .. }) if z == zen)
        );
        let array = format!("\"many\":[{}0]", "0,".repeat(n / 2));
        assert!(matches!(
            parse("pull_request", &opened_with(&array)),
            Ok(Event::PullRequest(_))
        ));
        let digits = format!("{{\"zen\":\"z\",\"hook_id\":{}}}", "9".repeat(n));
        assert_eq!(
            syntax_message(parse("ping", digits.as_bytes())),
            "number out of range"
        );
        let repo = format!(
            "{{\"action\":\"added\",\"installation\":{{\"id\":1}},\"repositories_added\":[{{\"full_name\":\"{}\"}}]}}",
            "x".repeat(n)
        );
        let err = parse("installation_repositories", repo.as_bytes()).unwrap_err();
        assert!(
            err.to_string().len() <= 2 * MESSAGE_LIMIT,
            "{} bytes",
            err.to_string().len()
        );
        let (path, _) = field_error(Err(err));
        assert_eq!(path, "repositories_added[0].full_name");
    });
}
