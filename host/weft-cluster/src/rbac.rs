//! Authorization as kube-apiserver's `--authorization-mode=RBAC` does it,
//! so a test can show that a Role grants exactly what a client needs: a
//! request too much for its Role is refused here as it would be in a real
//! cluster, with the same 403 `Status`.
//!
//! Three parts, each as the API server has them: the request attributes a
//! method and path stand for (`RequestInfoFactory`), the rule matching of
//! the RBAC authorizer (`evaluation_helpers.go`) over the stored Roles,
//! ClusterRoles and their bindings, and the wording of the refusal
//! (`responsewriters.Forbidden`).

use std::ops::ControlFlow;
use std::str::FromStr;
use std::sync::{Arc, LazyLock};

use serde_json::Value;

use crate::status::ApiError;
use crate::store::Store;
use crate::user::{AUTHENTICATED, UNAUTHENTICATED, UserInfo};

/// How the dev cluster authorizes requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Authorization {
    /// Everything is allowed (kube-apiserver's `AlwaysAllow`); the audit
    /// still names each request's user. The default, so API tests need no
    /// RBAC objects.
    #[default]
    AlwaysAllow,
    /// Requests are checked against the stored Roles, ClusterRoles,
    /// RoleBindings and ClusterRoleBindings and against impersonation
    /// rights, as with `--authorization-mode=RBAC`. Requests without a bearer
    /// token are the cluster admin (`system:masters`).
    Rbac,
}

/// The environment variable [`Authorization::from_env`] reads.
pub const AUTHORIZATION_MODE_ENV: &str = "WEFT_DEV_AUTHORIZATION_MODE";

impl Authorization {
    /// The mode named by `WEFT_DEV_AUTHORIZATION_MODE` (`AlwaysAllow` or
    /// `RBAC`), `None` when unset, so a command can turn RBAC on without a
    /// flag of its own.
    pub fn from_env() -> crate::Result<Option<Authorization>> {
        match std::env::var(AUTHORIZATION_MODE_ENV) {
            Ok(v) if !v.is_empty() => v.parse().map(Some),
            _ => Ok(None),
        }
    }
}

impl FromStr for Authorization {
    type Err = crate::Error;

    /// kube-apiserver's `--authorization-mode` names, case-insensitively.
    fn from_str(s: &str) -> crate::Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "alwaysallow" => Ok(Authorization::AlwaysAllow),
            "rbac" => Ok(Authorization::Rbac),
            _ => Err(crate::Error::Config(format!(
                "unknown authorization mode {s:?}: expected AlwaysAllow or RBAC"
            ))),
        }
    }
}

/// What a request asks to do, as kube-apiserver's `RequestInfo` names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, `impersonate`; the lower-case HTTP method for
    /// non-resource requests.
    pub(crate) verb: String,
    /// False for discovery, `/version`, `/healthz` and other plain paths.
    pub(crate) resource_request: bool,
    pub(crate) path: String,
    pub(crate) api_group: String,
    pub(crate) namespace: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) name: String,
}

