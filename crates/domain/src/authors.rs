//! Which class a pull request's author falls in under a Blueprint's `authors` rules, and the
//! trigger, cap and times that class gets. Pure: the webhook, the commands and the controller
//! decide with these.

use std::time::Duration;

use sandcastle_crd::{AuthorClass, AuthorPolicy, BlueprintSpec, ClassTrigger, Trigger};

/// GitHub's `author_association` of a pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Association {
    Owner,
    Member,
    Collaborator,
    /// Anything else GitHub says (`CONTRIBUTOR`, `FIRST_TIME_CONTRIBUTOR`, `NONE`, ...).
    Other,
}

impl Association {
    /// GitHub's word for it (`Other` as `NONE`): [`Association::parse`] reads it back.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Owner => "OWNER",
            Self::Member => "MEMBER",
            Self::Collaborator => "COLLABORATOR",
            Self::Other => "NONE",
        }
    }

    pub fn parse(s: &str) -> Self {
        match s {
            "OWNER" => Self::Owner,
            "MEMBER" => Self::Member,
            "COLLABORATOR" => Self::Collaborator,
            _ => Self::Other,
        }
    }
}

/// A pull request's author as GitHub describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Author<'a> {
    pub login: &'a str,
    /// GitHub's `user.type` is `Bot`.
    pub is_bot: bool,
    pub association: Association,
    /// The pull request's head branch lives in the base repository itself (not a fork): its
    /// author could push there, so has write access, whatever `author_association` says.
    pub same_repository: bool,
}

/// The dependency bots GitHub users meet everywhere.
const DEPENDENCY_BOTS: [&str; 2] = ["dependabot[bot]", "renovate[bot]"];

/// Whether `login` is one of `names` (logins, or App slugs that stand for `slug[bot]`).
fn named(names: &[String], login: &str) -> bool {
    names.iter().any(|n| {
        let n = n.to_ascii_lowercase();
        n == login || format!("{n}[bot]") == login
    })
}

/// The class of a pull request by `author` carrying `labels`: a coding agent first (listed, or
/// labelled), then a dependency bot, then a member — whose head branch lives in the repository
/// itself (only someone with write access can push it there), or by association — else an
/// outside contributor.
pub fn classify(policy: &AuthorPolicy, author: &Author<'_>, labels: &[String]) -> AuthorClass {
    let login = author.login.to_ascii_lowercase();
    if named(&policy.agent_logins, &login) || labels.contains(&policy.agent_label) {
        return AuthorClass::Agent;
    }
    if (author.is_bot && DEPENDENCY_BOTS.contains(&login.as_str()))
        || named(&policy.bot_logins, &login)
    {
        return AuthorClass::DependencyBot;
    }
    if author.same_repository {
        return AuthorClass::Member;
    }
    match author.association {
        Association::Owner | Association::Member | Association::Collaborator => AuthorClass::Member,
        Association::Other => AuthorClass::OutsideContributor,
    }
}

/// The trigger of `class`'s pull requests: its own, or `blueprint`'s (the Blueprint's, or what
/// the repository's configuration chose).
pub fn trigger(
    spec: &BlueprintSpec,
    class: Option<AuthorClass>,
    blueprint: Trigger,
) -> ClassTrigger {
    let own = class.and_then(|c| spec.authors.rule(c).trigger);
    own.or_else(|| class.and_then(builtin_trigger))
        .unwrap_or(match blueprint {
            Trigger::Auto => ClassTrigger::Auto,
            Trigger::Comment => ClassTrigger::Comment,
        })
}

/// The TTL of `class`'s previews: its own, else `otherwise`.
pub fn ttl(spec: &BlueprintSpec, class: Option<AuthorClass>, otherwise: Duration) -> Duration {
    class
        .and_then(|c| spec.authors.rule(c).ttl)
        .map_or(otherwise, |t| t.get())
}

/// The idle stop of coding agents' previews when their rule leaves it out: the Blueprint's, cut
/// to this (`docs/lifecycle.md` shows the simulated week it was chosen from).
pub const AGENT_IDLE: Duration = Duration::from_secs(30 * 60);

/// The trigger of `class` when its rule leaves it out and the Blueprint deploys on its own:
/// dependency bots' pull requests deploy on `/preview` (most are merged unseen).
fn builtin_trigger(class: AuthorClass) -> Option<ClassTrigger> {
    (class == AuthorClass::DependencyBot).then_some(ClassTrigger::Comment)
}

