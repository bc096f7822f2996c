//! A request on a resource path: auditing, the extra authorization of an
//! apply that creates, the write options, and the verb it asks for mapped
//! onto [`crate::api`]. Lists and watches are answered by their own
//! modules.

use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, header};
use tokio::sync::watch;

use super::list::{delete_collection, list};
use super::request::{
    Query, Target, delete_opts, field_manager, parse_json, parse_target, parse_yaml_or_json,
    read_body,
};
use super::watches::watch_response;
use super::{Body, json_response};
use crate::api::{Cluster, DeleteOpts, PatchType, WriteOpts};
use crate::authn::Caller;
use crate::status::{ApiError, ApiResult};

pub(super) async fn resource(
    cx: Arc<Cluster>,
    shutdown: watch::Receiver<bool>,
    req: Request<Incoming>,
    caller: &Caller,
    group: String,
    version: String,
    rest: Vec<String>,
) -> ApiResult<Response<Body>> {
    let t = parse_target(&cx, &group, &version, &rest)?;
    let q = Query::parse(req.uri().query());
    let method = req.method().clone();
    let record = crate::audit::AuditRecord {
        user: caller.user.name.clone(),
        verb: crate::audit::verb(&method, t.name.is_some(), q.flag("watch")).into(),
        api_group: group.clone(),
        resource: match &t.sub {
            Some(sub) => format!("{}/{sub}", t.rt.plural),
            None => t.rt.plural.clone(),
        },
        namespace: t.namespace.clone().unwrap_or_default(),
        name: t.name.clone().unwrap_or_default(),
        impersonator: caller.impersonator.clone(),
    };
    // A server-side apply that creates its object is authorized as a
    // create too, as kube-apiserver does.
    let creates = method == Method::PATCH
        && req
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch"))
        && t.sub.is_none()
        && t.name.as_ref().is_some_and(|name| {
            let key_ns = if t.rt.namespaced {
                record.namespace.as_str()
            } else {
                ""
            };
            cx.store.get(&t.rt.gr(), key_ns, name).is_none()
        });
    if creates {
        authorize_create_on_apply(&cx, caller, &record)?;
        cx.audit.record_implied(crate::audit::AuditRecord {
            verb: "create".into(),
            ..record.clone()
        });
    }
    cx.audit.record(record);
    let (parts, body) = read_body(req).await?;
    let ct = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if t.rt.create_only {
        return review(&cx, &t, &method, &ct, &body, caller);
    }
    let table = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|a| crate::table::wanted(a))
        .map(|_| crate::table::Include::parse(q.get("includeObject")));
    let opts = WriteOpts {
        field_manager: field_manager(&q, &parts),
        force: q.flag("force"),
        dry_run: q.get("dryRun").is_some(),
        field_validation: crate::schema::FieldValidation::parse(q.get("fieldValidation"))?,
        warnings: Default::default(),
        user: Some(caller.user.clone()),
    };
    let resp = serve_resource(cx, shutdown, &t, &q, table, method, ct, body, &opts).await?;
    Ok(with_warnings(resp, &opts))
}

