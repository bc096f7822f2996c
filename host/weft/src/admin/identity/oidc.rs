//! OpenID Connect: the provider's discovery document and signing keys, and
//! ID tokens checked against them, as kube-apiserver's `--oidc-*` flags do.
//!
//! Nothing is fetched at start: the provider may come up after Weft, and a
//! provider that is down makes OIDC calls UNAVAILABLE, not the server. The
//! keys are fetched again when a token names a key id not in the set (the
//! provider rotated its keys) and when the set is older than
//! [`KEYS_MAX_AGE`], never more often than [`REFETCH_MIN_INTERVAL`] (a
//! caller waits for the next fetch instead), so a stream of forged key ids
//! cannot make Weft hammer the provider.

use std::time::{Duration, Instant};

use base64::Engine as _;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::sync::RwLock;

use super::{Identity, Via};

/// A key set older than this is fetched again before use.
pub const KEYS_MAX_AGE: Duration = Duration::from_secs(600);
/// The key set is fetched at most this often for unknown key ids.
pub const REFETCH_MIN_INTERVAL: Duration = Duration::from_secs(5);

/// The provider and how its tokens map to Kubernetes users and groups
/// (`authentication.oidc` in the `--admin-config` file).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcConfig {
    /// The issuer URL; its `/.well-known/openid-configuration` is read.
    pub issuer_url: String,
    /// The console's client id (the authorization-code flow).
    pub client_id: String,
    /// A file holding the console client's secret; absent: a public
    /// client, with PKCE only.
    #[serde(default)]
    pub client_secret_file: Option<std::path::PathBuf>,
    /// The CLI's client id (device and loopback flows; a public client).
    /// Absent: the console's.
    #[serde(default)]
    pub cli_client_id: Option<String>,
    /// Scopes asked for at login.
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// Audiences an ID token may carry (`aud`); absent: the client ids.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// The claim that names the user (`--oidc-username-claim`).
    #[serde(default = "default_username_claim")]
    pub username_claim: String,
    /// Put before the user name (`--oidc-username-prefix`), e.g. `oidc:`.
    #[serde(default)]
    pub username_prefix: String,
    /// The claim with the user's groups (`--oidc-groups-claim`).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Put before each group (`--oidc-groups-prefix`).
    #[serde(default)]
    pub groups_prefix: String,
    /// Where the provider sends the browser back to after the console's
    /// login; absent: `/auth/callback` on the host the browser used.
    #[serde(default)]
    pub redirect_url: Option<String>,
}

fn default_scopes() -> Vec<String> {
    ["openid", "email", "profile", "groups", "offline_access"]
        .map(String::from)
        .to_vec()
}

fn default_username_claim() -> String {
    "sub".into()
}

fn default_groups_claim() -> String {
    "groups".into()
}

impl OidcConfig {
    /// The CLI's client id.
    pub fn cli_client_id(&self) -> &str {
        self.cli_client_id.as_deref().unwrap_or(&self.client_id)
    }

    /// The audiences an ID token may be for.
    fn audiences(&self) -> Vec<String> {
        if !self.audiences.is_empty() {
            return self.audiences.clone();
        }
        let mut a = vec![self.client_id.clone()];
        a.extend(self.cli_client_id.clone());
        a
    }
}

/// What discovery tells (the fields Weft uses).
#[derive(Debug, Clone, Deserialize)]
pub struct Discovery {
    /// Must equal the configured issuer.
    pub issuer: String,
    /// Where the browser logs in.
    pub authorization_endpoint: String,
    /// Where codes, device codes and refresh tokens are exchanged.
    pub token_endpoint: String,
    /// The signing keys.
    pub jwks_uri: String,
    /// The device authorization grant's endpoint, when offered.
    #[serde(default)]
    pub device_authorization_endpoint: Option<String>,
    /// RP-initiated logout, when offered.
    #[serde(default)]
    pub end_session_endpoint: Option<String>,
}

