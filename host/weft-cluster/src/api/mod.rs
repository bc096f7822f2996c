//! What the API server does to objects, independent of HTTP: create, update,
//! patch, delete with their Kubernetes rules (uid, generation, status
//! subresource, finalizers, graceful pod deletion, CRD registration). The HTTP
//! layer, the garbage collector and the pod runner all write through here so
//! the rules hold whoever writes.
//!
//! One child module per verb (`create`, `update`, `patch`, `delete`), with
//! validation, defaulting, admission webhooks and ResourceQuota beside
//! them; this module holds the shared state, options and helpers.

mod admit;
mod create;
mod defaults;
mod delete;
mod patch;
mod quota;
mod update;
mod validate;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use crate::patch::Scope;
use crate::registry::{Registry, ResourceType};
use crate::schema::FieldValidation;
use crate::status::ApiError;
use crate::store::{Store, Txn};

/// Finalizer that makes a CRD's deletion remove its custom resources first.
pub(crate) const CRD_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
pub(crate) const FOREGROUND: &str = "foregroundDeletion";
pub(crate) const ORPHAN: &str = "orphan";

/// Shared state of one running dev cluster.
pub(crate) struct Cluster {
    pub(crate) store: Arc<Store>,
    pub(crate) registry: Registry,
    /// Wakes the garbage collector after deletions and owner changes.
    pub(crate) gc: Notify,
    /// `host:port` the server listens on.
    pub(crate) addr: String,
    pub(crate) node_name: String,
    /// Whether a runner finishes graceful pod deletion; without one, pods go
    /// at once.
    pub(crate) runner_enabled: bool,
    pub(crate) data_dir: PathBuf,
    /// Log files a container is still writing; `logs -f` follows these.
    pub(crate) live_logs: Mutex<HashSet<PathBuf>>,
    /// Who did what, for tests of permissions.
    pub(crate) audit: crate::audit::AuditLog,
    /// Whether requests are checked against RBAC.
    pub(crate) authorization: crate::rbac::Authorization,
}

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteOpts {
    pub(crate) field_manager: String,
    pub(crate) force: bool,
    pub(crate) dry_run: bool,
    /// What unknown fields of a custom resource do (`?fieldValidation=`).
    pub(crate) field_validation: FieldValidation,
    /// `Warning` headers for the response (unknown fields under Warn).
    pub(crate) warnings: Arc<Mutex<Vec<String>>>,
    /// Who asks, for the AdmissionReviews of admission webhooks.
    pub(crate) user: Option<crate::authn::UserInfo>,
}

/// DeleteOptions, from the body or the query.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOpts {
    pub(crate) propagation: Option<String>,
    pub(crate) grace_period: Option<i64>,
    pub(crate) precondition_uid: Option<String>,
    pub(crate) precondition_rv: Option<String>,
    pub(crate) dry_run: bool,
    /// Who asks, for the AdmissionReviews of admission webhooks.
    pub(crate) user: Option<crate::authn::UserInfo>,
}

/// The patch flavours a PATCH may carry, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

fn name_of(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or("")
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(String::from))
        .collect()
}

