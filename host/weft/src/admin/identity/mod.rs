//! Who is calling the admin API, established by the host before any Wasm
//! middleware runs.
//!
//! - an OpenID Connect ID token of the configured provider, as a bearer
//!   token (the CLI after `weft login`) or in the console's session cookie
//!   (`login`: the authorization-code flow with PKCE);
//! - with `tokenReview`, any other bearer token the API server accepts
//!   (service-account tokens), checked with a TokenReview;
//! - anything else is left to the middleware (the auth-token plugin's
//!   static tokens), which sets the same metadata.
//!
//! The identity travels as `x-weft-principal`, `x-weft-groups` and
//! `x-weft-authenticated-by` metadata, so middleware and the audit see it;
//! the credential itself (the `authorization` metadata and the cookie) is
//! removed once used, so no plugin ever sees it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use tonic::Status;

pub mod login;
pub mod oidc;
pub mod review;

pub use oidc::{Oidc, OidcConfig};

/// The principal (user name) of the call.
pub const PRINCIPAL: &str = "x-weft-principal";
/// The principal's groups, comma-separated.
pub const GROUPS: &str = "x-weft-groups";
/// Which authenticator established the principal (`oidc`, `session`,
/// `token-review`; absent: a middleware).
pub const AUTHENTICATED_BY: &str = "x-weft-authenticated-by";
/// The console's session cookie: the ID token, HttpOnly.
pub const SESSION_COOKIE: &str = "weft_session";

/// How callers authenticate (`authentication` in the `--admin-config` file).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthenticationConfig {
    /// An OpenID Connect provider for people (console and CLI).
    #[serde(default)]
    pub oidc: Option<OidcConfig>,
    /// Bearer tokens the API server knows (service accounts), checked with
    /// a TokenReview.
    #[serde(default)]
    pub token_review: bool,
    /// The audiences a reviewed token must be for (empty: the API
    /// server's).
    #[serde(default)]
    pub token_review_audiences: Vec<String>,
    /// Mark the session cookie `Secure` (browsers keep it on http only for
    /// localhost). Default true.
    #[serde(default = "yes")]
    pub secure_cookies: bool,
}

fn yes() -> bool {
    true
}

/// Which authenticator vouched for a caller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Via {
    /// An ID token sent as a bearer token.
    Oidc,
    /// The console's session cookie.
    Session,
    /// A TokenReview by the API server.
    TokenReview,
    /// A Wasm middleware (static tokens, the auth-token plugin's JWTs),
    /// or nobody.
    #[default]
    Middleware,
}

impl Via {
    /// The `x-weft-authenticated-by` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Oidc => "oidc",
            Via::Session => "session",
            Via::TokenReview => "token-review",
            Via::Middleware => "middleware",
        }
    }

    /// The inverse of [`Via::as_str`]; anything else is a middleware's.
    pub fn parse(s: Option<&str>) -> Via {
        match s {
            Some("oidc") => Via::Oidc,
            Some("session") => Via::Session,
            Some("token-review") => Via::TokenReview,
            _ => Via::Middleware,
        }
    }
}

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user name, prefixed as configured.
    pub user: String,
    /// The groups, prefixed as configured.
    pub groups: Vec<String>,
    /// Who vouched for it.
    pub via: Via,
    /// When the credential expires (seconds since the epoch), if it says.
    pub expires: Option<u64>,
}

/// The host's authenticators.
pub struct Authenticator {
    config: AuthenticationConfig,
    oidc: Option<Arc<Oidc>>,
    client: kube::Client,
    reviews: review::Reviews,
}

impl Authenticator {
    /// The authenticators `config` turns on; `client` runs TokenReviews.
    pub fn new(config: AuthenticationConfig, client: kube::Client) -> Self {
        let oidc = config.oidc.clone().map(|c| Arc::new(Oidc::new(c)));
        Authenticator {
            config,
            oidc,
            client,
            reviews: review::Reviews::default(),
        }
    }

    /// The OIDC provider, when configured.
    pub fn oidc(&self) -> Option<&Arc<Oidc>> {
        self.oidc.as_ref()
    }

    /// The configuration.
    pub fn config(&self) -> &AuthenticationConfig {
        &self.config
    }

    /// Establishes the caller from `md`'s credentials and records it in
    /// `md`. A credential meant for an authenticator here that fails is
    /// UNAUTHENTICATED with the reason; one for none of them is left for
    /// the middleware.
    pub async fn authenticate(&self, md: &mut BTreeMap<String, String>) -> Result<(), Status> {
        let session = md.remove("cookie").and_then(|c| session_cookie(&c));
        let bearer = md
            .get("authorization")
            .and_then(|v| v.strip_prefix("Bearer ").map(|t| t.trim().to_string()));
        let identity = match (bearer, session) {
            (Some(token), _) => self.bearer(&token).await?,
            (None, Some(token)) => self.session(&token).await?,
            (None, None) => None,
        };
        if let Some(id) = identity {
            md.remove("authorization");
            md.insert(PRINCIPAL.into(), id.user);
            md.insert(GROUPS.into(), id.groups.join(","));
            md.insert(AUTHENTICATED_BY.into(), id.via.as_str().into());
        }
        Ok(())
    }

    async fn bearer(&self, token: &str) -> Result<Option<Identity>, Status> {
        if let Some(oidc) = self.oidc.as_ref().filter(|o| o.issued(token)) {
            return oidc
                .verify(token, Via::Oidc)
                .await
                .map(Some)
                .map_err(refused);
        }
        if self.config.token_review && oidc::unverified_claims(token).is_some() {
            let audiences = &self.config.token_review_audiences;
            return self
                .reviews
                .review(&self.client, token, audiences)
                .await
                .map_err(Status::unavailable);
        }
        Ok(None)
    }

    async fn session(&self, token: &str) -> Result<Option<Identity>, Status> {
        let Some(oidc) = &self.oidc else {
            return Ok(None);
        };
        oidc.verify(token, Via::Session)
            .await
            .map(Some)
            .map_err(|e| refused(e).map_message(|m| format!("{m}; sign in to the console again")))
    }
}

/// A rejected token: UNAVAILABLE when the provider is down (the token may
/// be fine), UNAUTHENTICATED otherwise.
fn refused(e: oidc::Rejected) -> Status {
    match e {
        oidc::Rejected::Unreachable { .. } => Status::unavailable(e.to_string()),
        oidc::Rejected::Invalid(_) => Status::unauthenticated(e.to_string()),
    }
}

trait MapMessage {
    fn map_message(self, f: impl FnOnce(&str) -> String) -> Self;
}

impl MapMessage for Status {
    fn map_message(self, f: impl FnOnce(&str) -> String) -> Self {
        Status::new(self.code(), f(self.message()))
    }
}

/// The session cookie's value in a `cookie` header.
pub fn session_cookie(header: &str) -> Option<String> {
    cookie_value(header, SESSION_COOKIE)
}

/// The value of cookie `name` in a `cookie` header (none when empty).
pub fn cookie_value(header: &str, name: &str) -> Option<String> {
    header.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name && !v.is_empty()).then(|| v.to_string())
    })
}

/// The HTTP client for the provider: rustls with ring, as the rest of the
/// binary.
pub(crate) fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
