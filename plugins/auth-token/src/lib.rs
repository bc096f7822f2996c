//! Bearer-token authentication for Weft's admin API, as a middleware.
//!
//! Every call must carry `authorization: Bearer <token>` metadata, unless
//! its method is listed in `skipMethods`. The token is either
//!
//! - a **static token** from `tokens` (a map from token to principal), meant
//!   for robots and small installations, compared in constant time so the
//!   time an answer takes says nothing about how close a guess was; or
//! - a **JWT** signed with HS256 (a shared secret from `jwt.hs256Secrets`)
//!   or RS256 (a PEM public key from `jwt.rs256PublicKeys`), as issued by an
//!   identity provider. `exp` and `nbf` are checked against the host's clock
//!   with `jwt.leewaySeconds` of slack, `iss` and `aud` when configured. The
//!   principal is the `jwt.principalClaim` claim (`sub`), the groups the
//!   `jwt.groupsClaim` claim (`groups`) when present. Unsigned tokens
//!   (`alg: none`) and algorithms without a configured key are refused, so a
//!   token cannot pick a weaker check than the operator set up.
//!
//! A call the host already authenticated (its OpenID Connect sign-in or a
//! TokenReview: `x-weft-authenticated-by` is set) proceeds as it is.
//!
//! On success the call proceeds with `x-weft-principal` (and `x-weft-groups`,
//! comma-separated) set, and with `authorization` **removed**: later plugins
//! and the service get the identity, never the credential. The host strips
//! client-sent `x-weft-*` keys before the chain runs, so only this plugin
//! can have set them.
//!
//! Every failure is `UNAUTHENTICATED` with the reason (missing, malformed,
//! unknown, bad signature, expired, ...) and never the token itself. A
//! configuration the plugin cannot use fails every call with `INTERNAL`:
//! the plugin fails closed, like its manifest's `failStrategy`.

use std::collections::BTreeMap;

/// Each instance serves one call and is dropped: a bump allocator over the
/// memory the module starts with is all it needs (docs/benchmarks.md).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOC: weft_plugin_sdk::OneCallAllocator = weft_plugin_sdk::OneCallAllocator::new();

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use weft_plugin_sdk::{clock, log, Call, Code, MiddlewarePlugin, Value, Verdict};

mod jwt;

/// The metadata key carrying the credential.
const AUTHORIZATION: &str = "authorization";
/// Set by the host when it authenticated the caller itself (clients cannot
/// send `x-weft-*` keys: the host strips them).
pub const AUTHENTICATED_BY: &str = "x-weft-authenticated-by";
/// Where the authenticated identity goes; the host's convention.
pub const PRINCIPAL: &str = "x-weft-principal";
/// The principal's groups, comma-separated, when the token names any.
pub const GROUPS: &str = "x-weft-groups";

/// The plugin's configuration: the manifest's defaults merged key by key
/// with the operator's overrides. Unknown keys are an error so a typo does
/// not silently switch a check off.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// Static tokens: token -> principal.
    pub tokens: BTreeMap<String, String>,
    /// Full method names that need no token (e.g. a health check).
    pub skip_methods: Vec<String>,
    /// How JWTs are checked.
    pub jwt: JwtConfig,
}

/// JWT verification settings. The host merges configuration only at the
/// top level, so an operator's `jwt` map replaces the manifest's whole: the
/// defaults here are what a key left out of it means.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct JwtConfig {
    /// Shared secrets (their UTF-8 bytes) that may sign HS256 tokens.
    pub hs256_secrets: Vec<String>,
    /// PEM public keys (SPKI `BEGIN PUBLIC KEY` or PKCS#1 `BEGIN RSA PUBLIC
    /// KEY`) that may sign RS256 tokens.
    pub rs256_public_keys: Vec<String>,
    /// Clock skew tolerated on `exp` and `nbf`.
    pub leeway_seconds: u64,
    /// When set, `iss` must equal it.
    pub issuer: Option<String>,
    /// When set, `aud` (a string or an array) must contain it.
    pub audience: Option<String>,
    /// The claim naming the principal.
    pub principal_claim: String,
    /// The claim listing groups (an array of strings, or one string);
    /// empty to ignore groups.
    pub groups_claim: String,
    /// Whether a token without `exp` is refused: one without would be valid
    /// forever.
    pub require_exp: bool,
}

impl Default for JwtConfig {
    fn default() -> Self {
        JwtConfig {
            hs256_secrets: Vec::new(),
            rs256_public_keys: Vec::new(),
            leeway_seconds: 30,
            issuer: None,
            audience: None,
            principal_claim: "sub".into(),
            groups_claim: "groups".into(),
            require_exp: true,
        }
    }
}

