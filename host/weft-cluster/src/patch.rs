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

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::status::ApiError;

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

// ---------------------------------------------------------------------------
// Server-side apply.

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

fn assoc_key(field: &str, items: &[Value]) -> Option<Vec<&'static str>> {
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
fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
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
fn remove_at(obj: &mut Value, path: &[String]) {
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

/// Deep-merges an applied configuration into the live object: maps merge,
/// keyed lists merge by key, set lists union, anything else is replaced.
fn apply_merge(live: &mut Value, applied: &Value, field: &str) {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            for (k, av) in a {
                match l.get_mut(k) {
                    Some(lv) if !av.is_null() => apply_merge(lv, av, k),
                    _ => {
                        l.insert(k.clone(), av.clone());
                    }
                }
            }
        }
        (Value::Array(l), Value::Array(a)) if is_set_list(field) => {
            for i in a {
                if !l.contains(i) {
                    l.push(i.clone());
                }
            }
        }
        (Value::Array(l), Value::Array(a)) => match assoc_key(field, a) {
            Some(keys) if l.iter().all(Value::is_object) => {
                for item in a {
                    let pos = l
                        .iter()
                        .position(|x| keys.iter().all(|k| x.get(*k) == item.get(*k)));
                    match pos {
                        Some(p) => apply_merge(&mut l[p], item, ""),
                        None => l.push(item.clone()),
                    }
                }
            }
            _ => *l = a.clone(),
        },
        (l, a) => *l = a.clone(),
    }
}

