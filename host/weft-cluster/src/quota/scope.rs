//! Which pods a quota with scopes tracks (`spec.scopes` and
//! `spec.scopeSelector`), decided as kube-apiserver's pod evaluator
//! decides: a quota charges a pod only when every scope matches it. Without
//! this a `BestEffort` or `PriorityClass` quota would count (and refuse)
//! pods a real cluster lets through.

use serde_json::Value;

use super::quantity::Quantity;
use crate::meta::strings;

/// Whether every scope of `quota` matches `pod` (true without scopes).
pub(super) fn matches(quota: &Value, pod: &Value) -> bool {
    let spec = &quota["spec"];
    let plain = strings(&spec["scopes"]);
    let plain_ok = plain.iter().all(|s| scope_matches(s, "Exists", &[], pod));
    let exprs = spec["scopeSelector"]["matchExpressions"].as_array();
    plain_ok
        && exprs.into_iter().flatten().all(|e| {
            let scope = e["scopeName"].as_str().unwrap_or("");
            let op = e["operator"].as_str().unwrap_or("");
            scope_matches(scope, op, &strings(&e["values"]), pod)
        })
}

fn scope_matches(scope: &str, op: &str, values: &[String], pod: &Value) -> bool {
    match scope {
        "Terminating" => terminating(pod),
        "NotTerminating" => !terminating(pod),
        "BestEffort" => best_effort(pod),
        "NotBestEffort" => !best_effort(pod),
        "PriorityClass" => priority_class(op, values, pod),
        "CrossNamespacePodAffinity" => cross_namespace_affinity(pod),
        _ => false,
    }
}

/// A pod with an `activeDeadlineSeconds` ends by itself.
fn terminating(pod: &Value) -> bool {
    pod["spec"]["activeDeadlineSeconds"]
        .as_i64()
        .is_some_and(|s| s >= 0)
}

/// The BestEffort QoS class: no cpu or memory request or limit anywhere.
fn best_effort(pod: &Value) -> bool {
    let spec = &pod["spec"];
    let containers = ["initContainers", "containers"]
        .iter()
        .flat_map(|l| spec[*l].as_array().into_iter().flatten());
    let resources = containers
        .map(|c| &c["resources"])
        .chain(std::iter::once(&spec["resources"]));
    !resources.into_iter().any(|r| {
        ["requests", "limits"].iter().any(|kind| {
            ["cpu", "memory"]
                .iter()
                .any(|res| Quantity::from_json(&r[*kind][*res]).is_some_and(|q| q.is_positive()))
        })
    })
}

/// The scope selector on `spec.priorityClassName`, evaluated as a label
/// selector on a set that always holds the key (so `DoesNotExist` never
/// matches, as on a real cluster).
fn priority_class(op: &str, values: &[String], pod: &Value) -> bool {
    let class = pod["spec"]["priorityClassName"].as_str().unwrap_or("");
    let listed = values.iter().any(|v| v == class);
    match op {
        "Exists" => !class.is_empty(),
        "In" => listed,
        "NotIn" => !listed,
        _ => false,
    }
}

/// Affinity terms that reach other namespaces (`namespaces` or a
/// `namespaceSelector`).
fn cross_namespace_affinity(pod: &Value) -> bool {
    let affinity = &pod["spec"]["affinity"];
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let a = &affinity[*kind];
        let required = a["requiredDuringSchedulingIgnoredDuringExecution"].as_array();
        let preferred = a["preferredDuringSchedulingIgnoredDuringExecution"].as_array();
        let terms = required.into_iter().flatten().chain(
            preferred
                .into_iter()
                .flatten()
                .map(|w| &w["podAffinityTerm"]),
        );
        terms.into_iter().any(|t| {
            !t["namespaceSelector"].is_null()
                || t["namespaces"].as_array().is_some_and(|n| !n.is_empty())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: Value) -> Value {
        json!({ "spec": spec })
    }

    #[test]
    fn scopes_pick_pods_as_the_pod_evaluator_does() {
        let plain = pod(json!({"containers": [{"name": "c"}]}));
        let limited = pod(json!({"containers": [{"name": "c",
            "resources": {"limits": {"cpu": "1"}}}], "activeDeadlineSeconds": 5,
            "priorityClassName": "high"}));
        let quota = |scopes: Value| json!({"spec": {"scopes": scopes}});
        assert!(matches(&quota(json!(["BestEffort"])), &plain));
        assert!(!matches(&quota(json!(["BestEffort"])), &limited));
        assert!(matches(
            &quota(json!(["NotBestEffort", "Terminating"])),
            &limited
        ));
        assert!(!matches(&quota(json!(["Terminating"])), &plain));
        assert!(matches(&json!({}), &plain));
        let sel = |op: &str, values: Value| {
            json!({"spec": {"scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": op, "values": values}]}}})
        };
        assert!(matches(&sel("In", json!(["high"])), &limited));
        assert!(!matches(&sel("In", json!(["high"])), &plain));
        assert!(matches(&sel("NotIn", json!(["high"])), &plain));
        assert!(matches(&sel("Exists", json!([])), &limited));
        assert!(!matches(&sel("DoesNotExist", json!([])), &plain));
        let cross = pod(json!({"affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"namespaces": ["x"]}]}}}));
        assert!(matches(
            &quota(json!(["CrossNamespacePodAffinity"])),
            &cross
        ));
        assert!(!matches(
            &quota(json!(["CrossNamespacePodAffinity"])),
            &plain
        ));
    }
}
