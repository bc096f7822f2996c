//! The data proxy (flyteadmin's DataProxyService): presigned URLs of the
//! artifact repository for callers outside the cluster, so that a user
//! uploads a workflow input or downloads a node's artifact without ever
//! holding the store's credentials. Both calls pass the middleware chain
//! and the namespace authorization like every other call.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

use object_store::signer::Method;
use serde_json::{Map, Value};
use tonic::Status;
use weft_dag::NodeStatus;
use weft_dag::artifacts::{ArtifactRef, OUTPUTS_KEY};

use crate::admin::DataProxyConfig;
use crate::admin::chain::Caller;
use crate::admin::pb;
use crate::admin::service::AdminService;
use crate::api::Workflow;
use crate::store::{Store, StoreError};

/// How long a URL lives when the caller does not say.
const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// The longest a SigV4 presigned URL may live (S3 refuses longer).
const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

impl AdminService {
    /// The store, or why there is none.
    fn store(&self) -> Result<&Store, Status> {
        self.artifacts.as_deref().map(|io| io.store()).ok_or_else(|| {
            Status::failed_precondition(
                "the admin API has no artifact repository: start weft controller with --artifact-repository (weft dev and weft run have a local one)",
            )
        })
    }

    /// CreateUploadLocation: a presigned PUT under a fresh key of the
    /// namespace, for an upload within the configured limits.
    pub(super) async fn upload_location(
        &self,
        caller: Caller,
        req: pb::CreateUploadLocationRequest,
    ) -> Result<pb::CreateUploadLocationResponse, Status> {
        namespace(&req.namespace)?;
        self.authorize(&caller, Some(&req.namespace)).await?;
        filename(&req.filename)?;
        within(&req, &self.data_proxy)?;
        let ttl = expiry(req.expires_in_seconds)?;
        let store = self.store()?;
        let key = format!("{}/uploads/{}/{}", req.namespace, upload_id(), req.filename);
        let url = store
            .presign(Method::PUT, &key, ttl)
            .await
            .map_err(store_status)?;
        tracing::info!(
            key,
            size = req.content_length,
            principal = caller.principal,
            request_id = caller.request_id,
            "upload location signed"
        );
        Ok(pb::CreateUploadLocationResponse {
            signed_url: url.to_string(),
            key,
            expires_at: expires_at(ttl),
            max_content_length: self.data_proxy.max_upload_bytes,
        })
    }

    /// CreateDownloadLink: a presigned GET for the artifact a node's
    /// status records, with what the downloader checks it against.
    pub(super) async fn download_link(
        &self,
        caller: Caller,
        req: pb::CreateDownloadLinkRequest,
    ) -> Result<pb::CreateDownloadLinkResponse, Status> {
        let fields = [
            ("namespace", &req.namespace),
            ("workflow", &req.workflow),
            ("node", &req.node),
            ("artifact", &req.artifact),
        ];
        for (field, value) in fields {
            if value.is_empty() && !(req.log && field == "artifact") {
                return Err(Status::invalid_argument(format!("{field}: required")));
            }
        }
        if req.log && !req.artifact.is_empty() {
            return Err(Status::invalid_argument(
                "artifact: give an artifact or log, not both",
            ));
        }
        let ttl = expiry(req.expires_in_seconds)?;
        let id = pb::ExecutionId {
            namespace: req.namespace.clone(),
            name: req.workflow.clone(),
            ..Default::default()
        };
        // An archived run's artifacts too, while the store keeps them.
        let (wf, _) = self.fetch_any(&caller, Some(id)).await?;
        let store = self.store()?;
        let what = format!("execution {}/{}", req.namespace, req.workflow);
        if req.log {
            let key = crate::admin::console::archived_log(&wf, &req.node)?;
            let url = store
                .presign(Method::GET, &key, ttl)
                .await
                .map_err(store_status)?;
            return Ok(pb::CreateDownloadLinkResponse {
                signed_url: url.to_string(),
                expires_at: expires_at(ttl),
                kind: "file".into(),
                key,
                ..Default::default()
            });
        }
        let io = self.artifacts.as_deref().expect("store() checked it");
        let outputs = node_outputs(&wf, &req.node, io, &what).await?;
        let found = artifact(
            &outputs,
            &req.artifact,
            &format!("node {} of {what}", req.node),
        )?;
        let url = store
            .presign(Method::GET, &found.key, ttl)
            .await
            .map_err(store_status)?;
        Ok(pb::CreateDownloadLinkResponse {
            signed_url: url.to_string(),
            expires_at: expires_at(ttl),
            size: found.size,
            digest: found.digest,
            kind: found.kind,
            key: found.key,
        })
    }
}

