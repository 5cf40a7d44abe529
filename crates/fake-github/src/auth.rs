//! How the stand-in checks credentials like GitHub does: App JWTs (RS256 with the App's key,
//! `iss`, `iat`, `exp` rules of GITHUB.md §3.1) and the installation tokens it issued.

use jiff::Timestamp;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;

use super::calls::CallAuth;
use super::state::State;

/// The longest JWT lifetime GitHub accepts.
const MAX_JWT_LIFETIME_SECS: i64 = 600;
/// Clock drift tolerated on `iat`.
const IAT_SKEW_SECS: i64 = 60;

#[derive(Deserialize)]
struct Claims {
    iss: Option<Value>,
    iat: Option<i64>,
    exp: Option<i64>,
}

/// Checks an App JWT; the error is GitHub's 401 message.
pub(crate) fn verify_jwt(
    token: &str,
    key: &DecodingKey,
    app_id: u64,
    now: i64,
) -> Result<(), &'static str> {
    let mut validation = Validation::new(Algorithm::RS256);
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let claims = jsonwebtoken::decode::<Claims>(token, key, &validation)
        .map_err(|_| "A JSON web token could not be decoded")?
        .claims;
    let iss_ok = match &claims.iss {
        Some(Value::Number(n)) => n.as_u64() == Some(app_id),
        Some(Value::String(s)) => s.trim() == app_id.to_string(),
        _ => false,
    };
    if !iss_ok {
        return Err("'Issuer' claim ('iss') must be an Integer");
    }
    let iat = claims.iat.ok_or(
        "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
    )?;
    let exp = claims.exp.ok_or(
        "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
    )?;
    if exp - iat > MAX_JWT_LIFETIME_SECS {
        return Err("'Expiration time' claim ('exp') is too far in the future");
    }
    if exp <= now {
        return Err(
            "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
        );
    }
    if iat > now + IAT_SKEW_SECS {
        return Err(
            "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
        );
    }
    Ok(())
}

/// The credential a request carries, as checked.
#[derive(Debug, Clone)]
pub(crate) enum RequestAuth {
    None,
    Jwt(Result<(), &'static str>),
    Installation {
        installation: u64,
        token: u32,
    },
    /// A user-to-server token from the OAuth sign-in.
    User {
        login: String,
    },
    BadToken,
}

impl RequestAuth {
    /// Reads `Authorization: Bearer|token <credential>`.
    pub fn classify(header: Option<&str>, state: &State, key: &DecodingKey, app_id: u64) -> Self {
        let Some(header) = header else {
            return Self::None;
        };
        let credential = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .or_else(|| header.strip_prefix("token "))
            .unwrap_or(header)
            .trim();
        if credential.split('.').count() == 3 {
            if state.app_key_revoked {
                // What GitHub answers for a JWT signed with a key it no longer holds.
                return Self::Jwt(Err("A JSON web token could not be decoded"));
            }
            let now = Timestamp::now().as_second();
            return Self::Jwt(verify_jwt(credential, key, app_id, now));
        }
        if let Some(login) = state.user_tokens.get(credential) {
            return Self::User {
                login: login.clone(),
            };
        }
        match state.tokens.get(credential) {
            Some(t) if t.expires_at > Timestamp::now() => Self::Installation {
                installation: t.installation,
                token: t.serial,
            },
            _ => Self::BadToken,
        }
    }

    pub fn for_log(&self) -> CallAuth {
        match *self {
            Self::User { .. } => CallAuth::User,
            Self::None => CallAuth::None,
            Self::Jwt(ref r) => CallAuth::Jwt { valid: r.is_ok() },
            Self::Installation {
                installation,
                token,
            } => CallAuth::Installation {
                installation,
                token,
            },
            Self::BadToken => CallAuth::BadToken,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    const PRIVATE: &str = include_str!("../../../fixtures/keys/test-app.pem");
    const PUBLIC: &str = include_str!("../../../fixtures/keys/test-app.pub.pem");
    const OTHER: &str = include_str!("../../../fixtures/keys/other-app.pem");

    fn jwt(key: &str, claims: Value) -> String {
        let key = EncodingKey::from_rsa_pem(key.as_bytes()).unwrap();
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &key).unwrap()
    }

    #[test]
    fn jwt_rules() {
        let key = DecodingKey::from_rsa_pem(PUBLIC.as_bytes()).unwrap();
        let now = 1_760_000_000;
        let check = |pem: &str, claims: Value| verify_jwt(&jwt(pem, claims), &key, 42, now);
        assert_eq!(
            check(
                PRIVATE,
                json!({"iss": 42, "iat": now - 60, "exp": now + 540})
            ),
            Ok(())
        );
        assert_eq!(
            check(
                PRIVATE,
                json!({"iss": "42", "iat": now - 60, "exp": now + 540})
            ),
            Ok(())
        );
        assert!(check(OTHER, json!({"iss": 42, "iat": now - 60, "exp": now + 540})).is_err());
        assert!(
            check(
                PRIVATE,
                json!({"iss": 43, "iat": now - 60, "exp": now + 540})
            )
            .is_err()
        );
        assert!(check(PRIVATE, json!({"iss": 42, "iat": now, "exp": now + 601})).is_err());
        assert!(
            check(
                PRIVATE,
                json!({"iss": 42, "iat": now - 700, "exp": now - 100})
            )
            .is_err()
        );
        assert!(
            check(
                PRIVATE,
                json!({"iss": 42, "iat": now + 120, "exp": now + 600})
            )
            .is_err()
        );
        assert!(check(PRIVATE, json!({"iss": 42, "exp": now + 600})).is_err());
        assert!(verify_jwt("a.b.c", &key, 42, now).is_err());
    }
}
