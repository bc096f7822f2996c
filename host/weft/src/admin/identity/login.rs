//! The console's sign-in: the authorization-code flow with PKCE, done by
//! the server (the browser never holds a token a script can read).
//!
//! `/auth/login` sends the browser to the provider with a PKCE challenge,
//! a state and a nonce, kept meanwhile in a short-lived HttpOnly cookie;
//! `/auth/callback` checks the state, exchanges the code with the
//! verifier, checks the ID token (signature, audience, nonce) and puts it
//! in the session cookie (HttpOnly, SameSite=Lax, Secure unless
//! configured off); `/auth/logout` clears it and ends the provider's
//! session. The cookie holds only the provider-signed ID token, so any
//! replica can check it and none keeps sessions. `/auth/config` tells the
//! console and the CLI how to sign in; `/auth/me` who the cookie is.

use std::sync::Arc;

use base64::Engine as _;
use http::{Response, StatusCode, header};
use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, StandardRevocableToken,
    StandardTokenResponse, TokenUrl,
};
use serde::{Deserialize, Serialize};
use tonic::body::Body;

use super::oidc::{Discovery, unverified_claims};
use super::{Authenticator, SESSION_COOKIE, Via, cookie_value, session_cookie};

/// The login state cookie, between `/auth/login` and `/auth/callback`.
const LOGIN_COOKIE: &str = "weft_login";

/// The ID token beside the access token in a token response.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct IdTokenFields {
    /// The ID token (OpenID Connect).
    #[serde(default)]
    pub id_token: Option<String>,
}

impl oauth2::ExtraTokenFields for IdTokenFields {}

/// A token response with its ID token.
pub type Tokens = StandardTokenResponse<IdTokenFields, BasicTokenType>;

/// An OAuth 2.0 client of the provider with the endpoints the flows use.
pub type OidcClient<HasDevice = EndpointNotSet> = oauth2::Client<
    BasicErrorResponse,
    Tokens,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    EndpointSet,
    HasDevice,
    EndpointNotSet,
    EndpointNotSet,
    EndpointSet,
>;

/// A client of `d`'s endpoints as `client_id` (with `secret` when the
/// client is confidential).
pub fn client(
    d: &Discovery,
    client_id: &str,
    secret: Option<String>,
) -> Result<OidcClient, String> {
    let auth = AuthUrl::new(d.authorization_endpoint.clone()).map_err(|e| e.to_string())?;
    let token = TokenUrl::new(d.token_endpoint.clone()).map_err(|e| e.to_string())?;
    let c = oauth2::Client::new(ClientId::new(client_id.to_string()))
        .set_auth_uri(auth)
        .set_token_uri(token);
    Ok(match secret {
        Some(s) => c.set_client_secret(ClientSecret::new(s)),
        None => c,
    })
}

/// Sends one of oauth2's requests with reqwest (oauth2's own reqwest
/// feature would bring a second reqwest).
pub async fn send(
    http: reqwest::Client,
    req: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, reqwest::Error> {
    let (parts, body) = req.into_parts();
    let resp = http
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await?;
    let status = resp.status();
    let headers = resp.headers().clone();
    let mut out = http::Response::new(resp.bytes().await?.to_vec());
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    Ok(out)
}

/// What `/auth/login` remembers for `/auth/callback`.
#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    state: String,
    verifier: String,
    nonce: String,
    next: String,
    redirect: String,
}

/// What `/auth/config` tells the console and the CLI.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginConfig {
    /// The issuer, when people sign in with OIDC.
    pub issuer: Option<String>,
    /// The client id the CLI signs in as.
    pub cli_client_id: Option<String>,
    /// The scopes to ask for.
    pub scopes: Vec<String>,
    /// How the admin API reads a token's user and groups, so the CLI
    /// names the user as the server will.
    #[serde(default)]
    pub username_claim: Option<String>,
    /// Put before the user name.
    #[serde(default)]
    pub username_prefix: Option<String>,
    /// The claim with the groups.
    #[serde(default)]
    pub groups_claim: Option<String>,
    /// Put before each group.
    #[serde(default)]
    pub groups_prefix: Option<String>,
}

impl LoginConfig {
    fn off() -> Self {
        LoginConfig {
            issuer: None,
            cli_client_id: None,
            scopes: Vec::new(),
            username_claim: None,
            username_prefix: None,
            groups_claim: None,
            groups_prefix: None,
        }
    }
}

/// A request the login routes answer.
pub struct AuthRequest {
    /// The path, `/auth/...`.
    pub path: String,
    /// The query string.
    pub query: String,
    /// The cookie header.
    pub cookie: Option<String>,
    /// The host the browser used, for the default redirect URL.
    pub host: Option<String>,
    /// Whether the request came over TLS.
    pub tls: bool,
}

