//! Gate nodes: wait for time to pass (`sleep`) or for a person (`approval`).
//! They take no parallelism slot: nothing runs while they wait.

use std::time::Duration;

use serde_json::json;

use crate::compiled::{CompiledNode, Kind, duration};
use crate::nodes::Handler;
use crate::problem::Problems;
use crate::round::{Executor, NodeCx, Round};
use crate::spec::{GateSpec, NodeSpec};
use crate::status::{NodePhase, NodeStatus, parse_timestamp, timestamp_millis};

/// The gate node handler.
pub struct Gate;

impl Handler for Gate {
    fn start<E: Executor>(cx: NodeCx<'_, '_, E>) {
        Self::drive(cx);
    }

    fn drive<E: Executor>(cx: NodeCx<'_, '_, E>) {
        let NodeCx {
            round: r,
            node: n,
            status: st,
            ..
        } = cx;
        match n.kind {
            Kind::Sleep(d) => drive_sleep(r, n, st, d),
            _ => drive_approval(r, n, st),
        }
    }

    fn abort<E: Executor>(_: NodeCx<'_, '_, E>) {}
}

pub(crate) fn drive_sleep<E: Executor>(
    r: &mut Round<'_, E>,
    n: &CompiledNode,
    st: &mut NodeStatus,
    d: Duration,
) {
    // `startedAt` has Kubernetes' one-second precision; the sleep counts
    // from a millisecond timestamp so it never ends early.
    if st.attempt_started_at.is_none() {
        st.attempt_started_at = Some(timestamp_millis(r.input.now));
    }
    let started = parse_timestamp(st.attempt_started_at.as_deref()).unwrap_or(r.input.now);
    let until = started + d;
    if r.input.now >= until {
        r.transition(
            &n.id,
            st,
            NodePhase::Succeeded,
            Some(format!("slept {}", humantime::format_duration(d))),
        );
    } else {
        st.task_phase = Some("sleeping".into());
        r.out.wake(until);
    }
}

pub(crate) fn drive_approval<E: Executor>(
    r: &mut Round<'_, E>,
    n: &CompiledNode,
    st: &mut NodeStatus,
) {
    if let Some(reason) = r.input.rejections.get(&n.id) {
        st.task_phase = None;
        st.reason = Some("Rejected".into());
        let message = match reason.trim() {
            "" => "rejected".to_string(),
            r => format!("rejected: {r}"),
        };
        r.transition(&n.id, st, NodePhase::Failed, Some(message));
    } else if r.input.approvals.contains(&n.id) {
        st.task_phase = None;
        st.outputs = Some(
            json!({"approved": true})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        r.transition(&n.id, st, NodePhase::Succeeded, Some("approved".into()));
    } else {
        st.task_phase = Some("waiting-for-approval".into());
        let ask = r
            .spec
            .nodes
            .iter()
            .find(|s| s.id == n.id)
            .and_then(|s| s.gate.as_ref())
            .and_then(|g| g.approval.as_ref())
            .and_then(|a| a.message.clone());
        st.message = Some(ask.unwrap_or_else(|| {
            format!(
                "waiting for approval: annotate the Workflow with {}=true",
                crate::spec::approval_annotation(&n.id)
            )
        }));
    }
}

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