/// Maps a method, path and query to attributes exactly as
/// kube-apiserver's `RequestInfoFactory` does, so a rule grants here what
/// it grants there (a GET on a collection is `list`, with `watch=true`
/// `watch`, a DELETE on one `deletecollection`, and a
/// `fieldSelector=metadata.name=X` makes `X` the name).
pub(crate) fn request_attributes(method: &str, path: &str, query: Option<&str>) -> Attributes {
    let mut a = Attributes {
        verb: method.to_ascii_lowercase(),
        path: path.to_string(),
        ..Default::default()
    };
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, mut rest) = match segs.as_slice() {
        ["api", _, rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", g, _, rest @ ..] if !rest.is_empty() => (*g, rest),
        _ => return a,
    };
    a.resource_request = true;
    a.api_group = group.to_string();
    if matches!(rest[0], "watch" | "proxy") && rest.len() >= 2 {
        a.verb = rest[0].to_string();
        rest = &rest[1..];
    } else {
        a.verb = method_verb(method).to_string();
    }
    if rest[0] == "namespaces" && rest.len() > 1 {
        a.namespace = rest[1].to_string();
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    a.resource = rest[0].to_string();
    a.name = rest.get(1).map_or_else(String::new, |s| s.to_string());
    if a.verb != "proxy" {
        a.subresource = rest.get(2).map_or_else(String::new, |s| s.to_string());
    }
    collection_verb(&mut a, query);
    a
}

fn method_verb(method: &str) -> &'static str {
    match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// A nameless get is a list or watch; a nameless delete a deletecollection.
fn collection_verb(a: &mut Attributes, query: Option<&str>) {
    if !a.name.is_empty() {
        return;
    }
    let params: Vec<(String, String)> = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect();
    let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if a.verb == "get" {
        // Query booleans convert as apimachinery converts them: anything
        // but 0, f or false is true.
        let watch = param("watch")
            .is_some_and(|v| !matches!(v.to_ascii_lowercase().as_str(), "0" | "f" | "false"));
        a.verb = if watch { "watch" } else { "list" }.into();
        if let Some(name) = param("fieldSelector").and_then(exact_name) {
            a.name = name;
        }
    }
    if a.verb == "delete" {
        a.verb = "deletecollection".into();
    }
}

/// The name a field selector pins with `metadata.name=X` (or `==`), when X
/// could be a path segment.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
        let valid = !v.is_empty() && v != "." && v != ".." && !v.contains(['/', '%']);
        (k.trim() == "metadata.name" && valid).then(|| v.to_string())
    })
}

/// One rule of a Role or ClusterRole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PolicyRule {
    pub(crate) verbs: Vec<String>,
    pub(crate) api_groups: Vec<String>,
    pub(crate) resources: Vec<String>,
    pub(crate) resource_names: Vec<String>,
    pub(crate) non_resource_urls: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

impl PolicyRule {
    fn from_json(v: &Value) -> Self {
        PolicyRule {
            verbs: strings(&v["verbs"]),
            api_groups: strings(&v["apiGroups"]),
            resources: strings(&v["resources"]),
            resource_names: strings(&v["resourceNames"]),
            non_resource_urls: strings(&v["nonResourceURLs"]),
        }
    }

    /// Whether the rule covers the request, as the RBAC authorizer's
    /// `RuleAllows`.
    pub(crate) fn allows(&self, a: &Attributes) -> bool {
        let verb = self.verbs.iter().any(|v| v == "*" || *v == a.verb);
        if !a.resource_request {
            return verb && self.url_matches(&a.path);
        }
        verb && self
            .api_groups
            .iter()
            .any(|g| g == "*" || *g == a.api_group)
            && self.resource_matches(a)
            && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
    }

    /// `pods`, `pods/status`, `*`, and `*/status` for any resource's status.
    fn resource_matches(&self, a: &Attributes) -> bool {
        let combined = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!a.subresource.is_empty() && r.strip_prefix("*/") == Some(&a.subresource))
        })
    }

    /// `/healthz`, `*`, and prefixes ending in `*` such as `/apis/*`.
    fn url_matches(&self, path: &str) -> bool {
        self.non_resource_urls.iter().any(|u| {
            u == "*"
                || u == path
                || u.strip_suffix('*')
                    .is_some_and(|p| path.starts_with(p.trim_end_matches('*')))
        })
    }
}

