//! The four patch flavours, and the field ownership behind server-side apply.
//!
//! * JSON merge patch (RFC 7386) and JSON patch (RFC 6902) are exact.
//! * Strategic merge patch has no OpenAPI schema to read merge keys from, so
//!   it knows the merge keys of the built-in lists a controller patches
//!   (`containers`/`initContainers`/`env`/`volumes`/... by `name`,
//!   `volumeMounts` by `mountPath`, `ports` by `containerPort`, `conditions` by
//!   `type`, `ownerReferences` by `uid`, `finalizers` as a set); every other
//!   list is replaced, where a real server would merge the few other lists
//!   the Kubernetes types mark with `patchStrategy: merge`. The directives
//!   `$patch: delete|replace`, `$deleteFromPrimitiveList/...`, `$retainKeys`
//!   and `$setElementOrder/...` (ignored: order is kept as merged) are
//!   understood, which is what `kubectl apply` sends.
//! * Server-side apply tracks which manager owns which field in
//!   `metadata.managedFields` (FieldsV1) and reports conflicts with other
//!   managers unless forced. Lists of objects that all carry `name` (or the
//!   merge keys above) are treated as maps keyed by it, `finalizers` as a
//!   set, every other list as atomic. A real server takes this from the
//!   schema (`x-kubernetes-list-type`), so a CRD that declares a different
//!   list type merges differently here.
//!
//! Here: the two JSON patches, the merge keys and `managedFields` entries
//! both other parts share, and [`Scope`]. Strategic merge, FieldsV1 paths
//! and the field manager (apply and update ownership) have a module each.

mod field_manager;
mod fields;
mod strategic;

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::status::ApiError;

pub(crate) use field_manager::{server_side_apply, track_update};
pub(crate) use fields::{from_fields_v1, leaf_paths, to_fields_v1};
pub(crate) use strategic::strategic_merge;

/// Merge key of a built-in list field, by field name.
fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    let has = |k: &str| !items.is_empty() && items.iter().all(|i| i.get(k).is_some());
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "containerStatuses"
        | "initContainerStatuses" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "ports" if has("containerPort") => Some("containerPort"),
        "ports" if has("port") => Some("port"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        _ => None,
    }
}

fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

/// RFC 7386.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// RFC 6902; a failed operation is a 422 as on a real server.
pub(crate) fn json_patch(
    target: &mut Value,
    patch: &Value,
    kind: &str,
    name: &str,
) -> Result<(), ApiError> {
    let p: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "the server rejected our request due to an error in our request: {e}"
        ))
    })?;
    json_patch::patch(target, &p).map_err(|e| {
        ApiError::invalid(kind, name, vec![("".into(), format!("Invalid value: {e}"))])
    })
}

/// A leaf path in FieldsV1 notation: `f:spec`, `k:{"name":"c"}`, `v:"x"`, `.`.
type Path = Vec<String>;

/// Metadata fields the server owns; never part of anyone's field set.
const SERVER_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "generateName",
    "selfLink",
];

/// One `managedFields` entry.
#[derive(Debug, Clone)]
pub(crate) struct Managed {
    pub(crate) manager: String,
    pub(crate) operation: String,
    pub(crate) api_version: String,
    pub(crate) time: String,
    pub(crate) subresource: String,
    pub(crate) fields: BTreeSet<Path>,
}

pub(crate) fn read_managed(obj: &Value) -> Vec<Managed> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            Managed {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: s("subresource"),
                fields: from_fields_v1(&e["fieldsV1"]),
            }
        })
        .collect()
}

pub(crate) fn write_managed(obj: &mut Value, entries: &[Managed]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = e.subresource.clone().into();
            }
            v
        })
        .collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Which part of the object a request may touch: the main resource of a
/// type with a status subresource does not own status, `/status` owns only
/// status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    All,
    NoStatus,
    StatusOnly,
}

#[cfg(test)]
mod tests;
