//! The gate in front of a `signedIn` preview (`domain::edge` holds the rules): for each request
//! the ingress controller asks whether it may pass, and who it is. In order: the gate's own
//! paths on the preview's host (a sign-in ticket or a share link redeemed for a cookie,
//! sign-out); the preview's header secret; a bearer token (the preview's own, or any identity
//! RBAC lets read the preview); the gate's cookie. Anyone else is sent to sign in (a browser)
//! or refused with the reason (a program). After sign-in nothing here calls GitHub: a decision
//! opens a sealed cookie and reads the watch cache, or reuses a token review of the last 30 s.
//!
//! The credentials are Sandcastle's own: cookies and tickets sealed (`sealed`), share links and
//! header secrets signed with keys derived from the webhook secret, each bound to the preview's
//! uid and incarnation, so none opens another preview or the preview's next life. Every grant
//! is audited (an `audit` line: who, which preview, how, which link).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use ring::hmac;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::sealed::{Sealer, random, signing_key};
use super::{Agent, Operation};
use sandcastle_crd::{Phase, PreviewEnvironment};
use sandcastle_domain::Secret;
use sandcastle_domain::edge::{self, GATE_COOKIE, GatePath};

/// How long a person's (or a share link's) pass lasts before signing in again.
pub const PASS_LIFETIME: Duration = Duration::from_secs(8 * 3600);
/// How long a sign-in ticket may take from Sandcastle's sign-in page to the preview's host.
pub const TICKET_LIFETIME: Duration = Duration::from_secs(60);
/// A grant by token or header secret is audited again after this long.
const AUDIT_AGAIN: Duration = Duration::from_secs(600);
/// Entries kept at most in the gate's memories before they are emptied.
const MEMORY_LIMIT: usize = 10_000;

/// What the gate's cookie holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Pass {
    /// `github:<login>` or `share:<id>`.
    who: String,
    /// The preview's uid and incarnation.
    uid: String,
    inc: u32,
    /// The host it was given on.
    host: String,
    /// Unix seconds after which it opens nothing.
    exp: u64,
}

/// What Sandcastle's sign-in page hands the preview's host, once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Ticket {
    login: String,
    uid: String,
    inc: u32,
    host: String,
    /// Where on the host to go once in.
    path: String,
    exp: u64,
    nonce: String,
}

/// The gate's keys and memories. Cheap to clone.
#[derive(Clone)]
pub struct GateKeys {
    passes: Sealer,
    tickets: Sealer,
    links: hmac::Key,
    secrets: hmac::Key,
    /// Tickets redeemed, until they expire (one-time).
    used: Arc<Mutex<HashMap<String, u64>>>,
    /// Token and header-secret grants last audited, by a hash of credential and preview.
    audited: Arc<Mutex<HashMap<[u8; 32], Instant>>>,
}

impl std::fmt::Debug for GateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateKeys").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn uid_of(pe: &PreviewEnvironment) -> String {
    pe.uid().unwrap_or_default()
}

impl GateKeys {
    /// Keys derived from `secret` (the current webhook secret).
    pub fn new(secret: &Secret) -> Self {
        Self {
            passes: Sealer::new(secret, "sandcastle preview pass v1", GATE_COOKIE),
            tickets: Sealer::new(secret, "sandcastle preview ticket v1", "ticket"),
            links: signing_key(secret, "sandcastle share link v1"),
            secrets: signing_key(secret, "sandcastle preview secret v1"),
            used: Arc::default(),
            audited: Arc::default(),
        }
    }

    fn link_message(pe: &PreviewEnvironment, id: &str, exp: u64) -> String {
        format!(
            "share\n{}\n{}\n{id}\n{exp}",
            uid_of(pe),
            pe.spec.incarnation
        )
    }

