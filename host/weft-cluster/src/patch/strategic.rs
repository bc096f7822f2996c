//! Strategic merge patch without OpenAPI schemas: the built-in merge keys
//! and the `$patch`, `$retainKeys`, `$deleteFromPrimitiveList` and
//! `$setElementOrder` directives (see the parent module's docs for what
//! differs from a real server).

use serde_json::{Map, Value};

use super::{is_set_list, merge_key};

/// Strategic merge patch (see the module docs for what differs).
pub(crate) fn strategic_merge(original: &Value, patch: &Value) -> Value {
    smp_value(Some(original), patch, "").unwrap_or(Value::Null)
}

fn smp_value(orig: Option<&Value>, patch: &Value, field: &str) -> Option<Value> {
    match patch {
        Value::Object(p) => {
            match p.get("$patch").and_then(Value::as_str) {
                Some("delete") => return None,
                Some("replace") => {
                    let mut p = p.clone();
                    p.remove("$patch");
                    return Some(Value::Object(p));
                }
                _ => {}
            }
            let mut out = match orig {
                Some(Value::Object(o)) => o.clone(),
                _ => Map::new(),
            };
            let mut retain: Option<Vec<String>> = None;
            for (k, pv) in p {
                if k == "$patch" || k.starts_with("$setElementOrder/") {
                    continue;
                }
                if k == "$retainKeys" {
                    retain = pv.as_array().map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(String::from))
                            .collect()
                    });
                    continue;
                }
                if let Some(list) = k.strip_prefix("$deleteFromPrimitiveList/") {
                    if let Some(Value::Array(items)) = out.get_mut(list) {
                        let drop: Vec<&Value> = pv
                            .as_array()
                            .map(|a| a.iter().collect())
                            .unwrap_or_default();
                        items.retain(|i| !drop.contains(&i));
                    }
                    continue;
                }
                if pv.is_null() {
                    out.remove(k);
                    continue;
                }
                let merged = match pv {
                    Value::Array(items) => Some(smp_list(out.get(k), items, k)),
                    _ => smp_value(out.get(k), pv, k),
                };
                match merged {
                    Some(v) => {
                        out.insert(k.clone(), v);
                    }
                    None => {
                        out.remove(k);
                    }
                }
            }
            if let Some(keep) = retain {
                out.retain(|k, _| keep.contains(k));
            }
            let _ = field;
            Some(Value::Object(out))
        }
        other => Some(other.clone()),
    }
}

fn smp_list(orig: Option<&Value>, patch: &[Value], field: &str) -> Value {
    let orig_items: Vec<Value> = orig.and_then(Value::as_array).cloned().unwrap_or_default();
    if patch
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Value::Array(
            patch
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .cloned()
                .collect(),
        );
    }
    if is_set_list(field) {
        let mut out = orig_items;
        for i in patch {
            if !out.contains(i) {
                out.push(i.clone());
            }
        }
        return Value::Array(out);
    }
    let objects: Vec<Value> = patch.iter().filter(|i| i.is_object()).cloned().collect();
    let key = if objects.len() == patch.len() {
        merge_key(field, &objects)
    } else {
        None
    };
    let Some(key) = key else {
        return Value::Array(patch.to_vec());
    };
    let mut out = orig_items;
    for item in patch {
        let Some(kv) = item.get(key) else { continue };
        let pos = out.iter().position(|o| o.get(key) == Some(kv));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(p), true) => {
                out.remove(p);
            }
            (None, true) => {}
            (Some(p), false) => {
                if let Some(v) = smp_value(Some(&out[p]), item, "") {
                    out[p] = v;
                }
            }
            (None, false) => {
                if let Some(v) = smp_value(None, item, "") {
                    out.push(v);
                }
            }
        }
    }
    Value::Array(out)
}
