//! The admin API's middleware chain, in flyteadmin's order: built-in
//! recovery, request ids and metrics first, then the Wasm plugins of the
//! registry's `unary-middleware` slot in the configured order.
//!
//! tonic's interceptors see neither the method nor the message, and a
//! middleware may ask for both, so the chain runs inside every handler
//! through [`Chain::call`]: one place for recovery, ids, metrics, plugins
//! and the outcome hook, shared by unary and streaming methods.

use std::collections::BTreeMap;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::FutureExt as _;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Request, Response, Status};
use weft_plugin::registry::UNARY_MIDDLEWARE;
use weft_plugin::{
    CallError, MiddlewareCall, MiddlewarePlugin, Plugin, Registry, Verdict, manifest::FailStrategy,
};

use crate::metrics::Metrics;

/// The request id every call carries, echoed in the answer's metadata.
pub const REQUEST_ID: &str = "x-request-id";
pub use crate::admin::identity::PRINCIPAL;
use crate::admin::identity::{AUTHENTICATED_BY, Authenticator, GROUPS, Via};
/// Metadata keys with this prefix are the host's and its middleware's to
/// set: a client cannot send them (they are removed before the chain).
pub const RESERVED_PREFIX: &str = "x-weft-";

/// The authorization decision of a call, for the audit's outcome hook.
pub const DECISION: &str = "x-weft-decision";

/// Who is calling, as the chain established it: what a handler may use.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// The call's request id.
    pub request_id: String,
    /// The authenticated principal, when the host or a middleware set one.
    pub principal: Option<String>,
    /// The principal's groups.
    pub groups: Vec<String>,
    /// Who vouched for the principal.
    pub via: Via,
    /// The method called (`/weft.admin.v1.AdminService/Name`).
    pub method: &'static str,
    /// The metadata after every middleware's edits.
    pub metadata: BTreeMap<String, String>,
    /// The authorization's decision, in words (the audit reads it).
    pub decision: Arc<Mutex<Option<String>>>,
}

impl Caller {
    /// Records the authorization's decision for the audit.
    pub fn decide(&self, decision: String) {
        *self.decision.lock().unwrap_or_else(|p| p.into_inner()) = Some(decision);
    }

    fn decision(&self) -> Option<String> {
        self.decision
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Which middleware run, in order.
#[derive(Debug, Clone, Default)]
pub enum Selection {
    /// Every plugin in the `unary-middleware` slot, in the registry's order.
    #[default]
    Slot,
    /// Exactly these plugins, in this order. A named plugin that is not
    /// loaded fails every call closed: a missing auth plugin must not open
    /// the API.
    Named(Vec<String>),
}

/// The chain: shared by every handler of the admin service.
pub struct Chain {
    registry: Arc<Registry>,
    selection: Selection,
    metrics: Arc<Metrics>,
    authn: Option<Arc<Authenticator>>,
}

/// One link of the resolved chain.
enum Link {
    Plugin(Arc<MiddlewarePlugin>),
    Missing(String),
}

impl Chain {
    /// A chain over `registry`'s middleware.
    pub fn new(registry: Arc<Registry>, selection: Selection, metrics: Arc<Metrics>) -> Self {
        Chain {
            registry,
            selection,
            metrics,
            authn: None,
        }
    }

    /// The host's authenticators run before the middleware.
    pub fn with_authentication(mut self, authn: Option<Arc<Authenticator>>) -> Self {
        self.authn = authn;
        self
    }

    /// The chain as it stands now: a registry snapshot, so a plugin swapped
    /// mid-call serves the next call and this one finishes on the old one.
    fn links(&self) -> Vec<Link> {
        let snapshot = self.registry.snapshot();
        match &self.selection {
            Selection::Slot => snapshot
                .middleware(UNARY_MIDDLEWARE)
                .iter()
                .cloned()
                .map(Link::Plugin)
                .collect(),
            Selection::Named(names) => names
                .iter()
                .map(|n| match snapshot.plugins().get(n) {
                    Some(Plugin::Middleware(m)) => Link::Plugin(m.clone()),
                    _ => Link::Missing(n.clone()),
                })
                .collect(),
        }
    }

    /// Serves one call: assigns its request id, runs the middleware, then
    /// `handler`; a panic anywhere becomes INTERNAL and the server lives.
    /// Records the call's metrics and hands its outcome to the plugins that
    /// observe outcomes.
    pub async fn call<Req, Resp, F, Fut>(
        &self,
        method: &'static str,
        request: Request<Req>,
        handler: F,
    ) -> Result<Response<Resp>, Status>
    where
        Req: serde::Serialize,
        F: FnOnce(Caller, Req) -> Fut,
        Fut: Future<Output = Result<Resp, Status>>,
    {
        let started = Instant::now();
        let peer = request.remote_addr().map(|a| a.to_string());
        let (metadata, _, message) = request.into_parts();
        let mut md = client_metadata(&metadata);
        let request_id = md
            .get(REQUEST_ID)
            .filter(|v| !v.is_empty())
            .cloned()
            .unwrap_or_else(new_request_id);
        md.insert(REQUEST_ID.into(), request_id.clone());
        let links = self.links();

        // An error carries the metadata the middleware left when it came
        // from the service, so the outcome names the principal it refused.
        let outcome = AssertUnwindSafe(async {
            let mut md = md;
            if let Some(authn) = &self.authn {
                authn.authenticate(&mut md).await.map_err(|s| (s, None))?;
            }
            // A cookie is a credential: no middleware sees it.
            md.remove("cookie");
            let md = self
                .admit(method, md, peer.clone(), &links, &message)
                .await
                .map_err(|s| (s, None))?;
            let caller = caller_of(method, md, &request_id);
            let mut observed = caller.metadata.clone();
            let slot = caller.clone();
            let result = handler(caller, message).await;
            if let Some(d) = slot.decision() {
                observed.insert(DECISION.into(), d);
            }
            match result {
                Ok(r) => Ok((r, observed)),
                Err(s) => Err((s, Some(observed))),
            }
        })
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            tracing::error!(method, request_id, panic = %what, "admin handler panicked");
            Err((
                Status::internal(format!(
                    "internal error serving {method} (request {request_id}); the server is still up"
                )),
                None,
            ))
        });

        let code = match &outcome {
            Ok(_) => Code::Ok,
            Err((s, _)) => s.code(),
        };
        self.metrics
            .grpc_request(method, code_name(code), started.elapsed());
        let (seen, message) = match &outcome {
            Ok((_, md)) => (md.clone(), String::new()),
            Err((s, Some(md))) => (md.clone(), s.message().to_string()),
            Err((s, None)) => {
                let mut md = client_metadata(&metadata);
                md.insert(REQUEST_ID.into(), request_id.clone());
                (md, s.message().to_string())
            }
        };
        self.observe(method, &links, seen, peer, code, message);

        let id = MetadataValue::try_from(request_id.as_str()).ok();
        match outcome {
            Ok((resp, _)) => {
                let mut resp = Response::new(resp);
                if let Some(id) = id {
                    resp.metadata_mut().insert(REQUEST_ID, id);
                }
                Ok(resp)
            }
            Err((mut status, _)) => {
                if let Some(id) = id {
                    status.metadata_mut().insert(REQUEST_ID, id);
                }
                Err(status)
            }
        }
    }