    /// The signed part of share link `id` of `pe`, valid until `exp` (unix seconds).
    pub fn share_token(&self, pe: &PreviewEnvironment, id: &str, exp: u64) -> String {
        let tag = hmac::sign(&self.links, Self::link_message(pe, id, exp).as_bytes());
        let mut bytes = hex::decode(id).unwrap_or_default();
        bytes.extend(exp.to_be_bytes());
        bytes.extend(tag.as_ref());
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The link id and expiry `token` was signed for, when it was signed for `pe`.
    fn open_share(&self, pe: &PreviewEnvironment, token: &str) -> Option<(String, u64)> {
        if token.len() > 128 {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
        if bytes.len() != 8 + 8 + 32 {
            return None;
        }
        let id = hex::encode(&bytes[..8]);
        let exp = u64::from_be_bytes(bytes[8..16].try_into().ok()?);
        hmac::verify(
            &self.links,
            Self::link_message(pe, &id, exp).as_bytes(),
            &bytes[16..],
        )
        .ok()?;
        Some((id, exp))
    }

    fn secret_message(pe: &PreviewEnvironment) -> String {
        format!("secret\n{}\n{}", uid_of(pe), pe.spec.incarnation)
    }

    /// `pe`'s header secret: what [`edge::SECRET_HEADER`] carries for tools that cannot carry
    /// tokens (and Sandcastle's own readiness probe). It changes with each incarnation.
    pub fn header_secret(&self, pe: &PreviewEnvironment) -> Secret {
        let tag = hmac::sign(&self.secrets, Self::secret_message(pe).as_bytes());
        Secret::new(hex::encode(tag.as_ref()))
    }

    fn secret_ok(&self, pe: &PreviewEnvironment, given: &str) -> bool {
        match hex::decode(given.trim()) {
            Ok(tag) if tag.len() == 32 => {
                hmac::verify(&self.secrets, Self::secret_message(pe).as_bytes(), &tag).is_ok()
            }
            _ => false,
        }
    }

    /// A one-time ticket letting `login` into `pe` on `host`, then on to `path`.
    pub fn ticket(
        &self,
        pe: &PreviewEnvironment,
        login: &str,
        host: &str,
        path: &str,
        now: u64,
    ) -> String {
        self.tickets.seal(&Ticket {
            login: login.to_owned(),
            uid: uid_of(pe),
            inc: pe.spec.incarnation,
            host: host.to_owned(),
            path: edge::local_path(path).to_owned(),
            exp: now + TICKET_LIFETIME.as_secs(),
            nonce: random(12),
        })
    }

    /// The ticket in `sealed`, when it lets someone into `pe` on `host` now; it is used up.
    fn redeem(
        &self,
        pe: &PreviewEnvironment,
        sealed: &str,
        host: &str,
        now: u64,
    ) -> Option<Ticket> {
        let t: Ticket = self.tickets.open(sealed)?;
        if t.uid != uid_of(pe) || t.inc != pe.spec.incarnation || t.host != host || t.exp <= now {
            return None;
        }
        let mut used = lock(&self.used);
        used.retain(|_, exp| *exp > now);
        if used.len() >= MEMORY_LIMIT || used.insert(t.nonce.clone(), t.exp).is_some() {
            return None;
        }
        Some(t)
    }

    fn pass(&self, pe: &PreviewEnvironment, who: String, host: &str, exp: u64) -> String {
        self.passes.seal(&Pass {
            who,
            uid: uid_of(pe),
            inc: pe.spec.incarnation,
            host: host.to_owned(),
            exp,
        })
    }

    /// Whether a grant of `credential` to `preview` should be audited now (once in a while).
    fn audit_due(&self, credential: &str, preview: &str) -> bool {
        let key: [u8; 32] = Sha256::digest(format!("{credential}\n{preview}")).into();
        let mut audited = lock(&self.audited);
        if audited.len() >= MEMORY_LIMIT {
            audited.clear();
        }
        match audited.get(&key) {
            Some(at) if at.elapsed() < AUDIT_AGAIN => false,
            _ => {
                audited.insert(key, Instant::now());
                true
            }
        }
    }
}

/// A request the ingress controller asks about, as the gate reads it.
#[derive(Debug, Clone, Default)]
pub struct Knock<'a> {
    /// The preview whose gate is asked (from the check URL the Middleware names).
    pub preview: &'a str,
    /// The request's host, path with query and scheme (`X-Forwarded-Host`, `-Uri`, `-Proto`).
    pub host: &'a str,
    pub uri: &'a str,
    pub proto: &'a str,
    pub authorization: Option<&'a str>,
    pub token: Option<&'a str>,
    pub secret: Option<&'a str>,
    pub cookies: Vec<&'a str>,
    /// A browser (it accepts HTML): sent to sign in rather than refused.
    pub wants_page: bool,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// In, as `user`; the request goes on with these (absent ones removed).
    In {
        user: String,
        authorization: Option<String>,
        cookie: Option<String>,
    },
    /// Go to `location` (on the preview's host), setting `cookie`.
    Go { location: String, cookie: String },
    /// A person must sign in first: their browser goes to Sandcastle's sign-in page.
    SignIn { location: String },
    /// Not in: the status, a stable code and why.
    Out {
        status: u16,
        code: &'static str,
        message: String,
    },
}

fn out(status: u16, code: &'static str, message: impl Into<String>) -> Entry {
    Entry::Out {
        status,
        code,
        message: message.into(),
    }
}

/// Where a request to the preview arrived: its host (without a port, what passes are bound
/// to), its origin as the browser named it, and whether over HTTPS.
struct Arrival<'a> {
    host: &'a str,
    origin: &'a str,
    secure: bool,
}

