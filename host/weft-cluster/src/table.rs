//! Server-side printing: `kubectl get` asks for `Table` objects
//! (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`) and prints the
//! columns it gets. Without this, kubectl falls back to NAME and AGE only.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};

use crate::meta;
use crate::registry::ResourceType;

/// Whether the Accept header asks for a Table.
pub(crate) fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// How much of each object a row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    pub(crate) fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

/// kubectl's human durations (`5s`, `3m2s`, `10m`, `5h`, `2d3h`, `40d`).
pub(crate) fn human_age(created: &str) -> String {
    let Some(t) = meta::parse_rfc3339(created) else {
        return "<unknown>".into();
    };
    let secs = SystemTime::now()
        .duration_since(t)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86_400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        if secs.is_multiple_of(60) {
            format!("{m}m")
        } else {
            format!("{m}m{}s", secs % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m.is_multiple_of(60) {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h.is_multiple_of(24) {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        format!("{}y{}d", d / 365, d % 365)
    } else {
        format!("{}y", d / 365)
    }
}

fn col(name: &str, ty: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": name, "priority": priority})
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Evaluates the simple JSONPaths CRDs use for printer columns:
/// `.spec.x`, `.status.items[0].y`, and `.spec.items[*].name`, whose
/// several results are joined with "," as kube-apiserver's table
/// convertor does.
fn json_path(obj: &Value, path: &str) -> Value {
    let segs: Vec<&str> = path
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .collect();
    let mut found = Vec::new();
    walk(obj, &segs, &mut found);
    match found.len() {
        0 => Value::Null,
        1 => found.remove(0).clone(),
        _ => found
            .iter()
            .map(|v| s(v))
            .collect::<Vec<_>>()
            .join(",")
            .into(),
    }
}

fn walk<'a>(cur: &'a Value, segs: &[&str], found: &mut Vec<&'a Value>) {
    let Some((seg, rest)) = segs.split_first() else {
        if !cur.is_null() {
            found.push(cur);
        }
        return;
    };
    let (field, index) = match seg.split_once('[') {
        Some((f, i)) => (f, Some(i.trim_end_matches(']'))),
        None => (*seg, None),
    };
    let cur = &cur[field];
    match index {
        Some("*") => {
            for item in cur.as_array().into_iter().flatten() {
                walk(item, rest, found);
            }
        }
        Some(i) => walk(&cur[i.parse::<usize>().unwrap_or(usize::MAX)], rest, found),
        None => walk(cur, rest, found),
    }
}

fn columns(rt: &ResourceType) -> Vec<Value> {
    let mut cols = vec![col("Name", "string", 0)];
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => {
            cols.extend([
                col("Ready", "string", 0),
                col("Status", "string", 0),
                col("Restarts", "string", 0),
                col("Age", "string", 0),
                col("IP", "string", 1),
                col("Node", "string", 1),
            ]);
        }
        ("", "namespaces") => cols.extend([col("Status", "string", 0), col("Age", "string", 0)]),
        ("", "configmaps") => cols.extend([col("Data", "integer", 0), col("Age", "string", 0)]),
        ("", "resourcequotas") => cols.extend([
            col("Age", "string", 0),
            col("Request", "string", 0),
            col("Limit", "string", 0),
        ]),
        ("", "secrets") => cols.extend([
            col("Type", "string", 0),
            col("Data", "integer", 0),
            col("Age", "string", 0),
        ]),
        ("", "nodes") => cols.extend([
            col("Status", "string", 0),
            col("Roles", "string", 0),
            col("Age", "string", 0),
            col("Version", "string", 0),
        ]),
        ("", "events") => {
            cols = vec![
                col("Last Seen", "string", 0),
                col("Type", "string", 0),
                col("Reason", "string", 0),
                col("Object", "string", 0),
                col("Message", "string", 0),
                col("Name", "string", 1),
            ];
        }
        ("coordination.k8s.io", "leases") => {
            cols.extend([col("Holder", "string", 0), col("Age", "string", 0)])
        }
        ("apiextensions.k8s.io", _) => cols.push(col("Created At", "date", 0)),
        _ => {
            for (name, ty, _, priority) in &rt.printer_columns {
                let ty = if ty == "date" { "string" } else { ty.as_str() };
                cols.push(col(name, ty, *priority));
            }
            if !rt.printer_columns.iter().any(|(n, ..)| n == "Age") {
                cols.push(col("Age", "string", 0));
            }
        }
    }
    cols
}

fn pod_status(pod: &Value) -> String {
    let st = &pod["status"];
    let mut reason = st["reason"]
        .as_str()
        .or(st["phase"].as_str())
        .unwrap_or("Pending")
        .to_string();
    let inits = st["initContainerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut initializing = false;
    for (i, c) in inits.iter().enumerate() {
        let state = &c["state"];
        if state["terminated"]["exitCode"] == 0 {
            continue;
        }
        initializing = true;
        reason = if state["terminated"].is_object() {
            match state["terminated"]["reason"].as_str() {
                Some(r) if !r.is_empty() => format!("Init:{r}"),
                _ => format!("Init:ExitCode:{}", s(&state["terminated"]["exitCode"])),
            }
        } else if let Some(r) = state["waiting"]["reason"]
            .as_str()
            .filter(|r| *r != "PodInitializing")
        {
            format!("Init:{r}")
        } else {
            format!("Init:{i}/{}", inits.len())
        };
        break;
    }
    if !initializing {
        for c in st["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .rev()
        {
            let state = &c["state"];
            if let Some(r) = state["waiting"]["reason"].as_str() {
                reason = r.to_string();
            } else if let Some(r) = state["terminated"]["reason"].as_str() {
                reason = r.to_string();
            }
        }
    }
    if pod["metadata"]["deletionTimestamp"].is_string() {
        reason = "Terminating".into();
    }
    reason
}

/// kubectl's REQUEST and LIMIT of a quota: `resource: used/hard` for each
/// resource of `spec.hard` in name order, `limits.*` in the second.
fn quota_usage(quota: &Value) -> (String, String) {
    let mut names: Vec<&String> = quota["spec"]["hard"]
        .as_object()
        .map(|h| h.keys().collect())
        .unwrap_or_default();
    names.sort();
    let (mut request, mut limit) = (Vec::new(), Vec::new());
    for r in names {
        let q = |part: &str| match &quota["status"][part][r.as_str()] {
            Value::Null => "0".to_string(),
            v => s(v),
        };
        let cell = format!("{r}: {}/{}", q("used"), q("hard"));
        match r.starts_with("limits.") {
            true => limit.push(cell),
            false => request.push(cell),
        }
    }
    (request.join(", "), limit.join(", "))
}

fn cells(rt: &ResourceType, obj: &Value) -> Vec<Value> {
    let m = &obj["metadata"];
    let name = s(&m["name"]);
    let age = human_age(m["creationTimestamp"].as_str().unwrap_or(""));
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => {
            let statuses = obj["status"]["containerStatuses"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let total = obj["spec"]["containers"].as_array().map_or(0, Vec::len);
            let ready = statuses.iter().filter(|c| c["ready"] == true).count();
            let restarts: u64 = statuses
                .iter()
                .filter_map(|c| c["restartCount"].as_u64())
                .sum();
            vec![
                name.into(),
                format!("{ready}/{total}").into(),
                pod_status(obj).into(),
                restarts.to_string().into(),
                age.into(),
                obj["status"]["podIP"].as_str().unwrap_or("<none>").into(),
                obj["spec"]["nodeName"].as_str().unwrap_or("<none>").into(),
            ]
        }
        ("", "namespaces") => vec![name.into(), s(&obj["status"]["phase"]).into(), age.into()],
        ("", "configmaps") => {
            let n = obj["data"].as_object().map_or(0, |d| d.len())
                + obj["binaryData"].as_object().map_or(0, |d| d.len());
            vec![name.into(), n.into(), age.into()]
        }
        ("", "resourcequotas") => {
            let (request, limit) = quota_usage(obj);
            vec![name.into(), age.into(), request.into(), limit.into()]
        }
        ("", "secrets") => {
            let n = obj["data"].as_object().map_or(0, |d| d.len());
            vec![name.into(), s(&obj["type"]).into(), n.into(), age.into()]
        }
        ("", "nodes") => {
            let ready = obj["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            vec![
                name.into(),
                if ready { "Ready" } else { "NotReady" }.into(),
                "<none>".into(),
                age.into(),
                s(&obj["status"]["nodeInfo"]["kubeletVersion"]).into(),
            ]
        }
        ("", "events") => {
            let last = obj["lastTimestamp"]
                .as_str()
                .unwrap_or(m["creationTimestamp"].as_str().unwrap_or(""));
            let io = &obj["involvedObject"];
            vec![
                human_age(last).into(),
                s(&obj["type"]).into(),
                s(&obj["reason"]).into(),
                format!("{}/{}", s(&io["kind"]).to_lowercase(), s(&io["name"])).into(),
                s(&obj["message"]).into(),
                name.into(),
            ]
        }
        ("coordination.k8s.io", "leases") => {
            vec![
                name.into(),
                s(&obj["spec"]["holderIdentity"]).into(),
                age.into(),
            ]
        }
        ("apiextensions.k8s.io", _) => vec![name.into(), s(&m["creationTimestamp"]).into()],
        _ => {
            let mut out: Vec<Value> = vec![name.into()];
            for (_, ty, path, _) in &rt.printer_columns {
                let v = json_path(obj, path);
                out.push(if ty == "date" {
                    v.as_str().map(human_age).unwrap_or_default().into()
                } else {
                    v
                });
            }
            if !rt.printer_columns.iter().any(|(n, ..)| n == "Age") {
                out.push(age.into());
            }
            out
        }
    }
}

fn row(rt: &ResourceType, obj: &Value, include: Include) -> Value {
    let mut r = json!({"cells": cells(rt, obj)});
    match include {
        Include::None => {}
        Include::Metadata => {
            r["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                 "metadata": obj["metadata"]});
        }
        Include::Object => r["object"] = obj.clone(),
    }
    r
}

/// A Table of `items`; `headers` false leaves out column definitions (watch
/// events after the first).
pub(crate) fn table(
    rt: &ResourceType,
    items: &[Arc<Value>],
    resource_version: &str,
    cont: Option<&str>,
    include: Include,
    headers: bool,
) -> Value {
    let mut metadata = json!({"resourceVersion": resource_version});
    if let Some(c) = cont {
        metadata["continue"] = c.into();
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": if headers { Value::Array(columns(rt)) } else { Value::Array(vec![]) },
        "rows": items.iter().map(|o| row(rt, o, include)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_accept_header() {
        assert!(wanted(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wanted("application/json"));
    }

    #[test]
    fn pod_status_reasons() {
        let p = json!({"status": {"phase": "Running", "containerStatuses": [
            {"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(pod_status(&p), "CrashLoopBackOff");
        let p = json!({"status": {"phase": "Pending", "initContainerStatuses": [
            {"state": {"running": {}}}, {"state": {"waiting": {"reason": "PodInitializing"}}}]}});
        assert_eq!(pod_status(&p), "Init:0/2");
    }

    #[test]
    fn paths() {
        let o = json!({"status": {"items": [{"x": 1}]}});
        assert_eq!(json_path(&o, ".status.items[0].x"), json!(1));
        let l = json!({"spec": {"holders": [{"w": "a"}, {"w": "b"}], "none": []}});
        assert_eq!(json_path(&l, ".spec.holders[*].w"), json!("a,b"));
        assert_eq!(json_path(&l, ".spec.none[*].w"), Value::Null);
        assert_eq!(json_path(&l, ".spec.holders[1].w"), json!("b"));
        assert_eq!(json_path(&l, ".spec.missing"), Value::Null);
    }
}
