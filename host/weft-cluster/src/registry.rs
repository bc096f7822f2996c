//! Which resources the server serves: a fixed set of built-in ones plus one
//! entry per CustomResourceDefinition, and the discovery documents
//! (`/api`, `/apis`, `/apis/{group}/{version}`) clients build their
//! REST mappings from.

use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

/// One served resource.
#[derive(Debug, Clone)]
pub(crate) struct ResourceType {
    /// API group; empty for the core group.
    pub(crate) group: String,
    /// Served versions; the first is the preferred one.
    pub(crate) versions: Vec<String>,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) kind: String,
    pub(crate) list_kind: String,
    pub(crate) namespaced: bool,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) status_subresource: bool,
    /// Built-in types take strategic merge patches; custom resources do not
    /// (a real API server answers 415 for them too).
    pub(crate) builtin: bool,
    /// Extra `kubectl get` columns from a CRD: (name, type, jsonPath,
    /// priority; kubectl shows priority > 0 only with `-o wide`).
    pub(crate) printer_columns: Vec<(String, String, String, u8)>,
    /// A CRD's `openAPIV3Schema` per served version: custom resources are
    /// pruned, defaulted and validated against it, and OpenAPI serves it.
    pub(crate) schemas: Vec<(String, Arc<Value>)>,
    /// Served by `crate::reviews` and only created (the access and token
    /// reviews): nothing is stored, and discovery lists the one verb.
    pub(crate) create_only: bool,
}

impl ResourceType {
    /// The store key prefix, `group/plural`.
    pub(crate) fn gr(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }

    /// The CRD schema of `version` (none for built-in types).
    pub(crate) fn schema(&self, version: &str) -> Option<&Value> {
        self.schemas
            .iter()
            .find(|(v, _)| v == version)
            .map(|(_, s)| &**s)
    }

    pub(crate) fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    fn builtin(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        short: &[&str],
        status: bool,
    ) -> Self {
        ResourceType {
            group: group.into(),
            versions: vec![version.into()],
            plural: plural.into(),
            singular: kind.to_lowercase(),
            kind: kind.into(),
            list_kind: format!("{kind}List"),
            namespaced,
            short_names: short.iter().map(|s| s.to_string()).collect(),
            categories: Vec::new(),
            status_subresource: status,
            builtin: true,
            printer_columns: Vec::new(),
            schemas: Vec::new(),
            create_only: false,
        }
    }

    /// A review: created, answered, never stored.
    fn review(group: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        ResourceType {
            create_only: true,
            ..Self::builtin(group, "v1", plural, kind, namespaced, &[], false)
        }
    }

    /// Puts the type in the `all` category (`kubectl get all`).
    fn in_all(mut self) -> Self {
        self.categories.push("all".into());
        self
    }

    /// Builds the served type from a CRD object, or explains why it cannot.
    pub(crate) fn from_crd(crd: &Value) -> Result<Self, Vec<(String, String)>> {
        let spec = &crd["spec"];
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let group = s(&spec["group"]);
        let names = &spec["names"];
        let plural = s(&names["plural"]);
        let kind = s(&names["kind"]);
        let mut errs = Vec::new();
        if group.is_empty() {
            errs.push(("spec.group".into(), "Required value".into()));
        } else if !group.contains('.') {
            errs.push((
                "spec.group".into(),
                format!("Invalid value: \"{group}\": should be a domain with at least one dot"),
            ));
        }
        if plural.is_empty() {
            errs.push(("spec.names.plural".into(), "Required value".into()));
        }
        if kind.is_empty() {
            errs.push(("spec.names.kind".into(), "Required value".into()));
        }
        let name = crd["metadata"]["name"].as_str().unwrap_or("");
        if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
            errs.push((
                "metadata.name".into(),
                format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
            ));
        }
        let scope = s(&spec["scope"]);
        if scope != "Namespaced" && scope != "Cluster" {
            errs.push((
                "spec.scope".into(),
                format!(
                    "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
                ),
            ));
        }
        let mut versions = Vec::new();
        let mut status = false;
        let mut columns = Vec::new();
        let mut schemas = Vec::new();
        for v in spec["versions"].as_array().into_iter().flatten() {
            if v["served"].as_bool() == Some(false) {
                continue;
            }
            let vn = s(&v["name"]);
            if vn.is_empty() {
                continue;
            }
            // The first served version with a status subresource decides for
            // all: per-version subresources differing is rare and would need
            // per-version storage strategies.
            if versions.is_empty() {
                status = v["subresources"]["status"].is_object();
                for c in v["additionalPrinterColumns"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    let priority = c["priority"].as_u64().unwrap_or(0).min(255) as u8;
                    columns.push((s(&c["name"]), s(&c["type"]), s(&c["jsonPath"]), priority));
                }
            }
            let schema = &v["schema"]["openAPIV3Schema"];
            if schema.is_object() {
                schemas.push((vn.clone(), Arc::new(schema.clone())));
            }
            versions.push(vn);
        }
        if versions.is_empty() {
            errs.push((
                "spec.versions".into(),
                "Invalid value: must have exactly one version marked as storage version".into(),
            ));
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        // Kubernetes sorts served versions by "version priority"; stable
        // before beta before alpha is what matters for preferred version.
        versions.sort_by_key(|v| version_priority(v));
        let strs = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        };
        Ok(ResourceType {
            group,
            versions,
            singular: names["singular"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| kind.to_lowercase()),
            list_kind: names["listKind"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{kind}List")),
            plural,
            kind,
            namespaced: scope == "Namespaced",
            short_names: strs(&names["shortNames"]),
            categories: strs(&names["categories"]),
            status_subresource: status,
            builtin: false,
            printer_columns: columns,
            schemas,
            create_only: false,
        })
    }
}

