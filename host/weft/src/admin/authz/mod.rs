//! Who may do what through the admin API.
//!
//! With `kubernetes` set, the cluster decides: every call is a
//! SubjectAccessReview for the caller on the resource the call touches
//! ([`access`]), so a RoleBinding grants it and `kubectl auth can-i`
//! predicts the answer ([`rbac`]). The `principals` map (principal →
//! namespaces) is the older, file-based check: the only one without
//! `kubernetes`, and with it a fallback for static-token principals it
//! names (a robot's token need not be a Kubernetes user).

use std::collections::BTreeMap;

use serde::Deserialize;
use tonic::Status;

use crate::admin::chain::Caller;
use crate::admin::identity::Via;

pub mod access;
pub mod rbac;

pub use access::Access;

/// How calls are authorized (`authorization` in the `--admin-config` file).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Authorization {
    /// Principal → namespaces; `"*"` is every namespace. A call with no
    /// principal is checked as `anonymous`.
    #[serde(default)]
    pub principals: BTreeMap<String, Vec<String>>,
    /// Let the cluster's RBAC decide, with SubjectAccessReviews.
    #[serde(default)]
    pub kubernetes: Option<KubernetesAuthorization>,
}

/// The SubjectAccessReview authorizer's settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesAuthorization {
    /// How long a decision is reused (allowed or denied) before the API
    /// server is asked again: the most a new RoleBinding waits.
    #[serde(default = "default_cache_seconds")]
    pub cache_seconds: u64,
}

fn default_cache_seconds() -> u64 {
    5
}

impl Default for KubernetesAuthorization {
    fn default() -> Self {
        KubernetesAuthorization {
            cache_seconds: default_cache_seconds(),
        }
    }
}

impl Authorization {
    /// Whether `caller` may act on `namespace` by the `principals` map
    /// (`None`: every namespace, as a cluster-wide list asks).
    pub(super) fn check(&self, caller: &Caller, namespace: Option<&str>) -> Result<(), Status> {
        let who = caller.principal.as_deref().unwrap_or("anonymous");
        let Some(allowed) = self.principals.get(who) else {
            return Err(match &caller.principal {
                None => unauthenticated(),
                Some(p) => {
                    Status::permission_denied(format!("principal {p} may not act on any namespace"))
                }
            });
        };
        let ok = allowed
            .iter()
            .any(|a| a == "*" || Some(a.as_str()) == namespace);
        if ok {
            caller.decide(format!("allowed by the principals map to {who}"));
            return Ok(());
        }
        Err(Status::permission_denied(format!(
            "principal {who} may not act on {} (allowed: {})",
            namespace.map_or("every namespace".to_string(), |n| format!("namespace {n}")),
            allowed.join(", ")
        )))
    }
}

/// The admin API's authorizer: the configuration and, with `kubernetes`,
/// the reviewer.
pub struct Authorizer {
    config: Option<Authorization>,
    rbac: Option<rbac::Rbac>,
}

impl Authorizer {
    /// The authorizer `config` asks for; `client` runs the reviews.
    pub fn new(config: Option<Authorization>, client: kube::Client) -> Self {
        let rbac = config
            .as_ref()
            .and_then(|c| c.kubernetes.as_ref())
            .map(|k| rbac::Rbac::new(client, std::time::Duration::from_secs(k.cache_seconds)));
        Authorizer { config, rbac }
    }

    /// Whether the cluster's RBAC decides.
    pub fn by_rbac(&self) -> bool {
        self.rbac.is_some()
    }

    /// Whether `caller` may make its call on `namespace` (`None`: across
    /// all namespaces). Records the decision for the audit.
    pub async fn check(&self, caller: &Caller, namespace: Option<&str>) -> Result<(), Status> {
        let Some(config) = &self.config else {
            return Ok(());
        };
        let Some(rbac) = &self.rbac else {
            return config.check(caller, namespace);
        };
        let by_file = caller.via == Via::Middleware
            && caller
                .principal
                .as_ref()
                .is_some_and(|p| config.principals.contains_key(p));
        if by_file {
            return config.check(caller, namespace);
        }
        let Some(user) = &caller.principal else {
            return Err(unauthenticated());
        };
        let access = Access::of(caller.method);
        let decision = rbac
            .review(user, &caller.groups, &access, namespace)
            .await?;
        caller.decide(decision.describe(user, &access, namespace));
        if decision.allowed {
            Ok(())
        } else {
            Err(Status::permission_denied(
                decision.describe(user, &access, namespace),
            ))
        }
    }
}

fn unauthenticated() -> Status {
    Status::unauthenticated(
        "the admin API requires a principal; sign in (weft login, or the console) or send credentials an authentication middleware accepts",
    )
}
