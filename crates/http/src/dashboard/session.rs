//! Who is looking at the dashboard, remembered between requests: a session cookie holding the
//! person's GitHub login and user token, sealed with AES-256-GCM under a key derived from the
//! webhook secret (so every replica opens it, and it says nothing to whoever holds it:
//! `agent::sealed`); the OAuth `state`; and the CSRF token every form carries, bound to the
//! session.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use serde::{Deserialize, Serialize};

use sandcastle_agent::sealed::{Sealer, random, signing_key};
use sandcastle_domain::Secret;

/// The session cookie's name.
pub const COOKIE: &str = "sandcastle_session";
/// The cookie holding the OAuth `state` while a person signs in.
pub const STATE_COOKIE: &str = "sandcastle_oauth_state";
/// How long a sign-in lasts.
pub const LIFETIME: Duration = Duration::from_secs(8 * 3600);

/// What a session remembers. Its Debug form leaves the token out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub login: String,
    /// The person's user-to-server token.
    pub token: String,
    /// Unix seconds after which the session is over.
    pub expires: u64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("login", &self.login)
            .field("token", &"[redacted]")
            .field("expires", &self.expires)
            .finish()
    }
}

/// Seals and opens sessions, and makes and checks CSRF tokens. Cheap to clone.
#[derive(Clone)]
pub struct Sessions {
    sealer: Sealer,
    csrf: hmac::Key,
    /// Cookies only over HTTPS (`Secure`).
    secure: bool,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("secure", &self.secure)
            .finish_non_exhaustive()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

impl Sessions {
    /// Keys derived from `secret` (the current webhook secret), for cookies marked `Secure`
    /// when `secure`.
    pub fn new(secret: &Secret, secure: bool) -> Self {
        Self {
            sealer: Sealer::new(secret, "sandcastle dashboard session v1", COOKIE),
            csrf: signing_key(secret, "sandcastle dashboard csrf v1"),
            secure,
        }
    }

    /// The cookie value of `session`.
    pub fn seal(&self, session: &Session) -> String {
        self.sealer.seal(session)
    }

    /// The session in cookie value `value`, unless it was tampered with or is over.
    pub fn open(&self, value: &str) -> Option<Session> {
        let session: Session = self.sealer.open(value)?;
        (session.expires > now()).then_some(session)
    }

    /// A new session for `login` holding `token`.
    pub fn start(&self, login: &str, token: &Secret) -> Session {
        Session {
            login: login.to_owned(),
            token: token.expose().to_owned(),
            expires: now() + LIFETIME.as_secs(),
        }
    }

    /// The CSRF token of forms shown within `session`.
    pub fn csrf(&self, session: &Session) -> String {
        let tag = hmac::sign(
            &self.csrf,
            format!("{}\n{}", session.login, session.token).as_bytes(),
        );
        URL_SAFE_NO_PAD.encode(tag.as_ref())
    }

    /// Whether `token` is the CSRF token of `session` (in constant time).
    pub fn csrf_ok(&self, session: &Session, token: &str) -> bool {
        let Ok(tag) = URL_SAFE_NO_PAD.decode(token) else {
            return false;
        };
        hmac::verify(
            &self.csrf,
            format!("{}\n{}", session.login, session.token).as_bytes(),
            &tag,
        )
        .is_ok()
    }

    /// A `Set-Cookie` value: `name=value` with the attributes every Sandcastle cookie has
    /// (`HttpOnly`, `SameSite=Lax`, `Path=/`, `Secure` over HTTPS); `max_age` 0 removes it.
    pub fn cookie(&self, name: &str, value: &str, max_age: Duration) -> String {
        let secure = if self.secure { "; Secure" } else { "" };
        format!(
            "{name}={value}; Max-Age={}; Path=/; HttpOnly; SameSite=Lax{secure}",
            max_age.as_secs()
        )
    }
}

/// A random value for the OAuth `state`.
pub fn random_state() -> String {
    random(24)
}

/// The value of cookie `name` the request carries.
pub fn cookie<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Option<&'a str> {
    let header = headers.get(axum::http::header::COOKIE)?.to_str().ok()?;
    cookie_value(header, name)
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions() -> Sessions {
        Sessions::new(&Secret::new("webhook secret"), true)
    }

    #[test]
    fn a_sealed_session_opens_and_hides_its_token() {
        let s = sessions();
        let session = s.start("alice", &Secret::new("ghu_secret_token_value"));
        let value = s.seal(&session);
        assert!(!value.contains("alice") && !value.contains("ghu_"));
        assert_eq!(s.open(&value), Some(session.clone()));
        assert_ne!(s.seal(&session), value, "a fresh nonce each time");
    }

    #[test]
    fn tampered_foreign_and_expired_sessions_do_not_open() {
        let s = sessions();
        let value = s.seal(&s.start("alice", &Secret::new("t")));
        let mut bytes = URL_SAFE_NO_PAD.decode(&value).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(s.open(&URL_SAFE_NO_PAD.encode(&bytes)), None);
        let other = Sessions::new(&Secret::new("another secret"), true);
        assert_eq!(other.open(&value), None);
        assert_eq!(s.open("not base64!"), None);
        assert_eq!(s.open(""), None);
        let over = Session {
            login: "alice".into(),
            token: "t".into(),
            expires: now() - 1,
        };
        assert_eq!(s.open(&s.seal(&over)), None);
    }

    #[test]
    fn csrf_tokens_belong_to_their_session() {
        let s = sessions();
        let alice = s.start("alice", &Secret::new("t1"));
        let bob = s.start("bob", &Secret::new("t2"));
        let token = s.csrf(&alice);
        assert!(s.csrf_ok(&alice, &token));
        assert!(!s.csrf_ok(&bob, &token));
        assert!(!s.csrf_ok(&alice, ""));
        assert!(!s.csrf_ok(&alice, "forged"));
    }

    #[test]
    fn cookies_are_http_only_lax_and_secure_over_https() {
        let c = sessions().cookie(COOKIE, "v", LIFETIME);
        assert_eq!(
            c,
            "sandcastle_session=v; Max-Age=28800; Path=/; HttpOnly; SameSite=Lax; Secure"
        );
        let plain = Sessions::new(&Secret::new("x"), false).cookie(COOKIE, "", Duration::ZERO);
        assert_eq!(
            plain,
            "sandcastle_session=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax"
        );
        assert_eq!(
            cookie_value("a=1; sandcastle_session=xyz; b=2", COOKIE),
            Some("xyz")
        );
        assert_eq!(cookie_value("a=1", COOKIE), None);
    }
}
