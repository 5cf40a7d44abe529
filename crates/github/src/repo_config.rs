//! `.github/sandcastle.yml`: what a repository may choose for its previews, read from the pull
//! request's **base** branch (never its head, which anyone opening a pull request controls). It
//! can choose among the Blueprints that already admit the repository, the trigger mode, and a
//! ttl within the Blueprint's `maxTtl`; nothing else (images, sources, isolation stay with the
//! operator). Pure: the caller fetches the file and reports errors on the pull request.
//!
//! ```yaml
//! blueprint: shop    # one of the Blueprints that allow this repository
//! trigger: comment   # auto | comment
//! ttl: 12h           # 30m, 4h, 2d…; at most the Blueprint's maxTtl
//! ```

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use sandcastle_crd::{BlueprintSpec, Trigger};
use sandcastle_domain::duration;

/// Where the file lives in the repository.
pub const PATH: &str = ".github/sandcastle.yml";

/// The repository's choices, checked against the Blueprints that admit it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoConfig {
    /// Only this Blueprint makes previews for the repository.
    pub blueprint: Option<String>,
    pub trigger: Option<Trigger>,
    pub ttl: Option<Duration>,
}

impl RepoConfig {
    /// Whether Blueprint `name` makes previews for the repository.
    pub fn selects(&self, name: &str) -> bool {
        self.blueprint.as_deref().is_none_or(|b| b == name)
    }

    /// The trigger mode for Blueprint `spec`.
    pub fn trigger(&self, spec: &BlueprintSpec) -> Trigger {
        self.trigger.unwrap_or(spec.trigger)
    }

    /// How long a preview of Blueprint `spec` lives after a deploy.
    pub fn ttl(&self, spec: &BlueprintSpec) -> Duration {
        self.ttl.unwrap_or(spec.ttl.get())
    }
}

/// Why the file cannot be used; the message is for the people who wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub message: String,
    /// 1-based, when the error has a place in the file.
    pub line: Option<u64>,
    pub column: Option<u64>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "line {l}, column {c}: {}", self.message),
            (Some(l), None) => write!(f, "line {l}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    #[serde(default)]
    blueprint: Option<Spanned<String>>,
    #[serde(default)]
    trigger: Option<Spanned<String>>,
    #[serde(default)]
    ttl: Option<Spanned<String>>,
}

fn at<T>(s: &Spanned<T>, message: String) -> ConfigError {
    let loc = s.referenced;
    ConfigError {
        message,
        line: Some(loc.line()).filter(|l| *l > 0),
        column: Some(loc.column()).filter(|c| *c > 0),
    }
}

/// Read the file's text and check it against `admitting`, the Blueprints (name and spec) that
/// admit the repository and base branch. An empty file (or one holding only comments) chooses
/// nothing.
pub fn read(text: &str, admitting: &[(&str, &BlueprintSpec)]) -> Result<RepoConfig, ConfigError> {
    if text
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#') || l.trim() == "---")
    {
        return Ok(RepoConfig::default());
    }
    let wire: Wire = serde_saphyr::from_str(text).map_err(|e| {
        let (line, column) = e
            .location()
            .map_or((None, None), |l| (Some(l.line()), Some(l.column())));
        ConfigError {
            message: syntax_message(&e.to_string()),
            line: line.filter(|l| *l > 0),
            column: column.filter(|c| *c > 0),
        }
    })?;

    let mut config = RepoConfig::default();
    if let Some(b) = &wire.blueprint {
        let names: Vec<&str> = admitting.iter().map(|(n, _)| *n).collect();
        if !names.contains(&b.value.as_str()) {
            let allowed = if names.is_empty() {
                "none does".to_owned()
            } else {
                format!("these do: {}", names.join(", "))
            };
            return Err(at(
                b,
                format!(
                    "blueprint `{}` does not allow this repository and branch ({allowed})",
                    b.value
                ),
            ));
        }
        config.blueprint = Some(b.value.clone());
    }
    if let Some(t) = &wire.trigger {
        config.trigger = Some(match t.value.to_ascii_lowercase().as_str() {
            "auto" => Trigger::Auto,
            "comment" => Trigger::Comment,
            other => {
                return Err(at(
                    t,
                    format!("trigger must be `auto` or `comment`, not `{other}`"),
                ));
            }
        });
    }
    if let Some(t) = &wire.ttl {
        let ttl = duration::parse(&t.value, true).map_err(|e| at(t, e.to_string()))?;
        if ttl.is_zero() {
            return Err(at(t, "ttl must be longer than zero".to_owned()));
        }
        for (name, spec) in admitting.iter().filter(|(n, _)| config.selects(n)) {
            let max = spec.max_ttl.get();
            if ttl > max {
                return Err(at(
                    t,
                    format!(
                        "ttl {} is longer than blueprint `{name}` allows (maxTtl {})",
                        duration::human(ttl),
                        duration::human(max)
                    ),
                ));
            }
        }
        config.ttl = Some(ttl);
    }
    Ok(config)
}

