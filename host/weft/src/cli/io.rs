//! `weft io`: the pod's side of the data plane. A task pod (or a local
//! runner's process) moves its artifacts with presigned URLs the
//! controller minted for this attempt only; it never holds the store's
//! credentials.

use std::path::PathBuf;

use crate::store::Digest;
use crate::store::transfer::{self, Kind};

/// `weft io get` / `weft io put`.
#[derive(clap::Subcommand, Debug)]
pub enum IoCommand {
    /// Download an artifact from a presigned GET URL to a path.
    Get {
        /// The artifact's name (for messages).
        #[arg(long)]
        artifact: String,
        /// The presigned GET URL (or file:// under the local runner).
        #[arg(long)]
        url: url::Url,
        /// Where the file or directory goes.
        #[arg(long)]
        path: PathBuf,
        /// `file` or `directory` (a tar.zst object, unpacked).
        #[arg(long, value_enum, default_value = "file")]
        kind: KindArg,
        /// The digest the controller recorded; a mismatch fails.
        #[arg(long)]
        digest: Option<String>,
    },
    /// Upload a file or a directory (as tar.zst) to a presigned PUT URL;
    /// prints `{"kind", "size", "digest"}` as JSON.
    Put {
        /// The artifact's name (for messages).
        #[arg(long)]
        artifact: String,
        /// The file or directory.
        #[arg(long)]
        path: PathBuf,
        /// The presigned PUT URL (or file:// under the local runner).
        #[arg(long)]
        url: url::Url,
    },
}

/// The artifact kinds on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum KindArg {
    /// One file, stored as it is.
    File,
    /// A directory, stored as tar.zst.
    Directory,
}

impl IoCommand {
    /// Runs the transfer; the error names the artifact and says whether
    /// the store or the task is at fault.
    pub async fn run(self) -> anyhow::Result<()> {
        match self {
            IoCommand::Get {
                artifact,
                url,
                path,
                kind,
                digest,
            } => {
                let kind = match kind {
                    KindArg::File => Kind::File,
                    KindArg::Directory => Kind::Directory,
                };
                let expect = digest
                    .map(Digest::try_from)
                    .transpose()
                    .map_err(anyhow::Error::msg)?;
                let got = transfer::download(&artifact, &url, &path, kind, expect.as_ref()).await?;
                println!(
                    "{}",
                    serde_json::json!({"size": got.size, "digest": got.digest})
                );
            }
            IoCommand::Put {
                artifact,
                path,
                url,
            } => {
                let (kind, put) = transfer::upload(&artifact, &path, &url).await?;
                println!(
                    "{}",
                    serde_json::json!({"kind": kind, "size": put.size, "digest": put.digest})
                );
            }
        }
        Ok(())
    }
}

/// Runs `weft io` on its own runtime.
pub fn run(cmd: IoCommand) -> anyhow::Result<std::process::ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(cmd.run())?;
    Ok(std::process::ExitCode::SUCCESS)
}
