//! The controller's side of the execution history (`crate::history`):
//! the round's events go into the status it is about to write (the
//! outbox), the written status goes to the exporter, and TTL deletion of
//! a finished Workflow waits for its archive. Without `--history-db`
//! each of these does nothing, so statuses carry no outbox.

use std::time::{Duration, SystemTime};

use weft_dag::WorkflowStatus;
use weft_dag::history::{record, round_events, workflow_event};
use weft_dag::round::Transition;

use super::Context;
use crate::api::Workflow;

/// Records the round's events (from `old` to `new`) in `new`'s outbox,
/// and drops from it those the database already has.
pub(super) fn record_round(
    ctx: &Context,
    uid: &str,
    old: &WorkflowStatus,
    new: &mut WorkflowStatus,
    transitions: &[Transition],
    now: SystemTime,
) {
    let Some(h) = ctx.history() else {
        return;
    };
    let events = round_events(old, new, transitions, now);
    let recorded = !events.is_empty();
    record(new, events);
    h.prune(uid, new, recorded);
}

/// Records the workflow event of a status set outside a round (a spec
/// found invalid).
pub(super) fn record_workflow(ctx: &Context, status: &mut WorkflowStatus, now: SystemTime) {
    if ctx.history().is_some() {
        let event = workflow_event(status, &weft_dag::status::timestamp(now));
        record(status, vec![event]);
    }
}

/// After a status write the API server accepted: its outbox goes to the
/// exporter, and a finished Workflow to the archive.
pub(super) fn written(ctx: &Context, wf: &Workflow, status: &WorkflowStatus) {
    let Some(h) = ctx.history() else {
        return;
    };
    h.record(wf, status);
    if status.phase.is_terminal() {
        h.archive(wf, status);
    }
}

/// How long a finished Workflow's TTL deletion waits for the archive
/// (`None`: not at all). Only a deletion due now waits: a Workflow with
/// no time to live, or one not yet over, is not polled (that cost a
/// reconcile per workflow, measured in benches/history.rs).
pub(super) fn hold(ctx: &Context, wf: &Workflow, status: &WorkflowStatus) -> Option<Duration> {
    let wait = ctx.history()?.holds(wf, status);
    let due = super::writes::ttl_due(wf, status, ctx)?;
    (due <= SystemTime::now()).then_some(wait).flatten()
}