/// A namespace is a DNS label: it is the first part of every key, so a
/// `/` or `..` in it could reach another namespace's objects.
fn namespace(ns: &str) -> Result<(), Status> {
    let ok = !ns.is_empty()
        && ns.len() <= 63
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !ns.starts_with('-')
        && !ns.ends_with('-');
    match ok {
        true => Ok(()),
        false if ns.is_empty() => Err(Status::invalid_argument("namespace: required")),
        false => Err(Status::invalid_argument(format!(
            "namespace: {ns:?} is not a namespace name (lowercase letters, digits and '-', at most 63)"
        ))),
    }
}

/// The last part of a key: a plain file name, so it cannot add levels to
/// the key or be mistaken for a path.
fn filename(name: &str) -> Result<(), Status> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    match ok {
        true => Ok(()),
        false if name.is_empty() => Err(Status::invalid_argument("filename: required")),
        false => Err(Status::invalid_argument(format!(
            "filename: {name:?} is not a plain file name (1 to 255 letters, digits, '.', '-' and '_', not starting with '.')"
        ))),
    }
}

/// The declared size and content type against the server's limits.
fn within(req: &pb::CreateUploadLocationRequest, limits: &DataProxyConfig) -> Result<(), Status> {
    if req.content_length > limits.max_upload_bytes {
        return Err(Status::invalid_argument(format!(
            "content_length: {} bytes is over this server's upload limit of {} bytes (--max-upload-size)",
            req.content_length, limits.max_upload_bytes
        )));
    }
    let ct = req.content_type.trim();
    let well_formed = ct.split_once('/').is_some_and(|(t, s)| {
        let token = |x: &str| {
            !x.is_empty()
                && x.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
        };
        token(t) && token(s.split(';').next().unwrap_or_default().trim())
    });
    if !ct.is_empty() && !well_formed {
        return Err(Status::invalid_argument(format!(
            "content_type: {ct:?} is not a media type like text/csv"
        )));
    }
    if limits.content_types.is_empty() {
        return Ok(());
    }
    let essence = ct.split(';').next().unwrap_or_default().trim();
    let allowed = limits
        .content_types
        .iter()
        .any(|a| match a.strip_suffix("/*") {
            Some(t) => essence.split('/').next() == Some(t),
            None => a.eq_ignore_ascii_case(essence),
        });
    match allowed {
        true => Ok(()),
        false => Err(Status::invalid_argument(format!(
            "content_type: {} is not allowed here (allowed: {})",
            if ct.is_empty() { "none given" } else { ct },
            limits.content_types.join(", ")
        ))),
    }
}

/// The URL's lifetime: the caller's, within SigV4's week.
fn expiry(seconds: u32) -> Result<Duration, Status> {
    let ttl = match seconds {
        0 => DEFAULT_TTL,
        s => Duration::from_secs(s.into()),
    };
    if ttl > MAX_TTL {
        return Err(Status::invalid_argument(format!(
            "expires_in_seconds: {seconds} is longer than a presigned URL may live ({} s, 7 days)",
            MAX_TTL.as_secs()
        )));
    }
    Ok(ttl)
}

