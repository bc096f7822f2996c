//! Sub-workflow nodes: a child Workflow, owned by this one, runs a
//! template's spec or nodes given inline (Flyte's sub-workflow and
//! launch-plan nodes). Its outputs become the node's; its failure is the
//! node's, retried like a task's; aborting this workflow aborts it; this
//! workflow's `parallelism` bounds it too.

use serde_json::{Map, Value};

use crate::compiled::{CheckContext, CompiledNode, Kind};
use crate::expr::{self};
use crate::inputs::InputSpec;
use crate::nodes::Handler;
use crate::problem::Problems;
use crate::round::{Executor, NodeCx, Round, WorkflowRequest};
use crate::spec::template::TemplateRef;
use crate::spec::{NodeSpec, SubWorkflowSpec, WorkflowSpec};
use crate::status::{NodePhase, NodeStatus};

/// The sub-workflow node handler.
pub struct SubWorkflow;

/// Exactly one of `templateRef` and `nodes`; inline nodes are validated
/// as a workflow of their own.
pub fn check(n: &NodeSpec, w: &SubWorkflowSpec, cx: &CheckContext<'_>, p: &mut Problems) -> Kind {
    let id = Some(n.id.as_str());
    if !n.inputs.is_empty() {
        p.add(
            id,
            "inputs",
            "a workflow node gives its child's inputs in workflow.inputs",
        );
    }
    match (&w.template_ref, w.nodes.is_empty()) {
        (Some(t), true) if t.is_empty() => p.add(id, "workflow.templateRef", "is empty"),
        (Some(_), true) => {
            if !w.outputs.is_empty() {
                p.add(id, "workflow.outputs", "a template gives its own outputs");
            }
        }
        (None, false) => {
            let inline = inline_spec(w, &w.inputs);
            if let Err(problems) = (cx.compile)(&inline) {
                for q in problems {
                    p.add(id, "workflow", q.to_string());
                }
            }
        }
        _ => p.add(id, "workflow", "needs exactly one of templateRef and nodes"),
    }
    if let Err(es) = expr::template_exprs(&Value::Object(w.inputs.clone())) {
        es.into_iter().for_each(|e| p.add(id, "workflow.inputs", e));
    }
    Kind::Workflow
}

/// `workflow.inputs`' expressions.
pub fn expressions(w: &SubWorkflowSpec) -> Vec<(&'static str, String)> {
    expr::template_exprs(&Value::Object(w.inputs.clone()))
        .map(|es| es.into_iter().map(|e| ("workflow.inputs", e)).collect())
        .unwrap_or_default()
}

/// An inline child: its nodes and outputs, its inputs given as values.
fn inline_spec(w: &SubWorkflowSpec, inputs: &Map<String, Value>) -> WorkflowSpec {
    WorkflowSpec {
        nodes: w.nodes.clone(),
        outputs: w.outputs.clone(),
        inputs: inputs
            .iter()
            .map(|(k, v)| (k.clone(), InputSpec::Value(v.clone())))
            .collect(),
        ..Default::default()
    }
}

impl Handler for SubWorkflow {
    fn start<E: Executor>(cx: NodeCx<'_, '_, E>) {
        cx.round.begin_attempt(cx.node, cx.status);
        Self::drive(cx);
    }

    fn drive<E: Executor>(cx: NodeCx<'_, '_, E>) {
        let NodeCx {
            round: r,
            spec,
            node: n,
            status: st,
            scope,
            ..
        } = cx;
        let w = spec
            .workflow
            .as_ref()
            .expect("a workflow node has a workflow");
        let inputs = match expr::resolve(&Value::Object(w.inputs.clone()), scope) {
            Ok(Value::Object(m)) => m,
            Ok(_) => unreachable!("an object resolves to an object"),
            Err(e) => return r.fail(&n.id, st, "InputError", format!("workflow.inputs: {e}")),
        };
        let child = match &w.template_ref {
            Some(name) => WorkflowSpec {
                workflow_template_ref: Some(TemplateRef {
                    name: name.clone(),
                    inputs,
                }),
                ..Default::default()
            },
            None => inline_spec(w, &inputs),
        };
        run_child(r, n, st, child);
    }

    fn abort<E: Executor>(cx: NodeCx<'_, '_, E>) {
        let NodeCx {
            round: r,
            node: n,
            status: st,
            ..
        } = cx;
        abort_child(r, n, st);
    }
}

/// Observes (or creates) the current attempt's child Workflow running
/// `child`, bounded by this workflow's parallelism, and applies what
/// it says: the child's outputs, or its failure (retried as a task's).
pub(crate) fn run_child<E: Executor>(
    r: &mut Round<'_, E>,
    n: &CompiledNode,
    st: &mut NodeStatus,
    mut child: WorkflowSpec,
) {
    if let Some(p) = r.spec.parallelism {
        child.parallelism = Some(child.parallelism.map_or(p, |c| c.min(p)));
    }
    let req = WorkflowRequest {
        node_id: &n.id,
        attempt: st.attempts.saturating_sub(1),
        spec: &child,
        resource: st.resource.as_ref(),
    };
    let obs = match r.timed_out(n, st) {
        Some(failed) => {
            r.exec.abort_workflow(&req);
            failed
        }
        None => r.exec.workflow(&req),
    };
    r.apply(n, st, obs);
}

/// Aborts the current attempt's child Workflow, if one runs.
pub(crate) fn abort_child<E: Executor>(r: &mut Round<'_, E>, n: &CompiledNode, st: &NodeStatus) {
    if st.phase != NodePhase::Running || st.attempts == 0 {
        return;
    }
    let spec = WorkflowSpec::default();
    r.exec.abort_workflow(&WorkflowRequest {
        node_id: &n.id,
        attempt: st.attempts - 1,
        spec: &spec,
        resource: st.resource.as_ref(),
    });
}
