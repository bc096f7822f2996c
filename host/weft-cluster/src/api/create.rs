//! POST: creating an object (name generation, uid, generation, defaults,
//! field manager), the cluster's own creates, and the objects every
//! cluster starts with.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Cluster, WriteOpts, fits_in_etcd, meta_mut, name_of, tracks_generation};
use crate::admission::{self, Operation};
use crate::meta;
use crate::patch::{self, Scope};
use crate::registry::ResourceType;
use crate::status::{ApiError, ApiResult};
use crate::store::Txn;

impl Cluster {
    fn check_namespace(&self, txn: &Txn<'_>, ns: &str) -> ApiResult<()> {
        match txn.get("/namespaces", "", ns) {
            None => Err(ApiError::not_found("namespaces", ns)),
            Some(n) if n["metadata"]["deletionTimestamp"].is_string() => Err(ApiError::forbidden(
                "",
                "",
                &format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    /// Creates an object.
    pub(crate) async fn create(
        &self,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> ApiResult<Arc<Value>> {
        Self::check_kind(rt, version, &mut obj)?;
        Self::prune_unknown(rt, version, &mut obj, opts, false)?;
        let review = admission::Request {
            op: Operation::Create,
            rt,
            version,
            status: false,
            ns,
            opts,
        };
        if let Some(hooks) = review.hooks(self) {
            let plan = |txn: &mut Txn<'_>, dry: &WriteOpts| {
                let out = self.create_in(txn, rt, version, ns, obj.clone(), dry)?;
                Ok((None, out.ok_or_else(|| ApiError::internal("dry run"))?))
            };
            let name = name_of(&obj).to_string();
            let (out, _) = self
                .admitted(&review, &hooks, &name, Scope::All, plan)
                .await?;
            return Ok(out);
        }
        let (stored, fut) = {
            let mut txn = self.store.begin();
            let stored = self
                .create_in(&mut txn, rt, version, ns, obj, opts)?
                .ok_or_else(|| ApiError::internal("dry run"))?;
            (stored, txn.commit())
        };
        fut.await?;
        Ok(Self::versioned(rt, version, &stored))
    }

    /// Create under an open transaction. Dry runs return the object without
    /// storing it.
    pub(super) fn create_in(
        &self,
        txn: &mut Txn<'_>,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> ApiResult<Option<Arc<Value>>> {
        let now = meta::now();
        {
            let m = meta_mut(&mut obj);
            if rt.namespaced {
                match m.get("namespace").and_then(Value::as_str) {
                    Some(n) if !n.is_empty() && n != ns => {
                        return Err(ApiError::bad_request(
                            "the namespace of the provided object does not match the namespace sent on the request",
                        ));
                    }
                    _ => {
                        m.insert("namespace".into(), ns.into());
                    }
                }
            } else {
                m.remove("namespace");
            }
            let name = m
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if name.is_empty() {
                match m.get("generateName").and_then(Value::as_str) {
                    Some(g) if !g.is_empty() => {
                        let base: String = g.chars().take(58).collect();
                        m.insert(
                            "name".into(),
                            format!("{base}{}", meta::random_suffix()).into(),
                        );
                    }
                    _ => {
                        return Err(ApiError::invalid(
                            &rt.kind,
                            "",
                            vec![(
                                "metadata.name".into(),
                                "Required value: name or generateName is required".into(),
                            )],
                        ));
                    }
                }
            }
            m.insert("uid".into(), uuid::Uuid::new_v4().to_string().into());
            m.insert("creationTimestamp".into(), now.clone().into());
            if tracks_generation(rt) {
                m.insert("generation".into(), 1.into());
            } else {
                m.remove("generation");
            }
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
            m.remove("resourceVersion");
            m.remove("selfLink");
        }
        let name = name_of(&obj).to_string();
        if rt.status_subresource && !rt.builtin {
            // Status is written through /status only (and so is not
            // validated on create).
            if let Value::Object(m) = &mut obj {
                m.remove("status");
            }
        }
        self.validate(rt, version, &mut obj, None)?;
        if rt.namespaced {
            self.check_namespace(txn, ns)?;
        }
        // Admission runs before storage finds a duplicate, as in kube-apiserver.
        let quotas = self.admit_to_quota(txn, rt, ns, &obj, opts)?;
        let key_ns = if rt.namespaced { ns } else { "" };
        if txn.get(&rt.gr(), key_ns, &name).is_some() {
            return Err(ApiError::already_exists(&rt.gr(), &name));
        }
        self.defaults_on_create(rt, &mut obj)?;
        // "-" marks the cluster's own writes (events, bootstrap objects),
        // which record no field manager.
        if opts.field_manager != "-" {
            let scope = Scope::All;
            if !meta_mut(&mut obj).contains_key("managedFields") {
                patch::track_update(
                    None,
                    &mut obj,
                    &opts.field_manager,
                    scope,
                    &rt.api_version(version),
                    &now,
                );
            }
        }
        fits_in_etcd(rt, &name, &obj)?;
        if opts.dry_run {
            return Ok(Some(Arc::new(obj)));
        }
        let stored = txn.put(&rt.gr(), key_ns, &name, obj);
        self.after_write(txn, rt, None, &stored);
        if quotas {
            self.sync_quotas_in(txn, ns);
        }
        Ok(Some(stored))
    }

    /// Creates an object as the system (events, default namespaces).
    pub(crate) fn system_create(
        &self,
        txn: &mut Txn<'_>,
        rt: &ResourceType,
        ns: &str,
        obj: Value,
    ) -> ApiResult<Arc<Value>> {
        let version = rt.versions[0].clone();
        let mut obj = obj;
        Self::check_kind(rt, &version, &mut obj)?;
        let opts = WriteOpts {
            field_manager: "-".into(),
            ..Default::default()
        };
        self.create_in(txn, rt, &version, ns, obj, &opts)?
            .ok_or_else(|| ApiError::internal("dry run"))
    }

    /// Creates the namespaces and node every cluster has.
    pub(crate) async fn bootstrap(&self) -> ApiResult<()> {
        let ns_rt = self
            .registry
            .lookup("", "v1", "namespaces")
            .expect("built in");
        let node_rt = self.registry.lookup("", "v1", "nodes").expect("built in");
        let fut = {
            let mut txn = self.store.begin();
            for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                if txn.get("/namespaces", "", ns).is_none() {
                    self.system_create(&mut txn, &ns_rt, "", json!({"metadata": {"name": ns}}))?;
                }
            }
            // CRDs stored by an earlier run are served again.
            for crd in txn.list("apiextensions.k8s.io/customresourcedefinitions", None) {
                if let Ok(t) = ResourceType::from_crd(&crd) {
                    self.registry.register(t);
                }
            }
            if txn.get("/nodes", "", &self.node_name).is_none() {
                let node = json!({
                    "metadata": {"name": self.node_name, "labels": {
                        "kubernetes.io/hostname": self.node_name, "kubernetes.io/os": std::env::consts::OS,
                        "type": "weft-dev"}},
                    "spec": {},
                    "status": {
                        "conditions": [{"type": "Ready", "status": "True", "reason": "WeftDevRunnerReady",
                                         "message": "the weft dev cluster runs pods as local processes"}],
                        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                      {"type": "Hostname", "address": self.node_name}],
                        "nodeInfo": {"kubeletVersion": "v1.32.0-weft", "operatingSystem": std::env::consts::OS,
                                     "architecture": std::env::consts::ARCH, "containerRuntimeVersion": "weft-local://0.1"},
                    },
                });
                self.system_create(&mut txn, &node_rt, "", node)?;
            }
            txn.commit()
        };
        fut.await?;
        Ok(())
    }
}
