//! Dynamic nodes: a task decides at run time what runs next (Flyte's
//! dynamic nodes, Argo's steps generated from outputs). The task's output
//! `nodes` is a list of nodes; they are validated exactly as a workflow's
//! (same messages) and run as a child Workflow; the node succeeds when it
//! does, with its outputs: the task's `outputs` expressions over the
//! generated nodes, or else each generated node's outputs by id.

use serde_json::{Map, Value};

use crate::compiled::{CheckContext, CompiledNode, Kind, MAX_NODES};
use crate::expr::Scope;
use crate::nodes::subworkflow::{abort_child, run_child};
use crate::nodes::task::run_task;
use crate::nodes::{Handler, task};
use crate::problem::Problems;
use crate::round::{Executor, NodeCx, Round, TaskObservation, TaskState};
use crate::spec::{DEFAULT_MAX_DYNAMIC_NODES, DynamicSpec, NodeSpec, WorkflowSpec};
use crate::status::NodeStatus;

/// The dynamic node handler.
pub struct Dynamic;

/// The task, and the limit.
pub fn check(n: &NodeSpec, d: &DynamicSpec, cx: &CheckContext<'_>, p: &mut Problems) -> Kind {
    task::check_task(n, &d.task, "dynamic.task", cx, p);
    if let Some(m) = d.max_nodes
        && (m == 0 || m as usize > MAX_NODES)
    {
        p.add(
            Some(&n.id),
            "dynamic.maxNodes",
            format!("{m} is not between 1 and {MAX_NODES}"),
        );
    }
    Kind::Dynamic
}

/// Whether the node's current attempt runs its generated nodes (its
/// resource is the child Workflow, no longer the task's).
fn generated(st: &NodeStatus) -> bool {
    st.resource.as_ref().is_some_and(|r| r.kind == "Workflow")
}

/// The generated child, kept in the node's outputs while it runs.
fn child_spec(st: &NodeStatus) -> Result<WorkflowSpec, String> {
    let v = Value::Object(st.outputs.clone().unwrap_or_default());
    serde_json::from_value(v).map_err(|e| format!("the task's outputs are not nodes: {e}"))
}

impl Handler for Dynamic {
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
        if generated(st) {
            return match child_spec(st) {
                Ok(child) => run_child(r, n, st, child),
                Err(e) => r.fail(&n.id, st, "InvalidDynamicWorkflow", e),
            };
        }
        let d = spec.dynamic.as_ref().expect("a dynamic node has dynamic");
        run_task(r, &d.task, spec, n, st, scope, |r, n, st, obs| {
            match obs.state {
                TaskState::Succeeded => generate(r, n, st, obs, d),
                _ => r.apply(n, st, obs),
            }
        });
    }

    fn abort<E: Executor>(cx: NodeCx<'_, '_, E>) {
        let NodeCx {
            round: r,
            spec,
            node: n,
            status: st,
            ..
        } = cx;
        match generated(st) {
            true => abort_child(r, n, st),
            false => {
                let mut task_node = spec.clone();
                task_node.task = spec.dynamic.as_ref().map(|d| d.task.clone());
                let scope = Scope::default();
                task::Task::abort(NodeCx {
                    round: r,
                    spec: &task_node,
                    node: n,
                    status: st,
                    scope: &scope,
                });
            }
        }
    }
}

/// The task succeeded: validate what it generated and start it.
fn generate<E: Executor>(
    r: &mut Round<'_, E>,
    n: &CompiledNode,
    st: &mut NodeStatus,
    obs: TaskObservation,
    d: &DynamicSpec,
) {
    if obs.plugin.is_some() {
        st.plugin = obs.plugin;
    }
    let outputs = obs.outputs.unwrap_or_default();
    let child = match generated_spec(&outputs, d) {
        Ok(c) => c,
        Err(why) => return r.fail(&n.id, st, "InvalidDynamicWorkflow", why),
    };
    if let Err(problems) = r.compile_child(&child) {
        let why = format!(
            "the generated workflow is invalid:\n{}",
            crate::problem::describe(&problems)
        );
        return r.fail(&n.id, st, "InvalidDynamicWorkflow", why);
    }
    st.outputs = match serde_json::to_value(&child) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    };
    st.resource = None;
    st.task_phase = Some("running generated nodes".into());
    run_child(r, n, st, child);
}

/// The child a dynamic task's outputs describe: `nodes` (at most
/// `maxNodes`, those of no kind running `defaultTask`), and `outputs`, by
/// default every node's outputs by id.
fn generated_spec(outputs: &Map<String, Value>, d: &DynamicSpec) -> Result<WorkflowSpec, String> {
    let max = d.max_nodes.unwrap_or(DEFAULT_MAX_DYNAMIC_NODES) as usize;
    let Some(nodes) = outputs.get("nodes") else {
        return Err("the task gave no output \"nodes\" (a list of nodes to run)".into());
    };
    let mut nodes: Vec<NodeSpec> = read_nodes(nodes)?;
    if let Some(task) = &d.default_task {
        let kindless = |n: &NodeSpec| {
            n.task.is_none()
                && n.array.is_none()
                && n.gate.is_none()
                && n.workflow.is_none()
                && n.dynamic.is_none()
        };
        nodes
            .iter_mut()
            .filter(|n| kindless(n))
            .for_each(|n| n.task = Some(task.clone()));
    }
    if nodes.len() > max {
        return Err(format!(
            "the task generated {} nodes, more than the limit of {max} (dynamic.maxNodes)",
            nodes.len()
        ));
    }
    let outputs = match outputs.get("outputs") {
        Some(Value::Object(o)) => o.clone(),
        Some(other) => {
            return Err(format!(
                "the task's output \"outputs\" must be an object, not {other}"
            ));
        }
        None => nodes
            .iter()
            .map(|n| {
                (
                    n.id.clone(),
                    Value::String(format!("${{nodes[{:?}].outputs}}", n.id)),
                )
            })
            .collect(),
    };
    Ok(WorkflowSpec {
        nodes,
        outputs,
        ..Default::default()
    })
}

/// Reads the generated nodes, naming the first field that is wrong.
fn read_nodes(v: &Value) -> Result<Vec<NodeSpec>, String> {
    serde_json::from_value(v.clone())
        .map_err(|e| format!("the task's output \"nodes\" is not a list of nodes: {e}"))
}