    /// Runs the Wasm middleware in order; each sees the metadata as the
    /// ones before it left it.
    async fn admit<Req: serde::Serialize>(
        &self,
        method: &'static str,
        md: BTreeMap<String, String>,
        peer: Option<String>,
        links: &[Link],
        message: &Req,
    ) -> Result<BTreeMap<String, String>, Status> {
        if links.is_empty() {
            return Ok(md);
        }
        let wants_body = links
            .iter()
            .any(|l| matches!(l, Link::Plugin(p) if p.manifest().middleware.request_body));
        let body = if wants_body {
            Some(serde_json::to_string(message).map_err(|e| {
                Status::internal(format!("cannot show the request to middleware: {e}"))
            })?)
        } else {
            None
        };
        let plugins: Vec<Result<Arc<MiddlewarePlugin>, String>> = links
            .iter()
            .map(|l| match l {
                Link::Plugin(p) => Ok(p.clone()),
                Link::Missing(n) => Err(n.clone()),
            })
            .collect();
        let metrics = self.metrics.clone();
        let registry = self.registry.clone();
        // Plugin calls are synchronous and may run to their deadline:
        // off the async workers.
        tokio::task::spawn_blocking(move || {
            let mut call = MiddlewareCall {
                method: method.into(),
                metadata: md.into_iter().collect(),
                peer,
                request: body,
            };
            for plugin in plugins {
                let plugin = plugin.map_err(|name| {
                    Status::unavailable(format!(
                        "middleware {name} is configured but not loaded; the call was not run"
                    ))
                })?;
                if registry.circuit_open(plugin.digest()) {
                    open_circuit(&plugin)?;
                    continue;
                }
                let started = Instant::now();
                let verdict = plugin.on_request(&call);
                metrics.plugin_call(plugin.name(), "on-request", started.elapsed());
                registry.record_middleware_call(&plugin, verdict.as_ref().err());
                match verdict {
                    Ok(Verdict::Proceed { set, remove }) => apply(&mut call.metadata, set, remove),
                    Ok(Verdict::Reject { code, message }) => {
                        return Err(Status::new(
                            Code::from_i32(weft_plugin::plugin::grpc_code(code)),
                            message,
                        ));
                    }
                    Err(e) => fault(&metrics, &plugin, &e)?,
                }
            }
            Ok(call.metadata.into_iter().collect())
        })
        .await
        .map_err(|e| Status::internal(format!("middleware chain failed: {e}")))?
    }

