//! The `{{variable}}` templates of Blueprints (ingress hosts, image tags): parsing and rendering.
//! Callers decide which variables exist and how their values are cleaned for where they go.

use std::fmt;

/// Why a template cannot be rendered. Messages are written for the person who wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("`{{{{` at character {at} is never closed with `}}}}`")]
    Unclosed { at: usize },
    #[error("unknown variable {{{{{name}}}}}; use {}", Allowed(.allowed))]
    Unknown { name: String, allowed: Vec<String> },
    #[error("{{{{{name}}}}} has no value here: {why}")]
    NoValue { name: String, why: String },
}

struct Allowed<'a>(&'a [String]);

impl fmt::Display for Allowed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{{{{{name}}}}}")?;
        }
        Ok(())
    }
}

/// The value of one variable: text, or a reason it has none for this preview (for example
/// `{{pr}}` for a preview of a branch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Text(&'a str),
    Missing(&'a str),
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'t> {
    Literal(&'t str),
    Variable(&'t str),
}

/// Split a template into literals and `{{ name }}` variables (spaces inside braces are allowed).
fn parse(template: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    let mut pieces = Vec::new();
    let mut rest = template;
    let mut offset = 0;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            pieces.push(Piece::Literal(&rest[..open]));
        }
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(TemplateError::Unclosed { at: offset + open });
        };
        pieces.push(Piece::Variable(after[..close].trim()));
        let consumed = open + 2 + close + 2;
        offset += consumed;
        rest = &rest[consumed..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Literal(rest));
    }
    Ok(pieces)
}

/// Check that a template parses and names only `allowed` variables.
pub fn check(template: &str, allowed: &[&str]) -> Result<(), TemplateError> {
    for piece in parse(template)? {
        if let Piece::Variable(name) = piece
            && !allowed.contains(&name)
        {
            return Err(unknown(name, allowed));
        }
    }
    Ok(())
}

/// Whether the template uses the variable `name` (false when it does not parse).
pub fn uses(template: &str, name: &str) -> bool {
    parse(template).is_ok_and(|pieces| pieces.contains(&Piece::Variable(name)))
}

