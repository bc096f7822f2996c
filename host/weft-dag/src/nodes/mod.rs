//! Node kinds, one module each (flytepropeller's `pkg/controller/nodes/`):
//! what a kind checks at validation and how it runs. The compiler and the
//! scheduler only dispatch to them.

pub mod array;
pub mod dynamic;
pub mod gate;
pub mod subworkflow;
pub mod task;

use crate::compiled::{CheckContext, Kind};
use crate::problem::Problems;
use crate::round::{Executor, NodeCx};
use crate::spec::NodeSpec;

/// What every node kind does in a round (flytepropeller's node handler
/// interface): the round decides *when* (dependencies, conditions,
/// parallelism, stopping) and the handler *what*. Each method gets the
/// node in one [`NodeCx`] and changes the world only through the round's
/// primitives (`crate::round`).
pub trait Handler {
    /// The node just became Running.
    fn start<E: Executor>(cx: NodeCx<'_, '_, E>);
    /// A later round of a Running or Retrying node.
    fn drive<E: Executor>(cx: NodeCx<'_, '_, E>);
    /// Stop what the node runs (abort, fail-fast, deletion); the scope is
    /// empty then.
    fn abort<E: Executor>(cx: NodeCx<'_, '_, E>);
}

/// Which handler serves a kind; `$call` is one of the [`Handler`] methods.
macro_rules! dispatch {
    ($cx:expr, $call:ident) => {{
        let cx = $cx;
        match cx.node.kind {
            Kind::Task => task::Task::$call(cx),
            Kind::Array => array::Array::$call(cx),
            Kind::Sleep(_) | Kind::Approval => gate::Gate::$call(cx),
            Kind::Workflow => subworkflow::SubWorkflow::$call(cx),
            Kind::Dynamic => dynamic::Dynamic::$call(cx),
        }
    }};
}

/// Starts a node that just became Running.
pub fn start<E: Executor>(cx: NodeCx<'_, '_, E>) {
    dispatch!(cx, start)
}

/// Moves a Running or Retrying node on.
pub fn drive<E: Executor>(cx: NodeCx<'_, '_, E>) {
    dispatch!(cx, drive)
}

/// Stops what a node runs.
pub fn abort<E: Executor>(cx: NodeCx<'_, '_, E>) {
    dispatch!(cx, abort)
}

/// Whether a kind holds a parallelism slot while Running (gates wait
/// without running anything).
pub fn takes_slot(kind: &Kind) -> bool {
    !matches!(kind, Kind::Sleep(_) | Kind::Approval)
}

/// The node's kind, after its own checks: exactly one of the kinds'
/// fields must be set.
pub fn check(n: &NodeSpec, cx: &CheckContext<'_>, p: &mut Problems) -> Kind {
    let kinds = [
        n.task.is_some(),
        n.array.is_some(),
        n.gate.is_some(),
        n.workflow.is_some(),
        n.dynamic.is_some(),
    ];
    if kinds.iter().filter(|k| **k).count() != 1 {
        let why = "a node needs exactly one of task, array, gate, workflow and dynamic";
        p.add(Some(&n.id), "task", why);
        return Kind::Task;
    }
    if let Some(t) = &n.task {
        task::check_task(n, t, "task", cx, p);
        return Kind::Task;
    }
    if let Some(a) = &n.array {
        return array::check(n, a, cx, p);
    }
    if let Some(g) = &n.gate {
        return gate::check(n, g, p);
    }
    if let Some(w) = &n.workflow {
        return subworkflow::check(n, w, cx, p);
    }
    let d = n.dynamic.as_ref().expect("one kind is set");
    dynamic::check(n, d, cx, p)
}

/// The `${...}` expressions a kind reads besides the node's inputs, with
/// their fields (they may only use the node's dependencies).
pub fn expressions(n: &NodeSpec) -> Vec<(&'static str, String)> {
    let mut out = match (&n.array, &n.workflow) {
        (Some(a), _) => array::expressions(a),
        (_, Some(w)) => subworkflow::expressions(w),
        _ => Vec::new(),
    };
    let tasks = [n.task.as_ref(), n.array.as_ref().map(|a| &a.task)];
    for t in tasks.into_iter().flatten() {
        let from = crate::artifacts::expressions(t);
        out.extend(from.map(|e| ("task.inputs.artifacts", e)));
    }
    out
}
