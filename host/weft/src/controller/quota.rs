//! Children the API server refused for a reason that waiting cures: a
//! namespace's ResourceQuota is used up (kube-apiserver answers 403
//! Forbidden, "exceeded quota: <name>, requested: ..., used: ...,
//! limited: ...", or 422 from some admission chains), or the server
//! throttles (429). The node waits in the task phase
//! `waiting-for-resources` and its create is tried again with back-off,
//! instead of failing as other refusals do (issue 44). Argo and Flyte
//! users report pods failing on quota as a top complaint; the quota
//! frees as the namespace's own pods finish, so waiting is the answer.
//!
//! The waits are kept in memory, per child: after a restart the first
//! create is simply tried again, which costs one refused request.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weft_dag::schedule::TaskObservation;
use weft_dag::status::{PluginRef, ResourceRef};

/// The task phase of a node whose child waits for a quota.
pub const WAITING_PHASE: &str = "waiting-for-resources";

/// The longest back-off between two creates of a waiting child. A
/// workflow's own children wake it sooner when they finish.
const MAX_BACKOFF: Duration = Duration::from_secs(15);

/// One child's wait.
#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    /// `ExceededQuota` or `TooManyRequests`.
    pub reason: &'static str,
    /// The API server's message (it names the quota and the usage).
    pub message: String,
    /// The quota's name, when the refusal names one.
    pub quota: Option<String>,
    /// How many creates were refused in a row.
    pub tries: u32,
    /// Since when it waits.
    pub since: Instant,
    /// No create before this.
    pub until: Instant,
}

/// Why the API server refused a create in a way that waiting cures: the
/// reason and the quota's name (when it gives one). `None` for any other
/// refusal, which fails the node as before.
pub fn refusal(code: u16, message: &str) -> Option<(&'static str, Option<String>)> {
    let quota = |marker: &str| {
        message.find(marker).map(|at| {
            let rest = &message[at + marker.len()..];
            rest.split([',', ' ']).next().unwrap_or(rest).to_string()
        })
    };
    match code {
        403 | 422 => {
            let name = quota("exceeded quota: ").or_else(|| quota("status unknown for quota: "));
            name.map(|q| ("ExceededQuota", Some(q)))
        }
        429 => Some(("TooManyRequests", None)),
        _ => None,
    }
}

/// The children that wait, by key (`ns/apiVersion/kind/name`).
#[derive(Debug, Default)]
pub struct Waits(Mutex<HashMap<String, Wait>>);

impl Waits {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Wait>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a refused create; the wait's `tries` is 1 on the first
    /// refusal of a run of them (the one an Event reports).
    pub fn refused(
        &self,
        key: &str,
        reason: &'static str,
        quota: Option<String>,
        message: &str,
    ) -> Wait {
        let now = Instant::now();
        let mut waits = self.lock();
        let (tries, since) = waits.get(key).map_or((1, now), |w| (w.tries + 1, w.since));
        let wait = Wait {
            reason,
            message: message.to_string(),
            quota,
            tries,
            since,
            until: now + backoff(tries),
        };
        waits.insert(key.to_string(), wait.clone());
        wait
    }

    /// The wait of a child, if it waits.
    pub fn get(&self, key: &str) -> Option<Wait> {
        let waits = self.lock();
        if waits.is_empty() {
            return None;
        }
        waits.get(key).cloned()
    }

    /// The child exists (or its node went away): it no longer waits.
    pub fn clear(&self, key: &str) -> Option<Wait> {
        let mut waits = self.lock();
        if waits.is_empty() {
            return None;
        }
        waits.remove(key)
    }
}

/// 1 s, 2 s, 4 s, ... up to [`MAX_BACKOFF`].
fn backoff(tries: u32) -> Duration {
    let secs = 1u64 << tries.saturating_sub(1).min(4);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}

/// The status message of a node whose child waits.
pub fn describe(w: &Wait) -> String {
    let waited = w.since.elapsed().as_secs();
    match &w.quota {
        Some(q) => format!(
            "waiting for ResourceQuota {q} ({} refused create(s), {waited}s): {}",
            w.tries, w.message
        ),
        None => format!(
            "waiting: the API server throttles creates ({} refused, {waited}s): {}",
            w.tries, w.message
        ),
    }
}

/// What a waiting node's round observes: still in progress, in
/// [`WAITING_PHASE`], with the wait's reason and message.
pub fn observation(w: &Wait, r: ResourceRef, plugin: PluginRef) -> TaskObservation {
    let mut obs = TaskObservation::in_progress(WAITING_PHASE);
    obs.reason = Some(w.reason.to_string());
    obs.message = Some(describe(w));
    obs.resource = Some(r);
    obs.plugin = Some(plugin);
    obs
}

/// The message of the first round that finds the child created after a
/// wait (it replaces the wait's).
pub fn created_after(w: &Wait) -> String {
    let what = w
        .quota
        .as_ref()
        .map_or("throttling".to_string(), |q| format!("ResourceQuota {q}"));
    format!(
        "created after waiting {}s for {what}",
        w.since.elapsed().as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_refusal_names_the_quota_and_other_refusals_are_not_waits() {
        let msg = r#"pods "w-a" is forbidden: exceeded quota: two-pods, requested: pods=1, used: pods=2, limited: pods=2"#;
        assert_eq!(
            refusal(403, msg),
            Some(("ExceededQuota", Some("two-pods".into())))
        );
        assert_eq!(
            refusal(422, msg),
            Some(("ExceededQuota", Some("two-pods".into())))
        );
        let unknown = r#"pods "p" is forbidden: status unknown for quota: q1, resource: pods"#;
        assert_eq!(
            refusal(403, unknown),
            Some(("ExceededQuota", Some("q1".into())))
        );
        assert_eq!(
            refusal(429, "Too many requests"),
            Some(("TooManyRequests", None))
        );
        let rbac =
            r#"pods is forbidden: User "system:serviceaccount:x:y" cannot create resource "pods""#;
        assert_eq!(refusal(403, rbac), None);
        assert_eq!(refusal(422, "spec.containers: Required value"), None);
        assert_eq!(refusal(409, msg), None);
    }

    #[test]
    fn refusals_in_a_row_back_off_and_keep_their_start() {
        let waits = Waits::default();
        let first = waits.refused("k", "ExceededQuota", Some("q".into()), "m1");
        assert_eq!(first.tries, 1);
        assert_eq!(first.until - first.since, Duration::from_secs(1));
        let second = waits.refused("k", "ExceededQuota", Some("q".into()), "m2");
        assert_eq!((second.tries, second.since), (2, first.since));
        assert!(second.until >= second.since + Duration::from_secs(2));
        assert_eq!(waits.get("k").unwrap().message, "m2");
        assert!(describe(&second).contains("ResourceQuota q (2 refused"));
        assert_eq!(waits.clear("k").map(|w| w.tries), Some(2));
        assert_eq!(waits.get("k"), None);
        assert_eq!(backoff(30), MAX_BACKOFF);
    }
}
