//! PUT and the replacement every write ends in: server-owned fields kept,
//! status subresource rules, generation, finalizers, validation, storage.
//! Patch and the system's own writes go through `replace_in` too.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use super::{
    Cluster, WriteOpts, finalizers, fits_in_etcd, fold_string_data, meta_mut, name_of, scope_for,
    tracks_generation,
};
use crate::admission::{self, Operation};
use crate::meta;
use crate::patch::{self, Scope};
use crate::registry::ResourceType;
use crate::status::{ApiError, ApiResult};
use crate::store::Txn;

impl Cluster {
    /// Replaces an object (PUT), on the main resource or `/status`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn update(
        &self,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        mut obj: Value,
        status: bool,
        opts: &WriteOpts,
    ) -> ApiResult<Arc<Value>> {
        Self::check_kind(rt, version, &mut obj)?;
        Self::prune_unknown(rt, version, &mut obj, opts, false)?;
        let body_name = name_of(&obj);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let scope = scope_for(rt, status);
        let plan = |txn: &mut Txn<'_>, opts: &WriteOpts| {
            self.update_in(txn, rt, version, ns, name, obj.clone(), scope, opts)
        };
        let review = admission::Request {
            op: Operation::Update,
            rt,
            version,
            status,
            ns,
            opts,
        };
        if let Some(hooks) = review.hooks(self) {
            let (out, _) = self.admitted(&review, &hooks, name, scope, plan).await?;
            return Ok(out);
        }
        let (out, fut) = {
            let mut txn = self.store.begin();
            let (_, out) = plan(&mut txn, opts)?;
            (out, txn.commit())
        };
        fut.await?;
        Ok(Self::versioned(rt, version, &out))
    }

    /// The stored object and the one an update makes of it.
    #[allow(clippy::too_many_arguments)]
    fn update_in(
        &self,
        txn: &mut Txn<'_>,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        obj: Value,
        scope: Scope,
        opts: &WriteOpts,
    ) -> ApiResult<(Option<Arc<Value>>, Arc<Value>)> {
        {
            let key_ns = if rt.namespaced { ns } else { "" };
            let Some(old) = txn.get(&rt.gr(), key_ns, name) else {
                return Err(ApiError::not_found(&rt.gr(), name));
            };
            match obj["metadata"]["resourceVersion"].as_str() {
                Some(rv)
                    if !rv.is_empty()
                        && Some(rv) != old["metadata"]["resourceVersion"].as_str() =>
                {
                    return Err(ApiError::stale(&rt.gr(), name));
                }
                Some(rv) if !rv.is_empty() => {}
                _ if !rt.builtin => {
                    return Err(ApiError::invalid(
                        &rt.kind,
                        name,
                        vec![(
                            "metadata.resourceVersion".into(),
                            "Invalid value: 0x0: must be specified for an update".into(),
                        )],
                    ));
                }
                _ => {}
            }
            let out = self.replace_in(txn, rt, version, ns, &old, obj, scope, opts, false)?;
            Ok((Some(old), out))
        }
    }

    /// Common tail of update, patch and apply: server-owned fields kept,
    /// status rules, generation, finalizer completion, validation, storage.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn replace_in(
        &self,
        txn: &mut Txn<'_>,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        old: &Arc<Value>,
        mut new: Value,
        scope: Scope,
        opts: &WriteOpts,
        managed_done: bool,
    ) -> ApiResult<Arc<Value>> {
        let name = name_of(old).to_string();
        let key_ns = if rt.namespaced { ns } else { "" };
        // Server-owned metadata comes from the stored object.
        {
            let om = old["metadata"].as_object().cloned().unwrap_or_default();
            let nm = meta_mut(&mut new);
            for k in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "generateName",
            ] {
                match om.get(k) {
                    Some(v) => nm.insert(k.into(), v.clone()),
                    None => nm.remove(k),
                };
            }
        }
        new["apiVersion"] = old["apiVersion"].clone();
        new["kind"] = old["kind"].clone();
        if rt.status_subresource {
            match scope {
                Scope::NoStatus => match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Value::Object(m) = &mut new {
                            m.remove("status");
                        }
                    }
                },
                Scope::StatusOnly => {
                    let mut keep = (**old).clone();
                    match new.get("status") {
                        Some(s) => keep["status"] = s.clone(),
                        None => {
                            if let Value::Object(m) = &mut keep {
                                m.remove("status");
                            }
                        }
                    }
                    if managed_done {
                        keep["metadata"]["managedFields"] =
                            new["metadata"]["managedFields"].clone();
                    }
                    new = keep;
                }
                Scope::All => {}
            }
        }
        if rt.group.is_empty() && rt.plural == "secrets" {
            fold_string_data(&mut new);
        }
        if rt.group.is_empty() && rt.plural == "namespaces" && scope != Scope::StatusOnly {
            new["spec"] = old["spec"].clone();
        }
        self.validate(rt, version, &mut new, Some(old))?;
        let deleting = old["metadata"]["deletionTimestamp"].is_string();
        if deleting {
            let before: HashSet<String> = finalizers(old).into_iter().collect();
            if finalizers(&new).iter().any(|f| !before.contains(f)) {
                return Err(ApiError::invalid(
                    &rt.kind,
                    &name,
                    vec![(
                        "metadata.finalizers".into(),
                        "Forbidden: no new finalizers can be added if the object is being deleted"
                            .into(),
                    )],
                ));
            }
        }
        if tracks_generation(rt)
            && spec_part(old, rt.status_subresource) != spec_part(&new, rt.status_subresource)
        {
            let g = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            new["metadata"]["generation"] = g.into();
        }
        if rt.group == "apiextensions.k8s.io" && !deleting {
            let conds = old["status"].clone();
            self.crd_status(&mut new)?;
            if scope == Scope::StatusOnly {
                new["status"] = conds;
            }
        }
        if !managed_done {
            patch::track_update(
                Some(old),
                &mut new,
                &opts.field_manager,
                scope,
                &rt.api_version(version),
                &meta::now(),
            );
        }
        fits_in_etcd(rt, &name, &new)?;
        if opts.dry_run {
            return Ok(Arc::new(new));
        }
        if deleting && finalizers(&new).is_empty() && !self.awaits_other_cleanup(rt, &new) {
            // The last finalizer is gone: the deletion completes.
            let last = txn
                .delete_as(&rt.gr(), key_ns, &name, Some(new))
                .ok_or_else(|| ApiError::internal("object vanished"))?;
            self.after_delete(rt, &last);
            return Ok(last);
        }
        let stored = txn.put(&rt.gr(), key_ns, &name, new);
        self.after_write(txn, rt, Some(old), &stored);
        Ok(stored)
    }

    /// Writes an object as the system (the runner, the garbage collector):
    /// no resourceVersion check, managed fields untouched.
    pub(crate) fn system_replace(
        &self,
        txn: &mut Txn<'_>,
        rt: &ResourceType,
        old: &Arc<Value>,
        new: Value,
        status: bool,
    ) -> ApiResult<Arc<Value>> {
        let ns = old["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let version = rt.versions[0].clone();
        let opts = WriteOpts {
            field_manager: "weft-dev-cluster".into(),
            ..Default::default()
        };
        self.replace_in(
            txn,
            rt,
            &version,
            &ns,
            old,
            new,
            scope_for(rt, status),
            &opts,
            true,
        )
    }
}

/// Everything but metadata (and status when it is a subresource): the part
/// whose change bumps `metadata.generation`.
fn spec_part(obj: &Value, drop_status: bool) -> Value {
    let mut v = obj.clone();
    if let Value::Object(m) = &mut v {
        m.remove("metadata");
        m.remove("apiVersion");
        m.remove("kind");
        if drop_status {
            m.remove("status");
        }
    }
    v
}
