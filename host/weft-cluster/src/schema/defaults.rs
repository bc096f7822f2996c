//! Structural defaulting: non-nullable nulls are dropped (or replaced by
//! the default), and missing properties with a `default:` get a copy of it,
//! recursively, as apiextensions-apiserver does after pruning.

use serde_json::Value;

/// Applies nulls handling and defaults to `v` under schema `s`.
pub(crate) fn apply(v: &mut Value, s: &Value) {
    match v {
        Value::Object(m) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, p) in props {
                    let nullable = p.get("nullable").and_then(Value::as_bool) == Some(true);
                    let is_null = m.get(k).is_some_and(Value::is_null);
                    match p.get("default") {
                        Some(d) if !m.contains_key(k) || (is_null && !nullable) => {
                            m.insert(k.clone(), d.clone());
                        }
                        None if is_null && !nullable => {
                            m.remove(k);
                        }
                        _ => {}
                    }
                }
            }
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            let props = s.get("properties").and_then(Value::as_object);
            for (k, child) in m.iter_mut() {
                if let Some(cs) = props.and_then(|p| p.get(k)).or(additional) {
                    apply(child, cs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items").filter(|i| i.is_object()) {
                for item in items {
                    apply(item, is);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_missing_and_non_nullable_nulls() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "policy": {"type": "string", "default": "FailFast"},
            "gone": {"type": "string"},
            "kept": {"type": "string", "nullable": true},
            "nodes": {"type": "array", "items": {"type": "object", "properties": {
                "retries": {"type": "object", "properties": {"limit": {"type": "integer", "default": 0}}}}}}}}}});
        let mut o = json!({"spec": {"gone": null, "kept": null, "nodes": [{"retries": {}}]}});
        apply(&mut o, &s);
        assert_eq!(
            o,
            json!({"spec": {"policy": "FailFast", "kept": null, "nodes": [{"retries": {"limit": 0}}]}})
        );
    }
}