impl Cluster {
    /// Decides requests as [`crate::Config::authorization`] says.
    pub(crate) fn authorizer(&self) -> crate::rbac::Authorizer<'_> {
        crate::rbac::Authorizer {
            mode: self.authorization,
            store: &self.store,
        }
    }

    /// Sets apiVersion to the version the client asked for: storage keeps
    /// whatever version wrote the object and, as with a CRD conversion
    /// strategy of `None`, only apiVersion differs between versions.
    pub(crate) fn versioned(rt: &ResourceType, version: &str, obj: &Arc<Value>) -> Arc<Value> {
        let want = rt.api_version(version);
        if obj["apiVersion"].as_str() == Some(want.as_str()) {
            return obj.clone();
        }
        let mut o = (**obj).clone();
        o["apiVersion"] = want.into();
        Arc::new(o)
    }

    /// Side effects of a stored write that live outside the store
    /// (`old`: the version it replaced, `None` for a create).
    fn after_write(&self, txn: &Txn<'_>, rt: &ResourceType, old: Option<&Value>, stored: &Value) {
        if rt.group == "apiextensions.k8s.io"
            && stored["metadata"]["deletionTimestamp"].is_null()
            && let Ok(t) = ResourceType::from_crd(stored)
        {
            self.registry.register(t);
        }
        if self.concerns_gc(txn, old, stored) {
            self.gc.notify_one();
        }
    }

    /// Whether a write may give the garbage collector work: an object
    /// being deleted, or owner references (new or changed) of which one
    /// names an owner that is not there (or is a different object of that
    /// name, or is leaving). Each pass of the collector scans every
    /// object, so waking it for every write of an owned object (every pod
    /// status update of a busy cluster) kept a core scanning; the real
    /// collector, too, acts on owner references that change.
    fn concerns_gc(&self, txn: &Txn<'_>, old: Option<&Value>, stored: &Value) -> bool {
        let m = &stored["metadata"];
        if m["deletionTimestamp"].is_string() {
            return true;
        }
        let Some(refs) = m["ownerReferences"].as_array() else {
            return false;
        };
        if old.is_some_and(|o| o["metadata"]["ownerReferences"] == m["ownerReferences"]) {
            return false;
        }
        let ns = m["namespace"].as_str().unwrap_or_default();
        !refs.iter().all(|r| self.owner_present(txn, ns, r))
    }

    /// Whether the owner an owner reference names exists, is the object
    /// of that uid, and is not being deleted.
    fn owner_present(&self, txn: &Txn<'_>, ns: &str, r: &Value) -> bool {
        let group = r["apiVersion"].as_str().and_then(|v| v.rsplit_once('/'));
        let group = group.map_or("", |(g, _)| g);
        let kind = r["kind"].as_str().unwrap_or_default();
        let rt = self.registry.by_kind(group, kind);
        let (Some(rt), Some(name)) = (rt, r["name"].as_str()) else {
            return false;
        };
        let key_ns = if rt.namespaced { ns } else { "" };
        txn.get(&rt.gr(), key_ns, name).is_some_and(|o| {
            o["metadata"]["uid"] == r["uid"] && o["metadata"]["deletionTimestamp"].is_null()
        })
    }

    fn after_delete(&self, rt: &ResourceType, last: &Value) {
        if rt.group == "apiextensions.k8s.io"
            && let Ok(t) = ResourceType::from_crd(last)
        {
            self.registry.unregister(&t.group, &t.plural);
        }
        self.gc.notify_one();
    }
}

/// Custom resources, CRDs and pods carry `metadata.generation`; plain data
/// objects (ConfigMaps, Secrets, Leases, ...) do not, as on a real server.
fn tracks_generation(rt: &ResourceType) -> bool {
    !rt.builtin || matches!(rt.plural.as_str(), "pods" | "customresourcedefinitions")
}

fn scope_for(rt: &ResourceType, status: bool) -> Scope {
    match (rt.status_subresource, status) {
        (false, _) => Scope::All,
        (true, false) => Scope::NoStatus,
        (true, true) => Scope::StatusOnly,
    }
}

/// Secrets' `stringData` is write-only: it lands base64-encoded in `data`.
fn fold_string_data(obj: &mut Value) {
    use base64::Engine;
    let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) else {
        return;
    };
    if !obj["data"].is_object() {
        obj["data"] = json!({});
    }
    for (k, v) in sd {
        let s = v.as_str().unwrap_or("").to_string();
        obj["data"][k] = base64::engine::general_purpose::STANDARD.encode(s).into();
    }
}

pub(crate) use crate::status::MAX_OBJECT;

/// Refuses an object etcd would not store, as a real cluster does.
fn fits_in_etcd(rt: &ResourceType, name: &str, obj: &Value) -> Result<(), ApiError> {
    /// Counts bytes without keeping them.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    serde_json::to_writer(&mut n, obj).map_err(|e| ApiError::internal(e.to_string()))?;
    if n.0 > MAX_OBJECT {
        return Err(ApiError::object_too_large(
            &format!("{} {name:?}", rt.kind),
            n.0,
        ));
    }
    Ok(())
}