/// Answers `/auth/...`.
pub async fn route(auth: Option<Arc<Authenticator>>, req: AuthRequest) -> Response<Body> {
    let Some(auth) = auth else {
        return match req.path.as_str() {
            "/auth/config" => json(&LoginConfig::off()),
            _ => text(StatusCode::NOT_FOUND, "single sign-on is not configured"),
        };
    };
    let result = match req.path.as_str() {
        "/auth/config" => Ok(json(&config(&auth))),
        "/auth/login" => start(&auth, &req).await,
        "/auth/callback" => finish(&auth, &req).await,
        "/auth/logout" => logout(&auth, &req).await,
        "/auth/me" => me(&auth, &req).await,
        _ => Err((StatusCode::NOT_FOUND, format!("no such page: {}", req.path))),
    };
    result.unwrap_or_else(|(code, why)| text(code, &why))
}

type Answer = Result<Response<Body>, (StatusCode, String)>;

fn config(auth: &Authenticator) -> LoginConfig {
    let Some(o) = auth.oidc() else {
        return LoginConfig::off();
    };
    let c = o.config();
    LoginConfig {
        issuer: Some(c.issuer_url.clone()),
        cli_client_id: Some(c.cli_client_id().to_string()),
        scopes: c.scopes.clone(),
        username_claim: Some(c.username_claim.clone()),
        username_prefix: Some(c.username_prefix.clone()),
        groups_claim: Some(c.groups_claim.clone()),
        groups_prefix: Some(c.groups_prefix.clone()),
    }
}

/// `/auth/login?next=PATH`: to the provider.
async fn start(auth: &Authenticator, req: &AuthRequest) -> Answer {
    let oidc = auth.oidc().ok_or_else(not_configured)?;
    let d = oidc.discovery().await.map_err(unavailable)?;
    let redirect = redirect_url(auth, req);
    let client = client(&d, &oidc.config().client_id, None)
        .map_err(|e| {
            (
                StatusCode::BAD_GATEWAY,
                format!("the provider's endpoints: {e}"),
            )
        })?
        .set_redirect_uri(RedirectUrl::new(redirect.clone()).map_err(bad_redirect)?);
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let nonce = CsrfToken::new_random().secret().clone();
    let mut request = client
        .authorize_url(CsrfToken::new_random)
        .set_pkce_challenge(challenge)
        .add_extra_param("nonce", nonce.clone());
    for s in &oidc.config().scopes {
        request = request.add_scope(Scope::new(s.clone()));
    }
    let (url, state) = request.url();
    let pending = Pending {
        state: state.secret().clone(),
        verifier: verifier.secret().clone(),
        nonce,
        next: safe_next(query(&req.query, "next").as_deref()),
        redirect,
    };
    let value = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&pending).unwrap_or_default());
    let cookie = cookie(auth, LOGIN_COOKIE, &value, "/auth", 600);
    Ok(redirect_to(url.as_str(), &[cookie]))
}

/// `/auth/callback?code&state`: the code for an ID token in a cookie.
async fn finish(auth: &Authenticator, req: &AuthRequest) -> Answer {
    let oidc = auth.oidc().ok_or_else(not_configured)?;
    if let Some(error) = query(&req.query, "error") {
        let desc = query(&req.query, "error_description").unwrap_or_default();
        return Err((
            StatusCode::FORBIDDEN,
            format!("the identity provider refused the sign-in: {error} {desc}"),
        ));
    }
    let pending = req
        .cookie
        .as_deref()
        .and_then(|c| cookie_value(c, LOGIN_COOKIE))
        .and_then(|v| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(v).ok())
        .and_then(|b| serde_json::from_slice::<Pending>(&b).ok())
        .ok_or_else(|| {
            (
                StatusCode::BAD_REQUEST,
                "no sign-in is under way in this browser (the login cookie is missing or expired): start again at /auth/login".to_string(),
            )
        })?;
    if query(&req.query, "state").as_deref() != Some(pending.state.as_str()) {
        return Err((
            StatusCode::BAD_REQUEST,
            "the sign-in's state does not match this browser's: start again at /auth/login".into(),
        ));
    }
    let code = query(&req.query, "code").ok_or_else(|| {
        (
            StatusCode::BAD_REQUEST,
            "the provider sent no code".to_string(),
        )
    })?;
    let d = oidc.discovery().await.map_err(unavailable)?;
    let secret = console_secret(oidc.config())?;
    let client = client(&d, &oidc.config().client_id, secret)
        .map_err(|e| (StatusCode::BAD_GATEWAY, e))?
        .set_redirect_uri(RedirectUrl::new(pending.redirect.clone()).map_err(bad_redirect)?);
    let http = super::http_client();
    let tokens = client
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier.clone()))
        .request_async(&|r| send(http.clone(), r))
        .await
        .map_err(|e| {
            (
                StatusCode::BAD_GATEWAY,
                format!("exchanging the code failed: {e}"),
            )
        })?;
    let id_token = tokens.extra_fields().id_token.clone().ok_or_else(|| {
        (
            StatusCode::BAD_GATEWAY,
            "the provider answered without an ID token (is `openid` among the scopes?)".to_string(),
        )
    })?;
    let identity = oidc
        .verify(&id_token, Via::Session)
        .await
        .map_err(|e| (StatusCode::FORBIDDEN, e.to_string()))?;
    let nonce = unverified_claims(&id_token).and_then(|c| c.get("nonce").cloned());
    if nonce.as_ref().and_then(|n| n.as_str()) != Some(pending.nonce.as_str()) {
        return Err((
            StatusCode::FORBIDDEN,
            "the ID token's nonce does not match this sign-in".into(),
        ));
    }
    tracing::info!(user = identity.user, groups = ?identity.groups, "console sign-in");
    let max_age = identity
        .expires
        .map(|e| e.saturating_sub(now()))
        .unwrap_or(3600);
    let session = cookie(auth, SESSION_COOKIE, &id_token, "/", max_age);
    let clear = cookie(auth, LOGIN_COOKIE, "", "/auth", 0);
    Ok(redirect_to(&pending.next, &[session, clear]))
}

