//! `weft login` and `weft logout`: single sign-on for the CLI, as
//! `kubectl oidc-login` or `flytectl`'s PKCE and device flows do.
//!
//! The admin API says which provider and client to use (`/auth/config`);
//! by default the CLI listens on a loopback port and prints the URL to open
//! (the authorization-code flow with PKCE); `--device` uses the device
//! authorization grant for a machine without a browser. The ID token and
//! refresh token go to the user's config directory with 0600 permissions
//! ([`credentials`]); later commands send the ID token to that admin API
//! and refresh it when it is about to expire.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args;
use oauth2::{
    AuthorizationCode, CsrfToken, DeviceAuthorizationUrl, PkceCodeChallenge, RedirectUrl, Scope,
    StandardDeviceAuthorizationResponse,
};

use crate::admin::identity::login::{LoginConfig, Tokens, client, send};
use crate::admin::identity::{Oidc, Via, http_client};

pub mod credentials;
mod loopback;

/// Arguments of `weft login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The admin API to sign in to.
    #[arg(
        long = "admin",
        env = "WEFT_ADMIN",
        default_value = "http://127.0.0.1:8081",
        value_name = "URL"
    )]
    pub admin_url: String,
    /// Use the device authorization grant: print a code to enter on any
    /// device with a browser, instead of a link back to this machine.
    #[arg(long)]
    pub device: bool,
}

/// Arguments of `weft logout`.
#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// The admin API to forget the sign-in of.
    #[arg(
        long = "admin",
        env = "WEFT_ADMIN",
        default_value = "http://127.0.0.1:8081",
        value_name = "URL"
    )]
    pub admin_url: String,
}

/// Runs `weft login`.
pub fn login(args: LoginArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let (oidc, scopes) = provider(&args.admin_url).await?;
        let tokens = if args.device {
            device(&oidc, &scopes).await?
        } else {
            loopback::browser(&oidc, &scopes).await?
        };
        let saved = credentials::save(&args.admin_url, &oidc, &tokens).await?;
        eprintln!(
            "Signed in to {} as {} (groups: {}); the token is kept in {}",
            args.admin_url,
            saved.user,
            if saved.groups.is_empty() {
                "none".into()
            } else {
                saved.groups.join(", ")
            },
            credentials::path()?.display()
        );
        Ok(ExitCode::SUCCESS)
    })
}

/// Runs `weft logout`.
pub fn logout(args: LogoutArgs) -> anyhow::Result<ExitCode> {
    if credentials::forget(&args.admin_url)? {
        eprintln!("Signed out of {}", args.admin_url);
    } else {
        eprintln!("Not signed in to {}", args.admin_url);
    }
    Ok(ExitCode::SUCCESS)
}

/// The provider the admin API at `admin` names, as the CLI's client.
pub(crate) async fn provider(admin: &str) -> anyhow::Result<(Oidc, Vec<String>)> {
    let url = format!("{}/auth/config", admin.trim_end_matches('/'));
    let body = http_client()
        .get(&url)
        .send()
        .await
        .with_context(|| format!("cannot reach the admin API at {admin}"))?
        .error_for_status()
        .with_context(|| format!("GET {url}"))?
        .bytes()
        .await?;
    let config: LoginConfig = serde_json::from_slice(&body)
        .with_context(|| format!("GET {url}: not the admin API's sign-in configuration"))?;
    let (Some(issuer), Some(client_id)) = (config.issuer, config.cli_client_id) else {
        bail!("the admin API at {admin} has no single sign-on configured; use --token (WEFT_TOKEN)")
    };
    let mut oidc = serde_json::json!({"issuerUrl": issuer, "clientId": client_id});
    for (key, value) in [
        ("usernameClaim", config.username_claim),
        ("usernamePrefix", config.username_prefix),
        ("groupsClaim", config.groups_claim),
        ("groupsPrefix", config.groups_prefix),
    ] {
        if let Some(v) = value {
            oidc[key] = v.into();
        }
    }
    let oidc = serde_json::from_value(oidc).map(Oidc::new)?;
    Ok((oidc, config.scopes))
}

