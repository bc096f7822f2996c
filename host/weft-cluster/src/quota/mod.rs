//! ResourceQuota for pods, judged as kube-apiserver's `ResourceQuota`
//! admission plugin and counted as kube-controller-manager's quota
//! controller counts. A test (or a workflow engine that waits on a full
//! quota) then meets the same refusal on the dev cluster as on a real one:
//! 403 Forbidden, `pods "NAME" is forbidden: exceeded quota: QUOTA,
//! requested: pods=1, used: pods=N, limited: pods=N`.
//!
//! Only the pod count is evaluated (`pods` and `count/pods` in
//! `spec.hard`); other resources a quota names (cpu, memory, object counts)
//! are stored and shown but neither enforced nor counted. A pod counts
//! while it is not terminal (phase not Succeeded or Failed) and not stuck
//! terminating past its grace period, and only for quotas whose scopes
//! match it ([`scope`]).
//!
//! Usage here is the live count of the namespace's pods, taken under the
//! store's write lock, where kube-apiserver reads the quota's
//! `status.used` (which its controller corrects later): the dev cluster
//! never has a stale status to refuse or admit on.
//!
//! This module only decides; `api::quota` reads the store and writes.

mod quantity;
mod scope;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

use quantity::{NOT_A_QUANTITY, Quantity};

/// Where quotas are stored.
pub(crate) const GR: &str = "/resourcequotas";

/// The quota resources that count pods, in the order messages list them
/// (apimachinery sorts resource names).
const POD_RESOURCES: [&str; 2] = ["count/pods", "pods"];

/// Whether quota charges for `pod` at `now` (kube's `QuotaV1Pod`): a
/// terminal pod frees its slot, and so does one whose deletion is overdue
/// (a lost node must not hold quota forever).
pub(crate) fn charged(pod: &Value, now: SystemTime) -> bool {
    let phase = pod["status"]["phase"].as_str().unwrap_or("");
    if phase == "Succeeded" || phase == "Failed" {
        return false;
    }
    let m = &pod["metadata"];
    let deleted = m["deletionTimestamp"]
        .as_str()
        .and_then(crate::meta::parse_rfc3339);
    match (deleted, m["deletionGracePeriodSeconds"].as_u64()) {
        (Some(at), Some(grace)) => now <= at + Duration::from_secs(grace),
        _ => true,
    }
}

/// The pod-count limits of a quota, as (resource, hard).
fn pod_limits(quota: &Value) -> Vec<(&'static str, Quantity)> {
    let hard = &quota["spec"]["hard"];
    POD_RESOURCES
        .iter()
        .filter_map(|r| Some((*r, Quantity::from_json(hard.get(*r)?)?)))
        .collect()
}

/// Whether a quota limits the number of pods at all.
pub(crate) fn limits_pods(quota: &Value) -> bool {
    !pod_limits(quota).is_empty()
}

/// How many of `pods` the quota charges for.
fn used(quota: &Value, pods: &[Arc<Value>], now: SystemTime) -> u64 {
    let n = pods
        .iter()
        .filter(|p| charged(p, now) && scope::matches(quota, p))
        .count();
    n as u64
}

/// Admits a new `pod` against the namespace's `quotas` (in name order)
/// given its current `pods`, or says why not in kube-apiserver's words:
/// the first quota it would take over a limit, listing each exceeded
/// resource.
pub(crate) fn admit(
    quotas: &[Arc<Value>],
    pods: &[Arc<Value>],
    pod: &Value,
    now: SystemTime,
) -> Result<(), String> {
    for q in quotas {
        let limits = pod_limits(q);
        if limits.is_empty() || !scope::matches(q, pod) {
            continue;
        }
        let used = used(q, pods, now);
        let after = Quantity::count(used + 1);
        let over: Vec<_> = limits.iter().filter(|(_, h)| after.exceeds(h)).collect();
        if over.is_empty() {
            continue;
        }
        let list = |value: &dyn Fn(&Quantity) -> String| {
            let items: Vec<String> = over
                .iter()
                .map(|(r, h)| format!("{r}={}", value(h)))
                .collect();
            items.join(",")
        };
        let name = q["metadata"]["name"].as_str().unwrap_or("");
        return Err(format!(
            "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
            list(&|_| "1".into()),
            list(&|_| Quantity::count(used).canonical()),
            list(&|h| h.canonical()),
        ));
    }
    Ok(())
}