/// A subject of a binding.
fn subject_applies(s: &Value, user: &UserInfo, binding_ns: &str) -> bool {
    let name = s["name"].as_str().unwrap_or("");
    match s["kind"].as_str() {
        Some("User") => user.name == name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            // A RoleBinding's ServiceAccount without a namespace is one in
            // the binding's own namespace.
            let ns = s["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

/// A ClusterRoleBinding every cluster starts with (kube-apiserver's
/// bootstrap policy), to groups, of the ClusterRole of the same name.
struct DefaultBinding {
    name: &'static str,
    groups: &'static [&'static str],
    rules: Vec<PolicyRule>,
}

/// The default bindings RBAC evaluates here, in name order (as the stored
/// ones are listed): `cluster-admin` for `system:masters` (whom the
/// privileged-group authorizer allows before RBAC is asked; it lists their
/// rules in a SelfSubjectRulesReview), and what every authenticated user
/// has, without which kubectl could not read discovery or `/version` or
/// ask what it may do.
static DEFAULT_BINDINGS: LazyLock<Vec<DefaultBinding>> = LazyLock::new(|| {
    let rule = |verbs: &[&str], groups: &[&str], resources: &[&str], urls: &[&str]| PolicyRule {
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        api_groups: groups.iter().map(|s| s.to_string()).collect(),
        resources: resources.iter().map(|s| s.to_string()).collect(),
        non_resource_urls: urls.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let public = ["/livez", "/readyz", "/healthz", "/version", "/version/"];
    let discovery = [
        &public[..],
        &[
            "/openapi",
            "/openapi/*",
            "/api",
            "/api/*",
            "/apis",
            "/apis/*",
        ],
    ]
    .concat();
    vec![
        DefaultBinding {
            name: "cluster-admin",
            groups: &["system:masters"],
            rules: vec![
                rule(&["*"], &["*"], &["*"], &[]),
                rule(&["*"], &[], &[], &["*"]),
            ],
        },
        DefaultBinding {
            name: "system:basic-user",
            groups: &[AUTHENTICATED],
            rules: vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    &[],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                    &[],
                ),
            ],
        },
        DefaultBinding {
            name: "system:discovery",
            groups: &[AUTHENTICATED],
            rules: vec![rule(&["get"], &[], &[], &discovery)],
        },
        DefaultBinding {
            name: "system:public-info-viewer",
            groups: &[AUTHENTICATED, UNAUTHENTICATED],
            rules: vec![rule(&["get"], &[], &[], &public)],
        },
    ]
});

/// The rules of the role a binding refers to, or the error the RBAC
/// authorizer reports for a missing one (a Role referred to by a
/// ClusterRoleBinding is looked for at the cluster scope, and so missing).
fn role_rules(store: &Store, binding: &Value, binding_ns: &str) -> Result<Vec<PolicyRule>, String> {
    let name = binding["roleRef"]["name"].as_str().unwrap_or("");
    let (gr, ns, what) = match binding["roleRef"]["kind"].as_str().unwrap_or("") {
        "Role" => ("rbac.authorization.k8s.io/roles", binding_ns, "role"),
        "ClusterRole" => ("rbac.authorization.k8s.io/clusterroles", "", "clusterrole"),
        other => return Err(format!("unsupported role reference kind: {other:?}")),
    };
    let role = store
        .get(gr, ns, name)
        .ok_or_else(|| format!("{what}.rbac.authorization.k8s.io {name:?} not found"))?;
    Ok(role["rules"].as_array().map_or_else(Vec::new, |rs| {
        rs.iter().map(PolicyRule::from_json).collect()
    }))
}

/// Where bound rules come from: a default binding and the group it binds,
/// or a stored binding, its namespace (empty for a ClusterRoleBinding)
/// and the subject that is the user. Described only when a reason names
/// it.
enum Source<'a> {
    Default(&'a DefaultBinding, &'a str),
    Stored(&'a Value, &'a str, &'a Value),
}

impl Source<'_> {
    /// The binding as the RBAC authorizer names it (see
    /// [`describe_binding`]).
    fn describe(&self) -> String {
        match self {
            Source::Default(b, group) => format!(
                "ClusterRoleBinding {:?} of ClusterRole {:?} to Group {group:?}",
                b.name, b.name
            ),
            Source::Stored(binding, ns, subject) => describe_binding(binding, ns, subject),
        }
    }
}