/// A `Set-Cookie` value for the gate's cookie (`max_age` zero removes it), host-only.
pub fn gate_cookie(value: &str, max_age: Duration, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{GATE_COOKIE}={value}; Max-Age={}; Path=/; HttpOnly; SameSite=Lax{secure}",
        max_age.as_secs()
    )
}

impl Agent {
    /// The clock, in unix seconds.
    pub fn now_seconds(&self) -> u64 {
        u64::try_from(self.clock.now().as_second()).unwrap_or_default()
    }

    /// The live preview `name` from the watch cache.
    pub fn live(&self, name: &str) -> Option<Arc<PreviewEnvironment>> {
        self.previews
            .get(&ObjectRef::new(name).within(&self.home))
            .filter(|pe| {
                pe.spec.teardown.is_none()
                    && pe.status.as_ref().and_then(|s| s.phase) != Some(Phase::Removed)
            })
    }

    /// May `knock` pass the gate of its preview, and as whom.
    pub async fn enter(&self, knock: &Knock<'_>) -> Entry {
        let Some(pe) = self.live(knock.preview) else {
            return out(404, "unknown_preview", "no preview is served here");
        };
        let Some(host) = sandcastle_domain::wake::visited_host(knock.host) else {
            return out(400, "bad_host", "the request names no host");
        };
        let secure = knock.proto == "https";
        let now = self.now_seconds();
        // Where to send the browser on the preview's host: an absolute URL, since the ingress
        // controller resolves a relative one against the gate's own address.
        let origin = format!("{}://{}", knock.proto, knock.host.trim());
        let at = Arrival {
            host: &host,
            origin: &origin,
            secure,
        };
        match edge::gate_path(knock.uri) {
            GatePath::Callback { ticket } => return self.with_ticket(&pe, ticket, &at),
            GatePath::Share { token } => return self.with_link(&pe, token, &at),
            GatePath::SignOut => {
                return Entry::Go {
                    location: format!("{origin}/"),
                    cookie: gate_cookie("", Duration::ZERO, secure),
                };
            }
            GatePath::Unknown => return out(404, "not_found", "no such page"),
            GatePath::App => {}
        }
        let cookie = edge::without_gate_cookie(knock.cookies.iter().copied());
        if let Some(given) = knock.secret {
            if !self.gate_keys.secret_ok(&pe, given) {
                return out(
                    401,
                    "preview_secret_invalid",
                    "the preview secret is not this preview's",
                );
            }
            self.granted(&pe, "preview-secret", given, "header secret");
            return Entry::In {
                user: "preview-secret".to_owned(),
                authorization: knock.authorization.map(str::to_owned),
                cookie,
            };
        }
        let bearer = knock
            .authorization
            .and_then(|a| {
                a.strip_prefix("Bearer ")
                    .or_else(|| a.strip_prefix("bearer "))
            })
            .map(str::trim);
        let mut refused_token = None;
        for (token, from_header) in [(knock.token, true), (bearer, false)] {
            let Some(token) = token.filter(|t| !t.is_empty()) else {
                continue;
            };
            match self.token_opens(&pe, token).await {
                Ok(user) => {
                    self.granted(&pe, &user, token, "token");
                    return Entry::In {
                        user,
                        // Sandcastle's token goes no further; an app's own is given back.
                        authorization: None,
                        cookie,
                    };
                }
                Err(e) if from_header => return e,
                Err(e) => refused_token = Some(e),
            }
        }
        if let Some(user) = self.pass_opens(&pe, &knock.cookies, &host, now) {
            return Entry::In {
                user,
                authorization: knock.authorization.map(str::to_owned),
                cookie,
            };
        }
        if let Some(refused) = refused_token
            && !knock.wants_page
        {
            return refused;
        }
        self.knock_first(&pe, knock)
    }

    /// Who a bearer token is, when it opens `pe`: the preview's own token, or an identity RBAC
    /// lets read the preview.
    async fn token_opens(&self, pe: &PreviewEnvironment, token: &str) -> Result<String, Entry> {
        let caller = self
            .authority
            .authenticate(token)
            .await
            .map_err(|e| out(401, "token_invalid", e.to_string()))?;
        let name = pe.name_any();
        let (namespace, cluster) = self.place_of(pe);
        match self
            .authority
            .authorize(&caller, Operation::Get, Some((&name, &namespace, &cluster)))
            .await
        {
            Ok(()) => Ok(caller.user),
            Err(e) => Err(out(403, "token_not_for_this_preview", e.to_string())),
        }
    }

