//! PATCH: the four patch flavours applied to the stored object (an apply
//! may create it), then stored through the common replacement. The patch
//! algorithms themselves live in [`crate::patch`].

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Cluster, PatchType, WriteOpts, name_of, scope_for};
use crate::admission::{self, Operation};
use crate::meta;
use crate::patch::{self, Scope};
use crate::registry::ResourceType;
use crate::status::{ApiError, ApiResult};
use crate::store::Txn;

impl Cluster {
    /// PATCH on the main resource or `/status`; apply patches may create.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn patch(
        &self,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: Value,
        status: bool,
        opts: &WriteOpts,
    ) -> ApiResult<(Arc<Value>, bool)> {
        if ptype == PatchType::Strategic && !rt.builtin {
            return Err(ApiError::unsupported_media_type(
                "application/strategic-merge-patch+json",
            ));
        }
        let scope = scope_for(rt, status);
        let plan = |txn: &mut Txn<'_>, opts: &WriteOpts| {
            self.patch_in(txn, rt, version, ns, name, ptype, body.clone(), scope, opts)
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
            return self.admitted(&review, &hooks, name, scope, plan).await;
        }
        let (old, out, fut) = {
            let mut txn = self.store.begin();
            let (old, out) = plan(&mut txn, opts)?;
            (old, out, txn.commit())
        };
        fut.await?;
        Ok((Self::versioned(rt, version, &out), old.is_none()))
    }

    /// The stored object (none when an apply creates it) and the one the
    /// patch makes of it.
    #[allow(clippy::too_many_arguments)]
    fn patch_in(
        &self,
        txn: &mut Txn<'_>,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        ptype: PatchType,
        body: Value,
        scope: Scope,
        opts: &WriteOpts,
    ) -> ApiResult<(Option<Arc<Value>>, Arc<Value>)> {
        let status = scope == Scope::StatusOnly;
        {
            let key_ns = if rt.namespaced { ns } else { "" };
            let old = txn.get(&rt.gr(), key_ns, name);
            let Some(old) = old else {
                if ptype != PatchType::Apply {
                    return Err(ApiError::not_found(&rt.gr(), name));
                }
                if status {
                    return Err(ApiError::not_found(&rt.gr(), name));
                }
                let mut applied = body;
                Self::check_kind(rt, version, &mut applied)?;
                Self::check_apply(rt, version, &applied)?;
                let body_name = name_of(&applied);
                if body_name != name {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({body_name}) does not match the name on the URL ({name})"
                    )));
                }
                let mut obj = patch::server_side_apply(
                    None,
                    &applied,
                    &opts.field_manager,
                    opts.force,
                    scope,
                    &rt.api_version(version),
                    &meta::now(),
                )
                .map_err(|e| with_resource(e, rt, name))?;
                obj["apiVersion"] = applied["apiVersion"].clone();
                obj["kind"] = applied["kind"].clone();
                let stored = self
                    .create_in(txn, rt, version, ns, obj, opts)?
                    .ok_or_else(|| ApiError::internal("dry run"))?;
                return Ok((None, stored));
            };
            let mut managed_done = false;
            let new = match ptype {
                PatchType::Merge => {
                    let mut v = (*old).clone();
                    patch::merge_patch(&mut v, &body);
                    v
                }
                PatchType::Json => {
                    let mut v = (*old).clone();
                    patch::json_patch(&mut v, &body, &rt.kind, name)?;
                    v
                }
                PatchType::Strategic => patch::strategic_merge(&old, &body),
                PatchType::Apply => {
                    let mut applied = body;
                    Self::check_kind(rt, version, &mut applied)?;
                    Self::check_apply(rt, version, &applied)?;
                    managed_done = true;
                    patch::server_side_apply(
                        Some(&old),
                        &applied,
                        &opts.field_manager,
                        opts.force,
                        scope,
                        &rt.api_version(version),
                        &meta::now(),
                    )
                    .map_err(|e| with_resource(e, rt, name))?
                }
            };
            if !new.is_object() {
                return Err(ApiError::bad_request("the patch did not produce an object"));
            }
            let mut new = new;
            if ptype != PatchType::Apply {
                Self::prune_unknown(rt, version, &mut new, opts, true)?;
            }
            // A resourceVersion in the patch is a precondition.
            if let Some(rv) = new["metadata"]["resourceVersion"].as_str()
                && ptype != PatchType::Apply
                && Some(rv) != old["metadata"]["resourceVersion"].as_str()
            {
                return Err(ApiError::stale(&rt.gr(), name));
            }
            if new["kind"] != old["kind"] && !new["kind"].is_null() {
                return Err(ApiError::bad_request("a patch may not change the kind"));
            }
            let out =
                self.replace_in(txn, rt, version, ns, &old, new, scope, opts, managed_done)?;
            Ok((Some(old), out))
        }
    }
}

fn with_resource(mut e: ApiError, rt: &ResourceType, name: &str) -> ApiError {
    // An apply conflict names only its fields, as kube-apiserver's does.
    let apply_conflict = e.details["causes"][0]["reason"] == "FieldManagerConflict";
    if e.code == 409 && !apply_conflict {
        let mut details = json!({"name": name, "kind": rt.plural});
        if !rt.group.is_empty() {
            details["group"] = rt.group.clone().into();
        }
        details["causes"] = e.details["causes"].clone();
        e.details = details;
    }
    e
}
