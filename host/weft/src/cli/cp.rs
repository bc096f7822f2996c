//! `weft cp`: artifacts in and out through the admin API's data proxy
//! (CreateDownloadLink, CreateUploadLocation), never with the store's
//! credentials: the admin API signs a URL for one object, and the bytes go
//! straight between this machine and the store, digest checked. Also the
//! upload that `weft submit -a` does. Calls pass the admin API's
//! middleware, so `--token` (or `WEFT_TOKEN`) carries the caller's identity.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};
use weft_dag::artifacts::ArtifactRef;

use crate::admin::pb;
use crate::store::transfer::{self, Kind};
use crate::store::{Digest, archive};

/// How a CLI command reaches the admin API.
#[derive(Debug, Clone, Args)]
pub struct AdminClientArgs {
    /// The admin API's URL (`weft dev` prints it).
    #[arg(
        long = "admin",
        env = "WEFT_ADMIN",
        default_value = "http://127.0.0.1:8081",
        value_name = "URL"
    )]
    pub admin_url: String,
    /// A bearer token for the admin API (a static token of the auth-token
    /// middleware, a service-account token); without it, the token of
    /// `weft login` for this admin API, if any.
    #[arg(long, env = "WEFT_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The CA (PEM) that signed an https admin API's certificate.
    #[arg(long, env = "WEFT_ADMIN_CA", value_name = "FILE")]
    pub admin_ca: Option<PathBuf>,
}

/// The admin API client, with the caller's token on every call.
pub type AdminClient =
    pb::admin_service_client::AdminServiceClient<InterceptedService<Channel, Bearer>>;

/// Adds `authorization: Bearer <token>` when there is a token.
#[derive(Clone)]
pub struct Bearer(Option<tonic::metadata::AsciiMetadataValue>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut r: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            r.metadata_mut().insert("authorization", v.clone());
        }
        Ok(r)
    }
}

impl AdminClientArgs {
    /// Connects; an unreachable API is an error naming the URL and the flag.
    pub async fn connect(&self) -> anyhow::Result<AdminClient> {
        let url = &self.admin_url;
        let mut endpoint = Channel::from_shared(url.clone())
            .with_context(|| format!("--admin {url}: not a URL"))?;
        if url.starts_with("https://") {
            let Some(ca) = &self.admin_ca else {
                bail!("--admin {url}: an https admin API needs --admin-ca FILE (its CA, PEM)");
            };
            let pem = std::fs::read(ca).with_context(|| format!("--admin-ca {}", ca.display()))?;
            let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem));
            endpoint = endpoint.tls_config(tls)?;
        }
        let channel = endpoint.connect().await.with_context(|| {
            format!("cannot reach the admin API at {url} (--admin or WEFT_ADMIN)")
        })?;
        // An explicit token wins; otherwise `weft login`'s, if any.
        let token = match &self.token {
            Some(t) => Some(t.clone()),
            None => super::login::credentials::bearer(url).await?,
        };
        let token = match token {
            Some(t) => Some(
                format!("Bearer {t}")
                    .parse()
                    .context("--token: not a valid header value")?,
            ),
            None => None,
        };
        Ok(pb::admin_service_client::AdminServiceClient::with_interceptor(channel, Bearer(token)))
    }
}

/// What an admin API call's refusal means, naming the call.
fn refused(call: &str, s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{call}: {:?}: {}", s.code(), s.message())
}

/// Arguments of `weft cp`.
#[derive(Debug, Args)]
pub struct CpArgs {
    /// `WORKFLOW/NODE/ARTIFACT` to download (NODE `fan[2]` for item 2 of
    /// the array node `fan`), or a local file or directory to upload (with
    /// DEST `-`).
    pub src: String,
    /// Where a download goes (a directory artifact is unpacked into it; a
    /// file artifact into an existing directory keeps its name), or `-`:
    /// upload SRC as a workflow input and print its reference
    /// `{key, digest, size, kind}` (JSON) on stdout.
    pub dest: String,
    /// The upload's content type, when the admin API allows only some.
    #[arg(long, value_name = "TYPE")]
    pub content_type: Option<String>,
    /// The namespace (default: the kubeconfig context's).
    #[arg(short, long, default_value_t = super::context_namespace(), hide_default_value = true)]
    pub namespace: String,
    /// The admin API.
    #[command(flatten)]
    pub admin: AdminClientArgs,
}

/// Run `weft cp`.
pub fn cp(args: CpArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        if args.dest == "-" {
            let path = Path::new(&args.src);
            let mut admin = args.admin.connect().await?;
            let r = upload(
                &mut admin,
                &args.namespace,
                path,
                args.content_type.as_deref(),
            )
            .await?;
            super::out(&serde_json::to_string(&r)?)?;
            return Ok(ExitCode::SUCCESS);
        }
        let (workflow, node, artifact) = remote(&args.src)?;
        let mut admin = args.admin.connect().await?;
        let (to, got) = download(
            &mut admin,
            &args.namespace,
            [workflow, node, artifact],
            Path::new(&args.dest),
        )
        .await?;
        eprintln!(
            "{} ({}, {} bytes, {}) -> {}",
            args.src,
            got.kind,
            got.size,
            got.digest,
            to.display()
        );
        Ok(ExitCode::SUCCESS)
    })
}

