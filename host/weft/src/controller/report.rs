//! What the controller tells users about a round: Kubernetes Events on
//! the Workflow (failures, retries, its end, what a user asked for), log
//! lines and transition metrics. One Event per kind per round at most, so
//! Events do not multiply API writes per node.

use weft_dag::WorkflowStatus;
use weft_dag::schedule::{RoundOutcome, Transition};

use super::Context;
use crate::api::Workflow;
use crate::events::record_event;

/// Log lines and metrics for every node transition of a round, and
/// Events for the transitions a user must hear about (failures and
/// retries) and for the workflow's end.
pub(super) async fn round_events(
    ctx: &Context,
    wf: &Workflow,
    status: &WorkflowStatus,
    outcome: &RoundOutcome,
) {
    for t in &outcome.transitions {
        ctx.metrics
            .transition(&format!("{:?}", t.from), &format!("{:?}", t.to));
        tracing::info!(node = %t.node, from = ?t.from, to = ?t.to, "node transition");
    }
    let troubles: Vec<Transition> = outcome
        .transitions
        .iter()
        .filter(|t| {
            matches!(
                t.to,
                weft_dag::NodePhase::Failed | weft_dag::NodePhase::Retrying
            )
        })
        .cloned()
        .collect();
    if !troubles.is_empty() {
        let reason = if troubles.iter().any(|t| t.to == weft_dag::NodePhase::Failed) {
            "NodeFailed"
        } else {
            "NodeRetrying"
        };
        publish(ctx, wf, "Warning", reason, &describe(&troubles)).await;
    }
    let succeeded = status.phase == weft_dag::WorkflowPhase::Succeeded;
    if outcome.workflow_changed && status.phase.is_terminal() && (!succeeded || ctx.all_events()) {
        let kind = if succeeded { "Normal" } else { "Warning" };
        let msg = status
            .message
            .clone()
            .unwrap_or_else(|| format!("workflow {:?}", status.phase));
        let reason = format!("Workflow{:?}", status.phase);
        publish(ctx, wf, kind, &reason, &msg).await;
    }
}

/// Events for what users did and what it changed: a retry carried out or
/// refused, a suspension or resumption, the exit handler starting.
pub(super) async fn action_events(
    ctx: &Context,
    wf: &Workflow,
    old: &WorkflowStatus,
    new: &WorkflowStatus,
    retried: Option<(&'static str, String)>,
) {
    if let Some((reason, msg)) = retried {
        let kind = if reason == "WorkflowRetried" {
            "Normal"
        } else {
            "Warning"
        };
        publish(ctx, wf, kind, reason, &msg).await;
    }
    if old.suspended != new.suspended {
        let (reason, msg) = match new.suspended {
            true => (
                "WorkflowSuspended",
                "suspended: no new node starts until it is resumed",
            ),
            false => ("WorkflowResumed", "resumed"),
        };
        publish(ctx, wf, "Normal", reason, msg).await;
    }
    if let (None, Some(exit), true) = (&old.on_exit, &new.on_exit, ctx.all_events()) {
        let msg = format!("the main DAG ended {:?}: running spec.onExit", exit.phase);
        publish(ctx, wf, "Normal", "RunningExitHandler", &msg).await;
    }
}

/// Records a core/v1 Event on the Workflow (one per round, not per node,
/// to keep API writes per node low).
pub(super) async fn publish(ctx: &Context, wf: &Workflow, kind: &str, reason: &str, message: &str) {
    record_event(&ctx.client, &ctx.metrics, wf, kind, reason, message).await;
}

/// The transitions of an Event's message: the first 20, and how many more.
fn describe(ts: &[Transition]) -> String {
    let parts: Vec<String> = ts
        .iter()
        .take(20)
        .map(|t| match &t.message {
            Some(m) => format!("{}: {:?} ({m})", t.node, t.to),
            None => format!("{}: {:?}", t.node, t.to),
        })
        .collect();
    let more = ts.len().saturating_sub(20);
    if more > 0 {
        format!("{}; and {more} more", parts.join("; "))
    } else {
        parts.join("; ")
    }
}

/// A Warning Event when creates are first refused for a quota (or by
/// throttling): one per round, naming the quota and the nodes' children.
pub(super) async fn waiting_events(ctx: &Context, wf: &Workflow, waits: &[super::quota::Wait]) {
    let first: Vec<_> = waits.iter().filter(|w| w.tries == 1).collect();
    let Some(w) = first.first() else {
        return;
    };
    let msg = if first.len() == 1 {
        format!("{}; the task waits and tries again", w.message)
    } else {
        format!(
            "{} (and {} more); the tasks wait and try again",
            w.message,
            first.len() - 1
        )
    };
    publish(ctx, wf, "Warning", w.reason, &msg).await;
}