/// Adds the request's warnings as kube-apiserver does: one
/// `Warning: 299 - "TEXT"` header each, which kubectl prints.
fn with_warnings(mut resp: Response<Body>, opts: &WriteOpts) -> Response<Body> {
    let warnings = opts.warnings.lock().unwrap_or_else(|e| e.into_inner());
    for w in warnings.iter() {
        if let Ok(v) = header::HeaderValue::from_str(&format!("299 - {w:?}")) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// The verb on a resource path, once the request is read.
#[allow(clippy::too_many_arguments)]
async fn serve_resource(
    cx: Arc<Cluster>,
    shutdown: watch::Receiver<bool>,
    t: &Target,
    q: &Query,
    table: Option<crate::table::Include>,
    method: Method,
    ct: String,
    body: Bytes,
    opts: &WriteOpts,
) -> ApiResult<Response<Body>> {
    let ns = t.namespace.clone().unwrap_or_default();
    let rt = t.rt.clone();
    let version = t.version.clone();
    match (&t.name, t.sub.as_deref(), method) {
        (None, None, Method::GET) => {
            if q.flag("watch") {
                watch_response(cx, shutdown, t, q, table)
            } else {
                list(&cx, t, q, table)
            }
        }
        (None, None, Method::POST) => {
            let obj = create_body(&ct, &body)?;
            if t.namespace.is_none() && rt.namespaced {
                return Err(ApiError::method_not_allowed("create"));
            }
            let created = cx.create(&rt, &version, &ns, obj, opts).await?;
            Ok(json_response(201, &created))
        }
        (None, None, Method::DELETE) => delete_collection(&cx, t, q).await,
        (Some(name), None, Method::GET) => {
            let key_ns = if rt.namespaced { ns.as_str() } else { "" };
            let obj = cx
                .store
                .get(&rt.gr(), key_ns, name)
                .ok_or_else(|| ApiError::not_found(&rt.gr(), name))?;
            let obj = Cluster::versioned(&rt, &version, &obj);
            if let Some(include) = table {
                let rv = obj["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                let t = crate::table::table(&rt, &[obj], &rv, None, include, true);
                return Ok(json_response(200, &t));
            }
            Ok(json_response(200, &obj))
        }
        (Some(name), Some("status"), Method::GET) if rt.status_subresource => {
            let key_ns = if rt.namespaced { ns.as_str() } else { "" };
            let obj = cx
                .store
                .get(&rt.gr(), key_ns, name)
                .ok_or_else(|| ApiError::not_found(&rt.gr(), name))?;
            Ok(json_response(200, &Cluster::versioned(&rt, &version, &obj)))
        }
        (Some(name), sub @ (None | Some("status")), Method::PUT) => {
            let status = sub.is_some();
            if status && !rt.status_subresource {
                return Err(ApiError::no_route());
            }
            let obj = parse_json(&body)?;
            let out = cx
                .update(&rt, &version, &ns, name, obj, status, opts)
                .await?;
            Ok(json_response(200, &out))
        }
        (Some(name), sub @ (None | Some("status")), Method::PATCH) => {
            let status = sub.is_some();
            if status && !rt.status_subresource {
                return Err(ApiError::no_route());
            }
            let ptype = match ct.as_str() {
                "application/json-patch+json" => PatchType::Json,
                "application/merge-patch+json" => PatchType::Merge,
                "application/strategic-merge-patch+json" => PatchType::Strategic,
                "application/apply-patch+yaml" | "application/apply-patch+cbor" => PatchType::Apply,
                other => return Err(ApiError::unsupported_media_type(other)),
            };
            let patch = if ptype == PatchType::Apply {
                if q.get("fieldManager").is_none() {
                    return Err(ApiError::bad_request(
                        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                    ));
                }
                parse_yaml_or_json(&body)?
            } else {
                parse_json(&body)?
            };
            let (out, created) = cx
                .patch(&rt, &version, &ns, name, ptype, patch, status, opts)
                .await?;
            Ok(json_response(if created { 201 } else { 200 }, &out))
        }
        (Some(name), None, Method::DELETE) => {
            let dopts = DeleteOpts {
                user: opts.user.clone(),
                ..delete_opts(q, &body)?
            };
            let out = cx.delete(&rt, &version, &ns, name, &dopts).await?;
            Ok(json_response(200, &out))
        }
        (Some(name), Some("log"), Method::GET) if rt.group.is_empty() && rt.plural == "pods" => {
            crate::logs::serve(cx, shutdown, &ns, name, &q.0).await
        }
        (_, _, m) => {
            if t.sub.is_some() && (t.sub.as_deref() != Some("status") || !rt.status_subresource) {
                Err(ApiError::no_route())
            } else {
                Err(ApiError::method_not_allowed(m.as_str()))
            }
        }
    }
}

/// A POST body: JSON, or the protobuf kubectl's typed clients send.
fn create_body(ct: &str, body: &[u8]) -> ApiResult<serde_json::Value> {
    match ct {
        "application/json" | "" | "*/*" => parse_json(body),
        "application/vnd.kubernetes.protobuf" => {
            crate::protobuf::decode(body).ok_or_else(|| ApiError::unsupported_media_type(ct))
        }
        _ => Err(ApiError::unsupported_media_type(ct)),
    }
}

/// A review (`crate::reviews`): only created, on its collection, and
/// answered 201 as kube-apiserver answers creates.
fn review(
    cx: &Cluster,
    t: &Target,
    method: &Method,
    ct: &str,
    body: &[u8],
    caller: &Caller,
) -> ApiResult<Response<Body>> {
    if t.name.is_some() {
        return Err(ApiError::no_route());
    }
    if *method != Method::POST {
        return Err(ApiError::method_not_allowed(method.as_str()));
    }
    if t.namespace.is_none() && t.rt.namespaced {
        return Err(ApiError::method_not_allowed("create"));
    }
    let obj = create_body(ct, body)?;
    let ns = t.namespace.as_deref().unwrap_or("");
    let answer = crate::reviews::create(cx, &t.rt, &t.version, ns, obj, &caller.user)?;
    Ok(json_response(201, &answer))
}

/// A server-side apply that creates its object needs `create` besides
/// `patch`; refused, it is worded as kube-apiserver's `withAuthorization`
/// words it: the object's name, then only the authorizer's reason.
fn authorize_create_on_apply(
    cx: &Cluster,
    caller: &Caller,
    record: &crate::audit::AuditRecord,
) -> ApiResult<()> {
    let (resource, subresource) = record
        .resource
        .split_once('/')
        .unwrap_or((&record.resource, ""));
    let attrs = crate::rbac::Attributes {
        verb: "create".into(),
        resource_request: true,
        api_group: record.api_group.clone(),
        namespace: record.namespace.clone(),
        resource: resource.into(),
        subresource: subresource.into(),
        name: record.name.clone(),
        ..Default::default()
    };
    cx.authorizer()
        .decide(&caller.user, &attrs)
        .map(drop)
        .map_err(|reason| {
            ApiError::forbidden(&crate::rbac::group_resource(&attrs), &attrs.name, &reason)
        })
}
