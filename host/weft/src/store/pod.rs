//! The pod's side of an [`IoPlan`] (the steps are in [`super::plan`]):
//! [`init`] fetches the inputs before the task's container starts, [`exec`]
//! wraps the task's command, links the inputs where it expects them and,
//! when it succeeds, uploads its outputs and reports them in the
//! termination message, which is all the controller reads back.
//!
//! A failure is a [`Fault`]: one line naming the artifact and the reason,
//! and an exit code saying whose fault it is ([`EXIT_TASK_FAULT`],
//! [`EXIT_STORE_FAULT`]), because the controller retries the two on
//! different budgets.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use futures::{StreamExt, TryStreamExt};
use serde_json::{Map, Value};
use weft_dag::artifacts::{ArtifactRef, OUTPUTS_KEY};

use super::plan::{
    EXIT_STORE_FAULT, EXIT_TASK_FAULT, IoPlan, PlannedInput, PlannedOutput, PlannedParameter,
};
use super::transfer::{self, Kind, TransferError};
use super::{Digest, Stored};

/// How many artifacts move at once: enough that small ones do not wait
/// behind a large one, few enough not to swamp the pod's network and disk.
const PARALLEL: usize = 4;

/// Why `weft io` failed: one line for the termination log, and the exit
/// code that tells the controller whose fault it is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Fault {
    /// Names the artifact (or the command) and the reason.
    pub message: String,
    /// [`EXIT_TASK_FAULT`], [`EXIT_STORE_FAULT`], or 126/127 when the
    /// command cannot be started (as a shell says).
    pub code: i32,
}

impl Fault {
    /// The task's fault: retrying the same task would fail the same way.
    fn task(message: String) -> Fault {
        Fault {
            message,
            code: EXIT_TASK_FAULT,
        }
    }

    /// The store's or the system's fault: another attempt may succeed.
    fn store(message: String) -> Fault {
        Fault {
            message,
            code: EXIT_STORE_FAULT,
        }
    }

    /// A transfer's error, saying which way the artifact was going.
    fn transfer(direction: &str, e: TransferError) -> Fault {
        let message = format!("{direction} artifact {}: {}", e.artifact, e.message);
        if e.store_fault {
            Fault::store(message)
        } else {
            Fault::task(message)
        }
    }

    /// Writes the message to stderr and, when there is one, to the
    /// termination log (where the controller reads it); returns the exit
    /// code. The log is written whole, on one line, so that the
    /// controller never takes it for the task's outputs.
    pub fn report(&self, termination_log: Option<&Path>) -> i32 {
        let line = self
            .message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        eprintln!("error: {line}");
        if let Some(path) = termination_log
            && let Err(e) = write_file(path, &line)
        {
            eprintln!("error: termination log {}: {e}", path.display());
        }
        self.code
    }
}

/// `weft io init`: installs `binary` (the running weft,
/// [`std::env::current_exe`]) as `<dir>/bin/weft`, so that the task's
/// image needs no Weft of its own to run `weft io exec`, then downloads
/// every input into `<dir>/inputs/<name>`.
pub async fn init(plan: &IoPlan, binary: &Path) -> Result<(), Fault> {
    install(binary, &Path::new(&plan.dir).join("bin/weft")).await?;
    download_inputs(plan).await
}

/// Puts the binary next to its final name, then renames it, so that a
/// restarted init container never leaves a half-written executable.
///
/// A hard link where the filesystem allows one: the local runner's
/// emptyDirs sit on the same disk as the binary, and a copy per pod of a
/// debug build (~200 MiB) filled a CI machine's disk with 20 workflows.
/// In a real Pod the image and the emptyDir are different filesystems
/// (`EXDEV`), so the binary is copied.
async fn install(from: &Path, to: &Path) -> Result<(), Fault> {
    let fail = |e: std::io::Error| {
        Fault::store(format!(
            "install {} as {}: {e}",
            from.display(),
            to.display()
        ))
    };
    let tmp = to.with_extension("installing");
    if let Some(parent) = to.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(fail)?;
    }
    let _ = tokio::fs::remove_file(&tmp).await;
    if !executable(from).await || tokio::fs::hard_link(from, &tmp).await.is_err() {
        tokio::fs::copy(from, &tmp).await.map_err(fail)?;
        let mode = std::fs::Permissions::from_mode(0o755);
        tokio::fs::set_permissions(&tmp, mode).await.map_err(fail)?;
    }
    tokio::fs::rename(&tmp, to).await.map_err(fail)
}

/// Whether everyone may run `path` (what the installed copy gets), so a
/// link to it needs no change of mode.
async fn executable(path: &Path) -> bool {
    let meta = tokio::fs::metadata(path).await;
    meta.is_ok_and(|m| m.permissions().mode() & 0o555 == 0o555)
}

