//! TokenReview (whom does this token authenticate?) and SelfSubjectReview
//! (who am I? `kubectl auth whoami`), as kube-apiserver's
//! `pkg/registry/authentication` answers them, with the dev cluster's
//! authentication: a bearer token is the user's name, a service account's
//! name brings the service-account groups ([`UserInfo::token_user`]).

use serde_json::{Map, Value, json};

use super::{answer_metadata, string};
use crate::meta::strings;
use crate::status::{ApiError, ApiResult};
use crate::user::UserInfo;

/// `username` and `groups` as authentication.k8s.io's UserInfo (the dev
/// cluster's users have no uid or extra).
fn user_info(user: &UserInfo) -> Value {
    let mut v = json!({});
    if !user.name.is_empty() {
        v["username"] = user.name.clone().into();
    }
    if !user.groups.is_empty() {
        v["groups"] = json!(user.groups);
    }
    v
}

/// A TokenReview: authenticated as the user a request with this bearer
/// token would be (a token of only spaces authenticates no one, as it
/// does not on a request). `spec.audiences` are echoed: the dev cluster's
/// tokens are bound to no audience, so every audience accepts them.
pub(super) fn token_review(obj: &Value, metadata: Map<String, Value>) -> ApiResult<Value> {
    let token = string(&obj["spec"], "token");
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let audiences = strings(&obj["spec"]["audiences"]);
    let mut spec = json!({"token": token});
    let name = token.trim();
    let status = if name.is_empty() {
        json!({"user": {}})
    } else {
        let mut status = json!({
            "authenticated": true,
            "user": user_info(&UserInfo::token_user(name)),
        });
        if !audiences.is_empty() {
            status["audiences"] = json!(audiences);
        }
        status
    };
    if !audiences.is_empty() {
        spec["audiences"] = json!(audiences);
    }
    Ok(json!({
        "kind": "TokenReview",
        "apiVersion": obj["apiVersion"],
        "metadata": answer_metadata(metadata),
        "spec": spec,
        "status": status,
    }))
}

/// A SelfSubjectReview: the requester (or whom it impersonates), in a new
/// object stamped with its creation time.
pub(super) fn self_subject_review(user: &UserInfo) -> Value {
    json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": crate::meta::now()},
        "status": {"userInfo": user_info(user)},
    })
}
