//! The execution history's events (issue 43), as flytepropeller sends
//! them to flyteadmin: one per workflow, node and task-attempt transition.
//!
//! They are made here, from what a round did, so that they are pure and
//! tested without a database. The controller writes them into the
//! Workflow's status (`WorkflowStatus::outbox`) in the same patch as the
//! transition itself: that patch is the only write that makes a
//! transition happen, so an event can never be lost between the two.
//! The controller's exporter then copies them to the database and drops
//! them from the outbox at a later write. An event's [`EventId`] is
//! deterministic, so one copied twice (a crash between the copy and the
//! drop) is still one row.

use std::time::SystemTime;

use serde::Serialize;

use crate::round::Transition;
pub use crate::status::{EventId, EventKind, HistoryEvent};
use crate::status::{NodePhase, NodeStatus, ResourceRef, WorkflowStatus, timestamp};

/// A phase's name as the status writes it.
fn phase_name<P: Serialize>(phase: P) -> String {
    match serde_json::to_value(phase) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The events of one round: a node event for each transition, a task
/// event too when the node ran an attempt of a task, and a workflow event
/// when the workflow's phase or run changed (`old` to `new`).
pub fn round_events(
    old: &WorkflowStatus,
    new: &WorkflowStatus,
    transitions: &[Transition],
    now: SystemTime,
) -> Vec<HistoryEvent> {
    let at = timestamp(now);
    let mut events = Vec::new();
    for t in transitions {
        let st = node_status(new, &t.node);
        let t = &Transition {
            attempt: attempt_of(t, st),
            ..t.clone()
        };
        events.push(node_event(t, st, &at));
        if let Some(st) = st.filter(|st| t.attempt > 0 && is_task(st)) {
            events.push(task_event(t, st, &at));
        }
    }
    if old.phase != new.phase || old.retries.len() != new.retries.len() {
        events.push(workflow_event(new, &at));
    }
    events
}

/// The workflow event for `status` as it is now.
pub fn workflow_event(status: &WorkflowStatus, at: &str) -> HistoryEvent {
    HistoryEvent {
        kind: EventKind::Workflow,
        node: String::new(),
        attempt: run_of(status),
        phase: phase_name(status.phase),
        at: at.to_string(),
        reason: None,
        message: status.message.clone(),
        plugin: None,
        resource: None,
        log_links: Vec::new(),
    }
}

/// Which run of the workflow `status` is: 1, then one more per retry a
/// user asked for (`weft retry`), so a retried workflow's second
/// `Running` is an event of its own.
pub fn run_of(status: &WorkflowStatus) -> u32 {
    1 + status.retries.len() as u32
}

/// The attempt a transition belongs to. A node that starts goes Running
/// before its kind's handler counts its first attempt (`begin_attempt`),
/// so that Running is attempt 1 when the node counts attempts at all.
fn attempt_of(t: &Transition, st: Option<&NodeStatus>) -> u32 {
    match (t.to, t.attempt, st) {
        (NodePhase::Running, 0, Some(st)) => st.attempts.min(1),
        _ => t.attempt,
    }
}

/// A node's status, in the workflow's nodes or its exit handler's.
fn node_status<'s>(status: &'s WorkflowStatus, id: &str) -> Option<&'s NodeStatus> {
    status
        .nodes
        .get(id)
        .or_else(|| status.on_exit.as_ref().and_then(|e| e.nodes.get(id)))
}

/// Whether the node ran a child or a web-API job through a plugin.
fn is_task(st: &NodeStatus) -> bool {
    st.plugin.is_some() || st.resource.is_some()
}

fn node_event(t: &Transition, st: Option<&NodeStatus>, at: &str) -> HistoryEvent {
    let terminal = t.to.is_terminal() || t.to == NodePhase::Retrying;
    HistoryEvent {
        kind: EventKind::Node,
        node: t.node.clone(),
        attempt: t.attempt,
        phase: phase_name(t.to),
        at: at.to_string(),
        reason: st.filter(|_| terminal).and_then(|s| s.reason.clone()),
        message: t.message.clone(),
        plugin: None,
        resource: None,
        log_links: Vec::new(),
    }
}

fn task_event(t: &Transition, st: &NodeStatus, at: &str) -> HistoryEvent {
    HistoryEvent {
        kind: EventKind::Task,
        plugin: st.plugin.clone(),
        resource: st.resource.clone().map(|r| ResourceRef { meta: None, ..r }),
        log_links: st.log_links.clone(),
        ..node_event(t, Some(st), at)
    }
}

/// Adds `events` to the status's outbox, each at most once: an event the
/// outbox holds already (the same id, from a round repeated after a
/// crash) is not added again.
pub fn record(status: &mut WorkflowStatus, events: Vec<HistoryEvent>) {
    for e in events {
        let id = e.id();
        if !status.outbox.iter().any(|o| o.id() == id) {
            status.outbox.push(e);
        }
    }
}

#[cfg(test)]
mod tests;
