//! `weft io`: the pod's side of the data plane. A task pod (or a local
//! runner's process) moves its artifacts with presigned URLs the
//! controller minted for this attempt only; it never holds the store's
//! credentials. `init` and `exec` carry out a whole attempt's plan (see
//! `crate::store::plan`); `get` and `put` move one artifact by hand.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::store::plan::IoPlan;
use crate::store::transfer::{self, Kind};
use crate::store::{Digest, pod};

/// The environment variable naming `weft io init`'s termination log (its
/// plan names only the main container's).
const INIT_TERMINATION_LOG: &str = "WEFT_TERMINATION_MESSAGE_PATH";

/// `weft io init|exec|get|put`.
#[derive(clap::Subcommand, Debug)]
pub enum IoCommand {
    /// Fetch an attempt's inputs before its task runs (a pod's init
    /// container).
    ///
    /// Copies this weft binary to `<dir>/bin/weft` (for `weft io exec`
    /// in the task's own image) and downloads every input of the plan to
    /// `<dir>/inputs/<name>`, checking its digest when the plan has one
    /// and the plan's size limit when it has one. Exits 0, or
    /// 65 when an input is the task's fault (a digest mismatch, over the
    /// size limit, missing) or 75 when the store is (unreachable,
    /// refusing, an expired URL), with a line naming the artifact on
    /// stderr and in $WEFT_TERMINATION_MESSAGE_PATH when it is set.
    Init {
        /// The attempt's io plan (JSON), as the controller wrote it.
        #[arg(long, value_name = "JSON")]
        plan: String,
    },
    /// Run a task's command between its inputs and its outputs (the main
    /// container's command).
    ///
    /// Links each input's path to its download, runs the command
    /// (SIGTERM and SIGINT are passed on to it) and, when it exits 0,
    /// uploads the outputs (a directory as tar.zst), reads the output
    /// parameters' files and writes the termination message: the
    /// command's own JSON outputs, the parameters, and `artifacts`.
    /// Exits with the command's code (128 + the signal that ended it;
    /// nothing is uploaded), 0, or 65 / 75 as `weft io init` (the line
    /// naming the artifact goes to stderr and the termination log).
    Exec {
        /// The attempt's io plan (JSON), as the controller wrote it.
        #[arg(long, value_name = "JSON")]
        plan: String,
        /// The task's command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
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
    /// Runs the command and says how the process exits: `init` and `exec`
    /// by their exit codes (the controller reads whose fault a failure
    /// is from them); `get` and `put` by an error naming the artifact.
    pub async fn run(self) -> anyhow::Result<ExitCode> {
        let code = match self {
            IoCommand::Init { plan } => init(&IoPlan::from_arg(&plan)?).await?,
            IoCommand::Exec { plan, command } => {
                pod::exec(&IoPlan::from_arg(&plan)?, &command).await
            }
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
                0
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
                0
            }
        };
        Ok(exit_code(code))
    }
}

/// `weft io init` with this binary; a fault goes to stderr and to
/// [`INIT_TERMINATION_LOG`] when it is set.
async fn init(plan: &IoPlan) -> anyhow::Result<i32> {
    let binary = std::env::current_exe()?;
    Ok(match pod::init(plan, &binary).await {
        Ok(()) => 0,
        Err(fault) => {
            let log = std::env::var_os(INIT_TERMINATION_LOG);
            fault.report(log.as_deref().map(Path::new))
        }
    })
}

/// A process exit code from 0..=255 (anything else is a failure).
fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Runs `weft io` on its own runtime.
pub fn run(cmd: IoCommand) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(cmd.run())
}
