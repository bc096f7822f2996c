//! The data plane's flags, the same for `weft controller`, `weft dev` and
//! `weft run`: where artifacts go and how pods reach them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::pod_io::PodIo;
use crate::store::{ArtifactRepository, LocalRepository, Store};

/// Where tasks' artifacts go.
#[derive(Debug, Args, Clone)]
pub struct ArtifactArgs {
    /// The artifact repository, YAML: `s3: {endpoint, bucket, region,
    /// prefix, insecure, accessKeySecret: {name, key}, secretKeySecret}`
    /// (the Secrets in the controller's namespace; without them
    /// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or `local: {path}`.
    /// `weft dev` and `weft run` default to a directory of their data
    /// dir; without one `weft controller` fails tasks that declare
    /// artifacts, saying so.
    #[arg(long, value_name = "FILE", env = "WEFT_ARTIFACT_REPOSITORY")]
    pub artifact_repository: Option<PathBuf>,
    /// The image of the init container that moves a pod's artifacts
    /// (Weft's own: it runs `weft io`).
    #[arg(long, default_value = crate::pod_io::DEFAULT_IMAGE, env = "WEFT_IO_IMAGE")]
    pub io_image: String,
    /// The `weft` binary in that image, or on the node's machine where
    /// pods run as processes (default: /usr/local/bin/weft; this binary
    /// under `weft dev` and `weft run`).
    #[arg(long, value_name = "PATH", env = "WEFT_IO_BINARY")]
    pub io_binary: Option<String>,
    /// How long the presigned URLs a pod gets for its artifacts live.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub artifact_url_ttl: Duration,
    /// A node's outputs larger than this (bytes of JSON) stay in the
    /// artifact repository, referenced from the Workflow's status
    /// (`outputsRef`) and read back for expressions and the admin API.
    #[arg(long, default_value_t = crate::pod_io::DEFAULT_INLINE_LIMIT, value_name = "BYTES")]
    pub max_inline_outputs: usize,
    /// The largest artifact a pod moves either way, e.g. 10Gi (default:
    /// no limit); over it the node fails naming the artifact, its size and
    /// the limit.
    #[arg(long, env = "WEFT_MAX_ARTIFACT_SIZE", value_name = "QUANTITY", value_parser = weft_plugin::quantity::parse_quantity)]
    pub max_artifact_size: Option<u64>,
    /// Archive every task pod's main container log in the artifact
    /// repository when it ends (a workflow's `archiveLogs` overrides it).
    #[arg(long)]
    pub archive_logs: bool,
}

impl ArtifactArgs {
    /// The data plane: `--artifact-repository`, else a directory under
    /// `local_default` (`weft dev`, `weft run`), else none. S3 credentials
    /// come from their Secrets in `namespace`; a bad file or a missing
    /// Secret is an error naming it.
    pub async fn open(
        &self,
        client: &kube::Client,
        namespace: &str,
        local_default: Option<&Path>,
    ) -> anyhow::Result<Option<Arc<PodIo>>> {
        let repo = match (&self.artifact_repository, local_default) {
            (Some(path), _) => {
                let what = path.display().to_string();
                let text = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("artifact repository {what}: {e}"))?;
                ArtifactRepository::parse(&what, &text)?
            }
            (None, Some(dir)) => ArtifactRepository {
                local: Some(LocalRepository {
                    path: std::path::absolute(dir.join("artifacts"))?,
                    prefix: String::new(),
                }),
                s3: None,
            },
            (None, None) => return Ok(None),
        };
        let creds = crate::store::credentials(client, namespace, &repo).await?;
        let store = Store::open(&repo, creds.as_ref())?;
        tracing::info!(
            repository = store.describe(),
            "artifacts go to this repository"
        );
        let binary = match (&self.io_binary, local_default) {
            (Some(b), _) => b.clone(),
            (None, Some(_)) => std::env::current_exe()?.display().to_string(),
            (None, None) => "/usr/local/bin/weft".into(),
        };
        let io = PodIo::new(store, &binary, &self.io_image)
            .with_url_ttl(self.artifact_url_ttl)
            .with_inline_limit(self.max_inline_outputs)
            .with_max_size(self.max_artifact_size)
            .with_archive_logs(self.archive_logs);
        Ok(Some(Arc::new(io)))
    }
}
