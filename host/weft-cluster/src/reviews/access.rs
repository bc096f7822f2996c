//! SubjectAccessReview, LocalSubjectAccessReview and
//! SelfSubjectAccessReview (may this user do this?), and
//! SelfSubjectRulesReview (what may I do here?), as kube-apiserver's
//! `pkg/registry/authorization` answers them: validated as
//! `pkg/apis/authorization/validation` validates, then asked of the
//! authorizer, whose decision and reason become the `status`.

use serde_json::{Map, Value, json};

use super::{answer_metadata, invalid, json_string, metadata_error, quoted, string};
use crate::api::Cluster;
use crate::meta::strings;
use crate::rbac::{Attributes, PolicyRule};
use crate::registry::ResourceType;
use crate::status::{ApiError, ApiResult, FieldError};
use crate::user::UserInfo;

/// The string fields of `resourceAttributes`, in Go's order.
const RESOURCE_FIELDS: &[&str] = &[
    "namespace",
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "name",
];

/// An object's non-empty string fields among `keys`, and its selectors
/// (`resourceAttributes` keeps `fieldSelector` and `labelSelector`), as
/// decoding and encoding the Go type leaves them.
fn attributes(v: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    let mut out = Map::new();
    for k in keys {
        if let Some(s) = v.get(*k).and_then(Value::as_str).filter(|s| !s.is_empty()) {
            out.insert(k.to_string(), s.into());
        }
    }
    if keys == RESOURCE_FIELDS {
        for k in ["fieldSelector", "labelSelector"] {
            if let Some(sel) = v.get(k).filter(|s| s.is_object()) {
                out.insert(k.into(), sel.clone());
            }
        }
    }
    out
}

/// `nonResourceAttributes` as apimachinery renders the internal Go struct
/// in a field error (no JSON tags there): `{"Path":"/x","Verb":"get"}`.
fn go_non_resource(n: &Map<String, Value>) -> String {
    let s = |k: &str| n.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    format!(
        "{{\"Path\":{},\"Verb\":{}}}",
        json_string(&s("path")),
        json_string(&s("verb"))
    )
}

/// A selector needs exactly one of `rawSelector` and `requirements`.
fn selector_errors(ra: &Map<String, Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for key in ["fieldSelector", "labelSelector"] {
        let Some(sel) = ra.get(key) else { continue };
        let path = format!("spec.resourceAttributes.{key}");
        let raw = string(sel, "rawSelector");
        let requirements = sel["requirements"]
            .as_array()
            .is_some_and(|r| !r.is_empty());
        if !raw.is_empty() && requirements {
            errs.push(invalid(
                &format!("{path}.rawSelector"),
                &quoted(&raw),
                "may not specified at the same time as requirements",
            ));
        }
        if raw.is_empty() && !requirements {
            errs.push(FieldError::new(
                &format!("{path}.requirements"),
                "FieldValueRequired",
                format!(
                    "Required value: when {path} is specified, requirements or rawSelector is required"
                ),
            ));
        }
    }
    errs
}