impl Config {
    /// Reads the configuration the host passed (`null` means all defaults).
    pub fn from_value(value: &Value) -> Result<Self, String> {
        if value.is_null() {
            return Ok(Config::default());
        }
        let config: Config = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        for (i, secret) in config.jwt.hs256_secrets.iter().enumerate() {
            // HMAC with a short key is guessable offline from any token.
            if secret.len() < 32 {
                return Err(format!(
                    "jwt.hs256Secrets[{i}] is {} bytes; HS256 needs at least 32",
                    secret.len()
                ));
            }
        }
        for (token, principal) in &config.tokens {
            if token.is_empty() {
                return Err("tokens has an empty token".into());
            }
            if !is_metadata_value(principal) {
                return Err(format!(
                    "tokens maps a token to the principal {principal:?}, which is not a valid metadata value"
                ));
            }
        }
        Ok(config)
    }
}

/// Who the caller is, once a token checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The principal (`x-weft-principal`).
    pub principal: String,
    /// Its groups (`x-weft-groups`), maybe none.
    pub groups: Vec<String>,
}

/// Why a call is turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The caller's fault: answered `UNAUTHENTICATED` with this reason.
    Unauthenticated(String),
    /// The operator's: the configuration cannot be used (`INTERNAL`).
    Config(String),
}

/// Decides about one call at `now_millis` (the host's clock in the
/// component; a fixed time in tests).
pub fn authenticate(call: &Call, now_millis: u64) -> Verdict {
    let config = match Config::from_value(&call.plugin_config) {
        Ok(c) => c,
        Err(e) => return failure(Failure::Config(e)),
    };
    if config.skip_methods.contains(&call.method) {
        // No identity, but still no credential past this point.
        return Verdict::proceed().and_remove(AUTHORIZATION);
    }
    if call.metadata.contains_key(AUTHENTICATED_BY) {
        // The host signed the caller in (single sign-on, a TokenReview)
        // before the chain: the identity stands, and the host already
        // removed the credential.
        return Verdict::proceed();
    }
    match identify(&config, call.metadata.get(AUTHORIZATION), now_millis) {
        Ok(id) => {
            let mut verdict = Verdict::proceed_setting(PRINCIPAL, id.principal);
            if !id.groups.is_empty() {
                verdict = verdict.and_set(GROUPS, id.groups.join(","));
            }
            verdict.and_remove(AUTHORIZATION)
        }
        Err(f) => failure(f),
    }
}

fn failure(f: Failure) -> Verdict {
    match f {
        Failure::Unauthenticated(reason) => Verdict::reject(Code::Unauthenticated, reason),
        Failure::Config(problem) => {
            log::error(&format!("invalid configuration: {problem}"));
            Verdict::reject(
                Code::Internal,
                format!("auth-token is misconfigured: {problem}"),
            )
        }
    }
}

/// Checks the `authorization` value against the configuration.
pub fn identify(
    config: &Config,
    authorization: Option<&String>,
    now_millis: u64,
) -> Result<Identity, Failure> {
    let unauthenticated = |m: &str| Failure::Unauthenticated(m.to_string());
    let Some(value) = authorization else {
        return Err(unauthenticated(
            "missing credentials: send the `authorization` metadata as `Bearer <token>`",
        ));
    };
    // The scheme is case-insensitive (RFC 9110); never echo the value.
    let token = match value.trim().split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
        _ => {
            return Err(unauthenticated(
                "the `authorization` metadata must be `Bearer <token>`",
            ))
        }
    };
    if token.is_empty() {
        return Err(unauthenticated(
            "the `authorization` metadata has an empty bearer token",
        ));
    }
    if let Some(principal) = static_principal(&config.tokens, token) {
        return Ok(Identity {
            principal: principal.to_string(),
            groups: Vec::new(),
        });
    }
    if token.split('.').count() == 3 && config.jwt.has_keys() {
        return jwt::verify(&config.jwt, token, now_millis / 1000);
    }
    Err(unauthenticated("invalid bearer token: unknown token"))
}

/// The principal of a static token. Every configured token is compared,
/// each through its SHA-256 digest so lengths match too: neither which
/// token matched nor how much of it leaks through timing.
fn static_principal<'a>(tokens: &'a BTreeMap<String, String>, token: &str) -> Option<&'a str> {
    let presented = Sha256::digest(token.as_bytes());
    let mut found = None;
    for (candidate, principal) in tokens {
        let hit = Sha256::digest(candidate.as_bytes()).ct_eq(&presented);
        if bool::from(hit) {
            found = Some(principal.as_str());
        }
    }
    found
}

/// Whether `s` can be a gRPC ASCII metadata value: printable ASCII, no
/// surrounding whitespace, not empty.
fn is_metadata_value(s: &str) -> bool {
    !s.is_empty() && s.trim() == s && s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// The component.
pub struct AuthToken;

impl MiddlewarePlugin for AuthToken {
    fn on_request(call: Call) -> Verdict {
        authenticate(&call, clock::now_millis())
    }
}

weft_plugin_sdk::export_middleware_plugin!(AuthToken);

#[cfg(test)]
mod tests;
