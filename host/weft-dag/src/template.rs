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
    if workflow.artifact_gc.is_some() {
        spec.artifact_gc = workflow.artifact_gc;
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
mod tests;