/// Render a template. `vars` lists every variable the template may use with its value; a name
/// outside the list is an error, and so is a listed variable without a value when it is used.
pub fn render(template: &str, vars: &[(&str, Value<'_>)]) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    for piece in parse(template)? {
        match piece {
            Piece::Literal(text) => out.push_str(text),
            Piece::Variable(name) => match vars.iter().find(|(n, _)| *n == name) {
                Some((_, Value::Text(text))) => out.push_str(text),
                Some((_, Value::Missing(why))) => {
                    return Err(TemplateError::NoValue {
                        name: name.to_owned(),
                        why: (*why).to_owned(),
                    });
                }
                None => {
                    let names: Vec<&str> = vars.iter().map(|(n, _)| *n).collect();
                    return Err(unknown(name, &names));
                }
            },
        }
    }
    Ok(out)
}

/// Go template words that stand alone between braces (`{{ end }}`): never variables.
const GO_WORDS: [&str; 7] = ["end", "else", "break", "continue", "nil", "true", "false"];

/// Render the variables of a text that may also hold another tool's templates (a Helm value
/// the chart passes to `tpl`: `{{ .Release.Name }}`, `{{ include "x" . }}`). Only a bare word
/// between braces (`{{sha}}`) is a variable, and an unknown one is an error as in [`render`];
/// anything else between braces, and Go's own words (`{{ end }}`), is kept as written.
pub fn render_beside(template: &str, vars: &[(&str, Value<'_>)]) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        // An unclosed `{{` is the other tool's to judge.
        let Some(close) = after.find("}}") else { break };
        out.push_str(&rest[..open]);
        let name = after[..close].trim();
        if is_bare_word(name) && !GO_WORDS.contains(&name) {
            out.push_str(&render(&format!("{{{{{name}}}}}"), vars)?);
        } else {
            out.push_str(&rest[open..open + 2 + close + 2]);
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_bare_word(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric())
}

fn unknown(name: &str, allowed: &[&str]) -> TemplateError {
    TemplateError::Unknown {
        name: name.to_owned(),
        allowed: allowed.iter().map(|s| (*s).to_owned()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VARS: &[(&str, Value<'_>)] = &[
        ("pr", Value::Text("42")),
        ("repo", Value::Text("shop")),
        ("branch", Value::Missing("no branch")),
    ];

    #[test]
    fn beside_another_tools_templates_only_bare_words_are_variables() {
        let table = [
            ("{{pr}}-{{ .Release.Name }}", "42-{{ .Release.Name }}"),
            (
                "{{- if .Values.x }}{{repo}}{{ end }}",
                "{{- if .Values.x }}shop{{ end }}",
            ),
            ("{{ include \"x\" . }}", "{{ include \"x\" . }}"),
            ("open {{ never closed", "open {{ never closed"),
        ];
        for (template, want) in table {
            assert_eq!(
                render_beside(template, VARS).as_deref(),
                Ok(want),
                "{template}"
            );
        }
        assert!(matches!(
            render_beside("{{shaa}}", VARS),
            Err(TemplateError::Unknown { .. })
        ));
        assert!(matches!(
            render_beside("{{branch}}", VARS),
            Err(TemplateError::NoValue { .. })
        ));
    }

    #[test]
    fn renders_variables_and_literals() {
        let table = [
            (
                "{{pr}}-{{repo}}.preview.example.com",
                "42-shop.preview.example.com",
            ),
            ("{{ pr }}", "42"),
            ("plain", "plain"),
            ("", ""),
            ("a}}b", "a}}b"),
            ("{{repo}}{{pr}}", "shop42"),
        ];
        for (template, want) in table {
            assert_eq!(render(template, VARS).unwrap(), want, "{template}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let table = [
            (
                "{{pull}}.example.com",
                "unknown variable {{pull}}; use {{pr}} {{repo}} {{branch}}",
            ),
            ("x{{pr", "`{{` at character 1 is never closed with `}}`"),
            ("{{branch}}", "{{branch}} has no value here: no branch"),
        ];
        for (template, want) in table {
            assert_eq!(render(template, VARS).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn check_and_uses_look_at_names_only() {
        assert!(check("{{pr}}-{{host}}", &["pr", "host"]).is_ok());
        assert!(matches!(
            check("{{pr}}-{{nope}}", &["pr"]),
            Err(TemplateError::Unknown { .. })
        ));
        assert!(uses("{{ host }}.x", "host"));
        assert!(!uses("{{pr}}.x", "host"));
        assert!(!uses("{{host", "host"));
    }
}

#[cfg(test)]
mod hostile {
    use proptest::prelude::*;

    use super::*;
    use sandcastle_hostile::{self as hostile, SIZES, nasty_text};

    const ALLOWED: &[&str] = &["pr", "repo", "host"];

    fn vars() -> Vec<(&'static str, Value<'static>)> {
        vec![
            ("pr", Value::Text("42")),
            ("repo", Value::Text("shop")),
            ("host", Value::Missing("no host here")),
        ]
    }

    /// Templates of literals, variables (known, unknown, spaced) and stray braces.
    fn templates() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("{{pr}}".to_owned()),
            Just("{{ repo }}".to_owned()),
            Just("{{host}}".to_owned()),
            Just("{{nope}}".to_owned()),
            Just("{{".to_owned()),
            Just("}}".to_owned()),
            Just("{".to_owned()),
            Just("}".to_owned()),
            nasty_text(3),
        ];
        prop_oneof![
            proptest::collection::vec(piece, 0..12).prop_map(|p| p.concat()),
            any::<String>(),
        ]
    }

    #[test]
    fn proptest_templates_render_or_name_what_is_wrong() {
        hostile::check(
            "template: any template renders or names what is wrong",
            templates(),
            |t| {
                let checked = check(&t, ALLOWED);
                let rendered = render(&t, &vars());
                match &checked {
                    Ok(()) => prop_assert!(
                        matches!(rendered, Ok(_) | Err(TemplateError::NoValue { .. })),
                        "{rendered:?}"
                    ),
                    // A variable without a value may come first.
                    Err(e) => prop_assert!(
                        rendered.as_ref().err() == Some(e)
                            || matches!(rendered, Err(TemplateError::NoValue { .. })),
                        "{e:?} {rendered:?}"
                    ),
                }
                match rendered {
                    Err(TemplateError::Unclosed { at }) => {
                        prop_assert!(t[at..].starts_with("{{"));
                        prop_assert!(!t[at + 2..].contains("}}"));
                    }
                    Err(TemplateError::Unknown { name, allowed }) => {
                        prop_assert!(!ALLOWED.contains(&name.as_str()));
                        prop_assert!(t.contains(&name));
                        prop_assert_eq!(allowed, ALLOWED);
                    }
                    Err(TemplateError::NoValue { name, .. }) => prop_assert_eq!(name, "host"),
                    Ok(out) => {
                        if !t.contains("{{") {
                            prop_assert_eq!(&out, &t);
                        }
                        prop_assert!(!uses(&t, "host"));
                    }
                }
                Ok(())
            },
        );
    }

    /// Parsing is one forward scan: each variable is found once and the search for its `}}`
    /// starts after its `{{`. At every size a template of N variables renders to N values,
    /// an unclosed `{{` is refused at its place, and a huge variable name is one unknown name.
    #[test]
    fn corpus_templates_of_growing_size() {
        hostile::corpus("template: templates of growing size", SIZES, |n| {
            let many = "{{pr}}".repeat(n / 6);
            assert_eq!(render(&many, &vars()).unwrap(), "42".repeat(n / 6));
            let opens = "{{".repeat(n / 2);
            assert_eq!(
                check(&opens, ALLOWED),
                Err(TemplateError::Unclosed { at: 0 })
            );
            let last_open = format!("{}{{{{pr", "{{pr}}".repeat(n / 6));
            assert_eq!(
                check(&last_open, ALLOWED),
                Err(TemplateError::Unclosed { at: n / 6 * 6 })
            );
            let long_name = format!("{{{{{}}}}}", "x".repeat(n));
            assert!(matches!(
                check(&long_name, ALLOWED),
                Err(TemplateError::Unknown { name, .. }) if name.len() == n
            ));
        });
    }

    #[test]
    fn corpus_nasty_templates() {
        let unknown = |name: &str| {
            Err(TemplateError::Unknown {
                name: name.to_owned(),
                allowed: ALLOWED.iter().map(|s| (*s).to_owned()).collect(),
            })
        };
        let ten_thousand = "{{pr}}.".repeat(10_000);
        let cases: Vec<(&str, Result<(), TemplateError>)> = vec![
            ("{{pr", Err(TemplateError::Unclosed { at: 0 })),
            ("{{pr}", Err(TemplateError::Unclosed { at: 0 })),
            ("{pr}}", Ok(())),
            ("{{{pr}}}", unknown("{pr")),
            ("{{ {{pr}} }}", unknown("{{pr")),
            ("}}{{pr}}", Ok(())),
            ("{{}}", unknown("")),
            ("{{   }}", unknown("")),
            ("{{PR}}", unknown("PR")),
            ("{{pr\u{200b}}}", unknown("pr\u{200b}")),
            ("{{\u{ff50}r}}", unknown("\u{ff50}r")),
            ("{{pr}}{{nope}}", unknown("nope")),
            ("a{{\0}}", unknown("\0")),
            (&ten_thousand, Ok(())),
        ];
        hostile::corpus("template: nasty templates", cases, |(t, want)| {
            assert_eq!(check(t, ALLOWED), want, "{t:?}");
        });
        assert_eq!(
            render(&ten_thousand, &vars()).unwrap(),
            "42.".repeat(10_000)
        );
    }
}
