//! The reviews kube-apiserver answers without storing anything: in
//! `authorization.k8s.io/v1` SubjectAccessReview, LocalSubjectAccessReview,
//! SelfSubjectAccessReview and SelfSubjectRulesReview, decided by the same
//! authorizer that decides requests ([`crate::rbac`]); in
//! `authentication.k8s.io/v1` TokenReview and SelfSubjectReview, answered
//! by the dev cluster's authentication (a token is a user's name,
//! [`crate::user`]). A review is a create whose answer is the posted
//! object with its `status` (a new object for SelfSubjectRulesReview and
//! SelfSubjectReview), refused and worded as kube-apiserver 1.35 refuses
//! and words it. Who may create which review is the request's own
//! authorization (`create` on `subjectaccessreviews`, ...).

mod access;
mod identity;

use serde_json::{Map, Value};

use crate::api::Cluster;
use crate::meta::OBJECT_META;
use crate::registry::ResourceType;
use crate::status::{ApiError, ApiResult, FieldError};
use crate::user::UserInfo;

/// Answers the create of a review at `rt` by `user` (the requester, or
/// whom it impersonates); `ns` is the path's namespace (a
/// LocalSubjectAccessReview's).
pub(crate) fn create(
    cx: &Cluster,
    rt: &ResourceType,
    version: &str,
    ns: &str,
    mut obj: Value,
    user: &UserInfo,
) -> ApiResult<Value> {
    Cluster::check_kind(rt, version, &mut obj)?;
    let metadata = metadata(&obj, rt.namespaced.then_some(ns))?;
    match rt.plural.as_str() {
        "subjectaccessreviews" | "localsubjectaccessreviews" | "selfsubjectaccessreviews" => {
            access::access_review(cx, rt, &obj, metadata, user)
        }
        "selfsubjectrulesreviews" => access::rules_review(cx, &obj, user),
        "tokenreviews" => identity::token_review(&obj, metadata),
        "selfsubjectreviews" => Ok(identity::self_subject_review(user)),
        _ => Err(ApiError::no_route()),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// The posted metadata as kube-apiserver's create handler leaves it:
/// unknown and empty fields gone (decoding drops the former, Go's
/// semantic equality ignores the latter), system fields wiped
/// (creationTimestamp, uid, deletion fields, selfLink), and the namespace
/// the path's: a 400 when it names another, dropped for cluster-scoped
/// reviews.
fn metadata(obj: &Value, namespace: Option<&str>) -> ApiResult<Map<String, Value>> {
    let mut m = obj["metadata"].as_object().cloned().unwrap_or_default();
    let wiped = [
        "creationTimestamp",
        "uid",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ];
    m.retain(|k, v| {
        OBJECT_META.contains(&k.as_str()) && !wiped.contains(&k.as_str()) && !is_empty(v)
    });
    match (namespace, m.get("namespace").and_then(Value::as_str)) {
        (Some(ns), Some(given)) if given != ns => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        (Some(ns), _) => {
            m.insert("namespace".into(), ns.into());
        }
        (None, _) => {
            m.remove("namespace");
        }
    }
    Ok(m)
}

/// The metadata an answer carries: what was posted, without the
/// managedFields (kube-apiserver's field manager records the creating
/// manager there; the dev cluster does not for reviews).
fn answer_metadata(mut m: Map<String, Value>) -> Value {
    m.remove("managedFields");
    Value::Object(m)
}

/// A field error of type Invalid, `value` rendered as apimachinery
/// renders it (`"alice"`, `null`, JSON).
fn invalid(field: &str, value: &str, detail: &str) -> FieldError {
    FieldError::new(
        field,
        "FieldValueInvalid",
        format!("Invalid value: {value}: {detail}"),
    )
}

/// A string as Go's `%q` prints it (the same for printable text).
fn quoted(s: &str) -> String {
    format!("{s:?}")
}

/// A string as Go's JSON writes it.
fn json_string(s: &str) -> String {
    Value::from(s).to_string()
}

/// `metadata: Invalid value: {...}: DETAIL` when the metadata holds more
/// than the `allowed` fields (managedFields aside, which the server's
/// field manager writes itself), the value being the ObjectMeta's JSON.
fn metadata_error(m: &Map<String, Value>, allowed: &[&str], detail: &str) -> Option<FieldError> {
    if m.keys()
        .all(|k| k == "managedFields" || allowed.contains(&k.as_str()))
    {
        return None;
    }
    let fields: Vec<String> = OBJECT_META
        .iter()
        .filter(|k| **k != "managedFields")
        .filter_map(|k| Some(format!("{}:{}", json_string(k), m.get(*k)?)))
        .collect();
    Some(invalid(
        "metadata",
        &format!("{{{}}}", fields.join(",")),
        detail,
    ))
}

fn string(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests;