/// Sort key: v1 < v2 ... stable first (higher major first), then beta, then alpha.
fn version_priority(v: &str) -> (u8, i64, i64) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major: i64 = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (class, minor) = if tail.is_empty() {
        (0, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (1, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (2, n.parse().unwrap_or(0))
    } else {
        (3, 0)
    };
    if digits.is_empty() {
        return (4, 0, 0);
    }
    (class, -major, -minor)
}

/// The set of served resources; CRDs change it at run time.
pub(crate) struct Registry {
    types: RwLock<Vec<Arc<ResourceType>>>,
}

impl Registry {
    pub(crate) fn new() -> Self {
        let b = ResourceType::builtin;
        let r = ResourceType::review;
        let types = vec![
            b("", "v1", "namespaces", "Namespace", false, &["ns"], true),
            b("", "v1", "pods", "Pod", true, &["po"], true).in_all(),
            b("", "v1", "configmaps", "ConfigMap", true, &["cm"], false),
            b("", "v1", "secrets", "Secret", true, &[], false),
            b("", "v1", "events", "Event", true, &["ev"], false),
            b(
                "",
                "v1",
                "serviceaccounts",
                "ServiceAccount",
                true,
                &["sa"],
                false,
            ),
            b("", "v1", "services", "Service", true, &["svc"], true).in_all(),
            // Enforced for pods on create (crate::quota), its status kept by
            // the quota controller.
            b(
                "",
                "v1",
                "resourcequotas",
                "ResourceQuota",
                true,
                &["quota"],
                true,
            ),
            b("", "v1", "nodes", "Node", false, &["no"], true),
            // Stored only, with no controller behind them: task plugins
            // create Jobs (tests play the job controller), and the deploy/
            // manifests hold Deployments and PodDisruptionBudgets.
            b("batch", "v1", "jobs", "Job", true, &[], true).in_all(),
            b(
                "apps",
                "v1",
                "deployments",
                "Deployment",
                true,
                &["deploy"],
                true,
            )
            .in_all(),
            b(
                "policy",
                "v1",
                "poddisruptionbudgets",
                "PodDisruptionBudget",
                true,
                &["pdb"],
                true,
            ),
            // kube-runtime's event Recorder writes these; stored apart from
            // core/v1 Events (a real server shares the storage).
            b(
                "events.k8s.io",
                "v1",
                "events",
                "Event",
                true,
                &["ev"],
                false,
            ),
            b(
                "coordination.k8s.io",
                "v1",
                "leases",
                "Lease",
                true,
                &[],
                false,
            ),
            b(
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
                &["crd", "crds"],
                true,
            ),
            // Admission webhooks the API server calls on writes.
            b(
                "admissionregistration.k8s.io",
                "v1",
                "validatingwebhookconfigurations",
                "ValidatingWebhookConfiguration",
                false,
                &[],
                false,
            ),
            b(
                "admissionregistration.k8s.io",
                "v1",
                "mutatingwebhookconfigurations",
                "MutatingWebhookConfiguration",
                false,
                &[],
                false,
            ),
            b(
                "rbac.authorization.k8s.io",
                "v1",
                "roles",
                "Role",
                true,
                &[],
                false,
            ),
            b(
                "rbac.authorization.k8s.io",
                "v1",
                "rolebindings",
                "RoleBinding",
                true,
                &[],
                false,
            ),
            b(
                "rbac.authorization.k8s.io",
                "v1",
                "clusterroles",
                "ClusterRole",
                false,
                &[],
                false,
            ),
            b(
                "rbac.authorization.k8s.io",
                "v1",
                "clusterrolebindings",
                "ClusterRoleBinding",
                false,
                &[],
                false,
            ),
            // Answered by crate::reviews from RBAC and the token = name
            // authentication (kubectl auth can-i / whoami).
            r(
                "authorization.k8s.io",
                "subjectaccessreviews",
                "SubjectAccessReview",
                false,
            ),
            r(
                "authorization.k8s.io",
                "selfsubjectaccessreviews",
                "SelfSubjectAccessReview",
                false,
            ),
            r(
                "authorization.k8s.io",
                "localsubjectaccessreviews",
                "LocalSubjectAccessReview",
                true,
            ),
            r(
                "authorization.k8s.io",
                "selfsubjectrulesreviews",
                "SelfSubjectRulesReview",
                false,
            ),
            r(
                "authentication.k8s.io",
                "tokenreviews",
                "TokenReview",
                false,
            ),
            r(
                "authentication.k8s.io",
                "selfsubjectreviews",
                "SelfSubjectReview",
                false,
            ),
        ];
        Registry {
            types: RwLock::new(types.into_iter().map(Arc::new).collect()),
        }
    }

    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<ResourceType>>> {
        self.types.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Finds the type served at `group/version/plural`.
    pub(crate) fn lookup(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<ResourceType>> {
        self.read()
            .iter()
            .find(|t| {
                t.group == group && t.plural == plural && t.versions.iter().any(|v| v == version)
            })
            .cloned()
    }

    /// The type of `kind` in `group` (as an owner reference names one).
    pub(crate) fn by_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.read()
            .iter()
            .find(|t| t.group == group && t.kind == kind)
            .cloned()
    }

    pub(crate) fn by_gr(&self, gr: &str) -> Option<Arc<ResourceType>> {
        self.read().iter().find(|t| t.gr() == gr).cloned()
    }

    /// Serves (or re-serves, after an update) a CRD's resource.
    pub(crate) fn register(&self, t: ResourceType) {
        let mut types = self.types.write().unwrap_or_else(|e| e.into_inner());
        types.retain(|x| x.builtin || !(x.group == t.group && x.plural == t.plural));
        types.push(Arc::new(t));
    }

    pub(crate) fn unregister(&self, group: &str, plural: &str) {
        let mut types = self.types.write().unwrap_or_else(|e| e.into_inner());
        types.retain(|x| x.builtin || !(x.group == group && x.plural == plural));
    }

    /// Whether some other CRD already serves this kind or plural in the group.
    pub(crate) fn names_conflict(&self, t: &ResourceType) -> Option<String> {
        self.read()
            .iter()
            .find(|x| x.group == t.group && x.plural != t.plural && x.kind == t.kind)
            .map(|x| format!("kind {} is already served by {}", t.kind, x.plural))
    }

    /// `/api`.
    pub(crate) fn core_versions(&self, addr: &str) -> Value {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}],
        })
    }

    fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.read().iter().filter(|t| !t.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, vs)) => {
                    for v in &t.versions {
                        if !vs.contains(v) {
                            vs.push(v.clone());
                        }
                    }
                }
                None => out.push((t.group.clone(), t.versions.clone())),
            }
        }
        for (_, vs) in &mut out {
            vs.sort_by_key(|v| version_priority(v));
        }
        out
    }

    fn group_doc(group: &str, versions: &[String]) -> Value {
        let vs: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
            .collect();
        json!({
            "name": group,
            "versions": vs,
            "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
        })
    }

    /// `/apis`.
    pub(crate) fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .iter()
            .map(|(g, vs)| Self::group_doc(g, vs))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `/apis/{group}`.
    pub(crate) fn group(&self, group: &str) -> Option<Value> {
        let groups = self.groups();
        let (g, vs) = groups.iter().find(|(g, _)| g == group)?;
        let mut doc = Self::group_doc(g, vs);
        doc["kind"] = "APIGroup".into();
        doc["apiVersion"] = "v1".into();
        Some(doc)
    }

    /// `/api/v1` or `/apis/{group}/{version}`.
    pub(crate) fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let types: Vec<Arc<ResourceType>> = self
            .read()
            .iter()
            .filter(|t| t.group == group && t.versions.iter().any(|v| v == version))
            .cloned()
            .collect();
        if types.is_empty() {
            return None;
        }
        let verbs = json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]);
        let mut resources = Vec::new();
        for t in &types {
            let mut r = json!({
                "name": t.plural,
                "singularName": t.singular,
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": if t.create_only { json!(["create"]) } else { verbs.clone() },
            });
            if !t.short_names.is_empty() {
                r["shortNames"] = json!(t.short_names);
            }
            if !t.categories.is_empty() {
                r["categories"] = json!(t.categories);
            }
            resources.push(r);
            if t.status_subresource {
                resources.push(json!({
                    "name": format!("{}/status", t.plural),
                    "singularName": "",
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": ["get", "patch", "update"],
                }));
            }
            if t.group.is_empty() && t.plural == "pods" {
                resources.push(json!({
                    "name": "pods/log", "singularName": "", "namespaced": true,
                    "kind": "Pod", "verbs": ["get"],
                }));
            }
        }
        let gv = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": resources,
        }))
    }
}
