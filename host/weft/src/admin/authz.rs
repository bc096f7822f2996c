//! Which namespaces each principal may act on: the admin API's own
//! authorization, from the `--admin-config` file.

use std::collections::BTreeMap;

use serde::Deserialize;
use tonic::Status;

use crate::admin::chain::Caller;

/// Which namespaces each principal may act on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Authorization {
    /// Principal → namespaces; `"*"` is every namespace. A call with no
    /// principal is checked as `anonymous`.
    pub principals: BTreeMap<String, Vec<String>>,
}

impl Authorization {
    /// Whether `caller` may act on `namespace` (`None`: every namespace, as
    /// a cluster-wide list asks).
    pub(super) fn check(&self, caller: &Caller, namespace: Option<&str>) -> Result<(), Status> {
        let who = caller.principal.as_deref().unwrap_or("anonymous");
        let Some(allowed) = self.principals.get(who) else {
            return Err(match &caller.principal {
                None => Status::unauthenticated(
                    "the admin API requires a principal; send credentials an authentication middleware accepts",
                ),
                Some(p) => {
                    Status::permission_denied(format!("principal {p} may not act on any namespace"))
                }
            });
        };
        let ok = allowed
            .iter()
            .any(|a| a == "*" || Some(a.as_str()) == namespace);
        if ok {
            return Ok(());
        }
        Err(Status::permission_denied(format!(
            "principal {who} may not act on {} (allowed: {})",
            namespace.map_or("every namespace".to_string(), |n| format!("namespace {n}")),
            allowed.join(", ")
        )))
    }
}
