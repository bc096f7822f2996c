//! What the API server does to objects, independent of HTTP: create, update,
//! patch, delete with their Kubernetes rules (uid, generation, status
//! subresource, finalizers, graceful pod deletion, CRD registration). The HTTP
//! layer, the garbage collector and the pod runner all write through here so
//! the rules hold whoever writes.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use crate::admission::{self, Operation};
use crate::meta;
use crate::patch::{self, Scope};
use crate::registry::{Registry, ResourceType};
use crate::schema::{self, FieldError, FieldValidation};
use crate::status::{ApiError, ApiResult};
use crate::store::{Store, Txn};

/// Finalizer the namespace controller owns (in `spec.finalizers`).
const NS_FINALIZER: &str = "kubernetes";
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

    /// Checks a request body is the kind the URL serves and fills in what a
    /// client may leave out.
    fn check_kind(rt: &ResourceType, version: &str, obj: &mut Value) -> ApiResult<()> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was not a JSON object",
            ));
        }
        let want_av = rt.api_version(version);
        match obj["kind"].as_str() {
            None | Some("") => obj["kind"] = rt.kind.clone().into(),
            Some(k) if k == rt.kind => {}
            Some(k) => {
                return Err(ApiError::bad_request(format!(
                    "{k} in version \"{version}\" cannot be handled as a {}: the kind in the body ({k}) does not match the kind served at this URL ({})",
                    rt.kind, rt.kind
                )));
            }
        }
        match obj["apiVersion"].as_str() {
            None | Some("") => obj["apiVersion"] = want_av.into(),
            Some(av) if av == want_av => {}
            Some(av) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({want_av})"
                )));
            }
        }
        if !obj.get("metadata").is_none_or(Value::is_object) {
            return Err(ApiError::bad_request("metadata must be an object"));
        }
        Ok(())
    }

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
    fn create_in(
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
        self.after_write(rt, &stored);
        Ok(Some(stored))
    }

    /// Validates an object about to be stored; a custom resource is first
    /// defaulted from its CRD schema, then validated against it (with `old`
    /// for ratcheting and transition rules).
    fn validate(
        &self,
        rt: &ResourceType,
        version: &str,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> ApiResult<()> {
        let errs = Self::object_errors(rt, obj);
        if rt.builtin && errs.is_empty() {
            return Ok(());
        }
        if rt.builtin {
            return Err(ApiError::invalid(&rt.kind, name_of(obj), errs));
        }
        let mut all: Vec<FieldError> = errs
            .into_iter()
            .map(|(f, m)| FieldError::from_message(&f, m))
            .collect();
        if let Some(s) = rt.schema(version) {
            all.extend(schema::default_and_validate(s, obj, old));
        }
        if all.is_empty() {
            return Ok(());
        }
        let kind = format!("{}.{}", rt.kind, rt.group);
        let details = format!("{}/{}", rt.group, rt.kind);
        Err(ApiError::invalid_fields(
            &kind,
            &details,
            name_of(obj),
            &all,
        ))
    }

    /// Metadata and built-in rules, as (field, message).
    fn object_errors(rt: &ResourceType, obj: &Value) -> Vec<(String, String)> {
        let name = name_of(obj);
        let mut errs = Vec::new();
        let is_ns = rt.group.is_empty() && rt.plural == "namespaces";
        if let Some(msg) = meta::validate_name(name, is_ns) {
            errs.push(("metadata.name".to_string(), msg));
        }
        errs.extend(meta::validate_metadata(obj));
        errs.extend(admission::configuration_errors(rt, obj));
        if rt.group.is_empty() && rt.plural == "pods" {
            match obj["spec"]["containers"].as_array() {
                Some(cs) if !cs.is_empty() => {
                    for (i, c) in cs.iter().enumerate() {
                        if c["name"].as_str().unwrap_or("").is_empty() {
                            errs.push((
                                format!("spec.containers[{i}].name"),
                                "Required value".into(),
                            ));
                        }
                        if c["image"].as_str().unwrap_or("").is_empty() {
                            errs.push((
                                format!("spec.containers[{i}].image"),
                                "Required value".into(),
                            ));
                        }
                    }
                }
                _ => errs.push(("spec.containers".into(), "Required value".into())),
            }
        }
        if rt.group == "apiextensions.k8s.io"
            && let Err(e) = ResourceType::from_crd(obj)
        {
            errs.extend(e);
        }
        errs
    }

    /// What kube-apiserver's decoder does to a custom resource's body (or
    /// patched object): fields its schema does not declare are dropped,
    /// and reported as `Warning`s, refused (400 `strict decoding error`) or
    /// ignored as `?fieldValidation=` says.
    fn prune_unknown(
        rt: &ResourceType,
        version: &str,
        obj: &mut Value,
        opts: &WriteOpts,
        patched: bool,
    ) -> ApiResult<()> {
        let Some(s) = rt.schema(version) else {
            return Ok(());
        };
        let pruned = schema::prune_object(obj, s);
        if pruned.is_empty() {
            return Ok(());
        }
        let unknown: Vec<String> = pruned
            .iter()
            .map(|p| format!("unknown field \"{p}\""))
            .collect();
        match opts.field_validation {
            FieldValidation::Strict => {
                let why = format!("strict decoding error: {}", unknown.join(", "));
                let k = &rt.kind;
                if patched {
                    return Err(ApiError::bad_request(why));
                }
                Err(ApiError::bad_request(format!(
                    "{k} in version \"{version}\" cannot be handled as a {k}: {why}"
                )))
            }
            FieldValidation::Warn => {
                let mut w = opts.warnings.lock().unwrap_or_else(|e| e.into_inner());
                w.extend(unknown);
                Ok(())
            }
            FieldValidation::Ignore => Ok(()),
        }
    }

    /// Server-side apply converts its body to a typed object, which fails
    /// on a field the schema lacks whatever `fieldValidation` says; the
    /// real server answers 500 without a reason.
    fn check_apply(rt: &ResourceType, version: &str, applied: &Value) -> ApiResult<()> {
        let Some(s) = rt.schema(version) else {
            return Ok(());
        };
        let unknown = schema::apply_unknown_fields(applied, s);
        if unknown.is_empty() {
            return Ok(());
        }
        let errs: Vec<String> = unknown
            .iter()
            .map(|p| format!("{p}: field not declared in schema"))
            .collect();
        let errs = match errs.len() {
            1 => errs[0].clone(),
            _ => format!("errors:\n  {}", errs.join("\n  ")),
        };
        let m = &applied["metadata"];
        let (ns, name) = (m["namespace"].as_str().unwrap_or(""), name_of(applied));
        Err(ApiError::unclassified(format!(
            "failed to create typed patch object ({ns}/{name}; {}, Kind={}): {errs}",
            rt.api_version(version),
            rt.kind
        )))
    }

    /// What the real API server's strategies and defaulting fill in.
    fn defaults_on_create(&self, rt: &ResourceType, obj: &mut Value) -> ApiResult<()> {
        match (rt.group.as_str(), rt.plural.as_str()) {
            ("", "pods") => {
                let spec = &mut obj["spec"];
                for (k, v) in [
                    ("restartPolicy", json!("Always")),
                    ("terminationGracePeriodSeconds", json!(30)),
                    ("dnsPolicy", json!("ClusterFirst")),
                    ("schedulerName", json!("default-scheduler")),
                    ("serviceAccountName", json!("default")),
                    ("securityContext", json!({})),
                ] {
                    if spec.get(k).is_none_or(Value::is_null) {
                        spec[k] = v;
                    }
                }
                for list in ["initContainers", "containers"] {
                    for c in spec[list].as_array_mut().into_iter().flatten() {
                        let image = c["image"].as_str().unwrap_or("").to_string();
                        let pull = if image.ends_with(":latest") || !image.contains(':') {
                            "Always"
                        } else {
                            "IfNotPresent"
                        };
                        for (k, v) in [
                            ("terminationMessagePath", json!("/dev/termination-log")),
                            ("terminationMessagePolicy", json!("File")),
                            ("imagePullPolicy", json!(pull)),
                            ("resources", json!({})),
                        ] {
                            if c.get(k).is_none_or(Value::is_null) {
                                c[k] = v;
                            }
                        }
                    }
                }
                obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            }
            ("", "namespaces") => {
                obj["spec"] = json!({"finalizers": [NS_FINALIZER]});
                obj["status"] = json!({"phase": "Active"});
                let name = name_of(obj).to_string();
                let labels = meta_mut(obj).entry("labels").or_insert_with(|| json!({}));
                labels["kubernetes.io/metadata.name"] = name.into();
            }
            ("", "secrets") => {
                if obj["type"].as_str().unwrap_or("").is_empty() {
                    obj["type"] = "Opaque".into();
                }
                fold_string_data(obj);
            }
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                self.crd_status(obj)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Accepts a CRD: conditions, accepted names, stored versions. The
    /// served type itself is registered once the write is in.
    fn crd_status(&self, obj: &mut Value) -> ApiResult<()> {
        let t = ResourceType::from_crd(obj)
            .map_err(|e| ApiError::invalid("CustomResourceDefinition", name_of(obj), e))?;
        if let Some(why) = self.registry.names_conflict(&t) {
            return Err(ApiError::invalid(
                "CustomResourceDefinition",
                name_of(obj),
                vec![(
                    "spec.names.kind".into(),
                    format!("Invalid value: \"{}\": {why}", t.kind),
                )],
            ));
        }
        let now = meta::now();
        let storage: Vec<Value> = obj["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["storage"].as_bool() == Some(true))
            .map(|v| v["name"].clone())
            .collect();
        let mut accepted = obj["spec"]["names"].clone();
        if accepted["singular"].is_null() {
            accepted["singular"] = t.singular.clone().into();
        }
        if accepted["listKind"].is_null() {
            accepted["listKind"] = t.list_kind.clone().into();
        }
        obj["status"] = json!({
            "acceptedNames": accepted,
            "storedVersions": storage,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
        });
        Ok(())
    }

    /// Side effects of a stored write that live outside the store.
    fn after_write(&self, rt: &ResourceType, stored: &Value) {
        if rt.group == "apiextensions.k8s.io"
            && stored["metadata"]["deletionTimestamp"].is_null()
            && let Ok(t) = ResourceType::from_crd(stored)
        {
            self.registry.register(t);
        }
        let m = &stored["metadata"];
        if m["deletionTimestamp"].is_string() || m["ownerReferences"].is_array() {
            self.gc.notify_one();
        }
    }

    fn after_delete(&self, rt: &ResourceType, last: &Value) {
        if rt.group == "apiextensions.k8s.io"
            && let Ok(t) = ResourceType::from_crd(last)
        {
            self.registry.unregister(&t.group, &t.plural);
        }
        self.gc.notify_one();
    }

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

    /// A write that admission webhooks see: `plan` (create, update or
    /// patch) runs as a dry run to give the object as it would be stored;
    /// mutating webhooks patch it, it is defaulted and validated again,
    /// validating webhooks judge it, and it is stored unless the object
    /// changed meanwhile (then all again, as kube-apiserver retries a patch).
    /// Returns the stored object and whether it was created.
    async fn admitted<F>(
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
    fn replace_in(
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
        self.after_write(rt, &stored);
        Ok(stored)
    }

    /// Namespaces wait for `spec.finalizers`, pods for the runner.
    fn awaits_other_cleanup(&self, rt: &ResourceType, obj: &Value) -> bool {
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
                self.after_write(rt, &stored);
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
        self.after_write(rt, &stored);
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
