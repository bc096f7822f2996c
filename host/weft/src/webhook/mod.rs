//! Weft's admission webhook, the role of Flyte propeller's: a Workflow is
//! checked when it is submitted, by the same validator the controller runs
//! (every problem at once, with node ids and cycle paths), instead of being
//! accepted and failing afterwards in its status. This module is the
//! decision, on AdmissionReview v1 objects (kube's admission types);
//! [`server`] serves it over HTTPS with its own certificates.

pub mod pod_secrets;
pub mod server;

use std::collections::HashSet;
use std::sync::Arc;

use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use weft_plugin::Registry;

use crate::api::Workflow;

/// Decides on Workflows.
pub struct Validator {
    registry: Arc<Registry>,
    /// Admit task types no plugin serves yet (plugins may be hot-loaded
    /// later), with a warning instead of a refusal.
    allow_unknown_task_types: bool,
}

impl Validator {
    /// A validator that knows the task types `registry` serves or is loading.
    pub fn new(registry: Arc<Registry>, allow_unknown_task_types: bool) -> Self {
        Validator {
            registry,
            allow_unknown_task_types,
        }
    }

    /// The answer to one AdmissionReview.
    pub fn review(&self, review: AdmissionReview<DynamicObject>) -> AdmissionReview<DynamicObject> {
        let req: AdmissionRequest<DynamicObject> = match review.try_into() {
            Ok(r) => r,
            Err(e) => return AdmissionResponse::invalid(e.to_string()).into_review(),
        };
        let mut resp = AdmissionResponse::from(&req);
        match self.check(&req) {
            Ok(warnings) => {
                if !warnings.is_empty() {
                    resp.warnings = Some(warnings);
                }
                resp
            }
            Err(why) => resp.deny(why),
        }
        .into_review()
    }

    /// Ok with warnings, or why the Workflow is refused.
    fn check(&self, req: &AdmissionRequest<DynamicObject>) -> Result<Vec<String>, String> {
        if matches!(req.operation, Operation::Delete | Operation::Connect) {
            return Ok(Vec::new());
        }
        let Some(object) = &req.object else {
            return Ok(Vec::new());
        };
        let value = serde_json::to_value(object).map_err(|e| e.to_string())?;
        let wf: Workflow = serde_path_to_error::deserialize(value)
            .map_err(|e| format!("{}: {}", e.path(), e.inner()))?;
        let snapshot = self.registry.snapshot();
        let served: HashSet<&str> = snapshot.task_types().collect();
        let known = |t: &str| {
            served.contains(t)
                || self.registry.loading(t).is_some()
                || self.allow_unknown_task_types
        };
        weft_dag::compile(&wf.spec.spec, &known).map_err(|problems| {
            format!(
                "invalid workflow spec:\n{}",
                weft_dag::compile::describe(&problems)
            )
        })?;
        Ok(wf
            .spec
            .spec
            .nodes
            .iter()
            .filter_map(|n| n.task.as_ref())
            .map(|t| t.task_type.as_str())
            .filter(|t| !served.contains(t))
            .map(|t| format!("no plugin serves task type {t:?} yet: the workflow waits for one"))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn review(object: Value) -> AdmissionReview<DynamicObject> {
        serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "weft.dev", "version": "v1alpha1", "kind": "Workflow"},
                "resource": {"group": "weft.dev", "version": "v1alpha1", "resource": "workflows"},
                "name": "wf",
                "namespace": "default",
                "operation": "CREATE",
                "userInfo": {"username": "alice"},
                "object": object,
                "dryRun": false
            }
        }))
        .unwrap()
    }

    fn workflow(nodes: Value) -> Value {
        json!({"apiVersion": "weft.dev/v1alpha1", "kind": "Workflow",
               "metadata": {"name": "wf", "namespace": "default"}, "spec": {"nodes": nodes}})
    }

    fn answer(v: &Validator, object: Value) -> Value {
        serde_json::to_value(v.review(review(object))).unwrap()["response"].clone()
    }

    fn pod_registry() -> Arc<Registry> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let (_, registry) =
            crate::runtime::load_plugins(&root.join("target/plugins"), None).unwrap();
        registry
    }

    #[test]
    fn the_four_error_workflow_is_refused_with_all_four_messages() {
        let v = Validator::new(pod_registry(), false);
        let ok = answer(&v, workflow(json!([{"id": "a", "task": {"type": "pod"}}])));
        assert_eq!(
            (ok["uid"].as_str(), ok["allowed"].as_bool()),
            (Some("u-1"), Some(true)),
            "{ok}"
        );
        let bad = answer(
            &v,
            workflow(json!([
                {"id": "a", "dependsOn": ["b"], "task": {"type": "pod"}},
                {"id": "b", "dependsOn": ["a"], "task": {"type": "pod"}},
                {"id": "c", "dependsOn": ["ghost"], "task": {"type": "pod"}},
                {"id": "d", "when": "1 +", "task": {"type": "pod"}},
                {"id": "e", "task": {"type": "no-such-type"}}
            ])),
        );
        assert_eq!(bad["allowed"], false, "{bad}");
        let message = bad["status"]["message"].as_str().unwrap();
        for part in [
            "cycle",
            "\"ghost\" is not a node",
            "node d: when: invalid CEL",
            "no plugin serves task type \"no-such-type\"",
        ] {
            assert!(message.contains(part), "{part}: {message}");
        }
    }

    #[test]
    fn unknown_task_types_may_be_allowed_with_a_warning_and_bad_objects_name_the_field() {
        let v = Validator::new(pod_registry(), true);
        let ok = answer(
            &v,
            workflow(json!([{"id": "a", "task": {"type": "later"}}])),
        );
        assert_eq!(ok["allowed"], true, "{ok}");
        assert!(
            ok["warnings"][0].as_str().unwrap().contains("\"later\""),
            "{ok}"
        );
        let mut wf = workflow(json!([{"id": "a", "task": {"type": "pod"}}]));
        wf["spec"]["parallelism"] = json!("lots");
        let bad = answer(&v, wf);
        assert_eq!(bad["allowed"], false);
        assert!(
            bad["status"]["message"].as_str().unwrap().contains("spec"),
            "{bad}"
        );
    }
}
