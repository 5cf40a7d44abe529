//! A Blueprint's policy by pull request author: who counts as a member, an outside
//! contributor, a dependency bot or a coding agent, and each class's trigger, cap and times.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::GoDuration;

/// Who opened a pull request, as far as its previews' rules go.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "camelCase")]
pub enum AuthorClass {
    /// Someone with write access: the pull request's head branch lives in the repository
    /// itself, or its author is the repository's owner, an organization member or a
    /// collaborator.
    Member,
    /// Anyone else with a GitHub account: a pull request from a fork.
    OutsideContributor,
    /// Dependabot, Renovate, or a login listed in `botLogins`.
    DependencyBot,
    /// A coding agent: a login or App listed in `agentLogins`, or a pull request with the
    /// `agentLabel`.
    Agent,
}

impl AuthorClass {
    pub const ALL: [AuthorClass; 4] = [
        Self::Member,
        Self::OutsideContributor,
        Self::DependencyBot,
        Self::Agent,
    ];

    /// The name used in the Blueprint's `authors` and in metrics: `members`, `agents`, ...
    pub fn field(self) -> &'static str {
        match self {
            Self::Member => "members",
            Self::OutsideContributor => "outsideContributors",
            Self::DependencyBot => "dependencyBots",
            Self::Agent => "agents",
        }
    }

    /// In words, for people: `dependency bots`.
    pub fn words(self) -> &'static str {
        match self {
            Self::Member => "members",
            Self::OutsideContributor => "outside contributors",
            Self::DependencyBot => "dependency bots",
            Self::Agent => "coding agents",
        }
    }
}

/// How a class's pull requests get previews.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ClassTrigger {
    /// As the Blueprint's `trigger: auto`: opened, reopened and pushed pull requests deploy.
    Auto,
    /// Only on `/preview`.
    Comment,
    /// Never, not even on `/preview`.
    Off,
}

/// One class's rule; what it leaves out is the Blueprint's.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClassRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<ClassTrigger>,
    /// How many previews of this class may hold a slot at once (beside the Blueprint's
    /// `maxPreviews`, which counts every class); over it they queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_previews: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<GoDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_after_idle: Option<GoDuration>,
}

impl ClassRule {
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Rules by pull request author. Forks keep their own rule on top: never deployed without a
/// maintainer's `/preview`, whatever the class says.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuthorPolicy {
    #[serde(default, skip_serializing_if = "ClassRule::is_empty")]
    pub members: ClassRule,
    #[serde(default, skip_serializing_if = "ClassRule::is_empty")]
    pub outside_contributors: ClassRule,
    #[serde(default, skip_serializing_if = "ClassRule::is_empty")]
    pub dependency_bots: ClassRule,
    #[serde(default, skip_serializing_if = "ClassRule::is_empty")]
    pub agents: ClassRule,
    /// More logins counted as dependency bots, besides `dependabot[bot]` and `renovate[bot]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub bot_logins: Vec<String>,
    /// Logins (`my-agent[bot]`) or App slugs (`my-agent`) of coding agents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub agent_logins: Vec<String>,
    /// A label that marks a pull request as a coding agent's (default `agent`).
    #[serde(default = "default_agent_label")]
    #[schemars(length(min = 1, max = 50))]
    pub agent_label: String,
}

fn default_agent_label() -> String {
    "agent".to_owned()
}

impl Default for AuthorPolicy {
    fn default() -> Self {
        Self {
            members: ClassRule::default(),
            outside_contributors: ClassRule::default(),
            dependency_bots: ClassRule::default(),
            agents: ClassRule::default(),
            bot_logins: Vec::new(),
            agent_logins: Vec::new(),
            agent_label: default_agent_label(),
        }
    }
}

impl AuthorPolicy {
    /// The rule of `class`.
    pub fn rule(&self, class: AuthorClass) -> &ClassRule {
        match class {
            AuthorClass::Member => &self.members,
            AuthorClass::OutsideContributor => &self.outside_contributors,
            AuthorClass::DependencyBot => &self.dependency_bots,
            AuthorClass::Agent => &self.agents,
        }
    }
}
