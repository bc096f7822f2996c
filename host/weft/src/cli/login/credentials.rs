//! The CLI's saved sign-ins: `$XDG_CONFIG_HOME/weft/credentials.json` (or
//! `~/.config/weft/`), readable by the user only (0600, directory 0700),
//! one entry per admin API URL. A token about to expire is refreshed with
//! the refresh token and the new pair is saved before use (the provider
//! may rotate refresh tokens: a used one is then void).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use oauth2::{RefreshToken, TokenResponse as _};
use serde::{Deserialize, Serialize};

use crate::admin::identity::login::{Tokens, client, send};
use crate::admin::identity::oidc::unverified_claims;
use crate::admin::identity::{Identity, Oidc, Via, http_client};

/// A token this close to its expiry is refreshed first.
const REFRESH_BEFORE_SECS: u64 = 60;

/// One admin API's sign-in.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    issuer: String,
    client_id: String,
    id_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    /// The ID token's `exp`.
    expires_at: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    admins: BTreeMap<String, Entry>,
}

/// The credentials file.
pub fn path() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".config"),
    };
    Ok(base.join("weft").join("credentials.json"))
}

fn load() -> anyhow::Result<File> {
    let p = path()?;
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b)
            .with_context(|| format!("{}: not a weft credentials file", p.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(File::default()),
        Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
    }
}

/// Writes the file whole (a new file renamed over the old), 0600.
fn store(file: &File) -> anyhow::Result<()> {
    let p = path()?;
    let dir = p
        .parent()
        .context("the credentials file has no directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let tmp = dir.join(format!(".credentials.{}.tmp", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(&serde_json::to_vec_pretty(file)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &p).with_context(|| format!("writing {}", p.display()))?;
    Ok(())
}

fn key(admin: &str) -> String {
    admin.trim_end_matches('/').to_string()
}

/// Saves a sign-in's tokens for `admin`; answers who it is.
pub async fn save(admin: &str, oidc: &Oidc, tokens: &Tokens) -> anyhow::Result<Identity> {
    let id_token = tokens
        .extra_fields()
        .id_token
        .clone()
        .context("the provider answered without an ID token")?;
    let identity = oidc.verify(&id_token, Via::Oidc).await?;
    let mut file = load()?;
    let old_refresh = file
        .admins
        .get(&key(admin))
        .and_then(|e| e.refresh_token.clone());
    file.admins.insert(
        key(admin),
        Entry {
            issuer: oidc.config().issuer_url.clone(),
            client_id: oidc.config().cli_client_id().to_string(),
            id_token,
            refresh_token: tokens
                .refresh_token()
                .map(|t| t.secret().clone())
                .or(old_refresh),
            expires_at: identity.expires.unwrap_or_default(),
        },
    );
    store(&file)?;
    Ok(identity)
}

/// Removes `admin`'s sign-in; whether there was one.
pub fn forget(admin: &str) -> anyhow::Result<bool> {
    let mut file = load()?;
    let had = file.admins.remove(&key(admin)).is_some();
    if had {
        store(&file)?;
    }
    Ok(had)
}

/// The ID token to send to `admin`, refreshed when about to expire;
/// `None` when not signed in there.
pub async fn bearer(admin: &str) -> anyhow::Result<Option<String>> {
    let file = load()?;
    let Some(entry) = file.admins.get(&key(admin)).cloned() else {
        return Ok(None);
    };
    if entry.expires_at > now() + REFRESH_BEFORE_SECS {
        return Ok(Some(entry.id_token));
    }
    let Some(refresh) = entry.refresh_token.clone() else {
        bail!("your sign-in to {admin} has expired: run weft login --admin {admin}")
    };
    let oidc = Oidc::new(serde_json::from_value(serde_json::json!({
        "issuerUrl": entry.issuer,
        "clientId": entry.client_id,
    }))?);
    let d = oidc.discovery().await?;
    let http = http_client();
    let tokens = client(&d, &entry.client_id, None)
        .map_err(anyhow::Error::msg)?
        .exchange_refresh_token(&RefreshToken::new(refresh))
        .request_async(&|r| send(http.clone(), r))
        .await
        .with_context(|| {
            format!("refreshing your sign-in to {admin} failed: run weft login --admin {admin}")
        })?;
    save(admin, &oidc, &tokens).await?;
    let id = tokens.extra_fields().id_token.clone();
    Ok(id.filter(|t| unverified_claims(t).is_some()))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
