//! The field manager: server-side apply (conflicts with other managers,
//! fields a manager stopped applying removed, the applied configuration
//! merged in) and the ownership an ordinary update takes, both recorded in
//! `metadata.managedFields`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::fields::{assoc_key, display_path, leaf_paths, remove_at, value_at};
use super::{Managed, Path, SERVER_META, Scope, is_set_list, read_managed, write_managed};
use crate::status::ApiError;

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
