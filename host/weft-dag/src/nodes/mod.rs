//! Node kinds, one module each (flytepropeller's `pkg/controller/nodes/`):
//! what a kind checks at validation and how it runs. The compiler and the
//! scheduler only dispatch to them.

pub mod array;
pub mod gate;
pub mod task;

use crate::compile::{CheckContext, Kind, Problems};
use crate::spec::NodeSpec;

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