/// Downloads every input, a few at a time; the first failure (in the
/// plan's order) is the one reported.
pub async fn download_inputs(plan: &IoPlan) -> Result<(), Fault> {
    futures::stream::iter(&plan.inputs)
        .map(|input| download(plan, input))
        .buffered(PARALLEL)
        .try_collect()
        .await
}

/// Downloads one input, then refuses it (removing it) when it is not what
/// the plan says: another digest or over the size limit.
async fn download(plan: &IoPlan, input: &PlannedInput) -> Result<(), Fault> {
    let name = &input.name;
    let to = downloaded(plan, input)?;
    let url = parse_url("input", name, &input.url)?;
    let expect = input
        .digest
        .clone()
        .map(Digest::try_from)
        .transpose()
        .map_err(|e| Fault::task(format!("input artifact {name}: {e}")))?;
    // A restarted init container starts this input over.
    remove(&to).await;
    let got = transfer::download(name, &url, &to, input.kind, None)
        .await
        .map_err(|e| Fault::transfer("input", e))?;
    let refused = over_limit("input", name, got.size, plan.max_size)
        .and_then(|()| mismatch(name, &got, expect.as_ref()));
    if refused.is_err() {
        remove(&to).await;
    }
    refused
}

/// The digest is checked here, not by the transfer, because a mismatch is
/// the task's fault: the object under its key is not the one its producer
/// uploaded, and another attempt would read the same bytes.
fn mismatch(name: &str, got: &Stored, expect: Option<&Digest>) -> Result<(), Fault> {
    match expect {
        Some(want) if *want != got.digest => Err(Fault::task(format!(
            "input artifact {name}: digest mismatch: the store served {}, expected {want}",
            got.digest
        ))),
        _ => Ok(()),
    }
}

/// The plan's size limit, naming the artifact, its size and the limit.
fn over_limit(direction: &str, name: &str, size: u64, max: Option<u64>) -> Result<(), Fault> {
    match max {
        Some(max) if size > max => Err(Fault::task(format!(
            "{direction} artifact {name}: {size} bytes is over the limit of {max} bytes"
        ))),
        _ => Ok(()),
    }
}

/// Where an input is downloaded: `<dir>/inputs/<name>`. A name that is
/// not one path component could land anywhere, so it is refused.
fn downloaded(plan: &IoPlan, input: &PlannedInput) -> Result<PathBuf, Fault> {
    let name = &input.name;
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(Fault::task(format!(
            "input artifact {name:?}: not a valid artifact name"
        )));
    }
    Ok(Path::new(&plan.dir).join("inputs").join(name))
}

/// A URL from the plan; the controller wrote it, so a bad one is not the
/// task's fault.
fn parse_url(direction: &str, name: &str, url: &str) -> Result<url::Url, Fault> {
    url::Url::parse(url)
        .map_err(|e| Fault::store(format!("{direction} artifact {name}: bad URL {url:?}: {e}")))
}

/// Removes a file or a directory tree, whichever is there (if anything).
async fn remove(path: &Path) {
    match tokio::fs::symlink_metadata(path).await {
        Ok(m) if m.is_dir() => {
            let _ = tokio::fs::remove_dir_all(path).await;
        }
        Ok(_) => {
            let _ = tokio::fs::remove_file(path).await;
        }
        Err(_) => {}
    }
}

/// `weft io exec`: links the inputs, runs `command` (forwarding SIGTERM
/// and SIGINT to it), and when it exits 0 uploads the outputs and writes
/// the termination message. Returns the exit code: the command's own
/// (128 + the signal when a signal ended it; nothing is uploaded), 0, or
/// a [`Fault`]'s, reported to stderr and to `plan.termination_log`.
pub async fn exec(plan: &IoPlan, command: &[String]) -> i32 {
    exec_with(plan, command, true).await
}

/// [`exec`], with the signal forwarding optional: tokio never gives a
/// signal back once it listens for it, so tests leave it off and the test
/// process still stops on Ctrl-C.
async fn exec_with(plan: &IoPlan, command: &[String], forward_signals: bool) -> i32 {
    let steps = async {
        link_inputs(plan).await?;
        let log = plan.log.as_ref().map(|_| log_file(plan));
        let status = run_command(command, forward_signals, log.as_deref()).await;
        if let (Some(l), Some(file)) = (&plan.log, &log) {
            archive_log(l, file).await;
        }
        match exit_code(status?) {
            0 => finish(plan).await.map(|()| 0),
            code => Ok(code),
        }
    };
    match steps.await {
        Ok(code) => code,
        Err(fault) => fault.report(Some(Path::new(&plan.termination_log))),
    }
}

