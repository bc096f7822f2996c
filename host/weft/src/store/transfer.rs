//! The pod's side of the data plane (`weft io`): moving one artifact with
//! nothing but a presigned URL. Streams both ways, hashes on the way, and
//! checks the digest the controller expects, so a pod never holds the
//! store's credentials and never holds a whole file in memory.

use std::path::{Path, PathBuf};

use futures::StreamExt;
use sha2::Digest as _;

use super::{Digest, Stored, archive};

/// Whether an artifact is one file or a directory (a tar.zst object).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Stored as the file's bytes.
    File,
    /// Stored as a tar archive compressed with zstd.
    Directory,
}

/// What went wrong moving an artifact, naming it.
#[derive(Debug, thiserror::Error)]
#[error("artifact {artifact}: {message}")]
pub struct TransferError {
    /// The artifact's name (or path when unnamed).
    pub artifact: String,
    /// What happened, with the store's answer when it answered.
    pub message: String,
    /// Whether the store is at fault (retryable), not the task.
    pub store_fault: bool,
}

/// One HTTP client for the process (connections are reused).
fn client() -> reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    super::tls_provider();
    CLIENT.get_or_init(reqwest::Client::new).clone()
}

fn task_fault(artifact: &str, message: String) -> TransferError {
    TransferError {
        artifact: artifact.into(),
        message,
        store_fault: false,
    }
}

fn store_fault(artifact: &str, message: String) -> TransferError {
    TransferError {
        artifact: artifact.into(),
        message,
        store_fault: true,
    }
}

/// Uploads `path` (a file, or a directory as tar.zst) to the presigned
/// PUT `url` (`file://` under the local runner); returns its kind, size
/// and digest. A path that does not exist is the task's fault.
pub async fn upload(
    artifact: &str,
    path: &Path,
    url: &url::Url,
) -> Result<(Kind, Stored), TransferError> {
    let meta = tokio::fs::metadata(path).await.map_err(|e| {
        task_fault(
            artifact,
            format!("output path {} does not exist: {e}", path.display()),
        )
    })?;
    let (kind, file, _tmp) = if meta.is_dir() {
        let tmp = tempfile::NamedTempFile::new()
            .map_err(|e| store_fault(artifact, format!("temporary file: {e}")))?;
        let (dir, out) = (
            path.to_path_buf(),
            tmp.reopen()
                .map_err(|e| store_fault(artifact, e.to_string()))?,
        );
        tokio::task::spawn_blocking(move || archive::pack_dir(&dir, std::io::BufWriter::new(out)))
            .await
            .map_err(|e| store_fault(artifact, e.to_string()))?
            .map_err(|e| task_fault(artifact, format!("archive {}: {e}", path.display())))?;
        (Kind::Directory, tmp.path().to_path_buf(), Some(tmp))
    } else {
        (Kind::File, path.to_path_buf(), None)
    };
    let stored = put(artifact, &file, url).await?;
    Ok((kind, stored))
}

/// Streams `file` to `url`, hashing it on the way.
async fn put(artifact: &str, file: &Path, url: &url::Url) -> Result<Stored, TransferError> {
    let size = tokio::fs::metadata(file)
        .await
        .map_err(|e| store_fault(artifact, e.to_string()))?
        .len();
    if url.scheme() == "file" {
        let to = url
            .to_file_path()
            .map_err(|()| task_fault(artifact, format!("bad file URL {url}")))?;
        return copy_local(artifact, file, &to, true).await;
    }
    let f = tokio::fs::File::open(file)
        .await
        .map_err(|e| store_fault(artifact, e.to_string()))?;
    let hasher = std::sync::Arc::new(std::sync::Mutex::new(sha2::Sha256::new()));
    let h = hasher.clone();
    let body = tokio_util::io::ReaderStream::with_capacity(f, 1 << 20).map(move |chunk| {
        if let Ok(c) = &chunk {
            h.lock().expect("hasher").update(c);
        }
        chunk
    });
    let answer = client()
        .put(url.as_str())
        .header(reqwest::header::CONTENT_LENGTH, size)
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await
        .map_err(|e| store_fault(artifact, format!("upload: {e}")))?;
    check(artifact, "upload", answer).await?;
    let hasher = std::mem::take(&mut *hasher.lock().expect("hasher"));
    Ok(Stored {
        size,
        digest: Digest::from_hasher(hasher),
    })
}

/// Downloads the presigned GET `url` to `path` (a file, or a directory
/// unpacked from tar.zst), checking the digest when one is expected.
pub async fn download(
    artifact: &str,
    url: &url::Url,
    path: &Path,
    kind: Kind,
    expect: Option<&Digest>,
) -> Result<Stored, TransferError> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| task_fault(artifact, format!("create {}: {e}", parent.display())))?;
    }
    let target: PathBuf = match kind {
        Kind::File => path.to_path_buf(),
        Kind::Directory => path.with_extension("weft-download.tar.zst"),
    };
    let stored = get(artifact, url, &target).await?;
    if let Some(want) = expect.filter(|d| **d != stored.digest) {
        let _ = tokio::fs::remove_file(&target).await;
        return Err(store_fault(
            artifact,
            format!(
                "digest mismatch: the store served {}, expected {want}",
                stored.digest
            ),
        ));
    }
    if kind == Kind::Directory {
        let (from, to) = (target.clone(), path.to_path_buf());
        let unpacked = tokio::task::spawn_blocking(move || {
            let f = std::fs::File::open(&from)?;
            archive::unpack_dir(std::io::BufReader::new(f), &to)
        })
        .await
        .map_err(|e| store_fault(artifact, e.to_string()))?;
        let _ = tokio::fs::remove_file(&target).await;
        unpacked
            .map_err(|e| task_fault(artifact, format!("unpack into {}: {e}", path.display())))?;
    }
    Ok(stored)
}