/// `/auth/logout`: clears the cookie and ends the provider's session.
async fn logout(auth: &Authenticator, req: &AuthRequest) -> Answer {
    let oidc = auth.oidc().ok_or_else(not_configured)?;
    let token = req.cookie.as_deref().and_then(session_cookie);
    let clear = cookie(auth, SESSION_COOKIE, "", "/", 0);
    let back = format!("{}/", origin(req));
    let end = oidc
        .discovery()
        .await
        .ok()
        .and_then(|d| d.end_session_endpoint);
    let target = match end {
        Some(end) => {
            let mut url = url::Url::parse(&end).map_err(|e| {
                (
                    StatusCode::BAD_GATEWAY,
                    format!("end_session_endpoint: {e}"),
                )
            })?;
            url.query_pairs_mut()
                .append_pair("client_id", &oidc.config().client_id)
                .append_pair("post_logout_redirect_uri", &back);
            if let Some(t) = &token {
                url.query_pairs_mut().append_pair("id_token_hint", t);
            }
            url.to_string()
        }
        None => back,
    };
    Ok(redirect_to(&target, &[clear]))
}

/// `/auth/me`: the session's user and groups, or 401.
async fn me(auth: &Authenticator, req: &AuthRequest) -> Answer {
    let oidc = auth.oidc().ok_or_else(not_configured)?;
    let token = req
        .cookie
        .as_deref()
        .and_then(session_cookie)
        .ok_or_else(|| (StatusCode::UNAUTHORIZED, "not signed in".to_string()))?;
    let id = oidc
        .verify(&token, Via::Session)
        .await
        .map_err(|e| (StatusCode::UNAUTHORIZED, e.to_string()))?;
    Ok(json(
        &serde_json::json!({"user": id.user, "groups": id.groups, "expires": id.expires}),
    ))
}

fn console_secret(c: &super::OidcConfig) -> Result<Option<String>, (StatusCode, String)> {
    c.client_secret_file
        .as_ref()
        .map(|p| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .map_err(|e| {
                    let why = format!("clientSecretFile {}: {e}", p.display());
                    (StatusCode::INTERNAL_SERVER_ERROR, why)
                })
        })
        .transpose()
}

fn redirect_url(auth: &Authenticator, req: &AuthRequest) -> String {
    auth.oidc()
        .and_then(|o| o.config().redirect_url.clone())
        .unwrap_or_else(|| format!("{}/auth/callback", origin(req)))
}

fn origin(req: &AuthRequest) -> String {
    let scheme = if req.tls { "https" } else { "http" };
    format!("{scheme}://{}", req.host.as_deref().unwrap_or("127.0.0.1"))
}

/// Only a path of this site: never an open redirect.
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.into(),
        _ => "/".into(),
    }
}

fn query(q: &str, key: &str) -> Option<String> {
    form_urlencoded::parse(q.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

fn cookie(auth: &Authenticator, name: &str, value: &str, path: &str, max_age: u64) -> String {
    let secure = if auth.config().secure_cookies {
        "; Secure"
    } else {
        ""
    };
    format!("{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}")
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn not_configured() -> (StatusCode, String) {
    (
        StatusCode::NOT_FOUND,
        "single sign-on is not configured".into(),
    )
}

fn unavailable(e: super::oidc::Rejected) -> (StatusCode, String) {
    (StatusCode::BAD_GATEWAY, e.to_string())
}

fn bad_redirect(e: url::ParseError) -> (StatusCode, String) {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("the redirect URL: {e}"),
    )
}

fn redirect_to(location: &str, cookies: &[String]) -> Response<Body> {
    let mut b = Response::builder()
        .status(StatusCode::FOUND)
        .header(header::LOCATION, location)
        .header(header::CACHE_CONTROL, "no-store");
    for c in cookies {
        b = b.header(header::SET_COOKIE, c);
    }
    b.body(Body::empty()).expect("a valid response")
}

fn json(v: &impl Serialize) -> Response<Body> {
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-store")
        .body(Body::new(serde_json::to_string(v).unwrap_or_default()))
        .expect("a valid response")
}

fn text(code: StatusCode, body: &str) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-store")
        .body(Body::new(format!("{body}\n")))
        .expect("a valid response")
}
