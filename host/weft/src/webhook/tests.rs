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
    let review = v.review(review(object));
    let review = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(review);
    serde_json::to_value(review).unwrap()["response"].clone()
}

fn pod_registry() -> Arc<Registry> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let (_, registry) = crate::runtime::load_plugins(&root.join("target/plugins"), None).unwrap();
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