async fn get(artifact: &str, url: &url::Url, to: &Path) -> Result<Stored, TransferError> {
    if url.scheme() == "file" {
        let from = url
            .to_file_path()
            .map_err(|()| task_fault(artifact, format!("bad file URL {url}")))?;
        return copy_local(artifact, &from, to, false).await;
    }
    let answer = client()
        .get(url.as_str())
        .send()
        .await
        .map_err(|e| store_fault(artifact, format!("download: {e}")))?;
    let answer = check(artifact, "download", answer).await?;
    let chunks = answer
        .bytes_stream()
        .map(|c| c.map_err(|e| format!("download: {e}")));
    write_hashed(artifact, chunks, to, false).await
}

/// The store's refusal as an error naming its status and what it said
/// (S3 answers XML with a Code and a Message: an expired URL says
/// `AccessDenied` / `Request has expired`).
async fn check(
    artifact: &str,
    op: &str,
    answer: reqwest::Response,
) -> Result<reqwest::Response, TransferError> {
    let status = answer.status();
    if status.is_success() {
        return Ok(answer);
    }
    let body = answer.text().await.unwrap_or_default();
    let said: String = body.chars().take(300).collect();
    let message = format!("{op} refused by the store: HTTP {status}: {}", said.trim());
    // 404 on a download is a missing input: the task's inputs are wrong.
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err(task_fault(artifact, message));
    }
    Err(store_fault(artifact, message))
}

/// The local runner's transfer: a streamed copy with its digest (the
/// destination is the store on an upload, the task's disk on a download).
async fn copy_local(
    artifact: &str,
    from: &Path,
    to: &Path,
    to_store: bool,
) -> Result<Stored, TransferError> {
    if let Some(parent) = to.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| store_fault(artifact, e.to_string()))?;
    }
    let src = tokio::fs::File::open(from)
        .await
        .map_err(|e| task_fault(artifact, format!("open {}: {e}", from.display())))?;
    let chunks = tokio_util::io::ReaderStream::with_capacity(src, 1 << 20)
        .map(|c| c.map_err(|e| format!("read: {e}")));
    write_hashed(artifact, chunks, to, to_store).await
}

/// Writes `chunks` to the file `to`, hashing them on the way. A chunk that
/// fails is the store's fault; a write that fails is the store's when
/// `to_store`, else the task's. One blocking thread hashes and
/// writes while the stream keeps receiving: done in turn, chunk by chunk
/// through tokio's file (a blocking task per write), a 1 GiB download
/// took 1.43 times curl's time. The channel between them holds two
/// chunks: with 16 or 64, chunks queued while the disk lagged took peak
/// RSS from 24 to 77 MiB (benches/io.rs).
async fn write_hashed(
    artifact: &str,
    chunks: impl futures::Stream<Item = Result<bytes::Bytes, String>>,
    to: &Path,
    to_store: bool,
) -> Result<Stored, TransferError> {
    let write_fault = |m: String| {
        if to_store {
            store_fault(artifact, m)
        } else {
            task_fault(artifact, m)
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(2);
    let path = to.to_path_buf();
    let writer = tokio::task::spawn_blocking(move || -> Result<Stored, String> {
        use std::io::Write;
        let file =
            std::fs::File::create(&path).map_err(|e| format!("create {}: {e}", path.display()))?;
        let mut out = std::io::BufWriter::with_capacity(256 << 10, file);
        let (mut hasher, mut size) = (sha2::Sha256::new(), 0u64);
        while let Some(chunk) = rx.blocking_recv() {
            hasher.update(&chunk);
            size += chunk.len() as u64;
            out.write_all(&chunk)
                .map_err(|e| format!("write {}: {e}", path.display()))?;
        }
        out.flush()
            .map_err(|e| format!("write {}: {e}", path.display()))?;
        Ok(Stored {
            size,
            digest: Digest::from_hasher(hasher),
        })
    });
    let mut chunks = std::pin::pin!(chunks);
    let mut received = Ok(());
    while let Some(chunk) = chunks.next().await {
        match chunk {
            // A writer that stopped has its own error, read below.
            Ok(c) => {
                if tx.send(c).await.is_err() {
                    break;
                }
            }
            Err(m) => {
                received = Err(store_fault(artifact, m));
                break;
            }
        }
    }
    drop(tx);
    let written = writer
        .await
        .map_err(|e| write_fault(e.to_string()))?
        .map_err(write_fault);
    received?;
    written
}
