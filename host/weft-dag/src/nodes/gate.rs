//! Gate nodes: wait for time to pass (`sleep`) or for a person (`approval`).

use crate::compile::{Kind, Problems, duration};
use crate::spec::{GateSpec, NodeSpec};

/// Exactly one of `sleep` and `approval`; a sleep's duration.
pub fn check(n: &NodeSpec, gate: &GateSpec, p: &mut Problems) -> Kind {
    let id = Some(n.id.as_str());
    match (&gate.sleep, &gate.approval) {
        (Some(s), None) => match duration(s) {
            Ok(d) => Kind::Sleep(d),
            Err(e) => {
                p.add(id, "gate.sleep", e);
                Kind::Approval
            }
        },
        (None, Some(_)) => Kind::Approval,
        _ => {
            p.add(id, "gate", "needs exactly one of sleep and approval");
            Kind::Approval
        }
    }
}
