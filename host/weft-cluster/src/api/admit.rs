//! The write path when admission webhooks are configured: plan as a dry
//! run, let mutating and validating webhooks see the object, then store it
//! unless it changed meanwhile. Shared by create, update and patch.

use std::sync::Arc;

use serde_json::Value;

use super::{Cluster, WriteOpts, name_of};
use crate::admission::{self, Operation};
use crate::patch::Scope;
use crate::status::{ApiError, ApiResult};
use crate::store::Txn;

impl Cluster {
    /// A write that admission webhooks see: `plan` (create, update or
    /// patch) runs as a dry run to give the object as it would be stored;
    /// mutating webhooks patch it, it is defaulted and validated again,
    /// validating webhooks judge it, and it is stored unless the object
    /// changed meanwhile (then all again, as kube-apiserver retries a patch).
    /// Returns the stored object and whether it was created.
    pub(super) async fn admitted<F>(
        &self,
        review: &admission::Request<'_>,
        hooks: &admission::Hooks,
        name: &str,
        scope: Scope,
        plan: F,
    ) -> ApiResult<(Arc<Value>, bool)>
    where
        F: Fn(&mut Txn<'_>, &WriteOpts) -> ApiResult<(Option<Arc<Value>>, Arc<Value>)>,
    {
        let (rt, version, ns) = (review.rt, review.version, review.ns);
        let dry = WriteOpts {
            dry_run: true,
            ..review.opts.clone()
        };
        let key_ns = if rt.namespaced { ns } else { "" };
        for _ in 0..5 {
            let (old, draft) = plan(&mut self.store.begin(), &dry)?;
            let review = admission::Request {
                op: match old {
                    Some(_) => review.op,
                    None => Operation::Create,
                },
                ..*review
            };
            let old_obj = old.as_deref();
            let mutated = review
                .mutate(self, hooks, (*draft).clone(), old_obj)
                .await?;
            // Stored as planned, or replanned from the mutated object.
            let store = |txn: &mut Txn<'_>, opts: &WriteOpts| match &old {
                Some(o) => {
                    self.replace_in(txn, rt, version, ns, o, mutated.clone(), scope, opts, true)
                }
                None => self
                    .create_in(txn, rt, version, ns, mutated.clone(), opts)?
                    .ok_or_else(|| ApiError::internal("dry run")),
            };
            let checked = store(&mut self.store.begin(), &dry)?;
            review
                .validate(self, hooks, Some(&checked), old_obj)
                .await?;
            let name = match name {
                "" => name_of(&checked).to_string(),
                n => n.to_string(),
            };
            let (out, fut) = {
                let mut txn = self.store.begin();
                let now = txn.get(&rt.gr(), key_ns, &name);
                let rv =
                    |o: Option<&Arc<Value>>| o.map(|o| o["metadata"]["resourceVersion"].clone());
                if rv(now.as_ref()) != rv(old.as_ref()) {
                    continue;
                }
                (store(&mut txn, review.opts)?, txn.commit())
            };
            fut.await?;
            return Ok((Self::versioned(rt, version, &out), old.is_none()));
        }
        Err(ApiError::conflict(
            &rt.gr(),
            name,
            "the object kept changing while admission webhooks were called",
        ))
    }
}
