//! The two steps of `destroy`: the first call answers a confirmation bound to the caller, the
//! preview and a deadline a minute away (HMAC-SHA256 under the server's key, so replicas that
//! share the key accept each other's); the second call destroys only with it. No I/O.

use jiff::Timestamp;
use ring::hmac;

/// How long a confirmation is good for.
pub const VALID_FOR_SECONDS: i64 = 60;

/// Why a confirmation was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "this confirmation was not issued for you and this preview; call destroy without `confirm` to get one"
    )]
    Invalid,
    #[error(
        "this confirmation expired (they last a minute); call destroy without `confirm` for a new one"
    )]
    Expired,
}

/// Issues and checks confirmations under one key.
pub struct Confirmations {
    key: hmac::Key,
}

impl std::fmt::Debug for Confirmations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Confirmations")
    }
}

impl Confirmations {
    /// Under a key derived from `secret` (replicas sharing the secret share confirmations).
    pub fn from_secret(secret: &[u8]) -> Self {
        let root = hmac::Key::new(hmac::HMAC_SHA256, secret);
        let derived = hmac::sign(&root, b"sandcastle mcp destroy confirmation");
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()),
        }
    }

    /// Under a random key (a single process: the stdio server).
    pub fn random() -> Self {
        Self::from_secret(&rand::random::<[u8; 32]>())
    }

    fn message(who: &str, preview: &str, deadline: i64) -> Vec<u8> {
        format!("{who}\n{preview}\n{deadline}").into_bytes()
    }

    /// A confirmation for `who` to destroy `preview`, valid until a minute after `now`.
    pub fn issue(&self, who: &str, preview: &str, now: Timestamp) -> String {
        let deadline = now.as_second() + VALID_FOR_SECONDS;
        let tag = hmac::sign(&self.key, &Self::message(who, preview, deadline));
        format!("{deadline}.{}", hex::encode(tag.as_ref()))
    }

    /// Whether `token` lets `who` destroy `preview` at `now`.
    pub fn check(
        &self,
        token: &str,
        who: &str,
        preview: &str,
        now: Timestamp,
    ) -> Result<(), Refused> {
        let (deadline, tag) = token.split_once('.').ok_or(Refused::Invalid)?;
        let deadline: i64 = deadline.parse().map_err(|_| Refused::Invalid)?;
        let tag = hex::decode(tag).map_err(|_| Refused::Invalid)?;
        hmac::verify(&self.key, &Self::message(who, preview, deadline), &tag)
            .map_err(|_| Refused::Invalid)?;
        if now.as_second() > deadline {
            return Err(Refused::Expired);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn a_confirmation_is_for_one_caller_one_preview_one_minute() {
        let c = Confirmations::from_secret(b"shared");
        let token = c.issue("alice", "shop-pr-1", at(0));
        assert_eq!(c.check(&token, "alice", "shop-pr-1", at(59)), Ok(()));
        assert_eq!(
            c.check(&token, "alice", "shop-pr-1", at(61)),
            Err(Refused::Expired)
        );
        assert_eq!(
            c.check(&token, "mallory", "shop-pr-1", at(1)),
            Err(Refused::Invalid)
        );
        assert_eq!(
            c.check(&token, "alice", "shop-pr-2", at(1)),
            Err(Refused::Invalid)
        );
        for bad in ["", "bogus", "12.zz", &token.replace('.', "")] {
            assert_eq!(
                c.check(bad, "alice", "shop-pr-1", at(1)),
                Err(Refused::Invalid)
            );
        }
        // A later deadline written into the token breaks its tag.
        let (_, tag) = token.split_once('.').unwrap();
        let forged = format!("{}.{tag}", at(3600).as_second());
        assert_eq!(
            c.check(&forged, "alice", "shop-pr-1", at(120)),
            Err(Refused::Invalid)
        );
    }

    #[test]
    fn replicas_sharing_the_secret_accept_each_others() {
        let (a, b) = (
            Confirmations::from_secret(b"s"),
            Confirmations::from_secret(b"s"),
        );
        let token = a.issue("alice", "p", at(0));
        assert_eq!(b.check(&token, "alice", "p", at(1)), Ok(()));
        let other = Confirmations::from_secret(b"t");
        assert_eq!(
            other.check(&token, "alice", "p", at(1)),
            Err(Refused::Invalid)
        );
    }
}
