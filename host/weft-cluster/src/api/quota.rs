//! ResourceQuota on the write path: a pod create is checked against the
//! namespace's quotas inside the create's transaction, and the quotas'
//! status is recounted in the same transaction once the pod is stored. The
//! store's write lock is held throughout, so two creates racing for the
//! last slot cannot both see it free (kube-apiserver gets the same from
//! its optimistic update of the quota's status). What counts is decided in
//! [`crate::quota`].

use std::time::SystemTime;

use serde_json::Value;

use super::{Cluster, WriteOpts, name_of};
use crate::quota;
use crate::registry::ResourceType;
use crate::status::{ApiError, ApiResult};
use crate::store::Txn;

impl Cluster {
    /// Refuses a pod create that would exceed a quota; returns whether the
    /// namespace has pod quotas whose status the create must recount. The
    /// cluster's own creates are exempt, as they are from admission: they
    /// carry no user, where every request through the HTTP layer has one
    /// (a client may send `?fieldManager=-`, the system writes' other mark,
    /// but cannot drop its user).
    pub(super) fn admit_to_quota(
        &self,
        txn: &Txn<'_>,
        rt: &ResourceType,
        ns: &str,
        pod: &Value,
        opts: &WriteOpts,
    ) -> ApiResult<bool> {
        let is_pod = rt.group.is_empty() && rt.plural == "pods";
        if !is_pod || opts.user.is_none() {
            return Ok(false);
        }
        let quotas = txn.list(quota::GR, Some(ns));
        if !quotas.iter().any(|q| quota::limits_pods(q)) {
            return Ok(false);
        }
        let pods = txn.list("/pods", Some(ns));
        quota::admit(&quotas, &pods, pod, SystemTime::now())
            .map_err(|why| ApiError::forbidden("pods", name_of(pod), &why))?;
        Ok(true)
    }

    /// Recounts the status of every quota in `ns`, writing those that
    /// changed. Never fails: it runs after the write it follows is in the
    /// transaction (which has no rollback), and the quota controller
    /// retries what did not land.
    pub(super) fn sync_quotas_in(&self, txn: &mut Txn<'_>, ns: &str) {
        let quotas = txn.list(quota::GR, Some(ns));
        if quotas.is_empty() {
            return;
        }
        let Some(rt) = self.registry.by_gr(quota::GR) else {
            return;
        };
        let pods = txn.list("/pods", Some(ns));
        let now = SystemTime::now();
        for q in quotas {
            let status = quota::status(&q, &pods, now);
            if q["status"] == status {
                continue;
            }
            let mut new = (*q).clone();
            new["status"] = status;
            if let Err(e) = self.system_replace(txn, &rt, &q, new, true) {
                tracing::warn!(
                    namespace = ns,
                    quota = name_of(&q),
                    "quota status not written: {}",
                    e.message
                );
            }
        }
    }

    /// The quota controller's recount of one namespace.
    pub(crate) async fn sync_quotas(&self, ns: &str) -> ApiResult<()> {
        let fut = {
            let mut txn = self.store.begin();
            self.sync_quotas_in(&mut txn, ns);
            txn.commit()
        };
        fut.await.map_err(ApiError::from)
    }
}