/// The idle stop of `class`'s previews (`0`: never): its own, else the Blueprint's (for coding
/// agents at most [`AGENT_IDLE`], unless the Blueprint never stops previews).
pub fn stop_after_idle(spec: &BlueprintSpec, class: Option<AuthorClass>) -> Duration {
    if let Some(own) = class.and_then(|c| spec.authors.rule(c).stop_after_idle) {
        return own.get();
    }
    let blueprint = spec.stop_after_idle.get();
    match class {
        Some(AuthorClass::Agent) if !blueprint.is_zero() => blueprint.min(AGENT_IDLE),
        _ => blueprint,
    }
}

/// How many previews of `class` may hold a slot at once, if its rule caps them.
pub fn cap(spec: &BlueprintSpec, class: Option<AuthorClass>) -> Option<u32> {
    class.and_then(|c| spec.authors.rule(c).max_previews)
}

/// The rule that applied, in words, for the sticky comment: `coding agents (authors.agents):
/// at most 2 at once, TTL 8h, stops after 1h idle`. `None` without a class.
pub fn rule_line(spec: &BlueprintSpec, class: Option<AuthorClass>) -> Option<String> {
    let class = class?;
    let rule = spec.authors.rule(class);
    let mut parts = Vec::new();
    let trigger = rule.trigger.or_else(|| builtin_trigger(class));
    if let Some(t) = trigger {
        parts.push(match t {
            ClassTrigger::Auto => "deploys on its own".to_owned(),
            ClassTrigger::Comment => "deploys on /preview".to_owned(),
            ClassTrigger::Off => "not deployed".to_owned(),
        });
    }
    if let Some(n) = rule.max_previews {
        parts.push(format!("at most {n} at once"));
    }
    if let Some(t) = rule.ttl {
        parts.push(format!("TTL {}", super::duration::go_style(t.get())));
    }
    let idle = stop_after_idle(spec, Some(class));
    if rule.stop_after_idle.is_some() || idle != spec.stop_after_idle.get() {
        parts.push(match idle {
            d if d.is_zero() => "never stopped when idle".to_owned(),
            d => format!("stops after {} idle", super::duration::go_style(d)),
        });
    }
    let rules = if parts.is_empty() {
        "the Blueprint's own rules".to_owned()
    } else {
        parts.join(", ")
    };
    Some(format!(
        "{} (authors.{}): {rules}",
        class.words(),
        class.field()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(extra: serde_json::Value) -> AuthorPolicy {
        serde_json::from_value(extra).unwrap()
    }

    fn author<'a>(login: &'a str, is_bot: bool, association: &str) -> Author<'a> {
        Author {
            login,
            is_bot,
            association: Association::parse(association),
            same_repository: false,
        }
    }

    #[test]
    fn a_same_repository_pull_requests_author_is_a_member() {
        let p = policy(serde_json::json!({"agentLogins": ["copilot"]}));
        let here = |a: Author<'static>| Author {
            same_repository: true,
            ..a
        };
        use AuthorClass::*;
        // GitHub says CONTRIBUTOR (or NONE) of people whose write access comes through a team,
        // or who were never made collaborators by name: the branch they pushed says more.
        for association in ["CONTRIBUTOR", "NONE", "FIRST_TIME_CONTRIBUTOR"] {
            assert_eq!(
                classify(&p, &here(author("maria", false, association)), &[]),
                Member,
                "{association}"
            );
            assert_eq!(
                classify(&p, &author("eve", false, association), &[]),
                OutsideContributor,
                "a fork's author is judged by association"
            );
        }
        // Bots and agents stay what they are, wherever their branch lives.
        assert_eq!(
            classify(&p, &here(author("dependabot[bot]", true, "NONE")), &[]),
            DependencyBot
        );
        assert_eq!(
            classify(&p, &here(author("copilot", true, "NONE")), &[]),
            Agent
        );
    }

    #[test]
    fn authors_fall_in_one_class_agents_first() {
        let p = policy(serde_json::json!({
            "agentLogins": ["devin-ai-integration", "Copilot"],
            "botLogins": ["acme-updater"],
        }));
        let class = |a: Author<'_>, labels: &[&str]| {
            let labels: Vec<String> = labels.iter().map(|l| (*l).to_owned()).collect();
            classify(&p, &a, &labels)
        };
        use AuthorClass::*;
        assert_eq!(class(author("maria", false, "MEMBER"), &[]), Member);
        assert_eq!(class(author("octocat", false, "OWNER"), &[]), Member);
        assert_eq!(class(author("sam", false, "COLLABORATOR"), &[]), Member);
        assert_eq!(
            class(author("eve", false, "FIRST_TIME_CONTRIBUTOR"), &[]),
            OutsideContributor
        );
        assert_eq!(
            class(author("dependabot[bot]", true, "NONE"), &[]),
            DependencyBot
        );
        assert_eq!(
            class(author("renovate[bot]", true, "NONE"), &[]),
            DependencyBot
        );
        assert_eq!(
            class(author("dependabot[bot]", false, "NONE"), &[]),
            OutsideContributor,
            "a user account that only looks like the bot"
        );
        assert_eq!(
            class(author("acme-updater", false, "MEMBER"), &[]),
            DependencyBot
        );
        assert_eq!(
            class(author("devin-ai-integration[bot]", true, "NONE"), &[]),
            Agent,
            "by App slug"
        );
        assert_eq!(
            class(author("copilot", true, "NONE"), &[]),
            Agent,
            "case does not matter"
        );
        assert_eq!(
            class(author("maria", false, "MEMBER"), &["agent"]),
            Agent,
            "by label"
        );
        assert_eq!(
            class(author("dependabot[bot]", true, "NONE"), &["agent"]),
            Agent
        );
    }

    fn spec(authors: serde_json::Value) -> BlueprintSpec {
        serde_json::from_value(serde_json::json!({
            "source": {"namespace": "shop-staging"},
            "repositories": ["acme/shop"],
            "ttl": "24h",
            "stopAfterIdle": "4h",
            "authors": authors,
        }))
        .unwrap()
    }

    #[test]
    fn bots_wait_for_a_command_and_agents_stop_sooner_unless_told_otherwise() {
        let s = spec(serde_json::json!({}));
        let bots = Some(AuthorClass::DependencyBot);
        let agents = Some(AuthorClass::Agent);
        let members = Some(AuthorClass::Member);
        assert_eq!(trigger(&s, bots, Trigger::Auto), ClassTrigger::Comment);
        assert_eq!(trigger(&s, members, Trigger::Auto), ClassTrigger::Auto);
        assert_eq!(stop_after_idle(&s, agents), AGENT_IDLE);
        assert_eq!(stop_after_idle(&s, members), Duration::from_secs(4 * 3600));
        assert_eq!(
            rule_line(&s, agents).unwrap(),
            "coding agents (authors.agents): stops after 30m idle"
        );
        assert_eq!(
            rule_line(&s, bots).unwrap(),
            "dependency bots (authors.dependencyBots): deploys on /preview"
        );
        assert_eq!(
            rule_line(&s, members).unwrap(),
            "members (authors.members): the Blueprint's own rules"
        );
        // A Blueprint that never stops previews never stops agents' either; a shorter idle stop
        // is theirs too; a class's own rule wins.
        let mut never = s.clone();
        never.stop_after_idle = sandcastle_crd::GoDuration::from_secs(0);
        assert_eq!(stop_after_idle(&never, agents), Duration::ZERO);
        let mut short = s;
        short.stop_after_idle = sandcastle_crd::GoDuration::from_secs(600);
        assert_eq!(stop_after_idle(&short, agents), Duration::from_secs(600));
        let own = spec(
            serde_json::json!({"agents": {"stopAfterIdle": "2h"}, "dependencyBots": {"trigger": "auto"}}),
        );
        assert_eq!(stop_after_idle(&own, agents), Duration::from_secs(7200));
        assert_eq!(trigger(&own, bots, Trigger::Auto), ClassTrigger::Auto);
    }

    #[test]
    fn a_class_rule_overrides_what_it_sets_and_nothing_else() {
        let s = spec(serde_json::json!({
            "dependencyBots": {"trigger": "off"},
            "agents": {"maxPreviews": 2, "ttl": "8h", "stopAfterIdle": "1h"},
        }));
        let bots = Some(AuthorClass::DependencyBot);
        let agents = Some(AuthorClass::Agent);
        let day = Duration::from_secs(24 * 3600);
        assert_eq!(trigger(&s, bots, Trigger::Auto), ClassTrigger::Off);
        assert_eq!(trigger(&s, agents, Trigger::Comment), ClassTrigger::Comment);
        assert_eq!(trigger(&s, None, Trigger::Auto), ClassTrigger::Auto);
        assert_eq!(ttl(&s, agents, day), Duration::from_secs(8 * 3600));
        assert_eq!(ttl(&s, bots, day), day);
        assert_eq!(stop_after_idle(&s, agents), Duration::from_secs(3600));
        assert_eq!(
            stop_after_idle(&s, Some(AuthorClass::Member)),
            Duration::from_secs(4 * 3600)
        );
        assert_eq!(
            (cap(&s, agents), cap(&s, bots), cap(&s, None)),
            (Some(2), None, None)
        );
        assert_eq!(
            rule_line(&s, agents).as_deref(),
            Some("coding agents (authors.agents): at most 2 at once, TTL 8h, stops after 1h idle")
        );
        assert_eq!(
            rule_line(&s, Some(AuthorClass::Member)).as_deref(),
            Some("members (authors.members): the Blueprint's own rules")
        );
        assert_eq!(rule_line(&s, None), None);
    }
}