    /// Who the gate's cookie says came in, when it still opens `pe` on `host`.
    fn pass_opens(
        &self,
        pe: &PreviewEnvironment,
        cookies: &[&str],
        host: &str,
        now: u64,
    ) -> Option<String> {
        let sealed = edge::gate_cookie(cookies.iter().copied())?;
        let pass: Pass = self.gate_keys.passes.open(sealed)?;
        if pass.uid != uid_of(pe) || pass.inc != pe.spec.incarnation || pass.host != host {
            return None;
        }
        if pass.exp <= now {
            return None;
        }
        if let Some(id) = pass.who.strip_prefix("share:") {
            // Revoked (removed) or expired links open nothing, whatever the cookie says.
            let live = pe
                .spec
                .shares
                .iter()
                .any(|s| s.id == id && s.expires_at.0.as_second() > now as i64);
            if !live {
                return None;
            }
        }
        Some(pass.who)
    }

    /// Nobody we know: a browser goes to sign in, a program hears how to get in.
    fn knock_first(&self, pe: &PreviewEnvironment, knock: &Knock<'_>) -> Entry {
        let name = pe.name_any();
        if knock.wants_page {
            // The host as the browser named it, with its port: where to come back to.
            let rd = format!(
                "{}://{}{}",
                knock.proto,
                knock.host.trim(),
                edge::local_path(knock.uri)
            );
            let query = serde_urlencoded::to_string([("preview", name.as_str()), ("rd", &rd)])
                .unwrap_or_default();
            return Entry::SignIn {
                location: format!(
                    "{}/gate/signin?{query}",
                    self.addresses.public_url.trim_end_matches('/')
                ),
            };
        }
        out(
            401,
            "sign_in_required",
            format!(
                "preview {name} is open to people who can read {} (sign in with a browser), to \
                 its own token (Authorization: Bearer, or {}) and to share links",
                pe.spec.repository,
                edge::TOKEN_HEADER
            ),
        )
    }

    fn with_ticket(&self, pe: &PreviewEnvironment, sealed: &str, at: &Arrival<'_>) -> Entry {
        let now = self.now_seconds();
        let Some(t) = self.gate_keys.redeem(pe, sealed, at.host, now) else {
            return out(
                403,
                "ticket_invalid",
                "this sign-in link was already used, has expired or is for another preview; open the preview again",
            );
        };
        let who = format!("github:{}", t.login);
        let exp = now + PASS_LIFETIME.as_secs();
        self.audit_entry(pe, &who, "sign-in", None);
        Entry::Go {
            location: format!("{}{}", at.origin, t.path),
            cookie: gate_cookie(
                &self.gate_keys.pass(pe, who, at.host, exp),
                PASS_LIFETIME,
                at.secure,
            ),
        }
    }

    fn with_link(&self, pe: &PreviewEnvironment, token: &str, at: &Arrival<'_>) -> Entry {
        let now = self.now_seconds();
        let refused = || {
            out(
                403,
                "share_link_invalid",
                "this share link has expired or was revoked; ask whoever shared it for a new one",
            )
        };
        let Some((id, exp)) = self.gate_keys.open_share(pe, token) else {
            return refused();
        };
        let listed = pe.spec.shares.iter().any(|s| s.id == id);
        if !listed || exp <= now {
            return refused();
        }
        let until = exp.min(now + PASS_LIFETIME.as_secs());
        let who = format!("share:{id}");
        self.audit_entry(pe, &who, "share-link", Some(&id));
        Entry::Go {
            location: format!("{}/", at.origin),
            cookie: gate_cookie(
                &self.gate_keys.pass(pe, who, at.host, until),
                Duration::from_secs(until - now),
                at.secure,
            ),
        }
    }

    /// Audit a grant by token or header secret (once in a while for the same one).
    fn granted(&self, pe: &PreviewEnvironment, who: &str, credential: &str, how: &str) {
        if self.gate_keys.audit_due(credential, &pe.name_any()) {
            self.audit_entry(pe, who, how, None);
        }
    }

    fn audit_entry(&self, pe: &PreviewEnvironment, who: &str, how: &str, link: Option<&str>) {
        tracing::info!(target: "audit", actor = %who, action = "enter", preview = %pe.name_any(), sha = %pe.spec.sha, result = "granted", via = how, link = link.unwrap_or(""), "preview entry");
    }
}
