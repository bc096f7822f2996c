//! FieldsV1 paths: the leaf paths of an object (`f:`, `k:`, `v:`
//! segments), their encoding as a `fieldsV1` tree and back, and finding or
//! removing what a path points at. The field manager reasons in these
//! paths; this module only knows how to walk objects with them.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::{Path, SERVER_META, is_set_list, merge_key};

pub(super) fn assoc_key(field: &str, items: &[Value]) -> Option<Vec<&'static str>> {
    if items.is_empty() || !items.iter().all(Value::is_object) {
        return None;
    }
    if let Some(k) = merge_key(field, items) {
        return Some(vec![k]);
    }
    if items.iter().all(|i| i.get("name").is_some()) {
        return Some(vec!["name"]);
    }
    None
}

fn key_segment(item: &Value, keys: &[&str]) -> String {
    let mut m = Map::new();
    for k in keys {
        m.insert(
            (*k).to_string(),
            item.get(*k).cloned().unwrap_or(Value::Null),
        );
    }
    format!("k:{}", Value::Object(m))
}

/// Every leaf path of `obj` (apiVersion, kind and server-owned metadata left out).
pub(crate) fn leaf_paths(obj: &Value) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    if let Value::Object(m) = obj {
        for (k, v) in m {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            if k == "metadata" {
                if let Value::Object(meta) = v {
                    for (mk, mv) in meta {
                        if SERVER_META.contains(&mk.as_str()) {
                            continue;
                        }
                        walk(
                            mv,
                            mk,
                            &mut vec!["f:metadata".into(), format!("f:{mk}")],
                            &mut out,
                        );
                    }
                }
                continue;
            }
            walk(v, k, &mut vec![format!("f:{k}")], &mut out);
        }
    }
    out
}

fn walk(v: &Value, field: &str, path: &mut Path, out: &mut BTreeSet<Path>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                path.push(format!("f:{k}"));
                walk(c, k, path, out);
                path.pop();
            }
        }
        Value::Array(items) if is_set_list(field) => {
            for i in items {
                path.push(format!("v:{i}"));
                out.insert(path.clone());
                path.pop();
            }
        }
        Value::Array(items) => match assoc_key(field, items) {
            Some(keys) => {
                for i in items {
                    path.push(key_segment(i, &keys));
                    path.push(".".into());
                    out.insert(path.clone());
                    path.pop();
                    if let Value::Object(m) = i {
                        for (k, c) in m {
                            path.push(format!("f:{k}"));
                            walk(c, k, path, out);
                            path.pop();
                        }
                    }
                    path.pop();
                }
            }
            None => {
                out.insert(path.clone());
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

/// Encodes paths as a FieldsV1 tree.
pub(crate) fn to_fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for p in paths {
        let mut cur = &mut root;
        for seg in p {
            cur = cur
                .entry(seg.clone())
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("fieldsV1 nodes are objects");
        }
    }
    Value::Object(root)
}

/// Decodes a FieldsV1 tree into leaf paths.
pub(crate) fn from_fields_v1(v: &Value) -> BTreeSet<Path> {
    fn rec(v: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, c) in m {
                    path.push(k.clone());
                    rec(c, path, out);
                    path.pop();
                }
            }
            _ => {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    rec(v, &mut Vec::new(), &mut out);
    out
}

/// Finds the value a path points at.
pub(super) fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in path {
        cur = step(cur, seg)?;
    }
    Some(cur)
}

fn step<'a>(cur: &'a Value, seg: &str) -> Option<&'a Value> {
    if seg == "." {
        return Some(cur);
    }
    if let Some(f) = seg.strip_prefix("f:") {
        return cur.get(f);
    }
    let items = cur.as_array()?;
    if let Some(k) = seg.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(k).ok()?;
        return items
            .iter()
            .find(|i| key.iter().all(|(kk, kv)| i.get(kk) == Some(kv)));
    }
    if let Some(v) = seg.strip_prefix("v:") {
        let want: Value = serde_json::from_str(v).ok()?;
        return items.iter().find(|i| **i == want);
    }
    None
}

/// Removes what a path points at (a field, a keyed element or a set member).
pub(super) fn remove_at(obj: &mut Value, path: &[String]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    if last == "." {
        // The element itself: remove it from its list.
        let Some((key_seg, list_path)) = parent_path.split_last() else {
            return;
        };
        if let Some(list) = value_at_mut(obj, list_path).and_then(Value::as_array_mut)
            && let Some(k) = key_seg.strip_prefix("k:")
            && let Ok(key) = serde_json::from_str::<Map<String, Value>>(k)
        {
            list.retain(|i| !key.iter().all(|(kk, kv)| i.get(kk) == Some(kv)));
        }
        return;
    }
    let Some(parent) = value_at_mut(obj, parent_path) else {
        return;
    };
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = parent.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(v) = last.strip_prefix("v:")
        && let Ok(want) = serde_json::from_str::<Value>(v)
        && let Some(list) = parent.as_array_mut()
    {
        list.retain(|i| *i != want);
    }
}

fn value_at_mut<'a>(obj: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = obj;
    for seg in path {
        if seg == "." {
            continue;
        }
        cur = if let Some(f) = seg.strip_prefix("f:") {
            cur.get_mut(f)?
        } else if let Some(k) = seg.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).ok()?;
            cur.as_array_mut()?
                .iter_mut()
                .find(|i| key.iter().all(|(kk, kv)| i.get(kk) == Some(kv)))?
        } else {
            return None;
        };
    }
    Some(cur)
}

/// Human form of a path for conflict messages: `.spec.containers[name="c"].image`.
pub(super) fn display_path(p: &[String]) -> String {
    let mut s = String::new();
    for seg in p {
        if let Some(f) = seg.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = seg.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = seg.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}