fn expires_at(ttl: Duration) -> String {
    humantime::format_rfc3339_seconds(SystemTime::now() + ttl).to_string()
}

/// 128 bits from the OS-seeded hasher keys: an upload never lands on
/// another's key.
fn upload_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let half = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.finish()
    };
    format!("{:016x}{:016x}", half(), half())
}

/// A store error as the status a client can act on.
fn store_status(e: StoreError) -> Status {
    match e {
        StoreError::NotFound { .. } => Status::not_found(e.to_string()),
        StoreError::Config { .. } => Status::failed_precondition(e.to_string()),
        StoreError::Io { .. } => Status::unavailable(e.to_string()),
    }
}

/// The node's status: the main DAG's, else the exit handler's.
fn node_status<'a>(wf: &'a Workflow, node: &str, what: &str) -> Result<&'a NodeStatus, Status> {
    let status = wf.status.as_ref();
    let found = status.and_then(|s| {
        s.nodes
            .get(node)
            .or_else(|| s.on_exit.as_ref().and_then(|e| e.nodes.get(node)))
    });
    found.ok_or_else(|| {
        let known: Vec<&str> = status
            .map(|s| s.nodes.keys().map(String::as_str).collect())
            .unwrap_or_default();
        Status::not_found(format!(
            "{what} has no node {node} with a status (nodes with one: {})",
            if known.is_empty() {
                "none yet".to_string()
            } else {
                known.join(", ")
            }
        ))
    })
}

/// A node's outputs: inline in the status, or the JSON object the
/// controller stored when they were too large for it (read as the round
/// reads it: digest checked, kept by digest). `node[i]` is item `i` of an
/// array node (the name its pods, Events and locks use).
async fn node_outputs(
    wf: &Workflow,
    node: &str,
    io: &crate::pod_io::PodIo,
    what: &str,
) -> Result<Map<String, Value>, Status> {
    if let Some((array, idx)) = weft_dag::schedule::claim_item(node) {
        return item_outputs(wf, array, idx, what);
    }
    let st = node_status(wf, node, what)?;
    if let Some(o) = &st.outputs {
        return Ok(o.clone());
    }
    let Some(r) = &st.outputs_ref else {
        return Ok(Map::new());
    };
    let read = io.read_outputs(r).await;
    read.map(|m| (*m).clone())
        .map_err(|e| Status::unavailable(format!("node {node} of {what}: outputs: {e}")))
}

/// Item `idx` of the array node `array`: its outputs, inline in its item
/// status (an item's artifacts are keyed by the item, `<node>-<index>`).
fn item_outputs(
    wf: &Workflow,
    array: &str,
    idx: usize,
    what: &str,
) -> Result<Map<String, Value>, Status> {
    let st = node_status(wf, array, what)?;
    match st.items.get(idx) {
        Some(item) => Ok(item.outputs.clone().unwrap_or_default()),
        None if st.items.is_empty() => Err(Status::not_found(format!(
            "node {array} of {what} has no items (it is not an array node, or none started)"
        ))),
        None => Err(Status::not_found(format!(
            "node {array} of {what} has items 0 to {}: no item {idx}",
            st.items.len() - 1
        ))),
    }
}

/// Output artifact `name` among `outputs`, or what there is instead.
fn artifact(outputs: &Map<String, Value>, name: &str, what: &str) -> Result<ArtifactRef, Status> {
    let all = outputs.get(OUTPUTS_KEY).and_then(Value::as_object);
    let Some(v) = all.and_then(|a| a.get(name)) else {
        let names: Vec<&str> = all
            .map(|a| a.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(Status::not_found(format!(
            "{what} has no artifact {name} (its artifacts: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )));
    };
    serde_json::from_value(v.clone()).map_err(|e| {
        Status::internal(format!(
            "{what}: artifact {name} is not {{key, digest, size, kind}}: {e}"
        ))
    })
}

#[cfg(test)]
mod tests;
