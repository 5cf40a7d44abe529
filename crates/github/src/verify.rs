//! Webhook signature verification: `X-Hub-Signature-256` checked as HMAC-SHA256 over the exact
//! body bytes, in constant time, against every configured secret (so secrets can be rotated).

use sandcastle_domain::Secret;

/// The header GitHub puts the signature in (lower-case, as HTTP/2 delivers it).
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";

const PREFIX: &str = "sha256=";
const HEX_LEN: usize = 64;

/// Why a delivery was not accepted. Neither the message nor the code ever reveals the expected
/// signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the X-Hub-Signature-256 header is missing")]
    Missing,
    #[error("the X-Hub-Signature-256 header is not sha256= followed by 64 hex digits")]
    Malformed,
    #[error("the X-Hub-Signature-256 header does not match the body")]
    Mismatch,
}

impl SignatureError {
    /// A stable machine-readable code for the HTTP error body and metrics.
    pub fn code(self) -> &'static str {
        match self {
            Self::Missing => "signature_missing",
            Self::Malformed => "signature_malformed",
            Self::Mismatch => "signature_mismatch",
        }
    }

    /// A short sentence for the person reading the delivery log in GitHub's settings.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Missing => "no X-Hub-Signature-256 header; set a webhook secret on the App",
            Self::Malformed => "X-Hub-Signature-256 must be sha256= followed by 64 hex digits",
            Self::Mismatch => "signature does not match; check the webhook secret",
        }
    }
}