/// Where the command's log is kept until it is uploaded.
fn log_file(plan: &IoPlan) -> PathBuf {
    Path::new(&plan.dir).join("logs/main.log")
}

/// Uploads the command's log. A log that cannot be archived is said on
/// stderr and does not fail a task that did its work.
async fn archive_log(l: &super::plan::PlannedLog, file: &Path) {
    let uploaded = match url::Url::parse(&l.url) {
        Ok(url) => transfer::upload("log", file, &url)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(e) => Err(format!("bad log URL: {e}")),
    };
    if let Err(e) = uploaded {
        eprintln!("warning: the log was not archived to {}: {e}", l.key);
    }
}

/// Makes each input's declared path a symlink to its download: no copy,
/// whatever its size, and the command finds it where it expects it.
pub async fn link_inputs(plan: &IoPlan) -> Result<(), Fault> {
    for input in &plan.inputs {
        link(plan, input).await?;
    }
    Ok(())
}

async fn link(plan: &IoPlan, input: &PlannedInput) -> Result<(), Fault> {
    let (name, path) = (&input.name, Path::new(&input.path));
    let target = downloaded(plan, input)?;
    if tokio::fs::symlink_metadata(path).await.is_ok() {
        return Err(Fault::task(format!(
            "input artifact {name}: path {} already exists",
            path.display()
        )));
    }
    if tokio::fs::symlink_metadata(&target).await.is_err() {
        return Err(Fault::store(format!(
            "input artifact {name}: not downloaded to {} (did weft io init run?)",
            target.display()
        )));
    }
    let fail = |e: std::io::Error| {
        Fault::task(format!(
            "input artifact {name}: link {}: {e}",
            path.display()
        ))
    };
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(fail)?;
    }
    tokio::fs::symlink(&target, path).await.map_err(fail)
}

/// Runs the command as a child (stdin, stdout and stderr inherited) and
/// waits for it. With `forward_signals`, SIGTERM and SIGINT are passed on:
/// in a pod this process is the container's PID 1, the one the kubelet
/// signals when the pod is deleted, and the command must hear it to stop
/// within its grace period. The handlers are in place before the child
/// starts, so no signal falls between.
async fn run_command(
    command: &[String],
    forward_signals: bool,
    log: Option<&Path>,
) -> Result<ExitStatus, Fault> {
    use tokio::signal::unix::{SignalKind, signal};
    let Some((program, args)) = command.split_first() else {
        return Err(Fault::task("no command to run".into()));
    };
    let listen = |kind| {
        if forward_signals {
            signal(kind).map(Some)
        } else {
            Ok(None)
        }
    };
    let no_signals = |e: std::io::Error| Fault::store(format!("listen for signals: {e}"));
    let mut term = listen(SignalKind::terminate()).map_err(no_signals)?;
    let mut int = listen(SignalKind::interrupt()).map_err(no_signals)?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).kill_on_drop(true);
    if log.is_some() {
        super::tee::pipe(&mut cmd);
    }
    let mut child = cmd.spawn().map_err(|e| not_started(program, e))?;
    let tee = match log {
        Some(file) => Some(
            super::tee::Tee::start(&mut child, file)
                .await
                .map_err(|e| Fault::store(format!("log {}: {e}", file.display())))?,
        ),
        None => None,
    };
    loop {
        tokio::select! {
            status = child.wait() => {
                if let Some(t) = tee {
                    t.finish().await;
                }
                return status.map_err(|e| Fault::store(format!("wait for {program}: {e}")));
            }
            Some(()) = next(&mut term) => forward(&mut child, rustix::process::Signal::TERM).await,
            Some(()) = next(&mut int) => forward(&mut child, rustix::process::Signal::INT).await,
        }
    }
}