/// The status the quota controller keeps: `hard` is `spec.hard`, `used`
/// has the pod count for the pod resources and keeps what it had for the
/// others (nothing here counts them), for the resources in `hard` only.
pub(crate) fn status(quota: &Value, pods: &[Arc<Value>], now: SystemTime) -> Value {
    let spec_hard = quota["spec"]["hard"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if spec_hard.is_empty() {
        return json!({});
    }
    let hard: Map<String, Value> = spec_hard
        .iter()
        .map(|(k, v)| (k.clone(), canonical(v)))
        .collect();
    let count = Quantity::count(used(quota, pods, now)).canonical();
    let old = &quota["status"]["used"];
    let used: Map<String, Value> = hard
        .keys()
        .filter_map(|k| match POD_RESOURCES.contains(&k.as_str()) {
            true => Some((k.clone(), count.clone().into())),
            false => Some((k.clone(), old.get(k)?.clone())),
        })
        .collect();
    json!({"hard": hard, "used": used})
}

/// A quantity as kube-apiserver stores it (as written when it is none).
fn canonical(v: &Value) -> Value {
    match Quantity::from_json(v) {
        Some(q) => q.canonical().into(),
        None => v.clone(),
    }
}

/// Whether a pod change can change a quota's usage: a pod came or went,
/// or started or stopped being charged.
pub(crate) fn usage_changed(prev: Option<&Value>, now: Option<&Value>) -> bool {
    let t = SystemTime::now();
    match (prev, now) {
        (Some(a), Some(b)) => charged(a, t) != charged(b, t),
        _ => true,
    }
}

/// A quota's `spec.hard` must hold quantities, none negative, as
/// kube-apiserver's decoder and validation require.
pub(crate) fn spec_errors(obj: &Value) -> Vec<(String, String)> {
    let hard = obj["spec"]["hard"].as_object();
    let sorted: BTreeMap<&String, &Value> = hard.into_iter().flatten().collect();
    let mut errs = Vec::new();
    for (k, v) in sorted {
        let shown = match v {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        let why = match Quantity::from_json(v) {
            None => NOT_A_QUANTITY,
            Some(q) if q.is_negative() => "must be greater than or equal to 0",
            Some(_) => continue,
        };
        errs.push((
            format!("spec.hard[{k}]"),
            format!("Invalid value: {shown}: {why}"),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": "p"}, "status": {"phase": phase}}))
    }

    fn quota(hard: Value) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": "q"}, "spec": {"hard": hard}}))
    }

    #[test]
    fn refuses_in_kube_apiservers_words() {
        let now = SystemTime::now();
        let pods = [
            pod("Running"),
            pod("Pending"),
            pod("Succeeded"),
            pod("Failed"),
        ];
        let new = json!({"metadata": {"name": "n"}});
        assert_eq!(
            admit(&[quota(json!({"pods": "3"}))], &pods, &new, now),
            Ok(())
        );
        assert_eq!(
            admit(&[quota(json!({"pods": "2"}))], &pods, &new, now),
            Err("exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2".into())
        );
        assert_eq!(
            admit(&[quota(json!({"pods": 2, "count/pods": "2", "cpu": "1"}))], &pods, &new, now),
            Err("exceeded quota: q, requested: count/pods=1,pods=1, used: count/pods=2,pods=2, limited: count/pods=2,pods=2".into())
        );
        assert_eq!(
            admit(&[quota(json!({"cpu": "1"}))], &pods, &new, now),
            Ok(())
        );
    }

    #[test]
    fn overdue_deletions_free_their_slot() {
        let now = SystemTime::now();
        let at = |secs: u64| crate::meta::rfc3339(now - Duration::from_secs(secs));
        let pod = |at: String, grace: u64| json!({"metadata": {"deletionTimestamp": at, "deletionGracePeriodSeconds": grace}});
        assert!(charged(&pod(at(10), 30), now));
        assert!(!charged(&pod(at(60), 30), now));
    }

    #[test]
    fn status_counts_pods_and_keeps_other_usage() {
        let mut q = (*quota(json!({"pods": "1000", "cpu": "2", "secrets": 5}))).clone();
        q["status"] = json!({"used": {"cpu": "500m", "gone": "1"}});
        let s = status(&q, &[pod("Running"), pod("Succeeded")], SystemTime::now());
        assert_eq!(
            s,
            json!({"hard": {"pods": "1k", "cpu": "2", "secrets": "5"},
                   "used": {"pods": "1", "cpu": "500m"}})
        );
        assert_eq!(status(&quota(json!({})), &[], SystemTime::now()), json!({}));
    }

    #[test]
    fn hard_limits_must_be_quantities() {
        let q = quota(json!({"pods": "-1", "cpu": "lots", "memory": "1Gi"}));
        let errs = spec_errors(&q);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0].0, "spec.hard[cpu]");
        assert!(
            errs[0]
                .1
                .starts_with("Invalid value: \"lots\": quantities must match")
        );
        assert_eq!(
            errs[1],
            (
                "spec.hard[pods]".into(),
                "Invalid value: \"-1\": must be greater than or equal to 0".into()
            )
        );
    }
}
