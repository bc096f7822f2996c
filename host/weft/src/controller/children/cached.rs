//! A child as the watch cache keeps it: its metadata typed (what the cache
//! keys on, and what `Children::of_workflow` and the owner wake-ups read)
//! and every other field as JSON text, not as a `serde_json::Value` tree.
//!
//! Why: a pod is ~2.5 KB of JSON and ~14 KB as a tree, and the cache holds
//! every child of every running workflow: the 100,000-node tree of the
//! peers bench (issue 41) kept 1.5 GB of pods at three quarters of its run.
//! A child is read as a tree only when a reconcile observes it, which parses
//! the text once (what the old cache's deep copy into a `Value` cost).

use std::borrow::Cow;

use kube::Resource;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, TypeMeta};
use kube::core::DynamicResourceScope;
use serde_json::{Map, Value};

/// A watched child, compact (see the module's doc).
#[derive(Clone, Debug)]
pub struct CachedChild {
    /// `apiVersion` and `kind`, as served.
    pub types: Option<TypeMeta>,
    /// Its metadata, without `managedFields` (unread, and as large as a
    /// pod's spec).
    pub metadata: ObjectMeta,
    /// Every other top-level field (`spec`, `status`, …) as one JSON object.
    body: Box<str>,
}

impl CachedChild {
    /// The compact form of an object the watch decoded.
    pub fn new(o: DynamicObject) -> CachedChild {
        let mut metadata = o.metadata;
        metadata.managed_fields = None;
        // A Value always serialises.
        let body = serde_json::to_string(&o.data).unwrap_or_else(|_| "{}".into());
        CachedChild {
            types: o.types,
            metadata,
            body: body.into_boxed_str(),
        }
    }

    /// The fields other than `apiVersion`, `kind` and `metadata`, parsed.
    fn fields(&self) -> Map<String, Value> {
        serde_json::from_str(&self.body).unwrap_or_default()
    }

    /// One top-level field (`status`, `spec`), parsed; `Null` when absent.
    pub fn field(&self, name: &str) -> Value {
        self.fields().remove(name).unwrap_or(Value::Null)
    }

    /// The fields other than `apiVersion`, `kind` and `metadata` read as
    /// `T`, which may name only what it needs (the rest is skipped, not
    /// built): `None` when they do not read as `T`.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_str(&self.body).ok()
    }

    /// The whole object as JSON, as the API server served it (without
    /// `managedFields`): what plugins are given to observe.
    pub fn to_value(&self) -> Value {
        let mut all = Map::new();
        if let Some(t) = &self.types {
            all.insert("apiVersion".into(), Value::String(t.api_version.clone()));
            all.insert("kind".into(), Value::String(t.kind.clone()));
        }
        let meta = serde_json::to_value(&self.metadata).unwrap_or(Value::Null);
        all.insert("metadata".into(), meta);
        all.extend(self.fields());
        Value::Object(all)
    }
}

impl Resource for CachedChild {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"weft.dev/workflow": "wf"},
                "managedFields": [{"manager": "weft", "operation": "Apply"}]},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": "Succeeded"}
        }))
        .unwrap()
    }

    #[test]
    fn the_cached_child_reads_back_as_served_without_managed_fields() {
        let c = CachedChild::new(pod());
        let mut want = serde_json::to_value(pod()).unwrap();
        want["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert_eq!(c.to_value(), want);
        assert_eq!(c.field("status")["phase"], "Succeeded");
        assert_eq!(c.field("missing"), Value::Null);
        #[derive(serde::Deserialize)]
        struct Phase {
            status: serde_json::Map<String, Value>,
        }
        let phase = c.parse::<Phase>().unwrap().status;
        assert_eq!(phase["phase"], "Succeeded");
        assert!(c.parse::<Vec<u8>>().is_none());
        assert!(c.metadata.managed_fields.is_none());
        assert_eq!(
            c.metadata.labels.as_ref().unwrap()["weft.dev/workflow"],
            "wf"
        );
    }
}
