//! Workflow templates: a workflow registered once and launched many times
//! with different inputs (Flyte's launch plans, Argo's WorkflowTemplate).
//!
//! A Workflow that names a template (`spec.workflowTemplateRef`) runs the
//! template's spec with the launch's input values bound; the controller
//! resolves it once, when the workflow starts, and stores the result in the
//! Workflow's status, so editing the template later never changes a
//! workflow that already runs.

use serde_json::Map;

use crate::inputs;
use crate::problem::Problem;
use crate::spec::WorkflowSpec;

pub use crate::spec::template::{TemplateRecord, TemplateRef, WorkflowTemplateSpec};

/// The spec a Workflow runs when it names `template`: the template's, with
/// the launch's values bound to its inputs (type-checked, fixed inputs
/// kept), and the Workflow's own `abort`, `parallelism`, `activeDeadline`
/// and `ttlStrategy` on top.
pub fn resolve(
    name: &str,
    template: &WorkflowTemplateSpec,
    workflow: &WorkflowSpec,
) -> Result<WorkflowSpec, Vec<Problem>> {
    let given = workflow
        .workflow_template_ref
        .as_ref()
        .map(|r| r.inputs.clone())
        .unwrap_or_default();
    let source = format!("template {name}");
    let bound = inputs::bind(
        &template.workflow.inputs,
        &given,
        &template.fixed_inputs,
        &source,
    )
    .map_err(|ps| {
        ps.into_iter()
            .map(|p| Problem {
                field: format!("workflowTemplateRef.{}", p.field),
                ..p
            })
            .collect::<Vec<_>>()
    })?;
    let mut spec = template.workflow.clone();
    spec.inputs = bound;
    spec.workflow_template_ref = None;
    spec.abort = workflow.abort;
    if workflow.parallelism.is_some() {
        spec.parallelism = workflow.parallelism;
    }
    if workflow.active_deadline.is_some() {
        spec.active_deadline = workflow.active_deadline.clone();
    }
    if workflow.ttl_strategy.is_some() {
        spec.ttl_strategy = workflow.ttl_strategy.clone();
    }
    Ok(spec)
}

/// What is wrong with a template itself, besides its workflow's problems:
/// fields only a Workflow may set, and fixed inputs that are not declared
/// or of the wrong type.
pub fn check(name: &str, template: &WorkflowTemplateSpec) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut add = |field: &str, message: String| {
        out.push(Problem {
            node: None,
            field: field.into(),
            message,
        })
    };
    if template.workflow.workflow_template_ref.is_some() {
        add(
            "workflowTemplateRef",
            "a template cannot name another template; use a sub-workflow node".into(),
        );
    }
    if template.workflow.abort {
        add("abort", "is for Workflows, not templates".into());
    }
    let source = format!("template {name}");
    if let Err(ps) = inputs::bind(
        &template.workflow.inputs,
        &Map::new(),
        &template.fixed_inputs,
        &source,
    ) {
        for p in ps {
            add(
                &format!("fixedInputs.{}", &p.field["inputs.".len()..]),
                p.message,
            );
        }
    }
    out
}

/// Every problem of a template on its own: [`check`], and its workflow
/// compiled as a launch would run it, with its fixed inputs and a
/// stand-in value for each input a launch must give.
pub fn validate(
    name: &str,
    template: &WorkflowTemplateSpec,
    known_task_type: &dyn Fn(&str) -> bool,
) -> Vec<Problem> {
    let mut problems = check(name, template);
    let mut spec = template.workflow.clone();
    spec.workflow_template_ref = None;
    for (input, decl) in spec.inputs.iter_mut() {
        let value = match template.fixed_inputs.get(input) {
            Some(v) => v.clone(),
            None if decl.default_value().is_none() => match decl.input_type() {
                Some(t) => t.example(),
                None => continue,
            },
            None => continue,
        };
        *decl = decl.with_default(value);
    }
    if let Err(p) = crate::compile(&spec, known_task_type) {
        problems.extend(p);
    }
    problems
}

/// The templates a spec's sub-workflow nodes launch, inline children's
/// included, each with the path of node ids that leads to it.
pub fn launched_templates(spec: &WorkflowSpec) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack: Vec<(String, &[crate::spec::NodeSpec])> = vec![(String::new(), &spec.nodes)];
    while let Some((prefix, nodes)) = stack.pop() {
        for n in nodes {
            let Some(w) = &n.workflow else { continue };
            let path = format!("{prefix}{}", n.id);
            match &w.template_ref {
                Some(t) => out.push((path, t.clone())),
                None => stack.push((format!("{path}/"), &w.nodes)),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
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
}
