//! An audit log, as kube-apiserver keeps one: who asked for which verb on
//! which resource, in which namespace. By default the dev cluster
//! authorizes nothing, so this is how a test learns which permissions a
//! client really uses (and so whether a Role grants too little or too
//! much); with RBAC on it records only what was allowed.
//!
//! The user is the bearer token a client sends (`token:` in a kubeconfig):
//! the dev cluster does not authenticate, so a token is just a name (see
//! [`crate::authn`]). An impersonating request is recorded as the user it
//! impersonates, with the token's user as `impersonator`.

use std::sync::Mutex;

use hyper::Method;

/// One resource request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AuditRecord {
    /// The bearer token, or without one `system:anonymous`
    /// (`system:admin` with RBAC on); the impersonated user when the
    /// request impersonates one.
    pub user: String,
    /// Kubernetes' verb: get, list, watch, create, update, patch, delete,
    /// deletecollection.
    pub verb: String,
    /// The API group (`""` for core).
    pub api_group: String,
    /// The resource's plural, with `/subresource` when there is one.
    pub resource: String,
    /// The namespace (`""` for cluster-scoped and all-namespace requests).
    pub namespace: String,
    /// The object's name, for requests about one object.
    pub name: String,
    /// The user who sent an impersonating request (`kubectl --as`), which
    /// `user` then names; `None` without impersonation.
    pub impersonator: Option<String>,
}

/// At most this many records are kept (the oldest go first).
const CAP: usize = 100_000;

/// The log.
#[derive(Debug, Default)]
/// Each record with its arrival time, `None` for a record a request
/// implies beside its own (a server-side apply that creates is also a
/// create), so that the request log counts each request once.
pub(crate) struct AuditLog(Mutex<Vec<(Option<std::time::SystemTime>, AuditRecord)>>);

/// Kubernetes' verb for a method on a collection or an object.
pub(crate) fn verb(method: &Method, named: bool, watch: bool) -> &'static str {
    match (method.as_str(), named) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

impl AuditLog {
    pub(crate) fn record(&self, r: AuditRecord) {
        self.push(Some(std::time::SystemTime::now()), r);
    }

    /// A record implied by the request recorded next (not a request).
    pub(crate) fn record_implied(&self, r: AuditRecord) {
        self.push(None, r);
    }

    fn push(&self, at: Option<std::time::SystemTime>, r: AuditRecord) {
        let mut log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() >= CAP {
            log.drain(..CAP / 10);
        }
        log.push((at, r));
    }

    pub(crate) fn records(&self) -> Vec<AuditRecord> {
        let log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        log.iter().map(|(_, r)| r.clone()).collect()
    }

    /// The records with when each request arrived: a request log, e.g.
    /// to check a client's rate.
    pub(crate) fn timed(&self) -> Vec<(std::time::SystemTime, AuditRecord)> {
        let log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        log.iter()
            .filter_map(|(at, r)| Some(((*at)?, r.clone())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_as_kubernetes_names_them() {
        assert_eq!(verb(&Method::GET, false, true), "watch");
        assert_eq!(verb(&Method::GET, true, false), "get");
        assert_eq!(verb(&Method::GET, false, false), "list");
        assert_eq!(verb(&Method::POST, false, false), "create");
        assert_eq!(verb(&Method::PUT, true, false), "update");
        assert_eq!(verb(&Method::PATCH, true, false), "patch");
        assert_eq!(verb(&Method::DELETE, true, false), "delete");
        assert_eq!(verb(&Method::DELETE, false, false), "deletecollection");
    }
}
