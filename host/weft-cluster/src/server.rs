//! HTTP: routing Kubernetes REST paths onto [`crate::api`], list/watch
//! encoding, discovery, and `Status` bodies for every failure.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};

use crate::api::{Cluster, DeleteOpts, PatchType, WriteOpts};
use crate::authn::Caller;
pub(crate) use crate::body::{Body, full};
use crate::registry::ResourceType;
use crate::schema::openapi;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult};
use crate::store::{EventKind, WatchEvent};

/// Bodies above this are refused, as by a real API server (3 MiB).
pub(crate) const MAX_BODY: usize = 3 * 1024 * 1024;

fn json_response(code: u16, v: &Value) -> Response<Body> {
    let body = serde_json::to_vec(v).unwrap_or_default();
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(full(body))
        .expect("static response parts")
}

fn error_response(e: &ApiError) -> Response<Body> {
    json_response(e.code, &e.to_status())
}

/// Serves one request.
pub(crate) async fn handle(
    cx: Arc<Cluster>,
    shutdown: watch::Receiver<bool>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let resp = match admit(&cx, &req) {
        Ok(caller) => route(cx, shutdown, req, caller).await,
        Err(e) => Err(e),
    };
    let resp = resp.unwrap_or_else(|e| error_response(&e));
    tracing::debug!(%method, %path, status = resp.status().as_u16(), "request");
    Ok(resp)
}

/// Who the request acts as, once it may do what it asks: impersonation
/// and then the request itself are authorized before any routing, as in
/// kube-apiserver (so a refused user gets 403 even for an unknown path).
fn admit(cx: &Cluster, req: &Request<Incoming>) -> ApiResult<Caller> {
    let authz = cx.authorizer();
    let caller = crate::authn::caller(req.headers(), &authz)?;
    if authz.mode == crate::rbac::Authorization::AlwaysAllow {
        return Ok(caller);
    }
    let attrs =
        crate::rbac::request_attributes(req.method().as_str(), req.uri().path(), req.uri().query());
    authz.check(&caller.user, &attrs)?;
    Ok(caller)
}

struct Query(HashMap<String, String>);

impl Query {
    fn parse(q: Option<&str>) -> Self {
        Query(
            form_urlencoded::parse(q.unwrap_or("").as_bytes())
                .into_owned()
                .collect(),
        )
    }
    fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str).filter(|s| !s.is_empty())
    }
    fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1"))
    }
}

async fn route(
    cx: Arc<Cluster>,
    shutdown: watch::Receiver<bool>,
    req: Request<Incoming>,
    caller: Caller,
) -> ApiResult<Response<Body>> {
    let path = req.uri().path().to_string();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let get = req.method() == Method::GET;
    match segs.as_slice() {
        [] if get => Ok(json_response(
            200,
            &json!({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]}),
        )),
        ["version"] if get => Ok(json_response(
            200,
            &json!({
                "major": "1", "minor": "32", "gitVersion": "v1.32.0-weft-dev",
                "gitCommit": "", "gitTreeState": "clean", "buildDate": "1970-01-01T00:00:00Z",
                "goVersion": "n/a", "compiler": "rustc", "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
                "emulationMajor": "1", "emulationMinor": "32",
            }),
        )),
        ["healthz" | "livez" | "readyz", ..] if get => Ok(Response::new(full("ok"))),
        ["api"] if get => Ok(json_response(200, &cx.registry.core_versions(&cx.addr))),
        ["api", v] if get => cx
            .registry
            .resource_list("", v)
            .map(|d| json_response(200, &d))
            .ok_or_else(ApiError::no_route),
        ["apis"] if get => Ok(json_response(200, &cx.registry.group_list())),
        ["apis", g] if get => cx
            .registry
            .group(g)
            .map(|d| json_response(200, &d))
            .ok_or_else(ApiError::no_route),
        ["apis", g, v] if get => cx
            .registry
            .resource_list(g, v)
            .map(|d| json_response(200, &d))
            .ok_or_else(ApiError::no_route),
        ["openapi", "v2"] if get => Ok(json_response(200, &openapi::v2(&cx.registry))),
        ["openapi", "v3"] if get => Ok(json_response(200, &openapi::v3_root(&cx.registry))),
        ["openapi", "v3", "api", v] if get => openapi::v3_group_version(&cx.registry, "", v)
            .map(|d| json_response(200, &d))
            .ok_or_else(ApiError::no_route),
        ["openapi", "v3", "apis", g, v] if get => openapi::v3_group_version(&cx.registry, g, v)
            .map(|d| json_response(200, &d))
            .ok_or_else(ApiError::no_route),
        ["api", v, rest @ ..] => {
            let (v, rest) = (v.to_string(), rest.iter().map(|s| s.to_string()).collect());
            resource(cx, shutdown, req, &caller, String::new(), v, rest).await
        }
        ["apis", g, v, rest @ ..] => {
            let (g, v, rest) = (
                g.to_string(),
                v.to_string(),
                rest.iter().map(|s| s.to_string()).collect(),
            );
            resource(cx, shutdown, req, &caller, g, v, rest).await
        }
        _ => Err(ApiError::no_route()),
    }
}

