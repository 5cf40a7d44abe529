//! Share links and header secrets: the ways into a `signedIn` preview that need no GitHub
//! account. A share link is minted (`share`), listed on the preview (its view, the dashboard),
//! and revoked by removing it (`unshare`); the link itself is signed (`gate`) and shown only
//! to whoever minted it. A header secret is handed to whoever may mint tokens for the preview.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::write::through;
use super::{Agent, AgentError, Caller, Operation, PreviewView};
use sandcastle_crd::{MAX_SHARES, PreviewEnvironment, ShareLink};
use sandcastle_domain::edge::{GATE_PREFIX, SECRET_HEADER};

/// How long a share link lives unless asked otherwise.
pub const DEFAULT_SHARE_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// `POST /previews/{name}/shares`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShareBody {
    /// How long the link opens the preview (`2h`, `3d`; default `24h`); never past the
    /// longest Sandcastle allows (`--share-max-lifetime`) nor the preview's expiry.
    #[schema(
        pattern = r"^([0-9]+[wdhmsWDHMS])*[0-9]*[1-9][0-9]*[wdhmsWDHMS]([0-9]+[wdhmsWDHMS])*$",
        max_length = 12
    )]
    #[schemars(
        regex(
            pattern = r"^([0-9]+[wdhmsWDHMS])*[0-9]*[1-9][0-9]*[wdhmsWDHMS]([0-9]+[wdhmsWDHMS])*$"
        ),
        length(max = 12)
    )]
    pub expires_in: Option<String>,
    /// What it is for (shown on the preview's page), at most 100 characters.
    #[schema(max_length = 100)]
    #[schemars(length(max = 100))]
    pub label: Option<String>,
}

/// A share link as its maker sees it, once: the link itself is not kept anywhere.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShareView {
    pub id: String,
    /// Opens the preview without signing in until `expiresAt`, or until revoked.
    pub url: String,
    pub label: Option<String>,
    pub created_by: String,
    pub expires_at: String,
}

/// A preview's header secret.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
pub struct HeaderSecretView {
    /// The header to send it in.
    pub header: String,
    /// The secret: it opens this preview (this incarnation of it) through the gate.
    pub value: String,
}

/// A new link id: 16 hex digits.
fn new_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

impl Agent {
    /// The longest a share link lives (`--share-max-lifetime`).
    fn share_cap(&self) -> Duration {
        self.limits.share_lifetime
    }

    /// Mint a share link of preview `name` for `caller`.
    pub async fn share(
        &self,
        caller: &Caller,
        name: &str,
        body: &ShareBody,
    ) -> Result<ShareView, AgentError> {
        let pe = self.authorized(caller, Operation::Share, name).await?;
        let asked = match body.expires_in.as_deref() {
            Some(text) => super::error::api_duration("expiresIn", text, true)?,
            None => DEFAULT_SHARE_LIFETIME,
        };
        let label = body
            .label
            .as_deref()
            .map(str::trim)
            .filter(|l| !l.is_empty());
        if label.is_some_and(|l| l.chars().count() > 100) {
            return Err(AgentError::invalid(
                "invalid_label",
                "label",
                "a label has at most 100 characters",
            ));
        }
        let url = pe
            .status
            .as_ref()
            .and_then(|s| s.url.clone())
            .ok_or_else(|| AgentError::Conflict {
                code: "preview_has_no_url",
                message: format!("preview {name} has no URL to share (yet)"),
            })?;
        let now = self.clock.now();
        let mut lifetime = asked.min(self.share_cap());
        if let Some(expiry) = pe.spec.expires_at.as_ref() {
            let left: Duration = expiry.0.duration_since(now).try_into().unwrap_or_default();
            lifetime = lifetime.min(left);
        }
        if lifetime < Duration::from_secs(60) {
            return Err(AgentError::invalid(
                "invalid_duration",
                "expiresIn",
                "a share link must live at least a minute (and the preview expires before that)",
            ));
        }
        let expires = now + jiff::SignedDuration::try_from(lifetime).unwrap_or_default();
        let link = ShareLink {
            id: new_id(),
            label: label.map(str::to_owned),
            created_by: caller.user.clone(),
            created_at: Time(now),
            expires_at: Time(expires),
        };
        let note = format!("share link {} until {expires} {}", link.id, through(caller));
        let added = link.clone();
        self.write(caller, Operation::Share, &pe, note, move |next| {
            keep_live(next, now);
            if next.spec.shares.len() >= MAX_SHARES {
                next.spec.shares.remove(0);
            }
            next.spec.shares.push(added.clone());
            Ok(())
        })
        .await?;
        let exp = u64::try_from(expires.as_second()).unwrap_or_default();
        let token = self.gate_keys.share_token(&pe, &link.id, exp);
        Ok(ShareView {
            url: format!("{}{GATE_PREFIX}share/{token}", url.trim_end_matches('/')),
            id: link.id,
            label: link.label,
            created_by: link.created_by,
            expires_at: expires.to_string(),
        })
    }

    /// Revoke share link `id` of preview `name`: it opens nothing from now on (those who
    /// opened it are let in no more).
    pub async fn unshare(
        &self,
        caller: &Caller,
        name: &str,
        id: &str,
    ) -> Result<PreviewView, AgentError> {
        let pe = self.authorized(caller, Operation::Unshare, name).await?;
        if !pe.spec.shares.iter().any(|s| s.id == id) {
            return Err(AgentError::invalid(
                "unknown_share",
                "id",
                format!(
                    "preview {name} has no share link {}",
                    sandcastle_domain::quote::short(id)
                ),
            ));
        }
        let note = format!("share link {id} revoked {}", through(caller));
        let id = id.to_owned();
        let now = self.clock.now();
        self.write(caller, Operation::Unshare, &pe, note, move |next| {
            keep_live(next, now);
            next.spec.shares.retain(|s| s.id != id);
            Ok(())
        })
        .await
    }

    /// Preview `name`'s header secret, for `caller` (who may mint its tokens).
    pub async fn header_secret(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<HeaderSecretView, AgentError> {
        let pe = self
            .authorized(caller, Operation::HeaderSecret, name)
            .await?;
        self.audit(
            caller,
            Operation::HeaderSecret,
            name,
            &pe.spec.sha,
            "handed out",
        );
        Ok(HeaderSecretView {
            header: SECRET_HEADER.to_owned(),
            value: self.gate_keys.header_secret(&pe).expose().to_owned(),
        })
    }

    /// The header secret of `pe` (Sandcastle's own probes send it through the gate).
    pub fn header_secret_of(&self, pe: &PreviewEnvironment) -> sandcastle_domain::Secret {
        self.gate_keys.header_secret(pe)
    }
}

/// Drop the links of `pe` that have expired.
fn keep_live(pe: &mut PreviewEnvironment, now: Timestamp) {
    pe.spec.shares.retain(|s| s.expires_at.0 > now);
}
