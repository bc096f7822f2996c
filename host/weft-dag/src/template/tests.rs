use super::*;
use serde_json::{Value, json};

fn template() -> WorkflowTemplateSpec {
    serde_json::from_value(json!({
        "inputs": {"rows": {"type": "integer"}, "env": {"type": "string", "default": "dev"}},
        "fixedInputs": {"env": "prod"},
        "parallelism": 4,
        "nodes": [{"id": "a", "task": {"type": "pod"}}]
    }))
    .unwrap()
}

fn launch(v: serde_json::Value) -> WorkflowSpec {
    serde_json::from_value(
        json!({"workflowTemplateRef": {"name": "etl", "inputs": v}, "parallelism": 2}),
    )
    .unwrap()
}

#[test]
fn a_launch_binds_values_and_keeps_fixed_inputs() {
    let spec = resolve("etl", &template(), &launch(json!({"rows": 5}))).unwrap();
    let c = crate::compile(&spec, &|_| true).unwrap();
    assert_eq!(Value::Object(c.inputs), json!({"rows": 5, "env": "prod"}));
    assert_eq!(spec.parallelism, Some(2));
    assert!(spec.workflow_template_ref.is_none());
}

#[test]
fn missing_mistyped_and_fixed_inputs_are_named() {
    let p = resolve(
        "etl",
        &template(),
        &launch(json!({"rows": "many", "env": "x"})),
    )
    .unwrap_err();
    let p: Vec<String> = p.iter().map(ToString::to_string).collect();
    assert_eq!(
        p,
        [
            "workflowTemplateRef.inputs.env: is fixed by template etl to \"prod\"; it cannot be set",
            "workflowTemplateRef.inputs.rows: expected integer, got string \"many\""
        ]
    );
    let spec = resolve("etl", &template(), &launch(json!({}))).unwrap();
    let p: Vec<String> = crate::compile(&spec, &|_| true)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(p, ["inputs.rows: required input (integer) is missing"]);
}

#[test]
fn a_template_validates_without_launch_values() {
    assert!(validate("etl", &template(), &|_| true).is_empty());
    let mut t = template();
    t.workflow.nodes[0].depends_on = vec!["a".into()];
    let p: Vec<String> = validate("etl", &t, &|_| true)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(p, ["node a: dependsOn: cycle: a -> a"]);
}

#[test]
fn templates_are_checked() {
    let mut t = template();
    t.fixed_inputs.insert("nope".into(), json!(1));
    t.fixed_inputs.insert("rows".into(), json!("x"));
    t.workflow.abort = true;
    let p: Vec<String> = check("etl", &t).iter().map(ToString::to_string).collect();
    assert_eq!(p.len(), 3, "{p:#?}");
    assert!(p[0].starts_with("abort: "), "{p:#?}");
    assert!(
        p[1].starts_with("fixedInputs.nope: is not an input of template etl"),
        "{p:#?}"
    );
    assert!(
        p[2].starts_with("fixedInputs.rows: expected integer"),
        "{p:#?}"
    );
}
