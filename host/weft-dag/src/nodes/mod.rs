//! Node kinds, one module each (flytepropeller's `pkg/controller/nodes/`):
//! what a kind checks at validation and how it runs. The compiler and the
//! scheduler only dispatch to them.

pub mod array;
pub mod gate;
pub mod task;

use crate::compile::{CheckContext, CompiledNode, Kind, Problems};
use crate::expr::Scope;
use crate::schedule::{Executor, Round};
use crate::spec::NodeSpec;
use crate::status::NodeStatus;

/// What every node kind does in a round (flytepropeller's node handler
/// interface): the round decides *when* (dependencies, conditions,
/// parallelism, stopping) and the handler *what*.
pub trait Handler {
    /// The node just became Running.
    fn start<E: Executor>(
        r: &mut Round<'_, E>,
        spec: &NodeSpec,
        n: &CompiledNode,
        st: &mut NodeStatus,
        scope: &Scope,
    );
    /// A later round of a Running or Retrying node.
    fn drive<E: Executor>(
        r: &mut Round<'_, E>,
        spec: &NodeSpec,
        n: &CompiledNode,
        st: &mut NodeStatus,
        scope: &Scope,
    );
    /// Stop what the node runs (abort, fail-fast, deletion).
    fn abort<E: Executor>(
        r: &mut Round<'_, E>,
        spec: &NodeSpec,
        n: &CompiledNode,
        st: &mut NodeStatus,
    );
}

/// Which handler serves a kind; `$call` is one of the [`Handler`] methods.
macro_rules! dispatch {
    ($kind:expr, $call:ident($($arg:expr),*)) => {
        match $kind {
            Kind::Task => task::Task::$call($($arg),*),
            Kind::Array => array::Array::$call($($arg),*),
            Kind::Sleep(_) | Kind::Approval => gate::Gate::$call($($arg),*),
        }
    };
}

/// Starts a node that just became Running.
pub fn start<E: Executor>(
    r: &mut Round<'_, E>,
    spec: &NodeSpec,
    n: &CompiledNode,
    st: &mut NodeStatus,
    scope: &Scope,
) {
    dispatch!(n.kind, start(r, spec, n, st, scope))
}

/// Moves a Running or Retrying node on.
pub fn drive<E: Executor>(
    r: &mut Round<'_, E>,
    spec: &NodeSpec,
    n: &CompiledNode,
    st: &mut NodeStatus,
    scope: &Scope,
) {
    dispatch!(n.kind, drive(r, spec, n, st, scope))
}

/// Stops what a node runs.
pub fn abort<E: Executor>(
    r: &mut Round<'_, E>,
    spec: &NodeSpec,
    n: &CompiledNode,
    st: &mut NodeStatus,
) {
    dispatch!(n.kind, abort(r, spec, n, st))
}

/// Whether a kind holds a parallelism slot while Running (gates wait
/// without running anything).
pub fn takes_slot(kind: &Kind) -> bool {
    !matches!(kind, Kind::Sleep(_) | Kind::Approval)
}

/// The node's kind, after its own checks: exactly one of the kinds'
/// fields must be set.
pub fn check(n: &NodeSpec, cx: &CheckContext<'_>, p: &mut Problems) -> Kind {
    match (&n.task, &n.array, &n.gate) {
        (Some(t), None, None) => {
            task::check_task(n, t, "task", cx, p);
            Kind::Task
        }
        (None, Some(a), None) => array::check(n, a, cx, p),
        (None, None, Some(g)) => gate::check(n, g, p),
        _ => {
            p.add(
                Some(&n.id),
                "task",
                "a node needs exactly one of task, array and gate",
            );
            Kind::Task
        }
    }
}

/// The `${...}` expressions a kind reads besides the node's inputs, with
/// their fields (they may only use the node's dependencies).
pub fn expressions(n: &NodeSpec) -> Vec<(&'static str, String)> {
    match &n.array {
        Some(a) => array::expressions(a),
        None => Vec::new(),
    }
}