/// The next delivery of a signal listened for; never, when not listening.
async fn next(signal: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match signal {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

/// A command that cannot be started, with a shell's exit codes: 127 when
/// it is not there, 126 when it cannot be executed.
fn not_started(program: &str, e: std::io::Error) -> Fault {
    let code = match e.kind() {
        std::io::ErrorKind::NotFound => 127,
        _ => 126,
    };
    Fault {
        message: format!("command {program}: {e}"),
        code,
    }
}

/// Sends `signal` to the child (through rustix: kill(2) without unsafe
/// code), so a pod's deletion still gives the command its grace period.
async fn forward(child: &mut tokio::process::Child, signal: rustix::process::Signal) {
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw);
    let sent = pid.map(|p| rustix::process::kill_process(p, signal));
    if !matches!(sent, Some(Ok(()))) {
        let _ = child.start_kill();
    }
}

/// The exit code a shell would give: the command's, or 128 + the signal
/// that ended it.
fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// After the command exits 0: reads the parameters, uploads the outputs,
/// and writes the termination message: the command's own outputs, the
/// parameters, and `artifacts` (only once every upload succeeded, so that
/// nothing partly uploaded is ever referenced).
pub async fn finish(plan: &IoPlan) -> Result<(), Fault> {
    let mut parameters = Map::new();
    for p in &plan.parameters {
        parameters.insert(p.name.clone(), read_parameter(p).await?);
    }
    let artifacts = upload_outputs(plan).await?;
    let log = Path::new(&plan.termination_log);
    let mut message = own_outputs(log).await;
    message.extend(parameters);
    if !plan.outputs.is_empty() {
        message.insert(OUTPUTS_KEY.into(), Value::Object(artifacts));
    }
    let mut text = Value::Object(message).to_string();
    if let Some(o) = plan.offload.as_ref().filter(|o| text.len() > o.above) {
        text = offload(o, text).await?;
    }
    write_file(log, &text)
        .map_err(|e| Fault::store(format!("termination log {}: {e}", log.display())))
}

/// Uploads outputs too large for the termination message; what is left
/// for the message is their reference.
async fn offload(o: &super::plan::Offload, outputs: String) -> Result<String, Fault> {
    let file = tempfile::NamedTempFile::new()
        .map_err(|e| Fault::store(format!("outputs: temporary file: {e}")))?;
    tokio::fs::write(file.path(), outputs.as_bytes())
        .await
        .map_err(|e| Fault::store(format!("outputs: {e}")))?;
    let url = parse_url("output", "outputs", &o.url)?;
    let (_, stored) = transfer::upload("outputs", file.path(), &url)
        .await
        .map_err(|e| Fault::transfer("output", e))?;
    let reference = serde_json::json!({"key": o.key, "digest": stored.digest, "size": stored.size, "kind": "file"});
    Ok(serde_json::json!({ super::plan::OFFLOADED_KEY: reference }).to_string())
}

/// An output parameter's file: JSON when it parses as JSON (a number
/// stays a number), else its text, trimmed.
async fn read_parameter(p: &PlannedParameter) -> Result<Value, Fault> {
    let (name, path) = (&p.name, &p.path);
    let bytes = tokio::fs::read(path).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Fault::task(format!(
            "output parameter {name}: path {path} does not exist"
        )),
        _ => Fault::task(format!("output parameter {name}: read {path}: {e}")),
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Fault::task(format!("output parameter {name}: {path} is not UTF-8 text")))?;
    Ok(serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.trim().into())))
}

/// Uploads every output, a few at a time; the first failure (in the
/// plan's order) is the one reported.
async fn upload_outputs(plan: &IoPlan) -> Result<Map<String, Value>, Fault> {
    futures::stream::iter(&plan.outputs)
        .map(|output| upload(output, plan.max_size))
        .buffered(PARALLEL)
        .try_collect()
        .await
}

/// Uploads one output and says what the controller records of it. A
/// file over the limit is refused before it is sent; a directory only
/// has its size once packed, so it is refused after (unreferenced).
async fn upload(output: &PlannedOutput, max: Option<u64>) -> Result<(String, Value), Fault> {
    let (name, path) = (&output.name, Path::new(&output.path));
    let meta = tokio::fs::metadata(path)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Fault::task(format!(
                "output artifact {name}: path {} does not exist",
                path.display()
            )),
            _ => Fault::task(format!("output artifact {name}: {}: {e}", path.display())),
        })?;
    if meta.is_file() {
        over_limit("output", name, meta.len(), max)?;
    }
    let url = parse_url("output", name, &output.url)?;
    let (kind, stored) = transfer::upload(name, path, &url)
        .await
        .map_err(|e| Fault::transfer("output", e))?;
    over_limit("output", name, stored.size, max)?;
    let kind = match kind {
        Kind::File => "file",
        Kind::Directory => "directory",
    };
    let reference = ArtifactRef {
        key: output.key.clone(),
        digest: stored.digest.to_string(),
        size: stored.size,
        kind: kind.into(),
    };
    let reference = serde_json::to_value(reference).expect("an artifact reference serialises");
    Ok((name.clone(), reference))
}

/// What the command itself left in the termination log: a JSON object is
/// its outputs, kept; anything else (nothing, or a message in text) holds
/// no outputs.
async fn own_outputs(log: &Path) -> Map<String, Value> {
    let text = tokio::fs::read_to_string(log).await.unwrap_or_default();
    match serde_json::from_str(&text) {
        Ok(Value::Object(outputs)) => outputs,
        _ => Map::new(),
    }
}

/// Writes `text` to `path`, creating its directories (the local runner's
/// termination log is a plain file in a directory that may not exist).
fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests;