/// Human form of a path for conflict messages: `.spec.containers[name="c"].image`.
fn display_path(p: &[String]) -> String {
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

fn in_scope(p: &Path, scope: Scope) -> bool {
    let is_status = p.first().map(String::as_str) == Some("f:status");
    match scope {
        Scope::All => true,
        Scope::NoStatus => !is_status,
        Scope::StatusOnly => is_status,
    }
}

/// Server-side apply of `applied` by `manager` onto `live` (None: create).
/// Returns the new object with its managedFields rewritten.
pub(crate) fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    scope: Scope,
    api_version: &str,
    now: &str,
) -> Result<Value, ApiError> {
    let subresource = if scope == Scope::StatusOnly {
        "status"
    } else {
        ""
    };
    let mut entries = live.map(read_managed).unwrap_or_default();
    let applied_paths: BTreeSet<Path> = leaf_paths(applied)
        .into_iter()
        .filter(|p| in_scope(p, scope))
        .collect();
    let mut result = live.cloned().unwrap_or_else(|| json!({"metadata": {}}));

    // Conflicts with other managers over fields whose value would change.
    let mut conflicts = Vec::new();
    for e in &entries {
        if e.manager == manager && e.operation == "Apply" {
            continue;
        }
        for p in e.fields.intersection(&applied_paths) {
            if p.last().map(String::as_str) == Some(".") {
                continue;
            }
            let lv = live.and_then(|l| value_at(l, p));
            if lv.is_some() && !same_value(lv, value_at(applied, p)) {
                conflicts.push((e.manager.clone(), p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(apply_conflict(&conflicts, &entries));
    }
    // Forced (or no conflicts): others lose the fields this apply takes.
    for e in entries.iter_mut() {
        if e.manager == manager && e.operation == "Apply" {
            continue;
        }
        e.fields
            .retain(|p| !applied_paths.contains(p) || p.last().map(String::as_str) == Some("."));
    }

    // Fields this manager applied before but no longer does are removed,
    // unless someone else also owns them. Deepest first.
    let previous: BTreeSet<Path> = entries
        .iter()
        .find(|e| e.manager == manager && e.operation == "Apply" && e.subresource == subresource)
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let others: BTreeSet<Path> = entries
        .iter()
        .filter(|e| {
            !(e.manager == manager && e.operation == "Apply" && e.subresource == subresource)
        })
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let mut dropped: Vec<&Path> = previous.difference(&applied_paths).collect();
    dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in dropped {
        let prefix_owned = |q: &Path| {
            if p.last().map(String::as_str) == Some(".") {
                q.starts_with(&p[..p.len() - 1])
            } else {
                q == p
            }
        };
        if others.iter().any(prefix_owned) || applied_paths.iter().any(prefix_owned) {
            continue;
        }
        remove_at(&mut result, p);
    }

    // Merge the applied configuration (only the parts in scope).
    let mut scoped = applied.clone();
    if let Value::Object(m) = &mut scoped {
        match scope {
            Scope::All => {}
            Scope::NoStatus => {
                m.remove("status");
            }
            Scope::StatusOnly => m.retain(|k, _| k == "status" || k == "apiVersion" || k == "kind"),
        }
        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
            meta.retain(|k, _| {
                !SERVER_META.contains(&k.as_str()) || k == "name" || k == "namespace"
            });
        }
    }
    apply_merge(&mut result, &scoped, "");

    // Record ownership.
    entries.retain(|e| {
        !(e.manager == manager && e.operation == "Apply" && e.subresource == subresource)
    });
    entries.push(Managed {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: api_version.to_string(),
        time: now.to_string(),
        subresource: subresource.to_string(),
        fields: applied_paths,
    });
    write_managed(&mut result, &entries);
    Ok(result)
}

/// Records an Update (create, PUT, non-apply PATCH) by `manager`: it takes
/// the fields whose value it changed, as the real field manager does.
pub(crate) fn track_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    scope: Scope,
    api_version: &str,
    now: &str,
) {
    let subresource = if scope == Scope::StatusOnly {
        "status"
    } else {
        ""
    };
    let mut entries = old.map(read_managed).unwrap_or_default();
    let new_paths = leaf_paths(new);
    let changed: BTreeSet<Path> = new_paths
        .iter()
        .filter(|p| in_scope(p, scope))
        .filter(|p| match old {
            None => true,
            Some(o) => {
                value_at(o, p) != value_at(new, p) || p.last().map(String::as_str) == Some(".")
            }
        })
        .filter(|p| {
            // An element marker changes hands only when the element is new.
            p.last().map(String::as_str) != Some(".") || old.and_then(|o| value_at(o, p)).is_none()
        })
        .cloned()
        .collect();
    // Paths that vanished are owned by nobody any more.
    for e in entries.iter_mut() {
        e.fields.retain(|p| new_paths.contains(p));
        if !(e.manager == manager && e.operation == "Update" && e.subresource == subresource) {
            e.fields.retain(|p| !changed.contains(p));
        }
    }
    if !changed.is_empty() {
        match entries.iter_mut().find(|e| {
            e.manager == manager && e.operation == "Update" && e.subresource == subresource
        }) {
            Some(e) => {
                e.fields.extend(changed);
                e.time = now.to_string();
                e.api_version = api_version.to_string();
            }
            None => entries.push(Managed {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                time: now.to_string(),
                subresource: subresource.to_string(),
                fields: changed,
            }),
        }
    }
    write_managed(new, &entries);
}

/// Whether two field values are the same as a real API server sees them:
/// numbers by value (`0` and `0.0` are one quantity once decoded), the
/// rest exactly.
fn same_value(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// kube-apiserver's answer to an apply that conflicts (structured-merge-diff's
/// `NewConflictError`): a cause per field, one line for one conflict, else
/// the paths grouped under each manager, managers sorted. A manager that
/// applied is named alone, one that updated with its apiVersion and time.
fn apply_conflict(conflicts: &[(String, Path)], entries: &[Managed]) -> ApiError {
    let who = |m: &str| {
        let e = entries.iter().find(|e| e.manager == m);
        match e.filter(|e| e.operation == "Update") {
            Some(e) if e.time.is_empty() => format!("\"{m}\" using {}", e.api_version),
            Some(e) => format!("\"{m}\" using {} at {}", e.api_version, e.time),
            None => format!("\"{m}\""),
        }
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, p)| {
            json!({"reason": "FieldManagerConflict",
                   "message": format!("conflict with {}", who(m)),
                   "field": display_path(p)})
        })
        .collect();
    let n = conflicts.len();
    let message = if let [(m, p)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            who(m),
            display_path(p)
        )
    } else {
        let managers: BTreeSet<&String> = conflicts.iter().map(|(m, _)| m).collect();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {}:", who(m)));
            for (_, p) in conflicts.iter().filter(|(x, _)| x == m) {
                lines.push(format!("- {}", display_path(p)));
            }
        }
        format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
    };
    let mut err = ApiError::conflict("", "", &message);
    err.message = message;
    err.details = json!({"causes": causes});
    err
}

#[cfg(test)]
mod tests;