/// Where a resource path points.
struct Target {
    rt: Arc<ResourceType>,
    version: String,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn parse_target(cx: &Cluster, group: &str, version: &str, rest: &[String]) -> ApiResult<Target> {
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

async fn read_body(req: Request<Incoming>) -> ApiResult<(hyper::http::request::Parts, Bytes)> {
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

fn parse_json(bytes: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

fn parse_yaml_or_json(bytes: &[u8]) -> ApiResult<Value> {
    if let Ok(v) = serde_json::from_slice(bytes) {
        return Ok(v);
    }
    serde_yaml::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

/// The manager a write is recorded under: `fieldManager`, or the
/// user agent's program name as the real server derives it.
fn field_manager(q: &Query, parts: &hyper::http::request::Parts) -> String {
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

async fn resource(
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
            let obj = match ct.as_str() {
                "application/json" | "" | "*/*" => parse_json(&body)?,
                "application/vnd.kubernetes.protobuf" => crate::protobuf::decode(&body)
                    .ok_or_else(|| ApiError::unsupported_media_type(&ct))?,
                _ => return Err(ApiError::unsupported_media_type(&ct)),
            };
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
        .map_err(|reason| {
            ApiError::forbidden(&crate::rbac::group_resource(&attrs), &attrs.name, &reason)
        })
}

fn delete_opts(q: &Query, body: &[u8]) -> ApiResult<DeleteOpts> {
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

struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn from_query(q: &Query) -> ApiResult<Self> {
        Ok(Filter {
            labels: LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?,
            fields: FieldSelector::parse(q.get("fieldSelector").unwrap_or(""))?,
        })
    }
    fn matches(&self, obj: &Value) -> bool {
        (self.labels.is_empty() || self.labels.matches(obj)) && self.fields.matches(obj)
    }
}

fn list(
    cx: &Cluster,
    t: &Target,
    q: &Query,
    table: Option<crate::table::Include>,
) -> ApiResult<Response<Body>> {
    let filter = Filter::from_query(q)?;
    let ns = if t.rt.namespaced {
        t.namespace.as_deref()
    } else {
        None
    };
    let (items, rev) = cx.store.list(&t.rt.gr(), ns);
    if let Some(rv) = q.get("resourceVersion")
        && q.get("resourceVersionMatch") == Some("Exact")
        && rv.parse::<u64>().ok() != Some(rev)
    {
        return Err(ApiError::gone(format!(
            "resourceVersion {rv} is not the current revision; exact reads of older revisions are not supported"
        )));
    }
    let limit: usize = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
    // continue token: "<revision>/<namespace>/<name>" of the last item sent.
    let (list_rev, after) = match q.get("continue") {
        Some(tok) => {
            use base64::Engine;
            let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(tok)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
            let mut it = raw.splitn(3, '/');
            let r: u64 = it.next().and_then(|r| r.parse().ok()).unwrap_or(0);
            if r < cx.store.compacted() {
                return Err(ApiError::gone(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                ));
            }
            let ns = it.next().unwrap_or("").to_string();
            let name = it.next().unwrap_or("").to_string();
            (r, Some((ns, name)))
        }
        None => (rev, None),
    };
    let mut out = Vec::new();
    let mut next = None;
    let mut remaining = 0u64;
    for item in items.iter() {
        let key = (
            item["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            item["metadata"]["name"].as_str().unwrap_or("").to_string(),
        );
        if let Some(a) = &after
            && key <= *a
        {
            continue;
        }
        if !filter.matches(item) {
            continue;
        }
        if next.is_some() {
            remaining += 1;
            continue;
        }
        if limit > 0 && out.len() == limit {
            remaining = 1;
            next = out.last().map(|o: &Arc<Value>| {
                use base64::Engine;
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!(
                    "{list_rev}/{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap_or(""),
                    o["metadata"]["name"].as_str().unwrap_or("")
                ))
            });
            continue;
        }
        out.push(Cluster::versioned(&t.rt, &t.version, item));
    }
    if let Some(include) = table {
        let t = crate::table::table(
            &t.rt,
            &out,
            &list_rev.to_string(),
            next.as_deref(),
            include,
            true,
        );
        return Ok(json_response(200, &t));
    }
    let mut metadata = json!({"resourceVersion": list_rev.to_string()});
    if let Some(n) = next {
        metadata["continue"] = n.into();
        // Exact here: the count is taken from the same state as the page.
        metadata["remainingItemCount"] = remaining.into();
    }
    // A list's items carry no apiVersion and kind: the list says them once.
    let items: Vec<Value> = out
        .iter()
        .map(|o| {
            let mut item = (**o).clone();
            if let Some(m) = item.as_object_mut() {
                m.remove("apiVersion");
                m.remove("kind");
            }
            item
        })
        .collect();
    let list = json!({
        "kind": t.rt.list_kind,
        "apiVersion": t.rt.api_version(&t.version),
        "metadata": metadata,
        "items": items,
    });
    Ok(json_response(200, &list))
}

async fn delete_collection(cx: &Cluster, t: &Target, q: &Query) -> ApiResult<Response<Body>> {
    let filter = Filter::from_query(q)?;
    let ns = if t.rt.namespaced {
        t.namespace.as_deref()
    } else {
        None
    };
    let opts = delete_opts(q, b"")?;
    let (items, _) = cx.store.list(&t.rt.gr(), ns);
    let mut deleted = Vec::new();
    for item in items.iter().filter(|i| filter.matches(i)) {
        let name = item["metadata"]["name"].as_str().unwrap_or("");
        let ins = item["metadata"]["namespace"].as_str().unwrap_or("");
        match cx.delete(&t.rt, &t.version, ins, name, &opts).await {
            Ok(o) => deleted.push(o),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({
        "kind": t.rt.list_kind,
        "apiVersion": t.rt.api_version(&t.version),
        "metadata": {"resourceVersion": cx.store.revision().to_string()},
        "items": deleted.iter().map(|o| &**o).collect::<Vec<_>>(),
    });
    Ok(json_response(200, &list))
}

fn event_line(kind: &str, obj: &Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

/// Starts a watch: a chunked stream of `{"type": ..., "object": ...}` lines.
fn watch_response(
    cx: Arc<Cluster>,
    mut shutdown: watch::Receiver<bool>,
    t: &Target,
    q: &Query,
    table: Option<crate::table::Include>,
) -> ApiResult<Response<Body>> {
    let filter = Filter::from_query(q)?;
    let rt = t.rt.clone();
    let version = t.version.clone();
    let gr = rt.gr();
    let ns_filter = if rt.namespaced {
        t.namespace.clone()
    } else {
        None
    };
    let bookmarks = q.flag("allowWatchBookmarks");
    let initial_events_end = q.flag("sendInitialEvents") && bookmarks;
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let rv: Option<u64> = match q.get("resourceVersion") {
        None | Some("0") => None,
        // A streaming list starts from the current state whatever the
        // resourceVersion (NotOlderThan is satisfied by the newest).
        Some(_) if q.flag("sendInitialEvents") => None,
        Some(s) => Some(
            s.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion: {s}")))?,
        ),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    /// What a watch sends before live changes, produced as it is sent.
    type Backlog = Box<dyn Iterator<Item = Arc<WatchEvent>> + Send>;
    // Subscribe before reading state so nothing falls between the two.
    let (backlog, mut live, mut last) = match rv {
        Some(rv) => match cx.store.subscribe_from(rv) {
            Ok(sub) => {
                let (gr, ns) = (gr.clone(), ns_filter.clone());
                let parsed = sub
                    .backlog
                    .into_iter()
                    .filter(move |p| p.is_for(&gr, ns.as_deref()))
                    .filter_map(|p| p.event().map(Arc::new));
                (Box::new(parsed) as Backlog, sub.rx, rv)
            }
            Err(oldest) => {
                let status = ApiError::too_old(rv, oldest).to_status();
                let line = event_line("ERROR", &status);
                let body = StreamBody::new(futures_util::stream::iter([Ok::<_, Infallible>(
                    Frame::data(line),
                )]));
                return Ok(stream_response(body.boxed()));
            }
        },
        None => {
            let live = cx.store.subscribe();
            let (items, rev) = cx.store.list(&gr, ns_filter.as_deref());
            let initial: Vec<Arc<WatchEvent>> = items
                .into_iter()
                .map(|o| {
                    Arc::new(WatchEvent {
                        rev: 0,
                        kind: EventKind::Added,
                        gr: gr.clone(),
                        namespace: String::new(),
                        name: String::new(),
                        object: o,
                        prev: None,
                    })
                })
                .collect();
            (Box::new(initial.into_iter()) as Backlog, live, rev)
        }
    };
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut headers = true;
        let mut send = |ev: &WatchEvent| -> Option<Bytes> {
            if ev.rev != 0
                && (ev.gr != gr || ns_filter.as_ref().is_some_and(|n| *n != ev.namespace))
            {
                return None;
            }
            let now = filter.matches(&ev.object);
            let before = ev.prev.as_ref().is_some_and(|p| filter.matches(p));
            let kind = match ev.kind {
                EventKind::Deleted if now || before => "DELETED",
                EventKind::Deleted => return None,
                EventKind::Added if now => "ADDED",
                EventKind::Modified if now && (before || ev.prev.is_none()) => "MODIFIED",
                EventKind::Modified if now => "ADDED",
                EventKind::Modified if before => "DELETED",
                _ => return None,
            };
            let obj = Cluster::versioned(&rt, &version, &ev.object);
            if let Some(include) = table {
                let rv = obj["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                let t = crate::table::table(&rt, &[obj], &rv, None, include, headers);
                headers = false;
                return Some(event_line(kind, &t));
            }
            Some(event_line(kind, &obj))
        };
        for ev in backlog {
            if let Some(line) = send(&ev)
                && tx.send(line).await.is_err()
            {
                return;
            }
            if ev.rev > last {
                last = ev.rev;
            }
        }
        if initial_events_end {
            // Streaming lists (sendInitialEvents=true) learn the initial
            // state is complete from this bookmark.
            let bm = json!({"kind": rt.kind, "apiVersion": rt.api_version(&version),
                            "metadata": {"resourceVersion": last.to_string(),
                                         "annotations": {"k8s.io/initial-events-end": "true"}}});
            if tx.send(event_line("BOOKMARK", &bm)).await.is_err() {
                return;
            }
        }
        let mut ticker = tokio::time::interval(Duration::from_secs(30));
        ticker.tick().await;
        loop {
            tokio::select! {
                ev = live.recv() => match ev {
                    Ok(ev) => {
                        if ev.rev <= last {
                            continue;
                        }
                        last = ev.rev;
                        if let Some(line) = send(&ev)
                            && tx.send(line).await.is_err()
                        {
                            return;
                        }
                    }
                    // Fell behind: end the watch; the client resumes from
                    // its last resourceVersion and the history fills the gap.
                    Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = ticker.tick(), if bookmarks => {
                    let bm = json!({"kind": rt.kind, "apiVersion": rt.api_version(&version),
                                    "metadata": {"resourceVersion": last.to_string()}});
                    if tx.send(event_line("BOOKMARK", &bm)).await.is_err() {
                        return;
                    }
                }
                _ = &mut deadline => return,
                _ = shutdown.changed() => return,
                _ = tx.closed() => return,
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    Ok(stream_response(StreamBody::new(stream).boxed()))
}

fn stream_response(body: Body) -> Response<Body> {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::TRANSFER_ENCODING, "chunked")
        .body(body)
        .expect("static response parts")
}
