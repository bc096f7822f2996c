//! SubjectAccessReviews, cached for a few seconds as kube-apiserver's
//! webhook authorizer caches its answers: a page of the console makes many
//! calls, and a RoleBinding created now is honoured within the cache's
//! lifetime, with no restart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use tonic::Status;

use super::Access;

/// The API server's answer for one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Allowed.
    pub allowed: bool,
    /// The authorizer's reason (which binding allowed; often empty on a
    /// denial).
    pub reason: String,
}

impl Decision {
    /// The decision in a user's words, naming who, what and where.
    pub fn describe(&self, user: &str, access: &Access, namespace: Option<&str>) -> String {
        let verdict = if self.allowed { "may" } else { "may not" };
        let place = namespace.map_or("across all namespaces".to_string(), |n| {
            format!("in namespace {n:?}")
        });
        let mut s = format!(
            "user {user:?} {verdict} {} {} {place}",
            access.verb,
            access.resource_name()
        );
        if !self.reason.is_empty() {
            s = format!("{s} ({})", self.reason);
        } else if !self.allowed {
            s.push_str(" (no RoleBinding or ClusterRoleBinding grants it)");
        }
        s
    }
}

type Key = (String, Vec<String>, Access, Option<String>);

/// The reviewer and its cache.
pub struct Rbac {
    client: kube::Client,
    ttl: Duration,
    cache: Mutex<HashMap<Key, (Instant, Decision)>>,
}

impl Rbac {
    /// Decisions are kept for `ttl`.
    pub fn new(client: kube::Client, ttl: Duration) -> Self {
        Rbac {
            client,
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `user` in `groups` may `access` in `namespace` (`None`: in
    /// every namespace). A review that cannot be made is UNAVAILABLE: the
    /// call is refused, never let through.
    pub async fn review(
        &self,
        user: &str,
        groups: &[String],
        access: &Access,
        namespace: Option<&str>,
    ) -> Result<Decision, Status> {
        let key: Key = (
            user.to_string(),
            groups.to_vec(),
            *access,
            namespace.map(String::from),
        );
        if let Some(d) = self.cached(&key) {
            return Ok(d);
        }
        let decision = self.ask(user, groups, access, namespace).await?;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.retain(|_, (at, _)| at.elapsed() < self.ttl);
        cache.insert(key, (Instant::now(), decision.clone()));
        Ok(decision)
    }

    fn cached(&self, key: &Key) -> Option<Decision> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(key)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, d)| d.clone())
    }

    async fn ask(
        &self,
        user: &str,
        groups: &[String],
        access: &Access,
        namespace: Option<&str>,
    ) -> Result<Decision, Status> {
        let mut groups = groups.to_vec();
        // kube-apiserver puts every authenticated user in this group.
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.to_string()),
                groups: Some(groups),
                resource_attributes: Some(ResourceAttributes {
                    namespace: namespace.map(String::from),
                    verb: Some(access.verb.into()),
                    group: Some(access.group.into()),
                    resource: Some(access.resource.into()),
                    subresource: (!access.subresource.is_empty())
                        .then(|| access.subresource.into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                Status::unavailable(format!(
                    "cannot check access with a SubjectAccessReview, so the call was not run: {e}"
                ))
            })?;
        let status = answer.status.unwrap_or_default();
        let reason = match (status.reason, status.evaluation_error) {
            (Some(r), _) if !r.is_empty() => r,
            (_, Some(e)) if !e.is_empty() => e,
            _ => String::new(),
        };
        Ok(Decision {
            allowed: status.allowed && status.denied != Some(true),
            reason,
        })
    }
}
