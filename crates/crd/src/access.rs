//! Who may open a preview's URL: a Blueprint's `access`, and the share links a preview holds
//! (each opens it without signing in until it expires or is removed).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Who may open a preview's URL.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum Access {
    /// Anyone who reaches the ingress controller.
    #[default]
    Public,
    /// Through Sandcastle's gate: people signed in with GitHub who can read the repository,
    /// agents and CI with the preview's own token (or its header secret), and share links.
    SignedIn,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Public => "public",
            Access::SignedIn => "signedIn",
        }
    }
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Access {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "public" => Ok(Access::Public),
            "signedIn" | "signed-in" => Ok(Access::SignedIn),
            other => Err(format!(
                "access is `public` or `signedIn`, not {:?}",
                crate::quote::short(other)
            )),
        }
    }
}

/// The most share links one preview holds.
pub const MAX_SHARES: usize = 50;

/// A share link of a preview: whoever holds the link opens the preview, without signing in,
/// until `expiresAt` or until the link is removed from the preview (revoked). The link itself is
/// signed by Sandcastle and never stored.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ShareLink {
    /// The link's id: 16 lower-case hex digits.
    #[schemars(regex(pattern = r"^[0-9a-f]{16}$"))]
    pub id: String,
    /// What it is for, as its maker said (`for the design review`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 100))]
    pub label: Option<String>,
    /// Who made it: `github:<login>`, a ServiceAccount or Kubernetes user, as audited.
    #[schemars(length(min = 1, max = 300))]
    pub created_by: String,
    pub created_at: Time,
    /// After this the link opens nothing.
    pub expires_at: Time,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_reads_as_written_and_refuses_the_rest_briefly() {
        assert_eq!("public".parse::<Access>(), Ok(Access::Public));
        assert_eq!("signedIn".parse::<Access>(), Ok(Access::SignedIn));
        assert_eq!(Access::SignedIn.to_string(), "signedIn");
        let long = format!("private{}", "x".repeat(500));
        let err = long.parse::<Access>().unwrap_err();
        assert!(err.len() < 200, "{err}");
    }
}
