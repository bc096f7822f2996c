//! Kubernetes-shaped failures. A client (kube-rs, kubectl, client-go) decides
//! what to do from `reason` and `code` in a `Status` body, so every error the
//! server answers with is one of these, worded as the real API server words it.

use serde_json::{Value, json};

/// The most bytes one stored object may take: etcd's default
/// `--max-request-bytes` (1.5 MiB), which every real cluster inherits.
pub(crate) const MAX_OBJECT: usize = 1536 * 1024;

/// An error answered to a client as a `Status` object.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    pub(crate) details: Value,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: json!({}),
        }
    }

    fn with_details(mut self, name: &str, kind: &str) -> Self {
        let mut d = serde_json::Map::new();
        if !name.is_empty() {
            d.insert("name".into(), name.into());
        }
        let (group, kind) = kind.split_once('/').unwrap_or(("", kind));
        if !group.is_empty() {
            d.insert("group".into(), group.into());
        }
        if !kind.is_empty() {
            d.insert("kind".into(), kind.into());
        }
        self.details = Value::Object(d);
        self
    }

    /// `resource` is the plural resource, optionally `group/resource`.
    pub(crate) fn not_found(resource: &str, name: &str) -> Self {
        let plain = qualified(resource);
        Self::new(404, "NotFound", format!("{plain} \"{name}\" not found"))
            .with_details(name, resource)
    }

    /// The URL names no resource this server serves.
    pub(crate) fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub(crate) fn already_exists(resource: &str, name: &str) -> Self {
        let plain = qualified(resource);
        Self::new(
            409,
            "AlreadyExists",
            format!("{plain} \"{name}\" already exists"),
        )
        .with_details(name, resource)
    }

    pub(crate) fn conflict(resource: &str, name: &str, why: &str) -> Self {
        let plain = qualified(resource);
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {plain} \"{name}\": {why}"),
        )
        .with_details(name, resource)
    }

    pub(crate) fn stale(resource: &str, name: &str) -> Self {
        Self::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 422 with one cause per offending field, as validation failures are.
    pub(crate) fn invalid(kind: &str, name: &str, causes: Vec<(String, String)>) -> Self {
        let msgs: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let message = if msgs.len() == 1 {
            format!("{kind} \"{name}\" is invalid: {}", msgs[0])
        } else {
            format!("{kind} \"{name}\" is invalid: [{}]", msgs.join(", "))
        };
        let mut e = Self::new(422, "Invalid", message).with_details(name, kind);
        let causes: Vec<Value> = causes
            .into_iter()
            .map(|(field, message)| {
                json!({"reason": reason_of(&message), "message": message, "field": field})
            })
            .collect();
        e.details["causes"] = Value::Array(causes);
        e
    }

    /// 422 from field errors that carry their own reasons (custom resource
    /// schema validation). `kind` is what the message names
    /// (`Workflow.weft.dev`), `details_kind` is `group/Kind`.
    pub(crate) fn invalid_fields(
        kind: &str,
        details_kind: &str,
        name: &str,
        errs: &[FieldError],
    ) -> Self {
        let msgs: Vec<String> = errs
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        let message = if msgs.len() == 1 {
            format!("{kind} \"{name}\" is invalid: {}", msgs[0])
        } else {
            format!("{kind} \"{name}\" is invalid: [{}]", msgs.join(", "))
        };
        let mut e = Self::new(422, "Invalid", message).with_details(name, details_kind);
        let causes: Vec<Value> = errs
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        e.details["causes"] = Value::Array(causes);
        e
    }

    /// A failure kube-apiserver answers without a reason (an error that is
    /// not an API status, such as server-side apply's schema conversion
    /// errors): code 500, no `reason`.
    pub(crate) fn unclassified(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// 410 Expired, without `details` (kube-apiserver's NewResourceExpired
    /// sets none).
    pub(crate) fn gone(message: impl Into<String>) -> Self {
        Self {
            details: Value::Null,
            ..Self::new(410, "Expired", message)
        }
    }

    pub(crate) fn too_old(requested: u64, oldest: u64) -> Self {
        Self::gone(format!("too old resource version: {requested} ({oldest})"))
    }

    /// An object larger than etcd stores (its `--max-request-bytes`,
    /// 1.5 MiB by default): a real cluster refuses the write with etcd's
    /// words; this one also says which object and how large.
    pub(crate) fn object_too_large(what: &str, size: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!(
                "etcdserver: request is too large: {what} is {size} bytes stored, the limit is {MAX_OBJECT}"
            ),
        )
    }

    pub(crate) fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    pub(crate) fn method_not_allowed(verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({verb})"),
        )
    }

    pub(crate) fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {ct:?})"
            ),
        )
    }

    /// Worded as apimachinery's `NewForbidden`: without a name the quoted
    /// name is left out, without a resource (a plain path) the subject too.
    pub(crate) fn forbidden(resource: &str, name: &str, why: &str) -> Self {
        let plain = qualified(resource);
        let message = match (plain.is_empty(), name.is_empty()) {
            (true, _) => format!("forbidden: {why}"),
            (false, true) => format!("{plain} is forbidden: {why}"),
            (false, false) => format!("{plain} \"{name}\" is forbidden: {why}"),
        };
        Self::new(403, "Forbidden", message).with_details(name, resource)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// The `Status` object.
    pub(crate) fn to_status(&self) -> Value {
        if self.reason.is_empty() {
            return json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": self.message,
                "code": self.code,
            });
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        });
        if self.details.is_null() {
            status.as_object_mut().unwrap().remove("details");
        }
        status
    }
}

/// `pods` stays `pods`; `apps/deployments` becomes `deployments.apps`, which
/// is how the real server names a resource in messages.
fn qualified(resource: &str) -> String {
    match resource.split_once('/') {
        Some(("", r)) => r.to_string(),
        Some((g, r)) => format!("{r}.{g}"),
        None => resource.to_string(),
    }
}

impl From<crate::error::Error> for ApiError {
    fn from(e: crate::error::Error) -> Self {
        ApiError::internal(e.to_string())
    }
}

/// Result of an API operation.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// A cause's reason, read from its message as the built-in validation words
/// them (`Required value`, `Too long`, `Forbidden`, else invalid).
pub(crate) fn reason_of(message: &str) -> &'static str {
    if message.starts_with("Required value") {
        "FieldValueRequired"
    } else if message.starts_with("Too long") {
        "FieldValueTooLong"
    } else if message.starts_with("Forbidden") {
        "FieldValueForbidden"
    } else {
        "FieldValueInvalid"
    }
}

/// One validation failure, as apimachinery's `field.Error`: the field
/// path, the cause reason (`FieldValueInvalid`, ...) and the message after
/// the path (`Invalid value: ...`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldError {
    pub(crate) field: String,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
}

impl FieldError {
    /// A metadata error, its reason read from its message as the built-in
    /// validation words them.
    pub(crate) fn from_message(field: &str, message: String) -> Self {
        FieldError::new(field, reason_of(&message), message)
    }

    pub(crate) fn new(field: &str, reason: &'static str, message: String) -> Self {
        FieldError {
            field: field.to_string(),
            reason,
            message,
        }
    }
}
