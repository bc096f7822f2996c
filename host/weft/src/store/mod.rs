//! The data plane's object store (issue 42): one layer over the
//! `object_store` crate for an S3-compatible bucket or a local directory.
//! The controller holds the credentials; pods get presigned URLs scoped to
//! one key and a lifetime ([`Store::presign`]), so no pod ever sees them.
//! Bytes are streamed in both directions and hashed on the way (sha256),
//! never held whole in memory.

pub mod archive;
mod config;
mod key;
pub mod plan;
pub mod pod;
pub mod tee;
pub mod transfer;

pub use config::{
    ArtifactRepository, Credentials, LocalRepository, S3Repository, SecretKeyRef, credentials,
};
pub use key::{Digest, attempt_key};

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::signer::{Method, Signer};
use object_store::{ObjectStore, ObjectStoreExt};
use sha2::Digest as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What goes wrong with the store, each naming the repository and the key.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The repository's configuration cannot be used.
    #[error("artifact repository {repo}: {message}")]
    Config {
        /// [`ArtifactRepository::describe`].
        repo: String,
        /// What is wrong.
        message: String,
    },
    /// The object is not there.
    #[error("{key} is not in {repo}")]
    NotFound {
        /// The key asked for.
        key: String,
        /// [`ArtifactRepository::describe`].
        repo: String,
    },
    /// The store or the local file failed (retryable: the store's fault).
    #[error("{op} {key} in {repo}: {message}")]
    Io {
        /// `put`, `get`, `list`, `delete` or `presign`.
        op: &'static str,
        /// The key.
        key: String,
        /// [`ArtifactRepository::describe`].
        repo: String,
        /// The underlying error.
        message: String,
    },
}

/// Makes ring rustls' process-wide provider once: the store's HTTP client
/// (reqwest without a provider of its own, so that aws-lc-rs is not
/// built) takes it from there. Harmless when another part set it first.
pub fn tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// An open artifact repository.
#[derive(Clone, Debug)]
pub struct Store {
    objects: Arc<dyn ObjectStore>,
    /// S3's presigner; absent for a local directory (file:// URLs instead).
    signer: Option<Arc<object_store::aws::AmazonS3>>,
    /// The local directory, for file:// URLs.
    local: Option<std::path::PathBuf>,
    prefix: String,
    repo: String,
}

/// The size and sha256 of what was stored or read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// Bytes.
    pub size: u64,
    /// Content digest.
    pub digest: Digest,
}

/// Streaming chunks: 8 MiB, so a 1 GiB upload is 128 parts and the
/// memory in flight stays a few chunks.
const CHUNK: usize = 8 << 20;

impl Store {
    /// Opens `repo`; an S3 repository needs `credentials` (from its Secrets).
    pub fn open(
        repo: &ArtifactRepository,
        credentials: Option<&Credentials>,
    ) -> Result<Store, StoreError> {
        tls_provider();
        let name = repo.describe();
        let config = |message: String| StoreError::Config {
            repo: name.clone(),
            message,
        };
        repo.check().map_err(config)?;
        if let Some(l) = &repo.local {
            std::fs::create_dir_all(&l.path)
                .map_err(|e| config(format!("create {}: {e}", l.path.display())))?;
            let fs = object_store::local::LocalFileSystem::new_with_prefix(&l.path)
                .map_err(|e| config(e.to_string()))?;
            return Ok(Store {
                objects: Arc::new(fs),
                signer: None,
                local: Some(l.path.canonicalize().unwrap_or_else(|_| l.path.clone())),
                prefix: l.prefix.trim_matches('/').to_string(),
                repo: name,
            });
        }
        let s3 = repo.s3.as_ref().expect("checked: s3 or local");
        let creds = credentials.ok_or_else(|| {
            config("no credentials: set accessKeySecret and secretKeySecret".into())
        })?;
        let mut b = object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(&s3.bucket)
            .with_region(s3.region.as_deref().unwrap_or("us-east-1"))
            .with_access_key_id(&creds.access_key_id)
            .with_secret_access_key(&creds.secret_access_key)
            .with_allow_http(s3.insecure);
        if let Some(e) = &s3.endpoint {
            // Path-style requests: S3-compatible servers rarely resolve
            // bucket.host names.
            b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
        }
        let s3store = Arc::new(b.build().map_err(|e| config(e.to_string()))?);
        Ok(Store {
            objects: s3store.clone(),
            signer: Some(s3store),
            local: None,
            prefix: s3.prefix.trim_matches('/').to_string(),
            repo: name,
        })
    }

    /// How the repository shows in messages.
    pub fn describe(&self) -> &str {
        &self.repo
    }

    fn path(&self, key: &str) -> ObjectPath {
        let key = key.trim_start_matches('/');
        if self.prefix.is_empty() {
            ObjectPath::from(key)
        } else {
            ObjectPath::from(format!("{}/{key}", self.prefix))
        }
    }

