//! JWT (RFC 7519) verification: HS256 and RS256 only, signature first.
//!
//! The header's `alg` only selects among the keys the operator configured;
//! it can never turn a check off (`none`) or swap a public RSA key in as an
//! HMAC secret, the classic JWT confusions. Claims are read only after the
//! signature checked out.

use base64ct::{Base64UrlUnpadded, Encoding};
use hmac::{Hmac, Mac};
use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::pkcs1v15::{Signature, VerifyingKey};
use rsa::pkcs8::DecodePublicKey;
use rsa::signature::Verifier;
use rsa::RsaPublicKey;
use serde_json::{Map, Value};
use sha2::Sha256;

use crate::{is_metadata_value, Failure, Identity, JwtConfig};

impl JwtConfig {
    /// Whether any JWT could verify at all.
    pub(crate) fn has_keys(&self) -> bool {
        !self.hs256_secrets.is_empty() || !self.rs256_public_keys.is_empty()
    }
}

fn invalid(reason: impl std::fmt::Display) -> Failure {
    Failure::Unauthenticated(format!("invalid bearer token: {reason}"))
}

/// Verifies `token` at `now` (seconds since the epoch) and names its
/// principal.
pub(crate) fn verify(config: &JwtConfig, token: &str, now: u64) -> Result<Identity, Failure> {
    let mut parts = token.split('.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid("not a JWT"));
    };
    let header = decode_object(header_b64).ok_or_else(|| invalid("malformed JWT header"))?;
    let signature =
        Base64UrlUnpadded::decode_vec(signature_b64).map_err(|_| invalid("malformed signature"))?;
    let signed = &token[..header_b64.len() + 1 + payload_b64.len()];

    let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
    let verified = match alg {
        "HS256" if !config.hs256_secrets.is_empty() => hs256(config, signed, &signature),
        "RS256" if !config.rs256_public_keys.is_empty() => rs256(config, signed, &signature)?,
        a if a.eq_ignore_ascii_case("none") => {
            return Err(invalid("unsigned tokens (alg none) are not accepted"))
        }
        "" => return Err(invalid("the JWT header has no alg")),
        other => {
            return Err(invalid(format_args!(
                "algorithm {} is not accepted",
                printable(other)
            )))
        }
    };
    if !verified {
        return Err(invalid("bad signature"));
    }

    let claims = decode_object(payload_b64).ok_or_else(|| invalid("malformed JWT claims"))?;
    check_times(config, &claims, now)?;
    check_issuer_audience(config, &claims)?;
    identity(config, &claims)
}

/// Tries every secret: key rotation means several may be live.
/// `verify_slice` compares in constant time.
fn hs256(config: &JwtConfig, signed: &str, signature: &[u8]) -> bool {
    config.hs256_secrets.iter().any(|secret| {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
            return false;
        };
        mac.update(signed.as_bytes());
        mac.verify_slice(signature).is_ok()
    })
}

/// Tries every public key. A key that does not parse is the operator's
/// error, reported as such rather than as the caller's bad signature.
fn rs256(config: &JwtConfig, signed: &str, signature: &[u8]) -> Result<bool, Failure> {
    let Ok(signature) = Signature::try_from(signature) else {
        return Ok(false);
    };
    for (i, pem) in config.rs256_public_keys.iter().enumerate() {
        let key = parse_public_key(pem).map_err(|e| {
            Failure::Config(format!(
                "jwt.rs256PublicKeys[{i}] is not a PEM RSA public key: {e}"
            ))
        })?;
        if VerifyingKey::<Sha256>::new(key)
            .verify(signed.as_bytes(), &signature)
            .is_ok()
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Reads an SPKI (`BEGIN PUBLIC KEY`) or PKCS#1 (`BEGIN RSA PUBLIC KEY`)
/// PEM key; YAML block scalars may indent or pad it, so it is trimmed.
pub(crate) fn parse_public_key(pem: &str) -> Result<RsaPublicKey, String> {
    let pem = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    if pem.starts_with("-----BEGIN RSA PUBLIC KEY-----") {
        RsaPublicKey::from_pkcs1_pem(&pem).map_err(|e| e.to_string())
    } else {
        RsaPublicKey::from_public_key_pem(&pem).map_err(|e| e.to_string())
    }
}

fn decode_object(b64: &str) -> Option<Map<String, Value>> {
    let bytes = Base64UrlUnpadded::decode_vec(b64).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// A NumericDate claim: seconds, possibly fractional (RFC 7519 §2).
fn numeric_date(claims: &Map<String, Value>, name: &str) -> Result<Option<f64>, Failure> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| invalid(format_args!("the {name} claim is not a number"))),
    }
}

fn check_times(config: &JwtConfig, claims: &Map<String, Value>, now: u64) -> Result<(), Failure> {
    let now = now as f64;
    let leeway = config.leeway_seconds as f64;
    match numeric_date(claims, "exp")? {
        Some(exp) if now >= exp + leeway => return Err(invalid("the token has expired")),
        None if config.require_exp => return Err(invalid("the token has no exp claim")),
        _ => {}
    }
    if let Some(nbf) = numeric_date(claims, "nbf")? {
        if now + leeway < nbf {
            return Err(invalid("the token is not valid yet (nbf)"));
        }
    }
    Ok(())
}

fn check_issuer_audience(config: &JwtConfig, claims: &Map<String, Value>) -> Result<(), Failure> {
    if let Some(issuer) = &config.issuer {
        if claims.get("iss").and_then(Value::as_str) != Some(issuer.as_str()) {
            return Err(invalid(format_args!("the issuer is not {issuer}")));
        }
    }
    if let Some(audience) = &config.audience {
        let ok = match claims.get("aud") {
            Some(Value::String(aud)) => aud == audience,
            Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(audience)),
            _ => false,
        };
        if !ok {
            return Err(invalid(format_args!(
                "the audience does not include {audience}"
            )));
        }
    }
    Ok(())
}

fn identity(config: &JwtConfig, claims: &Map<String, Value>) -> Result<Identity, Failure> {
    let claim = &config.principal_claim;
    let principal = match claims.get(claim).and_then(Value::as_str) {
        Some(p) if is_metadata_value(p) => p.to_string(),
        Some(_) => {
            return Err(invalid(format_args!(
                "the {claim} claim is not a valid principal (printable ASCII)"
            )))
        }
        None => return Err(invalid(format_args!("the token has no {claim} claim"))),
    };
    let mut groups = Vec::new();
    if !config.groups_claim.is_empty() {
        match claims.get(&config.groups_claim) {
            Some(Value::Array(list)) => groups.extend(list.iter().filter_map(Value::as_str)),
            Some(Value::String(one)) => groups.push(one.as_str()),
            _ => {}
        }
    }
    // A comma would split one group into two in x-weft-groups.
    let groups = groups
        .into_iter()
        .filter(|g| is_metadata_value(g) && !g.contains(','))
        .map(str::to_string)
        .collect();
    Ok(Identity { principal, groups })
}

/// The caller controls `alg`: quote it only when it is short and plain.
fn printable(s: &str) -> String {
    if s.len() <= 16 && s.bytes().all(|b| b.is_ascii_alphanumeric()) {
        s.to_string()
    } else {
        "(unprintable)".to_string()
    }
}
