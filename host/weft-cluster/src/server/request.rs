//! What a request on a resource path says, decoded: the resource it
//! targets, its query, its body (size-limited JSON or YAML), its field
//! manager and its DeleteOptions. Pure decoding, no action.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Request, header};
use serde_json::Value;

use super::MAX_BODY;
use crate::api::{Cluster, DeleteOpts};
use crate::registry::ResourceType;
use crate::status::{ApiError, ApiResult};

pub(super) struct Query(pub(super) HashMap<String, String>);

impl Query {
    pub(super) fn parse(q: Option<&str>) -> Self {
        Query(
            form_urlencoded::parse(q.unwrap_or("").as_bytes())
                .into_owned()
                .collect(),
        )
    }
    pub(super) fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str).filter(|s| !s.is_empty())
    }
    pub(super) fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1"))
    }
}

/// Where a resource path points.
pub(super) struct Target {
    pub(super) rt: Arc<ResourceType>,
    pub(super) version: String,
    pub(super) namespace: Option<String>,
    pub(super) name: Option<String>,
    pub(super) sub: Option<String>,
}

pub(super) fn parse_target(
    cx: &Cluster,
    group: &str,
    version: &str,
    rest: &[String],
) -> ApiResult<Target> {
    let (ns, tail): (Option<String>, &[String]) = if rest.len() >= 3
        && rest[0] == "namespaces"
        && rest[2] != "status"
        && rest[2] != "finalize"
    {
        (Some(rest[1].clone()), &rest[2..])
    } else {
        (None, rest)
    };
    let (plural, name, sub) = match tail {
        [p] => (p, None, None),
        [p, n] => (p, Some(n.clone()), None),
        [p, n, s] => (p, Some(n.clone()), Some(s.clone())),
        _ => return Err(ApiError::no_route()),
    };
    let rt = cx
        .registry
        .lookup(group, version, plural)
        .ok_or_else(ApiError::no_route)?;
    if rt.namespaced != ns.is_some() && (name.is_some() || !rt.namespaced) {
        return Err(ApiError::no_route());
    }
    Ok(Target {
        rt,
        version: version.to_string(),
        namespace: ns,
        name,
        sub,
    })
}

pub(super) async fn read_body(
    req: Request<Incoming>,
) -> ApiResult<(hyper::http::request::Parts, Bytes)> {
    let (parts, body) = req.into_parts();
    if let Some(len) = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        && len > MAX_BODY
    {
        return Err(ApiError::too_large(MAX_BODY));
    }
    let bytes = Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map_err(|_| ApiError::too_large(MAX_BODY))?
        .to_bytes();
    Ok((parts, bytes))
}

pub(super) fn parse_json(bytes: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

pub(super) fn parse_yaml_or_json(bytes: &[u8]) -> ApiResult<Value> {
    if let Ok(v) = serde_json::from_slice(bytes) {
        return Ok(v);
    }
    serde_yaml::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

/// The manager a write is recorded under: `fieldManager`, or the
/// user agent's program name as the real server derives it.
pub(super) fn field_manager(q: &Query, parts: &hyper::http::request::Parts) -> String {
    if let Some(m) = q.get("fieldManager") {
        return m.to_string();
    }
    parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

pub(super) fn delete_opts(q: &Query, body: &[u8]) -> ApiResult<DeleteOpts> {
    let mut o = DeleteOpts {
        propagation: q.get("propagationPolicy").map(String::from),
        grace_period: q.get("gracePeriodSeconds").and_then(|v| v.parse().ok()),
        dry_run: q.get("dryRun").is_some(),
        ..Default::default()
    };
    if !body.iter().all(u8::is_ascii_whitespace) {
        let v = parse_json(body)?;
        if let Some(p) = v["propagationPolicy"].as_str() {
            o.propagation = Some(p.to_string());
        }
        if v["orphanDependents"].as_bool() == Some(true) {
            o.propagation = Some("Orphan".into());
        }
        if let Some(g) = v["gracePeriodSeconds"].as_i64() {
            o.grace_period = Some(g);
        }
        o.precondition_uid = v["preconditions"]["uid"].as_str().map(String::from);
        o.precondition_rv = v["preconditions"]["resourceVersion"]
            .as_str()
            .map(String::from);
        if v["dryRun"].as_array().is_some_and(|a| !a.is_empty()) {
            o.dry_run = true;
        }
    }
    match o.propagation.as_deref() {
        None | Some("Background" | "Foreground" | "Orphan") => Ok(o),
        Some(p) => Err(ApiError::bad_request(format!(
            "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
        ))),
    }
}