/// The parser's message without its own location prefix (the error carries it separately).
fn syntax_message(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default().trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    first
        .strip_prefix("line ")
        .and_then(|rest| rest.split_once(": "))
        .map_or(first, |(_, text)| text)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(trigger: &str, max_ttl: &str) -> BlueprintSpec {
        serde_json::from_value(serde_json::json!({
            "source": {"namespace": "staging"},
            "repositories": ["acme/shop"],
            "trigger": trigger,
            "maxTtl": max_ttl,
        }))
        .unwrap()
    }

    #[test]
    fn empty_files_choose_nothing() {
        let shop = spec("auto", "168h");
        for text in ["", "\n", "# nothing yet\n", "---\n# x\n"] {
            assert_eq!(read(text, &[("shop", &shop)]), Ok(RepoConfig::default()));
        }
    }

    #[test]
    fn choices_within_bounds() {
        let shop = spec("auto", "168h");
        let web = spec("auto", "24h");
        let all = [("shop", &shop), ("web", &web)];
        let c = read("blueprint: shop\ntrigger: comment\nttl: 2d\n", &all).unwrap();
        assert_eq!(c.blueprint.as_deref(), Some("shop"));
        assert_eq!(c.trigger, Some(Trigger::Comment));
        assert_eq!(c.ttl, Some(Duration::from_secs(2 * 86_400)));
        assert!(c.selects("shop") && !c.selects("web"));
        assert_eq!(c.trigger(&web), Trigger::Comment);
        assert_eq!(c.ttl(&web), Duration::from_secs(2 * 86_400));
        // Without choices, the Blueprint's own settings.
        let d = RepoConfig::default();
        assert!(d.selects("web"));
        assert_eq!(d.trigger(&spec("comment", "1h")), Trigger::Comment);
        assert_eq!(d.ttl(&web), Duration::from_secs(24 * 3600));
    }

    #[test]
    fn errors_name_the_line_and_what_is_wrong() {
        let shop = spec("auto", "168h");
        let web = spec("auto", "24h");
        let all = [("shop", &shop), ("web", &web)];
        let err = |text: &str| read(text, &all).unwrap_err().to_string();
        assert_eq!(
            err("trigger: comment\nblueprint: other\n"),
            "line 2, column 12: blueprint `other` does not allow this repository and branch (these do: shop, web)"
        );
        assert_eq!(
            err("trigger: always\n"),
            "line 1, column 10: trigger must be `auto` or `comment`, not `always`"
        );
        assert_eq!(
            err("ttl: 2d\n"),
            "line 1, column 6: ttl 2d is longer than blueprint `web` allows (maxTtl 1d)"
        );
        assert!(
            read("blueprint: shop\nttl: 2d\n", &all).is_ok(),
            "web is not chosen"
        );
        assert!(err("ttl: soon\n").starts_with("line 1, column 6: \"soon\" is not a duration"));
        assert!(err("ttl: 0\n").contains("longer than zero"));
        let unknown = read("blueprint: shop\nimages: evil\n", &all).unwrap_err();
        assert_eq!(unknown.line, Some(2), "{unknown}");
        assert!(unknown.message.contains("images"), "{unknown}");
        let syntax = read("blueprint: shop\ntrigger: [auto\n", &all).unwrap_err();
        assert!(syntax.line.is_some(), "{syntax}");
        let not_a_map = read("- shop\n", &all).unwrap_err();
        assert_eq!(not_a_map.line, Some(1), "{not_a_map}");
    }
}