/// A token that did not pass, with why (never the token itself).
#[derive(Debug, thiserror::Error)]
pub enum Rejected {
    /// The provider could not be asked (discovery or keys).
    #[error("the identity provider {issuer} cannot be reached: {why}")]
    Unreachable {
        /// The configured issuer.
        issuer: String,
        /// What failed.
        why: String,
    },
    /// The token is not valid.
    #[error("invalid ID token: {0}")]
    Invalid(String),
}

struct Keys {
    set: JwkSet,
    fetched: Instant,
}

/// One provider: discovery and keys, cached.
pub struct Oidc {
    config: OidcConfig,
    http: reqwest::Client,
    discovery: RwLock<Option<Discovery>>,
    keys: RwLock<Option<Keys>>,
    fetching: tokio::sync::Mutex<()>,
}

impl Oidc {
    /// A provider that is asked nothing until a token arrives.
    pub fn new(config: OidcConfig) -> Self {
        Oidc {
            config,
            http: super::http_client(),
            discovery: RwLock::new(None),
            keys: RwLock::new(None),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    /// Whether `token` claims to be from this issuer (unverified: it only
    /// picks the authenticator; [`Oidc::verify`] checks).
    pub fn issued(&self, token: &str) -> bool {
        unverified_claims(token)
            .and_then(|c| c.get("iss").and_then(Value::as_str).map(String::from))
            .is_some_and(|iss| iss == self.config.issuer_url)
    }

    /// The discovery document, fetched once.
    pub async fn discovery(&self) -> Result<Discovery, Rejected> {
        if let Some(d) = self.discovery.read().await.clone() {
            return Ok(d);
        }
        let issuer = self.config.issuer_url.trim_end_matches('/');
        let url = format!("{issuer}/.well-known/openid-configuration");
        let d: Discovery = self.get_json(&url).await?;
        if d.issuer != self.config.issuer_url {
            return Err(self.unreachable(format!(
                "its discovery document names the issuer {:?}, not {:?} as configured",
                d.issuer, self.config.issuer_url
            )));
        }
        *self.discovery.write().await = Some(d.clone());
        Ok(d)
    }

    /// Checks an ID token: signature by a key of the provider, issuer,
    /// audience, expiry; then maps its claims to a user and groups.
    pub async fn verify(&self, token: &str, via: Via) -> Result<Identity, Rejected> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Rejected::Invalid(format!("not a JWT: {e}")))?;
        let alg = header.alg;
        if !asymmetric(alg) {
            return Err(Rejected::Invalid(format!(
                "signed with {alg:?}; only the provider's public-key algorithms are accepted"
            )));
        }
        let jwk = self.key(header.kid.as_deref()).await?;
        let key = DecodingKey::from_jwk(&jwk)
            .map_err(|e| Rejected::Invalid(format!("the provider's key cannot be used: {e}")))?;
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&self.config.issuer_url]);
        validation.set_audience(&self.config.audiences());
        validation.leeway = 30;
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| Rejected::Invalid(describe(e)))?;
        self.identity(&data.claims, via)
    }

    /// The user and groups a verified token's claims name.
    fn identity(&self, claims: &Map<String, Value>, via: Via) -> Result<Identity, Rejected> {
        let c = &self.config;
        let user = claims
            .get(&c.username_claim)
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                Rejected::Invalid(format!(
                    "it has no {:?} claim (the configured usernameClaim)",
                    c.username_claim
                ))
            })?;
        if c.username_claim == "email" && claims.get("email_verified") == Some(&Value::Bool(false))
        {
            return Err(Rejected::Invalid(format!(
                "its email {user} is not verified (email_verified is false)"
            )));
        }
        let groups = match claims.get(&c.groups_claim) {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            Some(Value::String(g)) => vec![g.clone()],
            _ => Vec::new(),
        };
        Ok(Identity {
            user: format!("{}{user}", c.username_prefix),
            groups: groups
                .into_iter()
                .map(|g| format!("{}{g}", c.groups_prefix))
                .collect(),
            via,
            expires: claims.get("exp").and_then(Value::as_u64),
        })
    }

    /// The key `kid` names: from the cached set, or from a fresh one when
    /// the set lacks it (rotation) or is old. Fetches are one at a time and
    /// at least [`REFETCH_MIN_INTERVAL`] apart: a token of a new key waits
    /// that long at most, a stream of made-up key ids costs the provider
    /// one fetch per interval.
    async fn key(&self, kid: Option<&str>) -> Result<Jwk, Rejected> {
        if let Some(k) = self.cached(kid).await {
            return Ok(k);
        }
        let _one = self.fetching.lock().await;
        // Another call may have fetched while this one waited.
        if let Some(k) = self.cached(kid).await {
            return Ok(k);
        }
        let since = self.keys.read().await.as_ref().map(|k| k.fetched.elapsed());
        if let Some(since) = since.filter(|s| *s < REFETCH_MIN_INTERVAL) {
            tokio::time::sleep(REFETCH_MIN_INTERVAL - since).await;
        }
        let d = self.discovery().await?;
        let set: JwkSet = self.get_json(&d.jwks_uri).await?;
        let found = find(&set, kid);
        tracing::info!(
            issuer = self.config.issuer_url,
            keys = set.keys.len(),
            "fetched the identity provider's signing keys"
        );
        *self.keys.write().await = Some(Keys {
            set,
            fetched: Instant::now(),
        });
        found.ok_or_else(|| unknown_kid(kid))
    }

    /// The key from a set fetched less than [`KEYS_MAX_AGE`] ago.
    async fn cached(&self, kid: Option<&str>) -> Option<Jwk> {
        let keys = self.keys.read().await;
        keys.as_ref()
            .filter(|k| k.fetched.elapsed() < KEYS_MAX_AGE)
            .and_then(|k| find(&k.set, kid))
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, Rejected> {
        let resp = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| self.unreachable(format!("GET {url}: {e}")))?;
        if !resp.status().is_success() {
            return Err(self.unreachable(format!("GET {url}: HTTP {}", resp.status())));
        }
        let body = resp
            .bytes()
            .await
            .map_err(|e| self.unreachable(format!("GET {url}: {e}")))?;
        serde_json::from_slice(&body)
            .map_err(|e| self.unreachable(format!("GET {url}: not the JSON expected: {e}")))
    }

    fn unreachable(&self, why: String) -> Rejected {
        Rejected::Unreachable {
            issuer: self.config.issuer_url.clone(),
            why,
        }
    }
}

