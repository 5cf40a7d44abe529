//! Values handed to browsers and kept by them — cookies, one-time tickets — sealed with
//! AES-256-GCM under a key derived from the current webhook secret (so every replica opens
//! them, and they say nothing to whoever holds them), and keys derived the same way for
//! signatures (HMAC-SHA-256). ring does the cryptography; the envelope (nonce, sealed JSON,
//! base64url) is small enough to own.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde::Serialize;
use serde::de::DeserializeOwned;

use sandcastle_domain::Secret;

/// 32 bytes derived from `secret` for `label` (HMAC-SHA-256 of the label under the secret):
/// each use gets a key of its own, and none reveals another or the secret.
pub fn derive(secret: &Secret, label: &str) -> hmac::Tag {
    let root = hmac::Key::new(hmac::HMAC_SHA256, secret.expose().as_bytes());
    hmac::sign(&root, label.as_bytes())
}

/// An HMAC-SHA-256 key derived from `secret` for `label`.
pub fn signing_key(secret: &Secret, label: &str) -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, derive(secret, label).as_ref())
}

/// Random bytes from the system's source, base64url.
pub fn random(bytes: usize) -> String {
    let mut out = vec![0u8; bytes];
    SystemRandom::new()
        .fill(&mut out)
        .expect("the system's random source works");
    URL_SAFE_NO_PAD.encode(out)
}

/// Seals values of one kind (its `purpose`, bound into every seal as associated data, so that a
/// value sealed for one purpose never opens as another). Cheap to clone.
#[derive(Clone)]
pub struct Sealer {
    key: std::sync::Arc<LessSafeKey>,
    purpose: &'static str,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("purpose", &self.purpose)
            .finish_non_exhaustive()
    }
}

impl Sealer {
    /// A sealer keyed from `secret` for `label`, sealing values for `purpose`.
    pub fn new(secret: &Secret, label: &str, purpose: &'static str) -> Self {
        let key = derive(secret, label);
        let unbound = UnboundKey::new(&AES_256_GCM, key.as_ref()).expect("a 32-byte key");
        Self {
            key: std::sync::Arc::new(LessSafeKey::new(unbound)),
            purpose,
        }
    }

    /// `value`, sealed: base64url of a random nonce and the sealed JSON.
    pub fn seal<T: Serialize>(&self, value: &T) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .expect("the system's random source works");
        let mut data = serde_json::to_vec(value).expect("a sealed value serializes");
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(self.purpose.as_bytes()),
                &mut data,
            )
            .expect("sealing cannot fail for a short value");
        let mut out = nonce.to_vec();
        out.extend(data);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// The value sealed in `sealed`, unless it was tampered with, sealed under another key or
    /// for another purpose. Values of more than 4 KiB are not even decoded.
    pub fn open<T: DeserializeOwned>(&self, sealed: &str) -> Option<T> {
        if sealed.len() > 4096 {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(sealed).ok()?;
        if bytes.len() <= NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut sealed = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(self.purpose.as_bytes()), &mut sealed)
            .ok()?;
        serde_json::from_slice(plain).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, serde::Deserialize, Debug, PartialEq)]
    struct V {
        who: String,
    }

    #[test]
    fn sealed_values_open_only_with_their_key_and_purpose() {
        let secret = Secret::new("a webhook secret of some length");
        let a = Sealer::new(&secret, "label a", "cookie");
        let v = V {
            who: "alice".to_owned(),
        };
        let sealed = a.seal(&v);
        assert!(!sealed.contains("alice"));
        assert_eq!(a.open::<V>(&sealed), Some(v));
        assert_eq!(
            Sealer::new(&secret, "label b", "cookie").open::<V>(&sealed),
            None
        );
        assert_eq!(
            Sealer::new(&secret, "label a", "ticket").open::<V>(&sealed),
            None
        );
        let other = Secret::new("another webhook secret entirely");
        assert_eq!(
            Sealer::new(&other, "label a", "cookie").open::<V>(&sealed),
            None
        );
        let mut tampered = sealed.into_bytes();
        let last = tampered.len() - 2;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert_eq!(a.open::<V>(&tampered), None);
        assert_eq!(a.open::<V>(""), None);
        assert_eq!(a.open::<V>(&"A".repeat(5000)), None);
    }

    #[test]
    fn derived_keys_differ_by_label() {
        let secret = Secret::new("a webhook secret of some length");
        assert_ne!(derive(&secret, "a").as_ref(), derive(&secret, "b").as_ref());
        assert_eq!(random(24).len(), 32);
    }
}
