//! The OpenAPI documents of custom resources, built from their CRD schemas
//! as kube-apiserver builds them, so `kubectl explain` prints a CRD's
//! descriptions: v3 components per group-version, and a v2 document.

use serde_json::{Map, Value, json};

use crate::registry::{Registry, ResourceType};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// `weft.dev`, `v1alpha1`, `Workflow` → `dev.weft.v1alpha1.Workflow`, the
/// reversed-domain name kube-apiserver gives a CRD's schema.
pub(crate) fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

/// The schema of a resource at a version, with apiVersion, kind and
/// metadata declared and its GVK marked, as served under
/// `components.schemas` (v3) or `definitions` (v2, `v2` = true).
pub(crate) fn resource_schema(rt: &ResourceType, version: &str, v2: bool) -> Option<Value> {
    let mut s = rt.schema(version)?.clone();
    let m = s.as_object_mut()?;
    let props = m
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()?;
    props.insert("apiVersion".into(), json!({"type": "string",
        "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}));
    props.insert("kind".into(), json!({"type": "string",
        "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}));
    let meta_desc = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
    let meta = if v2 {
        json!({"$ref": format!("#/definitions/{OBJECT_META}"), "description": meta_desc})
    } else {
        json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "description": meta_desc})
    };
    props.insert("metadata".into(), meta);
    m.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([{"group": rt.group, "kind": rt.kind, "version": version}]),
    );
    if v2 {
        to_v2(&mut s);
    }
    Some(s)
}

/// v2 has no `nullable` nor combinators: kube-apiserver drops them from
/// CRD schemas it publishes as v2 (int-or-string loses its type).
fn to_v2(s: &mut Value) {
    match s {
        Value::Object(m) => {
            for k in ["nullable", "anyOf", "oneOf", "allOf", "not"] {
                m.remove(k);
            }
            if m.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
                m.remove("type");
            }
            for (k, v) in m.iter_mut() {
                if k != "default" && k != "enum" && k != "example" {
                    to_v2(v);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(to_v2),
        _ => {}
    }
}

/// The subset of ObjectMeta that `kubectl explain` shows for
/// `RESOURCE.metadata`.
pub(crate) fn object_meta() -> Value {
    let s = |d: &str| json!({"type": "string", "description": d});
    let map = |d: &str| json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}, "description": d});
    json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "properties": {
            "name": s("Name must be unique within a namespace."),
            "generateName": s("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
            "namespace": s("Namespace defines the space within which each name must be unique."),
            "uid": s("UID is the unique in time and space value for this object."),
            "resourceVersion": s("An opaque value that represents the internal version of this object."),
            "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state."},
            "creationTimestamp": s("CreationTimestamp is a timestamp representing the server time when this object was created."),
            "deletionTimestamp": s("DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."),
            "labels": map("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
            "annotations": map("Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata."),
            "finalizers": {"type": "array", "items": {"type": "string", "default": ""}, "description": "Must be empty before the object is deleted from the registry."},
            "ownerReferences": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "List of objects depended by this object."},
            "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow."},
        },
    })
}

/// `components.schemas` of `/openapi/v3/apis/{group}/{version}`.
pub(crate) fn v3_components(types: &[&ResourceType], version: &str) -> Map<String, Value> {
    let mut out = Map::new();
    for t in types {
        if let Some(s) = resource_schema(t, version, false) {
            out.insert(definition_name(&t.group, version, &t.kind), s);
        }
    }
    if !out.is_empty() {
        out.insert(OBJECT_META.into(), object_meta());
    }
    out
}

/// `/openapi/v2`: every custom resource's schema under `definitions`.
pub(crate) fn v2_document(types: &[&ResourceType]) -> Value {
    let mut defs = Map::new();
    defs.insert(OBJECT_META.into(), object_meta());
    for t in types {
        for v in &t.versions {
            if let Some(s) = resource_schema(t, v, true) {
                defs.insert(definition_name(&t.group, v, &t.kind), s);
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes (weft dev cluster)", "version": "v1.32.0"},
        "paths": {},
        "definitions": defs,
    })
}

/// `/openapi/v3`: one entry per group-version. kubectl reads it to learn
/// that PATCH takes `fieldValidation` (then it validates server-side
/// and needs no schema download).
pub(crate) fn v3_root(registry: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(String, String)> = Vec::new();
    for t in registry.read().iter() {
        for v in &t.versions {
            if !gvs.contains(&(t.group.clone(), v.clone())) {
                gvs.push((t.group.clone(), v.clone()));
            }
        }
    }
    for (g, v) in gvs {
        let key = if g.is_empty() {
            format!("api/{v}")
        } else {
            format!("apis/{g}/{v}")
        };
        let hash = openapi_hash(registry, &g, &v);
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

fn openapi_hash(registry: &Registry, group: &str, version: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for t in registry.read().iter().filter(|t| t.group == group) {
        (&t.plural, &t.kind, t.namespaced, &t.versions).hash(&mut h);
        if let Some(s) = t.schema(version) {
            s.to_string().hash(&mut h);
        }
    }
    version.hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`: PATCH
/// operations (kubectl learns from them that the server validates
/// fields), and the schemas of custom resources from their CRDs
/// (`kubectl explain`). Built-in types have no schemas here: kubectl
/// falls back to its compiled-in types for them.
pub(crate) fn v3_group_version(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    for t in registry
        .read()
        .iter()
        .filter(|t| t.group == group && t.versions.iter().any(|v| v == version))
    {
        let path = if t.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
        } else {
            format!("{prefix}/{}/{{name}}", t.plural)
        };
        let op = json!({
            "operationId": format!("patch{}", t.kind),
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": t.group, "version": version, "kind": t.kind},
            "parameters": [
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}},
                {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            ],
            "responses": {"200": {"description": "OK"}},
        });
        paths.insert(path, json!({"patch": op}));
    }
    if paths.is_empty() {
        return None;
    }
    let types = registry.read();
    let served: Vec<&ResourceType> = types
        .iter()
        .filter(|t| t.group == group && t.versions.iter().any(|v| v == version))
        .map(|t| &**t)
        .collect();
    let schemas = v3_components(&served, version);
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (weft dev cluster)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `/openapi/v2`: the custom resources' schemas.
pub(crate) fn v2(registry: &Registry) -> Value {
    let types = registry.read();
    let custom: Vec<&ResourceType> = types.iter().filter(|t| !t.builtin).map(|t| &**t).collect();
    v2_document(&custom)
}