/// Check `header` (the raw `X-Hub-Signature-256` value) against `body` with each secret in turn.
///
/// Succeeds when any secret matches. An empty `secrets` list matches nothing (`Mismatch`): the
/// configuration is expected to refuse to start without a secret.
pub fn verify_signature(
    secrets: &[Secret],
    header: Option<&str>,
    body: &[u8],
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let expected = decode(header)?;
    // ring's HMAC uses the CPU's SHA extensions (several times faster than a portable SHA-256 on
    // a 25 KB payload) and compares in constant time.
    let matches = secrets.iter().any(|secret| {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.expose().as_bytes());
        ring::hmac::verify(&key, body, &expected).is_ok()
    });
    if matches {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

/// `sha256=<64 hex digits>` → the 32 digest bytes. Hex digits may be of either case.
fn decode(header: &str) -> Result<[u8; 32], SignatureError> {
    let hex_part = header
        .trim()
        .strip_prefix(PREFIX)
        .ok_or(SignatureError::Malformed)?;
    if hex_part.len() != HEX_LEN {
        return Err(SignatureError::Malformed);
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_part, &mut out).map_err(|_| SignatureError::Malformed)?;
    Ok(out)
}

/// The header value GitHub would send for `body` signed with `secret`. For tests and the fake
/// GitHub, which must sign the deliveries they send.
pub fn sign(secret: &Secret, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.expose().as_bytes());
    format!(
        "{PREFIX}{}",
        hex::encode(ring::hmac::sign(&key, body).as_ref())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    const DOC_SECRET: &str = "It's a Secret to Everybody";
    const DOC_SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    const FIXTURE_SECRET: &str = "402786017574bd28f9d8f7a18648939751c47fe09077d56e10f0444f14fbb73b";

    fn secrets(list: &[&str]) -> Vec<Secret> {
        list.iter().map(|s| Secret::new(*s)).collect()
    }

    #[test]
    fn githubs_documented_test_vector() {
        let s = secrets(&[DOC_SECRET]);
        assert_eq!(
            verify_signature(&s, Some(DOC_SIGNATURE), b"Hello, World!"),
            Ok(())
        );
        assert_eq!(sign(&s[0], b"Hello, World!"), DOC_SIGNATURE);
    }

    #[test]
    fn real_captured_deliveries_verify() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/github");
        for name in ["opened", "synchronize", "closed.merged"] {
            let path = format!("{dir}/pull_request.{name}.delivery.json");
            let envelope: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let body = base64::engine::general_purpose::STANDARD
                .decode(envelope["body_raw_base64"].as_str().unwrap())
                .unwrap();
            let header = envelope["headers"][SIGNATURE_HEADER].as_str().unwrap();
            // The envelope's body is the sibling `.json` fixture byte for byte.
            let sibling = std::fs::read(format!("{dir}/pull_request.{name}.json")).unwrap();
            assert_eq!(body, sibling, "{name}");
            let s = secrets(&[FIXTURE_SECRET]);
            assert_eq!(verify_signature(&s, Some(header), &body), Ok(()), "{name}");
            // One changed byte breaks it.
            let mut tampered = body.clone();
            tampered[10] ^= 1;
            assert_eq!(
                verify_signature(&s, Some(header), &tampered),
                Err(SignatureError::Mismatch)
            );
        }
    }

    #[test]
    fn wrong_secret_is_a_mismatch() {
        let s = secrets(&["not it"]);
        assert_eq!(
            verify_signature(&s, Some(DOC_SIGNATURE), b"Hello, World!"),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(&[], Some(DOC_SIGNATURE), b"Hello, World!"),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn any_secret_of_a_rotation_list_matches() {
        let s = secrets(&["new secret", DOC_SECRET]);
        assert_eq!(
            verify_signature(&s, Some(DOC_SIGNATURE), b"Hello, World!"),
            Ok(())
        );
    }

    #[test]
    fn uppercase_hex_is_the_same_digest() {
        let upper = format!("sha256={}", DOC_SIGNATURE[7..].to_ascii_uppercase());
        let s = secrets(&[DOC_SECRET]);
        assert_eq!(verify_signature(&s, Some(&upper), b"Hello, World!"), Ok(()));
    }

    #[test]
    fn malformed_headers() {
        let s = secrets(&[DOC_SECRET]);
        let digest = &DOC_SIGNATURE[7..];
        let cases = [
            DOC_SIGNATURE[..DOC_SIGNATURE.len() - 1].to_owned(), // truncated
            format!("{DOC_SIGNATURE}0"),                         // too long
            digest.to_owned(),                                   // no prefix
            format!("sha1={digest}"),
            format!("SHA256={digest}"),
            format!("sha256={}", "z".repeat(64)),
            "sha256=".to_owned(),
            String::new(),
        ];
        for header in cases {
            assert_eq!(
                verify_signature(&s, Some(&header), b"Hello, World!"),
                Err(SignatureError::Malformed),
                "{header:?}"
            );
        }
        // The legacy SHA-1 header value from a real capture.
        assert_eq!(
            verify_signature(
                &s,
                Some("sha1=1ed655f84c2168b0830754eb39c1ae5f442e6b69"),
                b"x"
            ),
            Err(SignatureError::Malformed)
        );
    }

    #[test]
    fn missing_header() {
        let err = verify_signature(&secrets(&[DOC_SECRET]), None, b"{}").unwrap_err();
        assert_eq!(err, SignatureError::Missing);
        assert_eq!(err.code(), "signature_missing");
    }
}

#[cfg(test)]
mod hostile {
    use proptest::prelude::*;

    use super::*;
    use sandcastle_hostile::{self as hostile, SIZES, nasty_text};

    fn secret() -> impl Strategy<Value = Secret> {
        prop_oneof![nasty_text(6), any::<String>()]
            .prop_filter("a secret is never empty", |s| !s.is_empty())
            .prop_map(Secret::new)
    }

    fn body() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..2048)
    }

    /// Whether `header` has the shape `decode` accepts, judged without `decode`.
    fn well_formed(header: &str) -> bool {
        header
            .trim()
            .strip_prefix("sha256=")
            .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    }

    #[test]
    fn proptest_signed_bodies_verify_under_any_secret_of_a_rotation() {
        let strategy = (
            secret(),
            proptest::collection::vec(secret(), 0..3),
            body(),
            any::<usize>(),
        );
        hostile::check(
            "verify: signed bodies verify under any secret of a rotation",
            strategy,
            |(secret, others, body, at)| {
                let header = sign(&secret, &body);
                prop_assert!(well_formed(&header), "{header}");
                let mut list = others;
                list.insert(at % (list.len() + 1), secret);
                prop_assert_eq!(verify_signature(&list, Some(&header), &body), Ok(()));
                Ok(())
            },
        );
    }

    #[test]
    fn proptest_one_changed_byte_of_body_or_signature_is_refused() {
        let strategy = (
            secret(),
            body(),
            any::<usize>(),
            1..=255u8,
            any::<usize>(),
            1..16u8,
        );
        hostile::check(
            "verify: one changed byte of body or signature is refused",
            strategy,
            |(secret, body, at, flip, digit, shift)| {
                let header = sign(&secret, &body);
                let list = [secret];
                if !body.is_empty() {
                    let mut tampered = body.clone();
                    tampered[at % body.len()] ^= flip;
                    prop_assert_eq!(
                        verify_signature(&list, Some(&header), &tampered),
                        Err(SignatureError::Mismatch)
                    );
                }
                let mut appended = body.clone();
                appended.push(flip);
                prop_assert_eq!(
                    verify_signature(&list, Some(&header), &appended),
                    Err(SignatureError::Mismatch)
                );
                // Another hex digit in one place of the signature.
                let mut hex_digits: Vec<char> = header.chars().collect();
                let i = 7 + digit % 64;
                let value = hex_digits[i].to_digit(16).unwrap();
                hex_digits[i] = char::from_digit((value + u32::from(shift)) % 16, 16).unwrap();
                let changed: String = hex_digits.iter().collect();
                prop_assert_eq!(
                    verify_signature(&list, Some(&changed), &body),
                    Err(SignatureError::Mismatch)
                );
                // A byte that is no hex digit at all.
                let mut bytes = header.into_bytes();
                bytes[i] = b'g';
                let not_hex = String::from_utf8(bytes).unwrap();
                prop_assert_eq!(
                    verify_signature(&list, Some(&not_hex), &body),
                    Err(SignatureError::Malformed)
                );
                Ok(())
            },
        );
    }

    #[test]
    fn proptest_any_header_is_accepted_or_refused_by_name() {
        let header = prop_oneof![
            nasty_text(12),
            any::<String>(),
            "sha256=[0-9a-fA-F]{60,68}",
            " *sha256=[0-9a-fA-Fg\u{ff10}]{64} *",
        ];
        let strategy = (secret(), header, body());
        hostile::check(
            "verify: any header is accepted or refused by name",
            strategy,
            |(secret, header, body)| {
                let got = verify_signature(std::slice::from_ref(&secret), Some(&header), &body);
                if !well_formed(&header) {
                    prop_assert_eq!(got, Err(SignatureError::Malformed));
                } else if header.trim().eq_ignore_ascii_case(&sign(&secret, &body)) {
                    prop_assert_eq!(got, Ok(()));
                } else {
                    prop_assert_eq!(got, Err(SignatureError::Mismatch));
                }
                if let Err(e) = got {
                    prop_assert!(e.code().starts_with("signature_"));
                }
                Ok(())
            },
        );
    }

    /// Headers of growing size are refused for their shape alone (`decode` looks at the length
    /// before any hex digit), and bodies of growing size are one pass of HMAC each.
    #[test]
    fn corpus_headers_and_bodies_of_growing_size() {
        let s = Secret::new("It's a Secret to Everybody");
        let list = std::slice::from_ref(&s);
        hostile::corpus("verify: headers and bodies of growing size", SIZES, |n| {
            let long_hex = format!("sha256={}", "0".repeat(n));
            assert_eq!(
                verify_signature(list, Some(&long_hex), b"x"),
                Err(SignatureError::Malformed)
            );
            let long_junk = "\u{feff}".repeat(n / 3);
            assert_eq!(
                verify_signature(list, Some(&long_junk), b"x"),
                Err(SignatureError::Malformed)
            );
            // Surrounding whitespace is trimmed, as an HTTP header value's is.
            let body = vec![b'{'; n];
            let padded = format!("{}{}{}", " ".repeat(n), sign(&s, &body), "\t".repeat(n));
            assert_eq!(verify_signature(list, Some(&padded), &body), Ok(()));
        });
    }

    #[test]
    fn corpus_nasty_bodies_and_headers() {
        let s = Secret::new("It's a Secret to Everybody");
        let list = std::slice::from_ref(&s);
        let bodies: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"\xff\xfe\xfd not UTF-8".to_vec(),
            b"\xef\xbb\xbf{\"zen\":\"z\",\"hook_id\":1}".to_vec(),
            b"\0\0\0".to_vec(),
            "[".repeat(10_000).into_bytes(),
            vec![0u8; 25 * 1024 * 1024],
        ];
        hostile::corpus("verify: nasty bodies", bodies, |body| {
            assert_eq!(
                verify_signature(list, Some(&sign(&s, &body)), &body),
                Ok(())
            );
            assert_eq!(
                verify_signature(list, None, &body),
                Err(SignatureError::Missing)
            );
            assert_eq!(
                verify_signature(&[], Some(&sign(&s, &body)), &body),
                Err(SignatureError::Mismatch)
            );
        });
        let good = sign(&s, b"x");
        let digest = &good[7..];
        let headers = vec![
            format!("sha256={}\0", &digest[..63]),
            format!("sha256={}\u{e9}", &digest[..62]),
            format!("sha256=\u{ff10}{}", &digest[1..]),
            format!("sha256={}\u{ff10}", &digest[..61]),
            format!("sha256 ={digest}"),
            format!("sha256=\u{200b}{digest}"),
            format!("\u{feff}sha256={digest}"),
            format!("sha256={digest}\u{202e}"),
            format!("sha256={digest},sha256={digest}"),
            format!("sha256=0x{}", &digest[2..]),
            format!("sha256=+{}", &digest[1..]),
        ];
        hostile::corpus("verify: nasty headers", headers, |header| {
            assert_eq!(
                verify_signature(list, Some(&header), b"x"),
                Err(SignatureError::Malformed),
                "{header:?}"
            );
        });
    }
}
