//! What one attempt's pod moves: the controller writes an [`IoPlan`] into
//! the pod it builds (one JSON argument of `weft io init` and `weft io
//! exec`), so the pod needs nothing else: no credentials, no API access.
//!
//! The pod's side, in order:
//! 1. `weft io init` (an init container of Weft's image, or the same binary
//!    as a process under the local runner) copies its own binary to
//!    `<dir>/bin/weft` and downloads every input to `<dir>/inputs/<name>`,
//!    checking its digest. `dir` is an `emptyDir` both containers mount.
//! 2. `<dir>/bin/weft io exec --plan ... -- <command>` replaces the main
//!    container's command: it links each input's declared path to its
//!    download, runs the command, and when it exits 0 uploads each output
//!    (a directory as tar.zst), reads the output parameters' files, and
//!    writes the termination message: the command's own outputs (a JSON
//!    object, when it wrote one) plus `artifacts: {name: ArtifactRef}` and
//!    the parameters.
//!
//! Exit codes of both: the command's own; [`EXIT_TASK_FAULT`] when an
//! artifact is the task's fault (a declared output path that does not
//! exist, a digest that does not match); [`EXIT_STORE_FAULT`] when the
//! store is (unreachable, refusing, an expired URL): the controller counts
//! that attempt on the system retry budget.

use serde::{Deserialize, Serialize};

use super::transfer::Kind;

/// The exit code of `weft io` when the store is at fault (EX_TEMPFAIL).
pub const EXIT_STORE_FAULT: i32 = 75;
/// The exit code of `weft io` when an artifact is the task's fault
/// (EX_DATAERR).
pub const EXIT_TASK_FAULT: i32 = 65;

/// Where the shared `emptyDir` is mounted in the init and main containers.
pub const IO_DIR: &str = "/weft/io";

/// One attempt's transfers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IoPlan {
    /// The shared directory (an `emptyDir` mount, [`IO_DIR`]).
    pub dir: String,
    /// The main container's termination message path.
    pub termination_log: String,
    /// Artifacts to download before the command runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<PlannedInput>,
    /// Artifacts to upload after it exits 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<PlannedOutput>,
    /// Output parameters read from files after it exits 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<PlannedParameter>,
    /// The largest artifact, in bytes, either way (none: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u64>,
    /// Where the outputs go when they do not fit the termination message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload: Option<Offload>,
    /// Where the command's log goes when it ends (`archiveLogs`): a
    /// presigned PUT, whatever the command's exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<PlannedLog>,
}

/// The archived log of the main container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedLog {
    /// A presigned PUT URL.
    pub url: String,
    /// The key it writes.
    pub key: String,
}

/// The termination message's key that says the outputs were uploaded:
/// its value is an `ArtifactRef` of one JSON object.
pub const OFFLOADED_KEY: &str = "weft.dev/outputs";

/// The most a termination message holds here: Kubernetes keeps 4,096
/// bytes of a container's message; a little is left for the runtime.
pub const MESSAGE_LIMIT: usize = 4000;

/// Outputs too large for the termination message: uploaded as one JSON
/// object to `url` (a presigned PUT of `key`), and the message says only
/// `{"weft.dev/outputs": {key, digest, size, kind}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Offload {
    /// A presigned PUT URL.
    pub url: String,
    /// The key it writes.
    pub key: String,
    /// Outputs longer than this (serialised, bytes) are uploaded.
    pub above: usize,
}

/// An input artifact: fetched from `url` into `<dir>/inputs/<name>`, then
/// linked at `path`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedInput {
    /// The artifact's name in the task.
    pub name: String,
    /// Where the command expects it.
    pub path: String,
    /// A file, or a directory (a tar.zst object, unpacked).
    pub kind: Kind,
    /// A presigned GET URL (`file://` under a local repository), or the
    /// `url` the spec named. Only `weft io init`'s plan has it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// The digest recorded when it was uploaded; a mismatch fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// An output artifact: what is at `path` after the command, uploaded to
/// `url`, reported under `key`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedOutput {
    /// The artifact's name in the task.
    pub name: String,
    /// Where the command leaves it (a file or a directory).
    pub path: String,
    /// A presigned PUT URL (`file://` under a local repository).
    pub url: String,
    /// The key the URL writes (reported back in the termination message).
    pub key: String,
}

/// An output parameter read from a file the command wrote: its text,
/// parsed as JSON when it is JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedParameter {
    /// The output's name.
    pub name: String,
    /// The file.
    pub path: String,
}

impl IoPlan {
    /// The plan as the one argument `--plan` takes.
    pub fn to_arg(&self) -> String {
        serde_json::to_string(self).expect("a plan serialises")
    }

    /// The same inputs and nothing to report: what `weft io init` needs
    /// (each URL is in the pod once, in the container that uses it: URLs
    /// are most of a wrapped pod's bytes), and the whole plan of a
    /// resource's other pods (a PyTorchJob's workers), so that only the
    /// first pod spec's pods write the attempt's outputs and log.
    pub fn inputs_only(&self) -> IoPlan {
        IoPlan {
            outputs: Vec::new(),
            parameters: Vec::new(),
            offload: None,
            log: None,
            ..self.clone()
        }
    }

    /// What `weft io exec` needs: where the inputs were fetched to (not
    /// their URLs and digests), and everything it reports.
    pub fn for_exec(&self) -> IoPlan {
        let mut plan = self.clone();
        for i in &mut plan.inputs {
            i.url.clear();
            i.digest = None;
        }
        plan
    }

    /// Reads `--plan`, naming the problem.
    pub fn from_arg(arg: &str) -> anyhow::Result<IoPlan> {
        serde_json::from_str(arg).map_err(|e| anyhow::anyhow!("--plan is not an io plan: {e}"))
    }
}