    fn io(&self, op: &'static str, key: &str, e: impl std::fmt::Display) -> StoreError {
        StoreError::Io {
            op,
            key: key.into(),
            repo: self.repo.clone(),
            message: e.to_string(),
        }
    }

    fn object_error(&self, op: &'static str, key: &str, e: object_store::Error) -> StoreError {
        match e {
            object_store::Error::NotFound { .. } => StoreError::NotFound {
                key: key.into(),
                repo: self.repo.clone(),
            },
            e => self.io(op, key, e),
        }
    }

    /// Uploads the file at `file` to `key`, streaming, and returns its
    /// size and digest. A failed upload is aborted, so no partial object
    /// is left under `key`.
    pub async fn put_file(&self, key: &str, file: &std::path::Path) -> Result<Stored, StoreError> {
        let mut f = tokio::fs::File::open(file)
            .await
            .map_err(|e| self.io("put", key, format!("open {}: {e}", file.display())))?;
        let mut w = object_store::buffered::BufWriter::with_capacity(
            self.objects.clone(),
            self.path(key),
            CHUNK,
        );
        let (mut hasher, mut size) = (sha2::Sha256::new(), 0u64);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = match f.read(&mut buf).await {
                Ok(n) => n,
                Err(e) => {
                    let _ = w.abort().await;
                    return Err(self.io("put", key, format!("read {}: {e}", file.display())));
                }
            };
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            size += n as u64;
            if let Err(e) = w.write_all(&buf[..n]).await {
                let _ = w.abort().await;
                return Err(self.io("put", key, e));
            }
        }
        w.shutdown().await.map_err(|e| self.io("put", key, e))?;
        Ok(Stored {
            size,
            digest: Digest::from_hasher(hasher),
        })
    }

    /// Uploads `bytes` to `key` (small values: outputs over the inline
    /// threshold).
    pub async fn put_bytes(&self, key: &str, bytes: Vec<u8>) -> Result<Stored, StoreError> {
        let stored = Stored {
            size: bytes.len() as u64,
            digest: Digest::of(&bytes),
        };
        self.objects
            .put(&self.path(key), bytes.into())
            .await
            .map_err(|e| self.object_error("put", key, e))?;
        Ok(stored)
    }

    /// Downloads `key` into the file `file` (created or truncated),
    /// streaming, and returns its size and digest.
    pub async fn get_to_file(
        &self,
        key: &str,
        file: &std::path::Path,
    ) -> Result<Stored, StoreError> {
        let got = self
            .objects
            .get(&self.path(key))
            .await
            .map_err(|e| self.object_error("get", key, e))?;
        let mut out = tokio::fs::File::create(file)
            .await
            .map_err(|e| self.io("get", key, format!("create {}: {e}", file.display())))?;
        let (mut hasher, mut size) = (sha2::Sha256::new(), 0u64);
        let mut chunks = got.into_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| self.object_error("get", key, e))?;
            hasher.update(&chunk);
            size += chunk.len() as u64;
            out.write_all(&chunk)
                .await
                .map_err(|e| self.io("get", key, format!("write {}: {e}", file.display())))?;
        }
        out.flush().await.map_err(|e| self.io("get", key, e))?;
        Ok(Stored {
            size,
            digest: Digest::from_hasher(hasher),
        })
    }

    /// Reads `key` whole (small values only).
    pub async fn get_bytes(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        let got = self
            .objects
            .get(&self.path(key))
            .await
            .map_err(|e| self.object_error("get", key, e))?;
        let bytes = got
            .bytes()
            .await
            .map_err(|e| self.object_error("get", key, e))?;
        Ok(bytes.to_vec())
    }

    /// A URL that lets its holder GET or PUT `key` only, for `ttl`: SigV4
    /// query signing for S3; a `file://` URL for a local directory (whose
    /// readers run on the controller's machine and need no credentials).
    pub async fn presign(
        &self,
        method: Method,
        key: &str,
        ttl: Duration,
    ) -> Result<url::Url, StoreError> {
        let path = self.path(key);
        if let Some(s3) = &self.signer {
            return s3
                .signed_url(method, &path, ttl)
                .await
                .map_err(|e| self.io("presign", key, e));
        }
        let dir = self.local.as_ref().expect("a store is S3 or local");
        url::Url::from_file_path(dir.join(path.as_ref()))
            .map_err(|()| self.io("presign", key, "not an absolute path"))
    }

    /// Every key under `prefix` (relative to the repository's prefix).
    pub async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let base = self.path(prefix);
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        let mut keys = Vec::new();
        let mut items = self.objects.list(Some(&base));
        while let Some(item) = items.next().await {
            let meta = item.map_err(|e| self.object_error("list", prefix, e))?;
            let k = meta.location.to_string();
            keys.push(k.strip_prefix(&strip).unwrap_or(&k).to_string());
        }
        keys.sort();
        Ok(keys)
    }

    /// Deletes `key`; deleting what is not there succeeds (idempotent, as
    /// garbage collection after a restart needs).
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        match self.objects.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.io("delete", key, e)),
        }
    }
}

#[cfg(test)]
mod tests;