/// The device authorization grant: the user enters a code elsewhere.
async fn device(oidc: &Oidc, scopes: &[String]) -> anyhow::Result<Tokens> {
    let d = oidc.discovery().await?;
    let Some(endpoint) = d.device_authorization_endpoint.clone() else {
        bail!(
            "the identity provider {} offers no device authorization; run weft login without --device",
            d.issuer
        )
    };
    let client = client(&d, oidc.config().cli_client_id(), None)
        .map_err(anyhow::Error::msg)?
        .set_device_authorization_url(DeviceAuthorizationUrl::new(endpoint)?);
    let http = http_client();
    let ask = scopes.iter().fold(client.exchange_device_code(), |r, s| {
        r.add_scope(Scope::new(s.clone()))
    });
    let details: StandardDeviceAuthorizationResponse = ask
        .request_async(&|r| send(http.clone(), r))
        .await
        .context("the device authorization request failed")?;
    let link = details
        .verification_uri_complete()
        .map(|u| u.secret().to_string())
        .unwrap_or_else(|| details.verification_uri().to_string());
    eprintln!(
        "To sign in, open {link}\nand enter the code {}",
        details.user_code().secret()
    );
    client
        .exchange_device_access_token(&details)
        .request_async(&|r| send(http.clone(), r), tokio::time::sleep, None)
        .await
        .context("the device sign-in did not complete")
}

/// The authorization-code flow with a redirect to `redirect`: the URL to
/// open, and what [`exchange`] needs afterwards.
pub(crate) fn authorize_url(
    d: &crate::admin::identity::oidc::Discovery,
    oidc: &Oidc,
    scopes: &[String],
    redirect: &str,
) -> anyhow::Result<(url::Url, Pending)> {
    let client = client(d, oidc.config().cli_client_id(), None)
        .map_err(anyhow::Error::msg)?
        .set_redirect_uri(RedirectUrl::new(redirect.to_string())?);
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let nonce = CsrfToken::new_random().secret().clone();
    let request = scopes.iter().fold(
        client
            .authorize_url(CsrfToken::new_random)
            .set_pkce_challenge(challenge)
            .add_extra_param("nonce", nonce.clone()),
        |r, s| r.add_scope(Scope::new(s.clone())),
    );
    let (url, state) = request.url();
    Ok((
        url,
        Pending {
            state: state.secret().clone(),
            verifier,
            nonce,
            redirect: redirect.to_string(),
        },
    ))
}

/// A started authorization-code flow.
pub(crate) struct Pending {
    pub state: String,
    verifier: oauth2::PkceCodeVerifier,
    nonce: String,
    redirect: String,
}

/// The code for tokens; the ID token must carry this flow's nonce.
pub(crate) async fn exchange(
    oidc: &Oidc,
    pending: Pending,
    code: String,
) -> anyhow::Result<Tokens> {
    let d = oidc.discovery().await?;
    let client = client(&d, oidc.config().cli_client_id(), None)
        .map_err(anyhow::Error::msg)?
        .set_redirect_uri(RedirectUrl::new(pending.redirect)?);
    let http = http_client();
    let tokens = client
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(pending.verifier)
        .request_async(&|r| send(http.clone(), r))
        .await
        .context("exchanging the code failed")?;
    let id = tokens
        .extra_fields()
        .id_token
        .as_deref()
        .context("the provider answered without an ID token")?;
    oidc.verify(id, Via::Oidc).await?;
    let nonce = crate::admin::identity::oidc::unverified_claims(id)
        .and_then(|c| c.get("nonce").and_then(|n| n.as_str()).map(String::from));
    if nonce.as_deref() != Some(pending.nonce.as_str()) {
        bail!("the ID token's nonce does not match this sign-in");
    }
    Ok(tokens)
}
