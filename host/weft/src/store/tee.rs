//! A task command's output kept for the archive (`archiveLogs`): what the
//! command writes to stdout and stderr still goes to the container's own
//! streams (the kubelet's log, `kubectl logs`), and a copy goes to a file
//! that `weft io exec` uploads when the command ends, so the log outlives
//! the pod.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// The copies in flight: both streams into one file, in the order their
/// chunks arrive.
pub struct Tee {
    tasks: Vec<JoinHandle<()>>,
}

/// Pipes `cmd`'s stdout and stderr, to be passed on by [`Tee::start`].
pub fn pipe(cmd: &mut tokio::process::Command) {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
}

impl Tee {
    /// Starts copying `child`'s piped streams to this process's and to
    /// `file` (created, truncated).
    pub async fn start(child: &mut tokio::process::Child, file: &Path) -> std::io::Result<Tee> {
        if let Some(parent) = file.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        let out = Arc::new(Mutex::new(tokio::fs::File::create(file).await?));
        let mut tasks = Vec::new();
        if let Some(s) = child.stdout.take() {
            tasks.push(tokio::spawn(copy(s, tokio::io::stdout(), out.clone())));
        }
        if let Some(s) = child.stderr.take() {
            tasks.push(tokio::spawn(copy(s, tokio::io::stderr(), out.clone())));
        }
        Ok(Tee { tasks })
    }

    /// Waits until both streams ended (the command and anything it left
    /// running closed them) and the file has every byte.
    pub async fn finish(self) {
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Copies one stream; a full disk or a closed stream of ours loses the
/// copy, never the command's output itself.
async fn copy(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    file: Arc<Mutex<tokio::fs::File>>,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let _ = to.write_all(&buf[..n]).await;
        let _ = to.flush().await;
        let _ = file.lock().await.write_all(&buf[..n]).await;
    }
    let _ = file.lock().await.flush().await;
}