/// `WORKFLOW/NODE/ARTIFACT`, each part non-empty.
fn remote(src: &str) -> anyhow::Result<(&str, &str, &str)> {
    let parts: Vec<&str> = src.split('/').collect();
    match parts[..] {
        [w, n, a] if !w.is_empty() && !n.is_empty() && !a.is_empty() => Ok((w, n, a)),
        _ => bail!(
            "{src}: expected WORKFLOW/NODE/ARTIFACT to download (or DEST - to upload a local path)"
        ),
    }
}

/// Downloads `[workflow, node, artifact]` of `namespace` to `dest`, digest
/// checked; returns where it went and what the admin API said of it.
pub async fn download(
    admin: &mut AdminClient,
    namespace: &str,
    [workflow, node, artifact]: [&str; 3],
    dest: &Path,
) -> anyhow::Result<(PathBuf, pb::CreateDownloadLinkResponse)> {
    let link = admin
        .create_download_link(pb::CreateDownloadLinkRequest {
            namespace: namespace.into(),
            workflow: workflow.into(),
            node: node.into(),
            artifact: artifact.into(),
            ..Default::default()
        })
        .await
        .map_err(|s| refused("CreateDownloadLink", s))?
        .into_inner();
    let url = url::Url::parse(&link.signed_url).context("CreateDownloadLink: a bad URL")?;
    let digest = Digest::try_from(link.digest.clone()).map_err(anyhow::Error::msg)?;
    let kind = match link.kind.as_str() {
        "directory" => Kind::Directory,
        _ => Kind::File,
    };
    let target = target(dest, kind, artifact)?;
    transfer::download(artifact, &url, &target, kind, Some(&digest)).await?;
    Ok((target, link))
}

/// Where a download lands: `dest`, or `dest/<artifact>` for a file into
/// an existing directory (as cp does). Absolute, so that a directory's
/// archive goes beside it, not into it.
fn target(dest: &Path, kind: Kind, artifact: &str) -> anyhow::Result<PathBuf> {
    let dest = match dest.canonicalize() {
        Ok(d) => d,
        Err(_) => std::path::absolute(dest)?,
    };
    Ok(match (kind, dest.is_dir()) {
        (Kind::File, true) => dest.join(artifact),
        _ => dest,
    })
}

/// Uploads the file or directory `path` (a directory as tar.zst) as an
/// input of `namespace`'s workflows; returns the reference a workflow
/// input takes.
pub async fn upload(
    admin: &mut AdminClient,
    namespace: &str,
    path: &Path,
    content_type: Option<&str>,
) -> anyhow::Result<ArtifactRef> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let (kind, packed) = match meta.is_dir() {
        true => (Kind::Directory, Some(pack(path).await?)),
        false => (Kind::File, None),
    };
    let file = packed.as_ref().map_or(path, |t| t.path());
    let size = std::fs::metadata(file)?.len();
    let filename = upload_name(path, kind);
    let default_type = (kind == Kind::Directory).then_some("application/zstd");
    let loc = admin
        .create_upload_location(pb::CreateUploadLocationRequest {
            namespace: namespace.into(),
            filename: filename.clone(),
            content_length: size,
            content_type: content_type.or(default_type).unwrap_or_default().into(),
            expires_in_seconds: 0,
        })
        .await
        .map_err(|s| refused("CreateUploadLocation", s))?
        .into_inner();
    let url = url::Url::parse(&loc.signed_url).context("CreateUploadLocation: a bad URL")?;
    let (_, stored) = transfer::upload(&filename, file, &url).await?;
    Ok(ArtifactRef {
        key: loc.key,
        digest: stored.digest.to_string(),
        size: stored.size,
        kind: match kind {
            Kind::File => "file",
            Kind::Directory => "directory",
        }
        .into(),
    })
}

/// Packs a directory as the data plane stores directories, so its size
/// is known before asking where to put it.
async fn pack(dir: &Path) -> anyhow::Result<tempfile::NamedTempFile> {
    let tmp = tempfile::NamedTempFile::new()?;
    let (dir, out) = (dir.to_path_buf(), tmp.reopen()?);
    tokio::task::spawn_blocking(move || {
        archive::pack_dir(&dir, std::io::BufWriter::new(out))
            .with_context(|| format!("archive {}", dir.display()))
    })
    .await??;
    Ok(tmp)
}

/// The key's last part: the path's name with anything but letters,
/// digits, '.', '-' and '_' as '_' (the admin API takes no other), and
/// `.tar.zst` after a directory's.
fn upload_name(path: &Path, kind: Kind) -> String {
    let base = std::path::absolute(path)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let mut name: String = base
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                true => c,
                false => '_',
            },
        )
        .collect();
    name = name.trim_start_matches('.').to_string();
    if name.is_empty() {
        name = "upload".into();
    }
    if kind == Kind::Directory {
        name.push_str(".tar.zst");
    }
    name.chars().take(255).collect()
}

#[cfg(test)]
mod tests;