/// A SubjectAccessReview, LocalSubjectAccessReview (namespaced) or
/// SelfSubjectAccessReview (about `requester`).
pub(super) fn access_review(
    cx: &Cluster,
    rt: &ResourceType,
    obj: &Value,
    metadata: Map<String, Value>,
    requester: &UserInfo,
) -> ApiResult<Value> {
    let own = rt.kind == "SelfSubjectAccessReview";
    let local = rt.kind == "LocalSubjectAccessReview";
    let posted = &obj["spec"];
    let ra = posted["resourceAttributes"]
        .as_object()
        .map(|m| attributes(m, RESOURCE_FIELDS));
    let nra = posted["nonResourceAttributes"]
        .as_object()
        .map(|m| attributes(m, &["path", "verb"]));
    let (user, groups) = (string(posted, "user"), strings(&posted["groups"]));

    let mut spec = Map::new();
    if let Some(ra) = &ra {
        spec.insert("resourceAttributes".into(), Value::Object(ra.clone()));
    }
    if let Some(nra) = &nra {
        spec.insert("nonResourceAttributes".into(), Value::Object(nra.clone()));
    }
    if !own {
        if !user.is_empty() {
            spec.insert("user".into(), user.clone().into());
        }
        if !groups.is_empty() {
            spec.insert("groups".into(), json!(groups));
        }
        if let Some(extra) = posted["extra"].as_object().filter(|e| !e.is_empty()) {
            spec.insert("extra".into(), Value::Object(extra.clone()));
        }
        if let Some(uid) = posted["uid"].as_str().filter(|u| !u.is_empty()) {
            spec.insert("uid".into(), uid.into());
        }
    }

    let mut errs = Vec::new();
    match (&ra, &nra) {
        (Some(_), Some(n)) => errs.push(invalid(
            "spec.nonResourceAttributes",
            &go_non_resource(n),
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => errs.push(invalid(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    if !own && user.is_empty() && groups.is_empty() {
        errs.push(invalid(
            "spec.user",
            "\"\"",
            "at least one of user or group must be specified",
        ));
    }
    if let Some(ra) = &ra {
        errs.extend(selector_errors(ra));
    }
    let namespace = string(&Value::Object(metadata.clone()), "namespace");
    if local {
        errs.extend(metadata_error(
            &metadata,
            &["namespace"],
            "must be empty except for namespace",
        ));
        if let Some(ra) = &ra {
            let ra_ns = ra.get("namespace").and_then(Value::as_str).unwrap_or("");
            if ra_ns != namespace {
                errs.push(invalid(
                    "spec.resourceAttributes.namespace",
                    &quoted(ra_ns),
                    "must match metadata.namespace",
                ));
            }
        }
        if let Some(n) = &nra {
            errs.push(invalid(
                "spec.nonResourceAttributes",
                &go_non_resource(n),
                "disallowed on this kind of request",
            ));
        }
    } else {
        errs.extend(metadata_error(&metadata, &[], "must be empty"));
    }
    if !errs.is_empty() {
        // kube-apiserver names the kind of the decoded internal object,
        // which decoding leaves empty.
        return Err(ApiError::invalid_fields(
            ".authorization.k8s.io",
            "authorization.k8s.io/",
            "",
            &errs,
        ));
    }

    let subject = if own {
        requester.clone()
    } else {
        UserInfo { name: user, groups }
    };
    let attrs = match (&ra, &nra) {
        (Some(ra), _) => {
            let s = |k: &str| ra.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            Attributes {
                verb: s("verb"),
                resource_request: true,
                api_group: s("group"),
                namespace: s("namespace"),
                resource: s("resource"),
                subresource: s("subresource"),
                name: s("name"),
                ..Default::default()
            }
        }
        (_, nra) => {
            let nra = nra.clone().map(Value::Object).unwrap_or_default();
            Attributes {
                verb: string(&nra, "verb"),
                path: string(&nra, "path"),
                ..Default::default()
            }
        }
    };
    let (allowed, reason) = match cx.authorizer().decide(&subject, &attrs) {
        Ok(reason) => (true, reason),
        Err(reason) => (false, reason),
    };
    let mut status = json!({"allowed": allowed});
    if !reason.is_empty() {
        status["reason"] = reason.into();
    }
    Ok(json!({
        "kind": rt.kind,
        "apiVersion": obj["apiVersion"],
        "metadata": answer_metadata(metadata),
        "spec": spec,
        "status": status,
    }))
}

/// A rule as a SelfSubjectRulesReview lists it: as a ResourceRule when it
/// names resources, as a NonResourceRule when it names URLs.
fn listed(rules: &[PolicyRule]) -> (Vec<Value>, Vec<Value>) {
    let (mut resource, mut non_resource) = (Vec::new(), Vec::new());
    for r in rules {
        if !r.resources.is_empty() {
            let mut v = json!({"verbs": r.verbs, "resources": r.resources});
            if !r.api_groups.is_empty() {
                v["apiGroups"] = json!(r.api_groups);
            }
            if !r.resource_names.is_empty() {
                v["resourceNames"] = json!(r.resource_names);
            }
            resource.push(v);
        }
        if !r.non_resource_urls.is_empty() {
            non_resource.push(json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
        }
    }
    (resource, non_resource)
}

/// A SelfSubjectRulesReview (`kubectl auth can-i --list`): every rule
/// bound to `user` in `spec.namespace`, in a new object without the spec.
pub(super) fn rules_review(cx: &Cluster, obj: &Value, user: &UserInfo) -> ApiResult<Value> {
    let namespace = string(&obj["spec"], "namespace");
    if namespace.is_empty() {
        return Err(ApiError::bad_request("no namespace on request"));
    }
    let (rules, error) = cx.authorizer().rules_for(user, &namespace);
    let (resource, non_resource) = listed(&rules);
    let mut status = json!({
        "resourceRules": resource,
        "nonResourceRules": non_resource,
        "incomplete": false,
    });
    if !error.is_empty() {
        status["evaluationError"] = error.into();
    }
    Ok(json!({
        "kind": "SelfSubjectRulesReview",
        "apiVersion": obj["apiVersion"],
        "metadata": {},
        "spec": {},
        "status": status,
    }))
}
