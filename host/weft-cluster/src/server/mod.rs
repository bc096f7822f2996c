//! HTTP: routing Kubernetes REST paths onto [`crate::api`], list/watch
//! encoding, discovery, and `Status` bodies for every failure.
//!
//! This module authorizes a request and routes its path: discovery,
//! version and health here; resource paths to `resource`, which reads the
//! request (`request`) and serves its verb, lists (`list`) and watches
//! (`watches`) included.

mod list;
mod request;
mod resource;
mod watches;

use std::convert::Infallible;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, header};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::api::Cluster;
use crate::authn::Caller;
pub(crate) use crate::body::{Body, full};
use crate::schema::openapi;
use crate::status::{ApiError, ApiResult};

use self::resource::resource;

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
