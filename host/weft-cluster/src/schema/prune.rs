//! Pruning: fields a structural schema does not declare are dropped, as
//! apiextensions-apiserver's decoder drops them, and their paths are
//! returned so the caller can warn or refuse (`fieldValidation`).

use serde_json::{Map, Value};

use super::child;
use crate::meta::OBJECT_META;

/// Prunes a whole custom resource (apiVersion, kind and metadata are
/// always known). Returns the pruned paths, sorted, as
/// `spec.nodes[0].bogus` / `status.nodes[a].x`.
pub(crate) fn prune_object(obj: &mut Value, schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    prune_node(obj, schema, "", true, &mut out);
    out.sort();
    out
}

/// Server-side apply does not prune: a field its schema lacks fails the
/// conversion to a typed object. Returns the structured-merge-diff paths
/// (`.spec.bogusField`) of such fields.
pub(crate) fn apply_unknown_fields(obj: &Value, schema: &Value) -> Vec<String> {
    let mut copy = obj.clone();
    prune_object(&mut copy, schema)
        .into_iter()
        .map(|p| format!(".{p}"))
        .collect()
}

fn flag(s: &Value, k: &str) -> bool {
    s.get(k).and_then(Value::as_bool) == Some(true)
}

/// `root` and embedded resources keep apiVersion/kind and a pruned metadata.
fn prune_node(v: &mut Value, s: &Value, path: &str, root: bool, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let meta_ok = root || flag(s, "x-kubernetes-embedded-resource");
            prune_map(m, s, path, meta_ok, out);
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items").filter(|i| i.is_object()) {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_node(item, is, &format!("{path}[{i}]"), false, out);
                }
            }
        }
        _ => {}
    }
}

fn prune_map(
    m: &mut Map<String, Value>,
    s: &Value,
    path: &str,
    meta_ok: bool,
    out: &mut Vec<String>,
) {
    let props = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties");
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let mut drop = Vec::new();
    for (k, val) in m.iter_mut() {
        if meta_ok && (k == "apiVersion" || k == "kind") {
            continue;
        }
        if meta_ok && k == "metadata" {
            prune_meta(val, &child(path, k), out);
            continue;
        }
        if let Some(p) = props.and_then(|p| p.get(k)) {
            prune_node(val, p, &child(path, k), false, out);
        } else if let Some(a) = additional.filter(|a| a.is_object()) {
            prune_node(val, a, &format!("{path}[{k}]"), false, out);
        } else if !(preserve || additional == Some(&Value::Bool(true))) {
            drop.push(k.clone());
        }
    }
    for k in drop {
        m.remove(&k);
        out.push(child(path, &k));
    }
}

fn prune_meta(meta: &mut Value, path: &str, out: &mut Vec<String>) {
    if let Value::Object(m) = meta {
        let unknown: Vec<String> = m
            .keys()
            .filter(|k| !OBJECT_META.contains(&k.as_str()))
            .cloned()
            .collect();
        for k in unknown {
            m.remove(&k);
            out.push(child(path, &k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prunes_unknown_fields_but_keeps_preserved_and_maps() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "a": {"type": "integer"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "string"}}}},
            "l": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}}}}}});
        let mut o = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "n", "bogus": 1},
            "spec": {"a": 1, "b": 2, "free": {"any": {"thing": 1}}, "m": {"k": {"x": "1", "y": 2}},
                     "l": [{"id": "a", "z": 1}]}, "top": true});
        let pruned = prune_object(&mut o, &s);
        assert_eq!(
            pruned,
            vec![
                "metadata.bogus",
                "spec.b",
                "spec.l[0].z",
                "spec.m[k].y",
                "top"
            ]
        );
        assert_eq!(o["spec"]["free"]["any"]["thing"], 1);
        assert!(o["spec"]["m"]["k"].get("y").is_none());
    }
}