/// The key with `kid`, or the only key when the token names none.
fn find(set: &JwkSet, kid: Option<&str>) -> Option<Jwk> {
    match kid {
        Some(kid) => set.find(kid).cloned(),
        None if set.keys.len() == 1 => set.keys.first().cloned(),
        None => None,
    }
}

fn unknown_kid(kid: Option<&str>) -> Rejected {
    Rejected::Invalid(match kid {
        Some(kid) => format!("signed with key {kid:?}, which the provider does not publish"),
        None => "it names no key id (kid) and the provider publishes several keys".into(),
    })
}

fn asymmetric(alg: Algorithm) -> bool {
    use Algorithm::*;
    matches!(
        alg,
        RS256 | RS384 | RS512 | PS256 | PS384 | PS512 | ES256 | ES384 | EdDSA
    )
}

/// jsonwebtoken's error in a user's words.
fn describe(e: jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind::*;
    match e.kind() {
        ExpiredSignature => "it has expired".into(),
        ImmatureSignature => "it is not valid yet (nbf)".into(),
        InvalidSignature => "its signature does not match the provider's key".into(),
        InvalidIssuer => "it is from another issuer".into(),
        InvalidAudience => "it is for another client (aud)".into(),
        MissingRequiredClaim(c) => format!("it has no {c} claim"),
        _ => e.to_string(),
    }
}

/// A JWT's claims without checking anything: only to route the token.
pub fn unverified_claims(token: &str) -> Option<Map<String, Value>> {
    let mut parts = token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}
