//! DELETE: preconditions, propagation finalizers, graceful pod deletion,
//! namespaces and CRDs that clean up first, and the removal that completes
//! a pending deletion.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    CRD_FINALIZER, Cluster, DeleteOpts, FOREGROUND, ORPHAN, WriteOpts, finalizers, meta_mut,
};
use crate::admission::{self, Operation};
use crate::meta;
use crate::registry::ResourceType;
use crate::status::{ApiError, ApiResult};
use crate::store::Txn;

impl Cluster {
    /// DELETE: immediate, or pending on finalizers / a graceful pod stop.
    pub(crate) async fn delete(
        &self,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> ApiResult<Arc<Value>> {
        let write_opts = WriteOpts {
            dry_run: opts.dry_run,
            user: opts.user.clone(),
            ..Default::default()
        };
        let review = admission::Request {
            op: Operation::Delete,
            rt,
            version,
            status: false,
            ns,
            opts: &write_opts,
        };
        let key_ns = if rt.namespaced { ns } else { "" };
        if let Some(hooks) = review.hooks(self)
            && let Some(old) = self.store.get(&rt.gr(), key_ns, name)
        {
            review.validate(self, &hooks, None, Some(&old)).await?;
        }
        let (out, fut) = {
            let mut txn = self.store.begin();
            let out = self.delete_in(&mut txn, rt, ns, name, opts)?;
            (out, txn.commit())
        };
        fut.await?;
        Ok(Self::versioned(rt, version, &out))
    }

    pub(crate) fn delete_in(
        &self,
        txn: &mut Txn<'_>,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> ApiResult<Arc<Value>> {
        let key_ns = if rt.namespaced { ns } else { "" };
        let gr = rt.gr();
        let Some(old) = txn.get(&gr, key_ns, name) else {
            return Err(ApiError::not_found(&gr, name));
        };
        if let Some(uid) = &opts.precondition_uid
            && old["metadata"]["uid"].as_str() != Some(uid)
        {
            return Err(ApiError::conflict(
                &gr,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    old["metadata"]["uid"].as_str().unwrap_or("")
                ),
            ));
        }
        if let Some(rv) = &opts.precondition_rv
            && old["metadata"]["resourceVersion"].as_str() != Some(rv)
        {
            return Err(ApiError::conflict(
                &gr,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    old["metadata"]["resourceVersion"].as_str().unwrap_or("")
                ),
            ));
        }
        if opts.dry_run {
            return Ok(old);
        }
        let is_pod = rt.group.is_empty() && rt.plural == "pods";
        let deleting = old["metadata"]["deletionTimestamp"].is_string();
        let mut new = (*old).clone();
        let mut fins = finalizers(&old);
        if is_pod && self.pod_needs_graceful_stop(&old) {
            let grace = opts
                .grace_period
                .or_else(|| old["spec"]["terminationGracePeriodSeconds"].as_i64())
                .unwrap_or(30)
                .max(0);
            let current = old["metadata"]["deletionGracePeriodSeconds"].as_i64();
            // A shorter grace period may replace a longer one (kubectl
            // delete --grace-period=0 --force after a plain delete).
            if !deleting || current.is_some_and(|c| grace < c) {
                let at =
                    std::time::SystemTime::now() + std::time::Duration::from_secs(grace as u64);
                let m = meta_mut(&mut new);
                m.insert("deletionTimestamp".into(), meta::rfc3339(at).into());
                m.insert("deletionGracePeriodSeconds".into(), grace.into());
                if grace == 0 && fins.is_empty() {
                    // Forced: gone now; the runner kills what is left.
                    let last = txn
                        .delete(&gr, key_ns, name)
                        .ok_or_else(|| ApiError::internal("object vanished"))?;
                    self.after_delete(rt, &last);
                    return Ok(last);
                }
                let stored = txn.put(&gr, key_ns, name, new);
                self.after_write(txn, rt, Some(&old), &stored);
                return Ok(stored);
            }
            return Ok(old);
        }
        if deleting {
            return Ok(old);
        }
        match opts.propagation.as_deref() {
            Some("Foreground") if !fins.iter().any(|f| f == FOREGROUND) => {
                fins.push(FOREGROUND.into())
            }
            Some("Orphan") if !fins.iter().any(|f| f == ORPHAN) => fins.push(ORPHAN.into()),
            _ => {}
        }
        let is_ns = rt.group.is_empty() && rt.plural == "namespaces";
        let is_crd = rt.group == "apiextensions.k8s.io";
        if is_crd && !fins.iter().any(|f| f == CRD_FINALIZER) {
            fins.push(CRD_FINALIZER.into());
        }
        let ns_pending = is_ns && self.awaits_other_cleanup(rt, &old);
        if fins.is_empty() && !ns_pending {
            let last = txn
                .delete(&gr, key_ns, name)
                .ok_or_else(|| ApiError::internal("object vanished"))?;
            self.after_delete(rt, &last);
            return Ok(last);
        }
        {
            let m = meta_mut(&mut new);
            m.insert("deletionTimestamp".into(), meta::now().into());
            m.insert("deletionGracePeriodSeconds".into(), 0.into());
            if fins.is_empty() {
                m.remove("finalizers");
            } else {
                m.insert("finalizers".into(), json!(fins));
            }
            if let Some(g) = m.get("generation").and_then(Value::as_i64) {
                m.insert("generation".into(), (g + 1).into());
            }
        }
        if is_ns {
            new["status"]["phase"] = "Terminating".into();
        }
        let stored = txn.put(&gr, key_ns, name, new);
        self.after_write(txn, rt, Some(&old), &stored);
        Ok(stored)
    }

    /// Removes an object whose deletion is due, whatever holds it (the
    /// runner after a graceful stop, the namespace controller).
    pub(crate) fn finish_delete(
        &self,
        txn: &mut Txn<'_>,
        rt: &ResourceType,
        ns: &str,
        name: &str,
    ) -> Option<Arc<Value>> {
        let key_ns = if rt.namespaced { ns } else { "" };
        let last = txn.delete(&rt.gr(), key_ns, name)?;
        self.after_delete(rt, &last);
        Some(last)
    }

    /// Namespaces wait for `spec.finalizers`, pods for the runner.
    pub(super) fn awaits_other_cleanup(&self, rt: &ResourceType, obj: &Value) -> bool {
        if rt.group.is_empty() && rt.plural == "namespaces" {
            return obj["spec"]["finalizers"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
        }
        if rt.group.is_empty() && rt.plural == "pods" {
            return self.pod_needs_graceful_stop(obj)
                && obj["metadata"]["deletionGracePeriodSeconds"]
                    .as_i64()
                    .unwrap_or(0)
                    > 0;
        }
        false
    }

    fn pod_needs_graceful_stop(&self, pod: &Value) -> bool {
        if !self.runner_enabled {
            return false;
        }
        let phase = pod["status"]["phase"].as_str().unwrap_or("");
        let node = pod["spec"]["nodeName"].as_str().unwrap_or("");
        !node.is_empty() && phase != "Succeeded" && phase != "Failed"
    }
}