    /// Gives the outcome of a call to the plugins that asked for it
    /// (manifest `observeOutcome`), after the answer and off its path.
    fn observe(
        &self,
        method: &'static str,
        links: &[Link],
        mut md: BTreeMap<String, String>,
        peer: Option<String>,
        code: Code,
        message: String,
    ) {
        let observers: Vec<Arc<MiddlewarePlugin>> = links
            .iter()
            .filter_map(|l| match l {
                Link::Plugin(p) if p.manifest().middleware.observe_outcome => Some(p.clone()),
                _ => None,
            })
            .collect();
        if observers.is_empty() {
            return;
        }
        md.insert("x-weft-phase".into(), "outcome".into());
        md.insert("x-weft-outcome".into(), code_name(code).into());
        md.insert("x-weft-outcome-message".into(), message);
        let call = MiddlewareCall {
            method: method.into(),
            metadata: md.into_iter().collect(),
            peer,
            request: None,
        };
        let metrics = self.metrics.clone();
        tokio::task::spawn_blocking(move || {
            for plugin in observers {
                let started = Instant::now();
                let result = plugin.on_request(&call);
                metrics.plugin_call(plugin.name(), "on-outcome", started.elapsed());
                if let Err(e) = result {
                    metrics.plugin_failure(plugin.name(), "on-outcome", e.metric_label());
                    tracing::warn!(plugin = plugin.name(), error = %e, "outcome hook failed");
                }
            }
        });
    }
}

/// The caller the metadata names, after authentication and middleware.
fn caller_of(method: &'static str, md: BTreeMap<String, String>, request_id: &str) -> Caller {
    let groups = md
        .get(GROUPS)
        .map(|g| {
            g.split(',')
                .filter(|g| !g.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    Caller {
        request_id: md
            .get(REQUEST_ID)
            .cloned()
            .unwrap_or(request_id.to_string()),
        principal: md.get(PRINCIPAL).cloned(),
        groups,
        via: Via::parse(md.get(AUTHENTICATED_BY).map(String::as_str)),
        method,
        metadata: md,
        decision: Arc::default(),
    }
}

/// A middleware faulted (trap, deadline, memory): its manifest's failure
/// strategy decides whether the call goes on.
fn fault(metrics: &Metrics, plugin: &MiddlewarePlugin, e: &CallError) -> Result<(), Status> {
    metrics.plugin_failure(plugin.name(), "on-request", e.metric_label());
    match plugin.fail_strategy() {
        FailStrategy::Closed => {
            tracing::error!(plugin = plugin.name(), error = %e, "middleware failed closed");
            Err(Status::unavailable(format!(
                "middleware {} failed and fails closed, so the call was not run: {e}",
                plugin.name()
            )))
        }
        FailStrategy::Open => {
            tracing::warn!(plugin = plugin.name(), error = %e, "middleware failed open; the call goes on");
            Ok(())
        }
    }
}

/// A middleware whose circuit is open (it kept faulting and had no
/// earlier version): not called; its failure strategy decides.
fn open_circuit(plugin: &MiddlewarePlugin) -> Result<(), Status> {
    match plugin.fail_strategy() {
        FailStrategy::Closed => Err(Status::unavailable(format!(
            "middleware {} is switched off by the circuit breaker after repeated faults and fails closed, so the call was not run",
            plugin.name()
        ))),
        FailStrategy::Open => Ok(()),
    }
}

fn apply(md: &mut Vec<(String, String)>, set: Vec<(String, String)>, remove: Vec<String>) {
    md.retain(|(k, _)| !remove.contains(k));
    for (k, v) in set {
        let k = k.to_ascii_lowercase();
        match md.iter_mut().find(|(key, _)| *key == k) {
            Some(slot) => slot.1 = v,
            None => md.push((k, v)),
        }
    }
}

/// The client's text metadata, without the reserved `x-weft-` keys (only
/// the host and its middleware set those) and without gRPC's own headers.
fn client_metadata(md: &MetadataMap) -> BTreeMap<String, String> {
    md.iter()
        .filter_map(|kv| match kv {
            tonic::metadata::KeyAndValueRef::Ascii(k, v) => {
                let k = k.as_str();
                let own = k.starts_with(RESERVED_PREFIX)
                    || k.starts_with("grpc-")
                    || matches!(k, "te" | "content-type" | "user-agent");
                (!own).then(|| Some((k.to_string(), v.to_str().ok()?.to_string())))?
            }
            tonic::metadata::KeyAndValueRef::Binary(..) => None,
        })
        .collect()
}

/// A fresh request id: 64 random bits from the OS-seeded hasher keys.
fn new_request_id() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    format!("{:016x}", h.finish())
}

/// The canonical name of a gRPC code, as in `grpc-status` documentation.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests;