/// How kube-apiserver's RBAC authorizer names the binding that allowed a
/// request: `RoleBinding "NAME/NS" of Role "ROLE" to User "alice"`,
/// `ClusterRoleBinding "NAME" of ClusterRole "ROLE" to Group "g"`, a
/// ServiceAccount as `"NAME/NS"`.
fn describe_binding(binding: &Value, binding_ns: &str, subject: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let name = s(&binding["metadata"]["name"]);
    let (what, name) = if binding_ns.is_empty() {
        ("ClusterRoleBinding", name)
    } else {
        ("RoleBinding", format!("{name}/{binding_ns}"))
    };
    let (role_kind, role) = (
        s(&binding["roleRef"]["kind"]),
        s(&binding["roleRef"]["name"]),
    );
    let (kind, mut subject_name) = (s(&subject["kind"]), s(&subject["name"]));
    if kind == "ServiceAccount" {
        let ns = subject["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_ns);
        subject_name = format!("{subject_name}/{ns}");
    }
    format!("{what} {name:?} of {role_kind} {role:?} to {kind} {subject_name:?}")
}

/// Walks the rules bound to `user` for `namespace` (empty: the cluster
/// scope) in the RBAC rule resolver's order: the default
/// ClusterRoleBindings, the stored ClusterRoleBindings, then the
/// namespace's RoleBindings. `visit` gets, for each binding with a subject
/// that is `user` (the first such subject describes it), its source and
/// its role's rules, or the error of a missing role; it breaks to stop.
fn visit_rules(
    store: &Store,
    user: &UserInfo,
    namespace: &str,
    mut visit: impl FnMut(Result<(Source<'_>, &[PolicyRule]), String>) -> ControlFlow<()>,
) {
    for b in DEFAULT_BINDINGS.iter() {
        if let Some(group) = b
            .groups
            .iter()
            .find(|g| user.groups.iter().any(|u| u == *g))
            && visit(Ok((Source::Default(b, group), &b.rules))).is_break()
        {
            return;
        }
    }
    let mut bindings: Vec<(Arc<Value>, String)> = store
        .list("rbac.authorization.k8s.io/clusterrolebindings", None)
        .0
        .into_iter()
        .map(|b| (b, String::new()))
        .collect();
    if !namespace.is_empty() {
        let (rbs, _) = store.list("rbac.authorization.k8s.io/rolebindings", Some(namespace));
        bindings.extend(rbs.into_iter().map(|b| (b, namespace.to_string())));
    }
    for (binding, ns) in &bindings {
        let Some(subject) = binding["subjects"]
            .as_array()
            .and_then(|ss| ss.iter().find(|s| subject_applies(s, user, ns)))
        else {
            continue;
        };
        let flow = match role_rules(store, binding, ns) {
            Ok(rules) => visit(Ok((Source::Stored(binding, ns, subject), &rules))),
            Err(e) => visit(Err(e)),
        };
        if flow.is_break() {
            return;
        }
    }
}

/// Errors joined as apimachinery's aggregate error prints them: one as
/// itself, several (duplicates once) as `[a, b]`.
fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Whether any rule bound to `user` allows `a`: `Ok` with the reason
/// kube-apiserver gives (`RBAC: allowed by ...`), `Err` with the reason
/// shown after a refusal (`RBAC: ...` for bindings to missing roles, as
/// kube-apiserver words it; empty otherwise).
fn rbac_allows(store: &Store, user: &UserInfo, a: &Attributes) -> Result<String, String> {
    let mut allowed = None;
    let mut errors = Vec::new();
    visit_rules(store, user, &a.namespace, |found| {
        match found {
            Ok((source, rules)) if rules.iter().any(|r| r.allows(a)) => {
                allowed = Some(format!("RBAC: allowed by {}", source.describe()));
                return ControlFlow::Break(());
            }
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
        ControlFlow::Continue(())
    });
    match allowed {
        Some(reason) => Ok(reason),
        None if errors.is_empty() => Err(String::new()),
        None => Err(format!("RBAC: {}", aggregate(&errors))),
    }
}

/// The reason a review gets under [`Authorization::AlwaysAllow`] (where
/// kube-apiserver's AlwaysAllow authorizer gives none), so that a log
/// shows why a check passed.
pub(crate) const ALWAYS_ALLOW_REASON: &str =
    "allowed: the dev cluster runs with Authorization::AlwaysAllow, which allows every request";

/// Decides requests for one cluster.
pub(crate) struct Authorizer<'a> {
    pub(crate) mode: Authorization,
    pub(crate) store: &'a Store,
}

impl Authorizer<'_> {
    /// `Ok(reason)` when `user` may do `a`, `Err(reason)` otherwise, with
    /// the reasons kube-apiserver's authorizers give. Members of
    /// `system:masters` may do anything, as kube-apiserver's privileged
    /// group authorizer allows them (without a reason) before RBAC is
    /// asked.
    pub(crate) fn decide(&self, user: &UserInfo, a: &Attributes) -> Result<String, String> {
        if self.mode == Authorization::AlwaysAllow {
            return Ok(ALWAYS_ALLOW_REASON.into());
        }
        if user.groups.iter().any(|g| g == "system:masters") {
            return Ok(String::new());
        }
        rbac_allows(self.store, user, a)
    }

    /// [`Authorizer::decide`], refusing with kube-apiserver's 403.
    pub(crate) fn check(&self, user: &UserInfo, a: &Attributes) -> Result<(), ApiError> {
        self.decide(user, a)
            .map(drop)
            .map_err(|reason| forbidden(user, a, &reason))
    }

    /// What `user` may do in `namespace`, as a SelfSubjectRulesReview
    /// lists it: every rule bound to the user there (all of them under
    /// `AlwaysAllow`), and the errors of bindings to missing roles.
    pub(crate) fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, String) {
        if self.mode == Authorization::AlwaysAllow {
            let admin = DEFAULT_BINDINGS.iter().find(|b| b.name == "cluster-admin");
            return (
                admin.map(|b| b.rules.clone()).unwrap_or_default(),
                String::new(),
            );
        }
        let (mut rules, mut errors) = (Vec::new(), Vec::new());
        visit_rules(self.store, user, namespace, |found| {
            match found {
                Ok((_, rs)) => rules.extend_from_slice(rs),
                Err(e) => errors.push(e),
            }
            ControlFlow::Continue(())
        });
        let error = if errors.is_empty() {
            String::new()
        } else {
            aggregate(&errors)
        };
        (rules, error)
    }
}

/// The 403 kube-apiserver answers a refused request with:
/// `pods "x" is forbidden: User "u" cannot get resource "pods" in API
/// group "" in the namespace "default"`.
pub(crate) fn forbidden(user: &UserInfo, a: &Attributes, reason: &str) -> ApiError {
    let mut why = forbidden_message(user, a);
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    ApiError::forbidden(&group_resource(a), &a.name, &why)
}

/// `group/resource` as [`ApiError::forbidden`] takes it (`""` when not a
/// resource request).
pub(crate) fn group_resource(a: &Attributes) -> String {
    if a.resource.is_empty() {
        String::new()
    } else {
        format!("{}/{}", a.api_group, a.resource)
    }
}

fn forbidden_message(user: &UserInfo, a: &Attributes) -> String {
    let u = &user.name;
    let verb = &a.verb;
    if !a.resource_request {
        return format!("User {u:?} cannot {verb} path {:?}", a.path);
    }
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let group = &a.api_group;
    if a.namespace.is_empty() {
        format!(
            "User {u:?} cannot {verb} resource {resource:?} in API group {group:?} at the cluster scope"
        )
    } else {
        format!(
            "User {u:?} cannot {verb} resource {resource:?} in API group {group:?} in the namespace {:?}",
            a.namespace
        )
    }
}

#[cfg(test)]
mod tests;
